package usetable

import (
	"github.com/brandgw/brand/internal/cache/chunkcache"
	"github.com/brandgw/brand/internal/cache/evict"
	"github.com/brandgw/brand/internal/job/catalog"
)

// Never is the next-use distance of a chunk that no followed stream needs.
const Never = evict.Never

// Snapshot is, per dataset version and chunk, when some followed stream
// will next need the chunk, in the use table's time frame (ns since its
// zero): every stream's position converted to time by its own measured
// pace and divided by its weight, the soonest of them; Never when no
// stream needs the chunk in this epoch or the next. Evicting the chunk
// with the largest key is Belady's rule over the merged future of every
// job, comparing a fast job's and a slow job's uses as the times they
// will happen, not as positions in their own orders.
//
// Chunks of the windows streams are in now are needed by their next
// requests, whose times move with every request: their keys are read
// from the streams' clocks (hot), the rest are fixed when the table is
// built, once a stream crosses into another window.
type Snapshot struct {
	gen      uint64
	built    int64                    // when, in the use table's frame
	now      func() int64             // the use table's clock
	datasets map[string][]datasetUses // by name: one per version in use
	// clocks are, per chunk of some stream's current window, the clocks
	// of those streams: one map for every dataset, where one each cost a
	// table rebuilt at nearly every batch of a mixture of many sources a
	// map per source (issue 43).
	clocks map[hotChunk][]*clock
	// hot lists the chunks of some stream's current window, for a policy
	// to re-key when the streams' clocks move.
	hot []chunkcache.Key
	// hotFits reports whether the hot chunks fit in the cache together;
	// horizon is the latest key of the other chunks that fit beside them,
	// soonest first (Prefetchable). -1: none.
	hotFits bool
	horizon int64
	// keeps is the latest key of the chunks outside the current windows
	// that fit in the whole cache, soonest first (Keeps).
	keeps int64
	// crossing is when the first stream is expected to leave its current
	// window (Displaces); shared, whether several streams use the cache.
	crossing int64
	shared   bool
	// phased: some stream's pace changes at a phase ahead (jobstream.Pace.Changes).
	phased bool
	// straddle: some stream served now is in more than one window (its
	// readers straddle a window boundary); Displaces.
	straddle bool
}

// hotChunk is a chunk of a dataset version, in Snapshot.clocks.
type hotChunk struct {
	ds *catalog.Dataset
	c  int32
}

type datasetUses struct {
	ds   *catalog.Dataset
	dist []int64 // chunk ID → key of its next use past the current windows, by its window's start
	// first is, per chunk, the key of its next use by its first sample
	// there (jobstream.EpochOrder.Start): what the cache evicts by
	// (evictKey); nil: dist.
	first []int64
	// weight is, per chunk, the largest importance weight (over the mean)
	// an importance stream gives it; nil without importance streams.
	weight []float32
	// standIn is, per chunk, whether this node reads it only for a
	// node that owns it (Config.Own) and is down or out of reach; nil
	// when it stands in for none.
	standIn []bool
}

// Distance is k's next-use key in t, now.
func (t *Snapshot) Distance(k chunkcache.Key) int64 {
	if t == nil {
		return Never
	}
	return t.DistanceAt(k, t.Now())
}

// Now is the present in the table's time frame (its use table's clock).
func (t *Snapshot) Now() int64 {
	if t.now == nil {
		return t.built
	}
	return t.now()
}

// DistanceAt is k's next-use key in t at now (in the use table's frame): a
// policy re-keying many chunks reads the clock once. A chunk of a later
// window is keyed by that window's start, as the prefetch's answers
// (Prefetchable, Keeps, Displaces) count whole windows.
func (t *Snapshot) DistanceAt(k chunkcache.Key, now int64) int64 {
	return t.keyAt(k, now, false)
}

// evictKey is k's next-use key in t at now by its first sample, not its
// window's start: what the policy evicts by (victimKey). Keyed by their
// window's start, the chunks of a window tied, and the cache chose among
// them by their last touch — the order concurrent loads happened to end
// in — where the planner's Belady evicts the one used last: a cluster's
// nodes loaded a chunk more or fewer than /plan's bill, run to run
// (gateway/clustertest TestClusterBill). It orders chunks as DistanceAt
// does, and those of one window by their first samples.
func (t *Snapshot) evictKey(k chunkcache.Key, now int64) int64 {
	return t.keyAt(k, now, true)
}

