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
//     express this: the flight must hold a pin and count against the bound.)
//     The load belongs to the cache, not to the request that started it, so
//     a requester that gives up does not fail the others; Close ends loads.
//   - A hard byte bound. Every resident byte — ready, loading or in use by a
//     response — counts against Capacity. Requests pin the chunks they read,
//     and a request is admitted only when the chunks it would newly pin fit
//     beside those already pinned (a chunk pinned by another request costs
//     nothing more), so pinned bytes never exceed the cache and a request can
//     always make room by evicting unpinned chunks. Admitted requests pin all
//     their chunks at once, so no deadlock is possible, and waiting requests
//     are admitted in arrival order.
//   - A pluggable eviction order. A Policy orders unpinned, ready chunks for
//     eviction: LRU (recency) or, because the shuffle makes the future known,
//     the chunk whose next use is furthest away (Belady).
//
// Evicted buffers are reused for the next load when large enough (and not
// larger than the request allows), and Preallocate fills the cache's buffer
// pool before the first request, so a steady-state cache allocates nothing
// and the heap stays close to Capacity. A request may also take a larger
// buffer already held when none of its own class is there (Request.Reuse:
// a dataset served in place read with some of its fields, whose buffers
// were preallocated for all of them), which holds no more memory than
// allocating and faults no new pages in. A victim's buffer that fits no load
// it made room for goes to Config.Recycler (the node's memory manager's
// pools, where any other part may reuse it) rather than to the collector.
package chunkcache
