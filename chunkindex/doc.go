// Package chunkindex defines how a Brand dataset is laid out in object
// storage: samples packed into large tar chunks, and a compact binary index
// that says where every sample's bytes are.
//
// # Why tar chunks
//
// Chunks are plain POSIX tar files following the WebDataset convention: the
// members of one sample sit next to each other and share a key, the member
// path up to the first '.' of its base name (train/n01/x.JPEG and
// train/n01/x.cls are sample train/n01/x). Any WebDataset, tar or
// Python tarfile reader can read a chunk directly, and any existing
// WebDataset shard can be indexed as it is (ScanTar), so a dataset is never
// locked into Brand.
//
// # Why byte ranges
//
// The index records, for each sample, its chunk and the byte range from the
// first header block of its first member to the end of the block padding of
// its last member, with the CRC32C of those bytes. Because tar is a sequence
// of self-contained, block-aligned members, any list of such ranges written
// back to back and followed by EndOfArchive is itself a valid tar. The
// gateway serves a batch exactly that way: it copies cached chunk bytes to the
// response, with no decoding, re-encoding or per-sample allocation, and
// verifies each range against its CRC32C.
//
// # Why a binary index
//
// A training job addresses samples by dense integer ID. The index stores
// them grouped by chunk, in columns (20 bytes per sample plus the key
// bytes), so a million-sample dataset loads in a fraction of a second and
// occupies a few tens of megabytes. It is versioned, checksummed and
// validated field by field on load: a corrupt or hostile index is rejected
// with an error naming the problem, never trusted to index past a chunk.
// docs/format.md specifies the bytes precisely enough to reimplement.
//
// # Partial indexes
//
// Decode holds every sample's record: about 56 bytes a sample, 5.9 GB for
// 100 M samples, on every node of a cluster. Open reads the same object
// once and keeps only what every node needs (the chunk table, enough to
// compute any order and find any sample's chunk), the tables of the
// chunks a node owns, and a checksum of every chunk's table; other
// chunks' tables are read back from the stored index, checked, and cached
// within a byte bound in one explicit step a read takes before it reads
// them (Tables.Prepare, Samples, Lookup), with its context and an error
// to return. Sample, SampleRange and SampleKey never read the store. The
// format is unchanged: each chunk's records and keys are already
// contiguous in it. docs/format.md (section 2.8) has the memory per node.
// The sample tables are a part of the index with a type of their own
// (Index.Tables): the step that prepares them for a read, and what
// memory holds of them (Stats, Footprint), for a whole index as for a
// partial one.
//
// # Lineage
//
// The index of a dataset served in place to which files were added
// (`brand index --append`) extends the index it was made from: the old
// chunks first, every old sample under its ID, and the versions it
// extends recorded in it. Its Lineage (Index.Lineage) is that part of it
// with a type of its own: Extend makes the record, Root names the first
// version (by which a cluster places chunks), and AncestorIndex serves an
// ancestor as the prefix of the index's chunks.
//
// # Files
//
// A dataset root holds the chunks (any keys outside "_brand/"), the index at
// IndexKey and a JSON Manifest at ManifestKey describing the dataset and
// naming the index by its ID.
package chunkindex
