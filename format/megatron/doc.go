// Package megatron serves Megatron-LM / Megatron-Core indexed datasets in
// place: the token files language-model corpora are kept in, each a
// prefix with a data file (name.bin: every document's token IDs back to
// back) and an index (name.idx), as megatron/core/datasets/indexed_dataset.py
// writes them.
//
// # The .idx
//
// Little-endian, as the builder writes it:
//
//	magic      "MMIDIDX\x00\x00"
//	version    u64, 1
//	dtype      u8: 1 uint8, 2 int8, 3 int16, 4 int32, 5 int64, 6 float64, 7 float32, 8 uint16
//	sequences  u64 S
//	documents  u64 D: the length of the document index, one more than the documents
//	sizes      S × i32: each sequence's tokens
//	pointers   S × i64: each sequence's byte offset in the .bin
//	doc index  D × i64: the sequences' boundaries, from 0 to S
//	(modes     S × i8, only in multimodal datasets)
//
// # Samples, chunks, keys
//
// A sample is a document: its sequences (doc index[i] to doc index[i+1])
// concatenated, which is what the builder's add_document wrote and what
// a packer of token streams wants whole. It has one member, "npy", its
// tokens as a 1-D array of the file's dtype; the one field is "tokens".
// Its key is the prefix (the object's key without ".bin") and the
// document's number in the prefix, zero-padded to nine digits:
// "en/wiki_text_document/000000042". A chunk is a span of one .bin: the
// documents in order, cut at document boundaries when the chunk's
// resident form would pass Options.ChunkBytes (or Limits.ChunkSamples),
// so the cache holds chunks of about the chunk size however short the
// documents are (a short document's member costs a 512-byte tar header
// and padding, more than its tokens). A document whose resident form is
// larger than the chunk size is a chunk of its own, and one larger than
// Limits.ChunkBytes is refused.
//
// # Bounds
//
// The resident bound is exact: every document's token count is in the
// .idx, so each member's length (npy header and tokens × the dtype's
// size) is known before the read; the read of a chunk is exactly its
// documents' bytes. Decoder.DocTokens gives the token counts of a
// chunk's documents from the index alone, for packing sequences before
// any data is read.
//
// # What is refused
//
// At index time, naming the prefix or object: a .bin without its .idx
// or the reverse; an .idx that is not one (magic, version, a truncated
// file, counts larger than the file holds, trailing bytes); an unknown
// dtype code; sizes whose total disagrees with the .bin's length;
// pointers out of order, overlapping or leaving gaps (the builder writes
// the sequences back to back from 0); a document index that does not run
// from 0 to S in order; prefixes of different dtypes in one source; a
// document over Limits.ChunkBytes; an .idx larger than Limits.MetaBytes;
// multimodal datasets (sequence modes), as unsupported. Token values are
// not checked: every value of the dtype is a token. Options.Members may
// only say "tokens": "npy"; another field or extension is refused as
// unsupported, not ignored.
//
// # Concurrency
//
// A Format and its Decoders are safe for concurrent use. Index reads the
// prefixes' .idx files Options.Parallel at a time.
package megatron
