// Package layout computes what a job reads: its stream (the dataset
// version, seed, window and importance snapshot that fix an epoch's
// order), the memoised base order of each epoch with the job's edits, and
// the layout of a batch — which samples, in which chunks, at which bytes,
// under which ETag — before any chunk is read.
//
// # Units
//
// What a batch serves is its job's unit (Unit), one kind of batch each:
// samples as stored, token sequences packed from documents, image-text
// sequences, clips decoded from GOPs. The resolver chooses it once from
// the job's features (Orders.UnitOf) and hands it over in Source.Unit;
// Orders asks it an epoch's extent, a batch's layout, its part of the
// ETag and of /epoch/N, and never which kind it is. Orders keeps what the
// units share: the base orders (with their edits and windows), the one
// assigner of global batches to ranks (plain, locality, balance=: the
// table's Set.Assignment), and the mixtures. A unit of another package
// is made with the orders' Base and added with Orders.Add
// (docs/architecture.md, "One seam: adding a kind of batch").
//
// Everything here is a pure function of its inputs and the dataset's
// index; the memos (bounded LRUs) only save recomputation, so a lost or
// duplicated entry costs time, never a different answer. Any replica given
// the same parameters lays out the same batch.
package layout
