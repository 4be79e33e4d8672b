// Package lance reads Lance datasets (lance-format/lance, LanceDB) in
// place, in pure Go, exactly as Lance's own reader reads them: no cgo, no
// Rust library, every byte it reads planned as a range of an object.
//
// # What is read
//
//   - The dataset: the manifests under _versions/ (V2 names, which count
//     down from 2^64-1 beside latest_version_hint.json, and V1 names,
//     N.manifest), each one's trailing 16 bytes (position, table format
//     version, "LANC") and its protobuf: the schema's fields, the
//     fragments with their data files (field ids ↔ column indices) and
//     deletion files, the data format and the reader feature flags, an
//     unknown one of which refuses the dataset (Manifest, OpenVersion).
//   - A data file of file format 2.1: its 40-byte footer, the column
//     metadata offset table, global buffer 0 (the FileDescriptor: the
//     file's schema and row count) and each column's pages with their
//     layouts (encodings_v2_1.proto), all from one tail read (ReadFile).
//   - A column's rows by range (File.ReadRows): a page's small table
//     (chunk table, repetition index), then only the bytes of the rows
//     asked, for the layouts and compressions listed in decode.go; any
//     other is refused by name.
//   - Deletion files: Arrow IPC (arrowipc.go) and roaring bitmaps
//     (roaring.go), each read by a small reader of its own with bounds.
//   - A whole column of a version (Open, Dataset.Column): every live row
//     in fragment order with its row address, deletions applied, a
//     fragment without the field's file read as nulls.
//   - A dataset served in place (Format, format.go): its latest version
//     indexed from the manifest, deletion files and metadata tails, each
//     live row a sample of its columns' values, chunks of whole batches
//     of a fragment read as their pages' byte ranges (docs/format.md
//     §6.14).
//
// # Bounds
//
// Every length, count and offset a file declares is checked against the
// file's size (or the bytes in hand) and the caller's memory limit
// (Options.MemoryLimit, File.ReadRows' limit: the most bytes one read
// may allocate, past which it is refused with ErrOverLimit) before
// anything is allocated for it, so a hostile or truncated file costs at
// most the bytes it is and never more than the limit: it
// is refused with an error naming the file (and the column and the
// encoding where there is one), wrapping format.ErrInvalid, and what
// this reader does not know is refused wrapping format.ErrUnsupported,
// never read as wrong bytes.
//
// # The reference
//
// The fixtures under testdata/ are written by Lance's own writer
// (@lancedb/lancedb 0.31.0, Lance core 8.0.0, default options) and read
// back by Lance's own reader into a canonical JSON beside them
// (testdata/gen/lance.cjs; testdata/gen/regenerate.sh rewrites both);
// the tests compare every value of every column with it.
package lance
