// Package reader is the one path by which samples are read: for a batch
// on a single gateway, a batch on a node of a cluster, a peer's request
// for samples of the chunks this node owns, and a single sample alike.
//
// A read takes sample IDs of one dataset version and returns their bytes
// in order, complete and verified, or an error: nothing is ever partial
// but for the samples of chunks damaged or lost at rest (catalog.AtRest)
// when skipping them is asked for, which the result names. A sample its
// format wrote damaged in an otherwise intact chunk (format.SampleDamage:
// a video's GOP that failed its CRC32C) is the same: an error naming it
// (*catalog.DamagedChunkError, 502), or left out in skip mode; and so is
// a sample its chunk's load left unread (format.SampleUnread: a text
// past --max-text-bytes), an error naming it (ErrUnread, 422). On the way it
//
//   - fetches the samples whose chunks other nodes hold from those nodes
//     (the cluster's Remote; a single gateway's has none),
//   - pins the chunks this node reads itself in the chunk cache, all at
//     once, each loaded from the store once and checked against its
//     CRC32C (chunkcache, catalog.Loader),
//   - with skip mode, leaves out the samples of a chunk damaged at rest,
//     or whose object is no longer in the store, and pins the rest again,
//   - assembles a read whose chunks do not fit in the cache together a
//     group of chunks at a time into a copy (at most Assemblers at once),
//   - and, when the cache is under pressure (the memory manager's one
//     signal, which the response writer asks), copies a pinned read out
//     (Result.Relieve) so that its chunks go back to the cache before the
//     client reads it.
//
// Every copy out of the cache is taken from the node's memory manager
// (Config.Copies: internal/server/memory's copies, bounded by the budget
// --memory-limit governs), so the memory a gateway holds beside its cache
// is bounded whatever its clients do; a chunk larger than the whole cache
// is read through into the manager's decodes (Config.Through), reserved
// before a byte of it is read. Every wait — for room to assemble,
// or to load in turn — is bounded by Config.MaxWait and shows in
// Stalled, which /readyz reports; the copies' waits are the manager's.
//
// # Costs
//
// A pinned read allocates only the slice of its samples' byte slices; the
// response is written straight from the cached chunks. A read assembled
// in parts, or copied out, costs one copy of its bytes.
package reader
