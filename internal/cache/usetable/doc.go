// Package usetable follows the job streams a gateway serves and, from their
// seeded orders, knows when every chunk will next be needed. The cache
// evicts by it, the disk tier places by it, prefetch reads by it, and jobs
// whose windows do not fit in the cache together take turns by it.
//
// # Why
//
// A training job reads an epoch in an order the shuffle fixes from (dataset,
// seed, window) alone, so the gateway knows its future: which chunk each
// coming batch needs, across the epoch boundary into the next epoch. That
// turns the two classic cache problems into exact ones. Eviction can follow
// Belady's rule — evict the chunk whose next use is furthest away, the
// optimum for a known sequence — where LRU evicts exactly the window the
// next epoch needs first. Prefetch can read exactly the chunks that come
// next, and only those the cache will keep until they are used.
//
// # Streams
//
// Every request of one order belongs to one job stream (jobstream.Stream),
// whatever its batch size, world, rank or offset, unless the job names
// itself (job=): then it is a stream of its own. The use table follows each
// stream's leading edge (Advance) and the batches it is serving (Begin,
// Finish; internal/batch/visit makes these calls and Turn, in one order, for
// every batch): next use is measured from the oldest batch in flight —
// from its global batch's start for a rank's share of one by locality or
// balance= (Begin's drawn), drawn from all of it, as the planner pins a
// global batch's chunks together (on the rank's home node: a peer's
// request for its samples names its cut's position alone) — and, once
// batches have arrived out of
// order, from the edge less their lateness and a global batch
// (stream.position). Streams idle for
// streamIdle are forgotten; at most maxStreams are followed.
//
// # The time frame
//
// Positions in different jobs' orders cannot be compared — a fast job's
// 1,000 samples away come sooner than a slow one's — so a next use is a
// time: nanoseconds since the use table's zero, on its clock (injectable, so
// tests move time by hand). A chunk's key is the soonest time some stream
// is expected to need it; larger is later, Never is not at all. Two kinds:
//
//   - Hot: the chunks of the windows streams are in now. Every batch of a
//     window needs nearly every chunk of it, so they are all needed by the
//     stream's next batch, whose time moves with every request. Their keys
//     are read live from the stream's clock: with batches in flight, when
//     the oldest began (the order the cache serves them in); between
//     batches, its last batch's end plus its gap (its think time, learnt
//     from its requests), divided by its weight; later than that, now plus
//     twice the lateness, so a stream that stopped drifts out (clock.key).
//   - Fixed: every other chunk, keyed when the table is built: the base
//     time plus the samples until the stream reaches the chunk times its
//     time per sample, 1 / (rate × weight), where rate is the stream's
//     measured pace (over at least rateSpan), else the median of the
//     others', else defaultRate. A chunk read earlier in this epoch is
//     needed in the next: the samples left in this epoch plus its place in
//     the next epoch's order. The base is the build time for a stream
//     being served (plus twice its lateness if it is late) and, for a
//     stream waiting for a turn, when the first holder is expected to leave
//     its window (Snapshot.crossing), plus its place in line. Its place
//     is two: its window's start, by which prefetch counts whole windows
//     (Prefetchable, Keeps, Displaces), and its first sample's
//     (jobstream.EpochOrder.Start), by which the cache evicts
//     (Snapshot.evictKey), so that the chunks of one window go in the
//     order of their next uses rather than tie.
//
// With one job, eviction keys order chunks exactly as their next uses
// do: the policy is Belady's rule on its order, which is what the planner
// simulates. (Tied by their window's start, as they once were, the
// chunks of one window went in the order of their last touch — the order
// concurrent loads ended in — and a cluster's nodes loaded a chunk more
// or fewer than /plan's bill, run to run. A clip job's order knows its
// chunks' windows only: they tie still, and the planner simulates that
// rule, NextUse.)
// An importance stream's next epoch is drawn from a snapshot not sealed
// yet, so it is not projected; of the chunks no stream needs, the lightest
// go first (evict.FarKey, the planner's rule), still after every chunk some
// stream needs (Needed). On a node of a cluster only the chunks the node
// reads for the batches (Config.Local: those it owns, or reads for a node
// that is down) have keys: a copy of another node's chunk, such as one it
// owned before a membership change, is Never, the first to go — unless
// that node will ask this one for it (Config.Keep: a gain its new owner
// left to the batches, which this node read for the jobs before the
// change), which is keyed as this node's own until it is taken. A chunk
// it reads only for an owner that is down or out of reach (not its own
// under Config.Own: a stand-in) is keyed for the windows at hand and the
// next, and goes before every chunk the node owns, whatever their keys
// (Snapshot.victimKey; a stand-in's prefetch likewise displaces none):
// the node would read its own again once the fault heals.
//
// # The use table
//
// The keys are published as an immutable Snapshot, rebuilt (publish.go)
// when a stream starts, ends or crosses into another window, when a turn
// moves or a stream queues for one, and when the streams are late — past the time the table expected
// the first of them to leave its window (lateLocked), such rebuilds at
// least lateRebuildGap and lateRebuildCost builds' time apart. Between
// rebuilds only the
// hot keys move, through the clocks the table points to; Ticks counts the
// requests that moved them, so the policy re-keys only the hot chunks. The
// table also answers what prefetch may do: Prefetchable (the chunk is among
// the soonest that fit in the cache beside the hot ones), Displaces
// (whether a prefetch may evict chunks still needed later) and Keeps
// (whether a chunk needed later may stay until its use at all: one that
// cannot is evicted for any prefetch needed sooner). A schedule's
// component whose pace rises at a phase ahead is read ahead as far as
// the windows it reaches in the time its next windows take now
// (Table.upcoming), so the windows it reads first after a switch are
// in the cache when the switch comes.
//
// # Costs
//
//   - Begin, Finish, Advance: O(streams) (idle streams are pruned, a clock
//     published), and a rebuild when a stream changes window.
//   - A rebuild: O(streams × chunks of the datasets they read), plus a sort
//     of the needed chunks for the prefetch horizon; each stream holds the
//     orders of three epochs, so a rebuild computes none in steady state.
//   - Turn: O(streams × chunks of their windows) each time admission is
//     judged (turn.go).
//   - Snapshot.Distance and DistanceAt: a map lookup and, for a hot chunk,
//     one clock read per stream in that window; Prefetchable, Displaces and
//     Hot: O(1). The policy's costs are in policy.go.
//   - Memory: 16 bytes per chunk of each dataset version a followed
//     stream reads (4 more with importance streams), per table, and 4 per
//     chunk of each epoch order memoised (its first samples).
//   - Orders: an epoch's first samples cost O(samples × log chunks) to
//     find, once per epoch memoised.
//
// # Stability
//
// Keys are nanoseconds in one use table's frame: they mean nothing to
// another process or another Table, and are never stored or sent. What
// is fixed is the rule: with a single job, eviction by these keys is
// Belady's on the job's order, the same heap and far key the planner uses
// (internal/cache/evict); with several jobs it is Belady's on their merged
// future as far as their measured paces predict it.
//
// # Concurrency
//
// A Table is safe for concurrent use. Its mutex guards the streams (the
// map and every field of every stream), the line for turns (a line: its
// places and channel; its figures are atomic), and the building of
// tables; Begin, Finish, Advance, Turn, Shared and Turns
// take it, and Coalesce when it begins and ends (not while its function
// runs: a batch's calls, each taking it, with the rebuilds they ask for
// put off until it ends). Turn waits without it, woken when turns move (a
// channel closed and replaced) or when a holder may have gone idle.
//
// What readers see without the lock is published atomically: the latest
// Snapshot (an atomic pointer; a table never changes once stored), the
// request count (Ticks), and each stream's clock (atomics written under the
// mutex, read by the tables that point to them). Table, Distance, Ticks and
// every Snapshot method take no lock and never block, so the cache's policy
// can call them under the cache's own lock; the use table never calls the
// cache while holding its mutex (Advance returns what to prefetch, and the
// Prefetcher reads it with its own tracked workers, which Close waits for).
//
// # Files
//
// table.go holds the Table, its time frame (frame) and the requests'
// calls (Begin, Advance, Finish); stream.go a stream, its position and its
// clock; usetable.go the table's answers; publish.go how a table is
// built; turn.go turns, and the line (line) that gives them;
// policy.go the cache policy; prefetch.go the prefetcher; latest.go the
// latest table's answers for the prefetcher, and the turns' metrics.
package usetable