// keyAt is DistanceAt, or evictKey if byFirst.
func (t *Snapshot) keyAt(k chunkcache.Key, now int64, byFirst bool) int64 {
	if t == nil {
		return Never
	}
	// The soonest use of every version of the dataset that holds the
	// chunk: streams of one job read several (an appended job's batches
	// before a record's first step read the version before it, their
	// chunks those of the newest version too), and the first version
	// listed (the streams' map order) alone keyed a chunk a stream of
	// another version needed next as needed by none.
	best := int64(Never)
	for _, du := range t.datasets[k.Dataset] {
		c, ok := du.ds.ChunkOf(k)
		if !ok {
			continue
		}
		d := du.dist[c]
		if byFirst && du.first != nil {
			d = du.first[c]
		}
		for _, ck := range t.clocks[hotChunk{du.ds, int32(c)}] {
			d = min(d, ck.key(now))
		}
		if d == Never && du.weight != nil {
			// Importance-aware eviction: of the chunks no stream needs,
			// the lightest go first and the heaviest stay, to be drawn
			// early in the next epoch (docs/importance.md). They still go
			// before any chunk a stream needs. The planner keys them by
			// the same rule.
			d = evict.FarKey(du.weight[c])
		}
		best = min(best, d)
	}
	return best
}

// StandIn reports whether this node holds k only standing in for its
// owner (Config.Own): the cache gives it free room, or a chunk no stream
// needs, or another stand-in's room, never an own chunk's
// (Snapshot.victimKey, the prefetcher's admission).
func (t *Snapshot) StandIn(k chunkcache.Key) bool {
	if t == nil {
		return false
	}
	for _, du := range t.datasets[k.Dataset] {
		if c, ok := du.ds.ChunkOf(k); ok {
			return du.standIn != nil && du.standIn[c]
		}
	}
	return false
}

// standInBand is where a needed stand-in's key starts in the eviction
// order (victimKey): past any key of a chunk this node owns (keys are
// ns in the use table's frame, from its start: 2⁶¹ ns is 73 years) and
// before farFuture, the keys of chunks no stream needs.
const standInBand = 1 << 61

// victimKey is k's key in the policy's eviction order at now: its next
// use's (evictKey), except that a stand-in some stream needs ranks
// after every chunk this node owns, in the order of its uses, and before
// every chunk no stream needs. Belady's rule alone evicted an own chunk
// needed in the next epoch for a stand-in needed in this window, when
// the stand-ins of the windows at hand overflowed the room the cache had
// beside the node's own chunks: the node read that chunk again once the
// fault healed (0.025–0.038 × the dataset in the warm epoch after a cut,
// integration/partition_test.go). Its owner, back, reads the stand-in:
// one read again during the fault costs no more than an own chunk read
// again after it, and the fault's reads are the store's anyway.
func (t *Snapshot) victimKey(k chunkcache.Key, now int64) int64 {
	d := t.evictKey(k, now)
	if !Needed(d) || !t.StandIn(k) {
		return d
	}
	return standInBand + min(max(d, 0), standInBand-1)
}

// farFuture bounds the distances of chunks no stream needs: Never, less
// at most an importance weight's worth (Snapshot.Distance).
const farFuture = Never - 1<<40

// Needed reports whether a distance is a use some stream will make.
func Needed(d int64) bool { return d < farFuture }

// Prefetchable reports whether reading k ahead cannot be undone before it
// is used: k is among the chunks needed soonest — the hot ones first —
// that the cache holds together. A chunk beyond that would be evicted
// for a sooner one before its use (by Belady's rule, which the policy
// follows), a read wasted and a sooner chunk displaced to make it.
func (t *Snapshot) Prefetchable(k chunkcache.Key) bool {
	if t == nil || !t.hotFits {
		return false
	}
	for _, du := range t.datasets[k.Dataset] {
		c, ok := du.ds.ChunkOf(k)
		if !ok {
			continue
		}
		// Any version's stream that needs it soon (DistanceAt).
		if len(t.clocks[hotChunk{du.ds, int32(c)}]) > 0 || du.dist[c] <= t.horizon {
			return true
		}
	}
	return false
}

