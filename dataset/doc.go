// Package dataset builds and verifies Brand datasets in a store: the
// chunks, the index at chunkindex.IndexKey and the manifest beside it.
//
//   - Pack turns a directory tree (class folders such as
//     train/n01440764/x.JPEG) into tar chunks, an index and a manifest.
//   - IndexShards indexes tar shards already in a store (a WebDataset
//     dataset, say) in place, without rewriting them.
//   - Verify reads every chunk and checks it against the index.
//
// What they write is read by package dataset/stored (ReadIndex,
// ReadManifest, the checksum checks), which the gateway links without
// linking these tools.
//
// # Publication order
//
// Both Pack and IndexShards write the index only after every chunk it names
// is stored, and the manifest after the index. A reader that finds an index
// can therefore read every chunk it names; a pack that fails halfway leaves
// chunks behind but no index, and running it again overwrites them.
//
// # Memory
//
// Pack builds each chunk in memory before uploading it, so that the upload
// has an exact size and can be retried from the start (minio-go retries a
// single PUT only when it can seek back): at most Parallel chunks are in
// memory at once, so Pack needs about Parallel × ChunkSize bytes (256 MiB
// with the defaults), more if a single sample is larger than ChunkSize.
// IndexShards and Verify stream each object through one ReadPartSize buffer
// per concurrent read.
//
// # Progress
//
// Pack, IndexShards and Verify take an optional func(Progress). It is called
// from a single goroutine, at most every 100 ms while work is under way and
// once more with the final figures, and never after the function returns.
package dataset
