// Package disktier keeps whole chunks on local disk below the RAM chunk
// cache, so that a dataset larger than memory is read from the object store
// once, not every epoch, and a restarted gateway finds the chunks it had.
//
// The tier is inclusive and written on load: a chunk the store gave the
// cache is offered to the disk (Spill) while the cache still pins its
// bytes, and a chunk the cache misses is looked for on disk (Read) before
// the store. What stays is decided by the same next-use knowledge as the
// RAM cache: when the disk is full, a new chunk displaces the chunks
// needed furthest in the future, and only those needed later than itself;
// a chunk needed later than everything on disk is not written at all.
// Without a use table (the lru policy), the least recently used go first.
//
// Correctness never rests on the disk. Files are written to a temporary
// name and renamed into place, so a crash mid-write leaves only a
// temporary file, which the next Open removes; each file carries a header
// naming the chunk it holds (dataset, object, ETag, size) under its own
// CRC32C, checked on every read; and the caller verifies the chunk's bytes
// against the index (every sample's CRC32C) before serving them, as it
// does for bytes from the store (Read takes its check), and a file that
// fails is removed.
// No fsync is needed for that reason: after a power loss a renamed file
// whose pages never reached the disk fails its checks and is read from the
// store again. A disk that is full, failing or slow costs store reads,
// counted in metrics and logged, never a failed or wrong batch; a
// directory removed while serving is created again when next written or
// read, its chunks forgotten.
package disktier
