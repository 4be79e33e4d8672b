package handover

import (
	"context"
	"fmt"
	"slices"
	"sync/atomic"
	"testing"

	"github.com/rs/zerolog"

	"github.com/brandgw/brand/cluster"
	"github.com/brandgw/brand/internal/batch/layout"
	"github.com/brandgw/brand/internal/cache/chunkcache"
	"github.com/brandgw/brand/internal/cache/usetable"
	"github.com/brandgw/brand/internal/job/catalog"
	"github.com/brandgw/brand/internal/testsupport/catalogtest"
)

// oldOwner is a node's cache as a gateway builds it: a chunk cache
// evicting by its schedule's keys, the schedule keying the chunks the
// node reads for the batches (those it owns under the membership it
// agrees on) and, with kept, those it keeps for their new owners.
type oldOwner struct {
	self   string
	ds     *catalog.Dataset
	agreed atomic.Pointer[cluster.Membership]
	sched  *usetable.Table
	cache  *chunkcache.Cache
	kept   *Kept
	peers  *fakePeers // the other nodes, for its own warm-ups
	src    *Sources
	stored []int // chunks it read from the store
}

func newOldOwner(t *testing.T, ds *catalog.Dataset, self string, agreed *cluster.Membership, chunks int, kept *Kept) *oldOwner {
	o := &oldOwner{self: self, ds: ds, kept: kept, peers: &fakePeers{}}
	o.agreed.Store(agreed)
	o.src = NewSources(o.peers, zerolog.Nop())
	c := usetable.Config{Orders: layout.New(nil, nil), Capacity: int64(chunks) * 1024, Local: func(d *catalog.Dataset, c int) bool {
		m := o.agreed.Load()
		return m.Members()[d.Owners(m)[c]] == o.self
	}}
	if kept != nil {
		c.Keep = kept.Holds
	}
	o.sched = usetable.New(c)
	o.cache = chunkcache.New(chunkcache.Config{Capacity: c.Capacity, Policy: usetable.NewPolicy(o.sched.Snapshot, o.sched.Ticks),
		Loader: chunkcache.LoaderFunc(func(ctx context.Context, k chunkcache.Key, buf []byte) error {
			if !o.src.Read(ctx, k, buf, func([]byte) error { return nil }) {
				c, _ := ds.ChunkOf(k)
				o.stored = append(o.stored, c)
			}
			return nil
		})})
	t.Cleanup(o.cache.Close)
	return o
}

// owns reports whether the node owns chunk c under m.
func owns(ds *catalog.Dataset, m *cluster.Membership, u string, c int) bool {
	return m.Members()[ds.Owners(m)[c]] == u
}

// read reads windows [from, to) of epoch of js through the node as a
// gateway serves a batch: begun, advanced, the chunks it reads for the
// batches acquired, finished.
func (o *oldOwner) read(t *testing.T, js layout.Stream, epoch uint64, from, to int) {
	t.Helper()
	e, err := layout.New(nil, nil).Epoch(js, epoch)
	if err != nil {
		t.Fatal(err)
	}
	for w := from; w < to; w++ {
		f, err := o.sched.Begin(js, epoch, e.WindowStart(w), 0, 0, 1, usetable.Rank{World: 1})
		if err != nil {
			t.Fatal(err)
		}
		o.sched.Advance(js, epoch, e.WindowStart(w+1), 1)
		for _, c := range e.WindowChunks(w) {
			if !owns(o.ds, o.agreed.Load(), o.self, c) {
				continue
			}
			lease, err := o.cache.Acquire(context.Background(), []chunkcache.Request{o.ds.ChunkRequest(c)})
			if err != nil {
				t.Fatal(err)
			}
			lease.Release()
		}
		o.sched.Finish(f)
	}
}

