// Package batch is the parent of a batch's stages, one package each, in the
// order a batch flows through them (docs/architecture.md, "Data path"):
//
//	layout     which samples a batch holds, in which parts, under which ETag;
//	           a pure function of the job's parameters, before any byte is read
//	visit      the bracket around the read: the use table's begin and finish,
//	           prefetch, the job's turn, the next batch's samples fetched from
//	           peers, the next batch premade (premade holds what is made ahead)
//	reader     the one read path: chunks pinned in the cache, samples sliced
//	           out, damaged chunks failed or named, parts assembled
//	tensorize  the transform stage: image members become .npy tensors
//	sequences  the pack stage: a token job's sequences written from documents
//	respond    the one writer of every response that carries samples
//
// The stages read in one direction: no stage imports one after it.
package batch
