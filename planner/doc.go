// Package planner computes, before a job runs, exactly what a chunk cache of
// a given size will do with it.
//
// Brand's epoch order is a seeded function of the job (package shuffle), so
// the whole future stream of chunk requests is known in advance. The planner
// replays it: Trace turns a dataset and a job into the demand sequence the
// gateway will see, Simulate runs that sequence through a byte-bounded cache
// under LRU or under Belady's next-use rule, and MakePlan combines both into
// a report: per-epoch hit ratios and backend bytes under each policy, the
// working set prefetch needs, the smallest cache that keeps the trainer fed
// at a given backend bandwidth, and how well batches are mixed for the
// chosen shuffle window compared with a full shuffle.
//
// # The model
//
//   - A gateway serving every rank sees the global batches of each epoch in
//     order, all ranks in lockstep. Global batch m needs the distinct chunks
//     of its samples; they are requested in order of first use. That list,
//     batch after batch and epoch after epoch, is the trace.
//   - The cache holds whole chunks and is bounded in bytes. A chunk must be
//     resident to be served (demand paging): a miss reads the whole chunk
//     from the backend and admits it, evicting by the policy until it fits.
//     A batch's chunks are pinned together; a batch whose chunks do not fit
//     together is served a group at a time (at most half the cache each),
//     as the gateway does. A chunk larger than the cache is read but never
//     admitted.
//   - Accesses are at batch granularity: a chunk used by several samples of
//     one batch is one access. Prefetch is outside the trace; it changes when
//     bytes are read, not how many, and enters the plan only through the
//     working set below which prefetch would displace chunks still needed.
//
// # Policies
//
// LRU evicts the least recently used chunks until the new one fits. Belady
// evicts the chunk whose next use is furthest in the future, chunks never
// used again first, until the new one fits. With equal chunk sizes that is
// Belady's MIN, the optimal demand-paging policy: no other eviction order
// hits more often on the same trace, and it is a stack algorithm, so a larger
// cache never hits less, access by access. With unequal sizes optimal
// eviction is NP-hard and MIN is the standard near-optimal heuristic; the
// planner calls it "optimal" in both cases and docs/planner.md states the
// caveat.
//
// # Importance mode
//
// With a snapshot of a job's losses (PlanInput.Importance) a plan adds the
// same job read by importance (package importance): every simulated epoch
// drawn from that one snapshot, since the snapshots a job will seal later
// cannot be known, replayed under LRU, under the gateway's
// importance-aware eviction (ImportanceAware: Belady on the current
// epoch's remaining uses, and the chunks it does not need again evicted
// first, lightest importance first) and under Belady over the whole
// trace, which knows the epochs to come.
//
// # Two tiers
//
// With a disk tier below the cache (PlanInput.DiskCacheBytes), as `brand
// serve --disk-cache-size` keeps one, a miss is read from the disk if the
// disk holds the chunk, else from the store, and a chunk read from the
// store is offered to the disk. The disk is
// inclusive and ranks its chunks by the RAM policy's key: a new chunk
// displaces the chunks needed furthest in the future, only those needed
// later than itself, and is not written if they do not make room (under
// LRU, the least recently used, any of them). A plan then reports, per
// epoch and per policy, the bytes read from the store and from the disk
// (Plan.Disk); the RAM cache's own figures do not change.
//
// # Mixtures
//
// With a mixture of datasets (PlanInput.Mix, ClusterInput.Mix), as the
// gateway serves mix=, the trace is that of the mixture's epochs
// (shuffle.Mixture): each global batch's draws read, each, the chunk
// holding the sample at its position of its component's pass, a pass
// being that dataset's ordinary epoch order, and the batch needs their
// distinct chunks in order of first use. The components' chunks are
// numbered one after another, so that each is a cache entry of its own
// with its own size, and the policies run over the merged trace: the
// optimum's next use is the mixture's own future. A plan of a mixture
// reports the same figures as one of a dataset, the working set counting
// each component's windows as the stream of its own it is to the
// gateway, and per component its accesses, hits and backend bytes
// (Result.Components).
//
// # Datasets served in place
//
// A chunk of a dataset served in place (package format) is loaded by its
// store extent — the ranges of its object the fields read need — and held
// decoded, at its resident bound with those fields. Dataset.StoreSizes
// gives the former beside ChunkSizes, the latter: the simulation and
// every figure of room (cache, disk, working set, owned shares) count
// resident bytes, every figure of bytes from the store counts store
// extents (DatasetInPlace builds both from a format's decoder; the
// gateway describes the data a job reads, a columns= view included, as
// an api.PlanDataset).
//
// # The gateway's rules, called, not copied
//
// A plan is exact only while it replays the gateway's rules, so it calls
// them where the gateway does: each epoch's order is importance.NewOrder's
// choice (uniform or by importance, never a function of the cluster),
// the cut into global batches and ranks' shares is shuffle's
// (Params.GlobalBatch, AppendShares), a batch too large for the cache is
// pinned in internal/cache/assembly's groups, and eviction orders its victims
// by internal/cache/evict's heap and far key.
//
// # Costs
//
//   - Trace: O(samples × epochs) time (the shuffle, then a table lookup of
//     each sample's chunk), O(samples in a window) working memory plus the
//     trace itself, 8 bytes an access.
//   - Simulate: O(accesses) for LRU, O(accesses × log resident chunks) for
//     Belady (a backward pass for next uses, then evict.Heap); 8 bytes of
//     memory per access for the next uses.
//   - MakePlan: one trace for the job's window, one more pass for the full
//     shuffle's quality, and O(log(dataset bytes / g)) Belady simulations
//     for the smallest no-stall cache, g being the chunk sizes' greatest
//     common divisor. For a million samples in 10,000 chunks over three
//     epochs that is about half a second to two seconds. MakePlan's
//     context lets a server abandon it, checked inside every walk and
//     simulation, and a Budget bounds it (GatewayWalk and the others for
//     a gateway's plans).
//
// docs/planner.md describes the model, the algorithms and the report in
// full.
//
// Everything is a pure function of its arguments; the package holds no
// state and all of it is safe for concurrent use.
package planner