// TestDeferredGainKeptByItsOldOwner: a gain a join leaves to the batches
// (no cache held it when the joiner planned its warm-up) is read by its
// old owner for the jobs until the cluster flips, then asked of it when
// a batch first needs it. After the flip the old owner's copy is no
// longer one of its chunks: with nothing to say its new owner awaits it,
// the copy was the first to go (usetable: another node's chunk is
// Never), and a leave right after the join, whose gains the old owner
// loads evicting only the chunks no job needs, evicted it — the joiner
// then read it from the store (the hypothesis for
// integration.TestClusterJoinAtEpochEnd's one chunk in epoch 1). Here
// the old owner's cache holds exactly its chunks before the join, and
// the leave gives it more chunks than the join took from it, so its
// leave warm-up evicts every copy it is not told to keep: run first
// without Kept, as before, the copy is gone when the joiner asks (the
// premise, checked). Told by the joiner (Kept), the old owner keeps the
// copy, keyed by when the jobs need it, and gives it when asked; the
// leave's gains it has no room for are left to the batches.
func TestDeferredGainKeptByItsOldOwner(t *testing.T) {
	ds := catalogtest.Dataset(t, "d", 64, 2)
	js := layout.Stream{DS: ds, Seed: 7, Window: 8}
	e0, err := layout.New(nil, nil).Epoch(js, 0)
	if err != nil {
		t.Fatal(err)
	}
	last := e0.NumWindows() - 1
	x, y := "http://x:1", "http://y:1"
	two := mustMembers(t, x, y)
	// A joiner g whose gains from x include a chunk of epoch 0's last
	// window, still its own once y has left, and with which x gains more
	// in the leave than it loses in the join (its cache, full of its
	// chunks under the two, then must make room for more than the copies).
	var g string
	var three, after *cluster.Membership
	var deferred int
	for i := 0; g == "" && i < 1000; i++ {
		cand := fmt.Sprintf("http://g%d:1", i)
		three, after = mustMembers(t, x, y, cand), mustMembers(t, x, cand)
		var lost, gained int
		for c := range ds.Index.NumChunks() {
			if owns(ds, two, x, c) && !owns(ds, three, x, c) {
				lost++
			}
			if owns(ds, after, x, c) && !owns(ds, three, x, c) {
				gained++
			}
		}
		deferred = slices.IndexFunc(e0.WindowChunks(last), func(c int) bool {
			return owns(ds, two, x, c) && owns(ds, three, cand, c) && owns(ds, after, cand, c)
		})
		if deferred >= 0 && gained > lost {
			g, deferred = cand, e0.WindowChunks(last)[deferred]
		}
	}
	if g == "" {
		t.Fatal("no joiner URL of 1,000 gives the test its premise")
	}
	var own2 int
	for c := range ds.Index.NumChunks() {
		if owns(ds, two, x, c) {
			own2++
		}
	}
	for _, tc := range []struct {
		name string
		kept bool
	}{{"the premise: not told, as before, it evicts the copy", false}, {"told to keep it", true}} {
		t.Run(tc.name, func(t *testing.T) {
			var kept *Kept
			if tc.kept {
				kept = NewKept()
			}
			o := newOldOwner(t, ds, x, two, own2, kept)
			// The cold epoch under x and y, the join planned in its
			// middle: g leaves deferred to the batches, and tells x.
			o.read(t, js, 0, 0, last/2)
			if kept != nil {
				kept.Keep(g, ds, []int{deferred})
			}
			o.read(t, js, 0, last/2, last+1)
			if !o.cache.Contains(ds.ChunkKey(deferred)) {
				t.Fatalf("chunk %d, read for the batches at the epoch's end, is not in x's cache", deferred)
			}
			// The cluster flips to the three; the next epoch begins, and y
			// leaves: x copies its gains from y's cache, evicting only
			// what no job needs.
			o.agreed.Store(three)
			o.read(t, js, 1, 0, 1)
			var fromY []int
			for c := range ds.Index.NumChunks() {
				if owns(ds, three, y, c) {
					fromY = append(fromY, c)
				}
			}
			o.peers.held = map[string][]int{y: fromY}
			h := New(Config{Self: x, Peers: o.peers, UseTable: o.sched, Cache: o.cache, Sources: o.src, PrefetchWindows: 1,
				Datasets: func() ([]*catalog.Dataset, error) { return []*catalog.Dataset{ds}, nil },
				Admit:    func(victim chunkcache.Key) bool { return !usetable.Needed(o.sched.Distance(victim)) }})
			change, err := h.Warm(context.Background(), three, after, func() {})
			if err != nil {
				t.Fatal(err)
			}
			o.agreed.Store(after)
			o.read(t, js, 1, 1, 2)
			// g's first batch that needs the chunk asks x for it.
			held := o.cache.Contains(ds.ChunkKey(deferred))
			t.Logf("x's leave warm-up copied %d chunks from y; the deferred gain is in x's cache when g asks: %t", change.Chunks, held)
			switch {
			case !tc.kept && held:
				t.Fatalf("premise: chunk %d, deferred by the join, not kept, is still in x's cache after the leave's warm-up: the test proves nothing", deferred)
			case tc.kept && !held:
				t.Errorf("chunk %d, deferred by the join to its new owner g, who told x: not in x's cache when g asks (g reads the store)", deferred)
			}
			if kept != nil {
				kept.Taken(g, ds, deferred)
				if kept.Holds(ds, deferred) || kept.Len() != 0 {
					t.Errorf("chunk %d still kept once g has asked for it", deferred)
				}
			}
		})
	}
}
