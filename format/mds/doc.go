// Package mds serves Mosaic Streaming's MDS datasets in place: an
// index.json (version 2) and the shards it names, raw (shard.NNNNN.mds)
// or compressed (shard.NNNNN.mds.zstd, .gz, .bz2), as
// streaming/base/format/mds writes them.
//
// # Which index.json
//
// A source with an index.json at its root is that index's dataset; the
// shards it names may be in subdirectories (merge_index names a merged
// dataset's shards "part/shard.00000.mds"), and the partitions' own
// index.json files are ignored. A source without one is the
// concatenation, in key order, of every index.json that has no
// index.json in a directory above it (partitions written in parallel and
// never merged); each names its shards relative to its directory. Point
// a source at one split (…/train/), not at the directory of several: the
// splits would be one dataset. Every shard of the dataset must have the
// same columns.
//
// # Shards, samples, keys
//
// A shard is a chunk, read whole: MDS stores a sample's columns
// together, so a selection of columns reads every byte of the shard and
// only decodes less. A shard of zero samples is not a chunk. A sample is
// a sample, keyed by its shard's path without ".mds" and its number in
// the shard, zero-padded to six digits: "shard.00003/000042",
// "part0/shard.00000/000007". Compressed and raw copies of a shard have
// the same keys; a compressed shard is read (the raw one only when it is
// the one listed).
//
// # Members
//
// Fields are the columns, in the shards' order (sorted by name). Each
// becomes one member per sample:
//
//	jpeg → jpg, png → png      the image's bytes as stored
//	str → txt                  UTF-8 as stored
//	int, int8…int64, uint8…uint64 → cls      decimal text
//	float16, float32, float64 → json         Python's repr of the float
//	                                         (json.dumps): shortest digits
//	                                         of its width, NaN, Infinity
//	ndarray[:dtype[:shape]] → npy            a .npy (NumPy 1.0 header,
//	                                         little-endian, C order)
//	json → json, bytes → bin   as stored
//	str_int → cls, str_float, str_decimal → txt    the text as stored
//	pkl                        refused, unless Options.Members names the
//	                           column's member: then its raw bytes, never
//	                           unpickled (a reader that unpickles runs
//	                           the shard's code)
//
// Options.Members overrides a column's extension. Columns whose
// extensions collide are qualified by their names ("caption.txt",
// "title.txt"). pil, jpeg_array, list[…] and encodings Streaming does
// not define are unsupported, naming the column.
//
// # Bounds
//
// Index reads the index.json files (each within Limits.MetaBytes) and
// nothing else: a shard's resident bound comes from index.json's figures
// (raw_data.bytes, samples, column sizes), so it holds for any shard
// consistent with them. Per sample and selected column it counts the
// member's header (a PAX header for a name past 100 bytes) and, for a
// fixed-size column, its padded member (a scalar's longest text, a fixed
// ndarray's .npy); the variable-size columns' values together are at
// most the shard's bytes less its header, the fixed values and the size
// prefixes, plus per value its padding and, for an ndarray, the largest
// .npy header an array within a shard can have (320 bytes). A compressed
// shard's bound is on its decompressed contents; decompression writes
// into a buffer of raw_data.bytes and stops there, whatever the shard's
// bytes claim (package inflate: docs/format.md §6.10), and Working counts
// what its codec takes beside.
//
// # Token datasets
//
// With format.Options.Tokens naming a 1-D integer ndarray column, or
// Options.Text a str column and Options.Tokenizer a tokenizer file (a
// SentencePiece model or a byte-level BPE tokenizer.json, tokenize.Load),
// Index reads every shard once more, whole (there is no less to read),
// and counts each sample's tokens: from the ndarray's shape, or by
// tokenizing the text with package tokenize. The counts (and the model)
// are in the description, and Open returns a decoder implementing
// format.Tokens; a text dataset gains the field format.TextTokensField,
// each sample's tokens as an int32 .npy ("tokens.npy" beside another
// .npy), tokenized when decoded, with an exact bound. A count other than
// the index's at decode is damage (docs/format.md §6.7).
//
// # What is refused
//
// At index time, naming the index.json and shard: a shard the listing
// does not have, or whose size differs from index.json's; a basename
// that leaves the source; two shards of one name; shards of other
// columns; a column size that disagrees with its encoding; counts out of
// range (samples beyond Limits.ChunkSamples, raw_data past 4 GiB or
// Limits.ChunkBytes, too few bytes for the samples); a shard whose
// resident bound passes Limits.ChunkBytes; more columns than
// Limits.Fields; an index.json that is not JSON or over Limits.MetaBytes.
// Unsupported: index versions other than 2, shard formats other than
// mds (json, csv), compressions other than zstd, gz and bz2, unknown
// encodings. At decode, as a damaged chunk naming the shard: a header
// whose sample count or offsets disagree with index.json, a sample
// whose values overrun it or leave bytes over, an ndarray whose shape
// disagrees with its bytes, a compressed shard that does not decompress
// to exactly raw_data.bytes.
//
// # Concurrency
//
// A Format and its Decoders are safe for concurrent use; the process's
// one zstd decoder (package inflate) serves every decode.
package mds
