// Package stored is what a Brand dataset in a store is and how it is
// read: the objects beside its chunks (the index at chunkindex.IndexKey,
// the manifest at chunkindex.ManifestKey, the member table at
// chunkindex.MembersKey, the description of the chunks of a dataset
// served in place at chunkindex.FormatKey, the image-text facts of a
// dataset of tar chunks at VisionFactsKey, the samples' image sizes at
// SizesKey), their readers, the object a
// chunk of a dataset served in place is read from (ChunkObject), and the
// checks of a chunk's bytes against the CRC32Cs its index holds
// (CheckSpans, SpanChecker).
//
// It is the read side alone: the gateway's catalog serves datasets
// through it without linking the tools that build them (package dataset:
// `brand pack`, `brand index`, Verify), which write what this package
// reads.
//
// # Reads
//
// Every object is read whole, pinned to the ETag Stat returned, so one
// replaced during the read is reported (s3backend.ErrChanged) rather than
// decoded from bytes of two versions; its size is bounded before it is
// allocated. A missing object's error wraps s3backend.ErrNotFound and says
// what would make one.
package stored
