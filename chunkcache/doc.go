// Package chunkcache is Brand's byte-bounded cache of whole chunks.
//
// Training reads every sample once per epoch in a fresh order, so a cache of
// individual samples thrashes; Brand caches whole chunks (tens of MiB) instead
// and lets the shuffle keep each epoch's reads inside a window of chunks.
//
// Three properties shape the design:
//
//   - One backend read per chunk. Concurrent requests for a chunk that is not
//     resident share a single load: the first registers a loading entry under
//     the cache lock and the others wait for it. (x/sync/singleflight cannot
//     express this: the flight must own a byte reservation and a pin.)
//   - A hard byte bound. Every resident byte — ready, loading or in use by a
//     response — counts against Capacity. Requests pin the chunks they read,
//     and the bytes a request may pin are reserved up front from a FIFO
//     semaphore of Capacity bytes, so pinned bytes can never exceed the cache
//     and a request can always make room by evicting unpinned chunks. No
//     deadlock is possible: a request reserves everything it needs at once.
//   - A pluggable eviction order. A Policy orders unpinned, ready chunks for
//     eviction: LRU (recency) or, because the shuffle makes the future known,
//     the chunk whose next use is furthest away (Belady).
//
// Evicted buffers are reused for the next load when large enough, so a
// steady-state cache of same-sized chunks allocates almost nothing and the
// heap stays close to Capacity.
package chunkcache
