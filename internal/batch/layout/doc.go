// Package layout computes what a job reads: its stream (the dataset
// version, seed, window and importance snapshot that fix an epoch's
// order), the memoised order of each epoch, and the layout of a batch —
// which samples, in which chunks, at which bytes, under which ETag —
// before any chunk is read.
//
// Everything here is a pure function of its inputs and the dataset's
// index; the memos (bounded LRUs) only save recomputation, so a lost or
// duplicated entry costs time, never a different answer. Any replica given
// the same parameters lays out the same batch.
package layout