// Keeps reports whether a chunk whose next use is keyed d may stay in the
// cache until it is used: it is among the chunks needed soonest outside
// the windows streams are in that fill the whole cache — as if every
// chunk of those windows had left it. One that is not goes before its
// use, by Belady's rule, whatever prefetch does: even the chunks of the
// windows being left, the better victims Displaces waits for, would not
// make room for it. A prefetch of a chunk needed sooner may displace it
// at any time (Displaces bounds only when a prefetch may displace the
// chunks the cache keeps). The cache is full of chunks some stream needs
// in this epoch or the next, so without this a prefetch found room only
// at the first stream's crossing, and the windows that a source whose
// weight jumps at a switch reads first were read on demand (issue 43's
// schedule bench: 25 of the 100 steps after the jump waited on the
// store).
//
// With no phase change ahead of any stream (a dataset, a mixture of fixed
// weights, a schedule past its last switch) it keeps every chunk some
// stream needs, as before schedules: the future is steady, Displaces
// already times each prefetch for the window crossing that frees its
// room, and displacing chunks needed later only read them twice
// (brand-bench mix --small, a mixture of two datasets at a cache of a
// quarter of them: 1.090 × the planner's optimal store bytes with it,
// 1.003 without, at fac3554).
//
// With several jobs on the cache it keeps every chunk some stream needs,
// as Displaces does: their merged future is known only as well as their
// measured paces predict it, and displacing such chunks cost more store
// reads than it saved stalls (brand-bench jobs --quick, 4 jobs at a cache
// of half the dataset: 1.21 × the optimum's reads with it, 1.10
// without, at ba5f1d1).
func (t *Snapshot) Keeps(d int64) bool {
	return t == nil || !t.hotFits || t.shared || !t.phased || d <= t.keeps
}

// Displaces reports whether a prefetch of a chunk needed at need (its
// key), which takes lead to read (ns: the prefetcher's measure), may
// evict a chunk some stream still needs, later. Only if it is needed by
// the time the first stream leaves its window: until then every chunk a
// stream's current window holds is needed, and afterwards the chunks of
// the window left are the better victims (needed only in a later window,
// or epoch), which a read made earlier would have passed over for a chunk
// needed sooner than they are. A prefetch needed later takes only room
// that is free or that no stream needs — unless it is needed less than
// lead after that crossing: a read begun only once the better victims are
// free would come too late, and the batch that needs the chunk would wait
// for it. That is the case of streams that leave their windows at nearly
// the same time, as a mixture's components of equal weight and chunk
// sizes do: the second component's next window would be read on demand,
// every window (measured at a cache of a quarter of the dataset, two
// ranks, samples of 10 KiB: 139 of 297 loads on demand, against 8 of 297
// for one dataset, measured at 6345a82).
//
// With several streams, prefetch takes only such room: the first stream
// to leave its window is known only as well as the streams' measured
// paces, and a read made for one stream before another's window ends
// passes over that window's chunks, the better victims, for chunks some
// stream needs (that cost a tenth more reads at four jobs, measured at
// 7e79997).
//
// Nor while a stream's readers straddle two windows (its ranks read
// concurrently, the trailing one still in a window the leading one has
// left): that window's chunks become the better victims as soon as the
// trailing reader leaves it, so a read made before then passes over them
// for chunks needed later. Measured at a cache of a quarter of the
// dataset, two ranks (at 8de739b): one
// dataset read 1.10–1.18 of the optimum's bytes with such reads and
// 1.04–1.06 without them, a two-dataset mixture 1.07–1.09 and 1.04–1.06.
func (t *Snapshot) Displaces(need, lead int64) bool {
	return t != nil && !t.shared && !t.straddle && need-max(lead, 0) <= t.crossing
}

// Hot lists the chunks of the windows streams are in now.
func (t *Snapshot) Hot() []chunkcache.Key {
	if t == nil {
		return nil
	}
	return t.hot
}
