package usetable

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"github.com/brandgw/brand/internal/cache/chunkcache"
	"github.com/brandgw/brand/internal/job/catalog"
	"github.com/brandgw/brand/internal/job/jobstream"
)

// slowCache is a prefetchCache whose every load takes took on the
// prefetcher's clock.
type slowCache struct {
	now  *time.Time
	took time.Duration
}

func (slowCache) Contains(chunkcache.Key) bool { return false }

func (s slowCache) Prefetch(context.Context, chunkcache.Request, func(chunkcache.Key) bool) (chunkcache.PrefetchResult, error) {
	*s.now = s.now.Add(s.took)
	return chunkcache.PrefetchLoaded, nil
}

// TestPrefetchLeadIsMeasured: the lead a prefetch asks to displace with is
// the measured time of a load for each round the workers need to read
// the chunks queued or being read: nothing before a load is measured.
func TestPrefetchLeadIsMeasured(t *testing.T) {
	for _, tc := range []struct {
		workers int
		want    []time.Duration // the lead of each of four fetches in turn
	}{
		{1, []time.Duration{0, 9 * time.Millisecond, 6 * time.Millisecond, 3 * time.Millisecond}},
		{2, []time.Duration{0, 6 * time.Millisecond, 3 * time.Millisecond, 3 * time.Millisecond}},
	} {
		now := time.Unix(1, 0)
		var leads []time.Duration
		p := NewPrefetcher(PrefetcherConfig{Cache: slowCache{&now, 3 * time.Millisecond},
			Distance: func(chunkcache.Key) int64 { return 1 },
			Displaces: func(_, lead int64) bool {
				leads = append(leads, time.Duration(lead))
				return true
			},
			Tally: noTally{}, Registry: prometheus.NewRegistry(), Log: zerolog.Nop()})
		p.workers, p.clock = tc.workers, func() time.Time { return now } // no workers run: fetched by hand
		ds := catalog.NewDataset("d", "", nil, testIndex(t, 4, 8))
		var uses []Use
		for c := range 4 {
			uses = append(uses, Use{Stream: jobstream.Stream{DS: ds}, Chunk: c})
		}
		p.Enqueue(uses)
		for range 4 {
			p.fetch(<-p.queue)
		}
		p.Close()
		if len(leads) != len(tc.want) {
			t.Fatalf("%d workers: %d fetches asked to displace, want %d", tc.workers, len(leads), len(tc.want))
		}
		for i, l := range leads {
			if l != tc.want[i] {
				t.Errorf("%d workers, fetch %d: lead %v, want %v (all: %v)", tc.workers, i, l, tc.want[i], leads)
			}
		}
	}
}

// noTally hears nothing.
type noTally struct{}

func (noTally) Prefetched(jobstream.Stream, uint64, int, int64, bool) {}

// countingPrefetchCache records the chunks it was asked to read.
type countingPrefetchCache struct{ read []chunkcache.Key }

func (*countingPrefetchCache) Contains(chunkcache.Key) bool { return false }

func (c *countingPrefetchCache) Prefetch(_ context.Context, r chunkcache.Request, _ func(chunkcache.Key) bool) (chunkcache.PrefetchResult, error) {
	c.read = append(c.read, r.Key)
	return chunkcache.PrefetchLoaded, nil
}

// TestPrefetchLeavesChunksAnotherNodeReads: a chunk queued while this
// node read it (its owner was down) is not read once another node is its
// source again — on a cluster's start, nodes that saw their peers down
// for a moment went on to read those peers' chunks from their queues,
// and a cold epoch read some chunks twice or three times.
func TestPrefetchLeavesChunksAnotherNodeReads(t *testing.T) {
	cache := &countingPrefetchCache{}
	ds := catalog.NewDataset("d", "", nil, testIndex(t, 4, 8))
	local := map[int]bool{0: true, 1: true, 2: true, 3: true}
	p := NewPrefetcher(PrefetcherConfig{Cache: cache, Distance: func(chunkcache.Key) int64 { return 1 },
		Local: func(d *catalog.Dataset, c int) bool { return d == ds && local[c] },
		Tally: noTally{}, Registry: prometheus.NewRegistry(), Log: zerolog.Nop()})
	p.workers = 1 // no workers run: fetched by hand
	var uses []Use
	for c := range 4 {
		uses = append(uses, Use{Stream: jobstream.Stream{DS: ds}, Chunk: c})
	}
	p.Enqueue(uses)
	local[1], local[3] = false, false // their owners answer again
	for range 4 {
		p.fetch(<-p.queue)
	}
	p.Close()
	var got []string
	for _, k := range cache.read {
		got = append(got, k.Object)
	}
	want := []string{ds.ChunkKey(0).Object, ds.ChunkKey(2).Object}
	if !slices.Equal(got, want) {
		t.Fatalf("prefetched %v, want %v: chunks another node reads now are left to it", got, want)
	}
}

// newPrefetcher is a prefetcher of s's uses into cache, wired as the
// gateway wires them, on s's clock; no workers run: a test reads its
// queue itself.
func newPrefetcher(t *testing.T, s *Table, cache *chunkcache.Cache) *Prefetcher {
	p := NewPrefetcher(PrefetcherConfig{Cache: cache, Distance: s.Distance,
		Prefetchable: func(k chunkcache.Key) bool { return s.Snapshot().Prefetchable(k) },
		Displaces:    func(need, lead int64) bool { return s.Snapshot().Displaces(need, lead) },
		Keeps:        s.Keeps,
		Tally:        noTally{}, Registry: prometheus.NewRegistry(), Log: zerolog.Nop()})
	p.clock = s.clock
	t.Cleanup(p.Close)
	return p
}

// TestPrefetchReadsTheNextWindow: a stream's first batch queues the rest
// of its window and the whole next one, in the order the stream needs
// them, and once they are read the next window's batches find every chunk
// in the cache. A prefetch whose load fails (a bad link) leaves its chunk
// to the batch that needs it, and the chunk may be queued again. (gateway's
// TestPrefetchLoadsNextWindow waited for the first on a running gateway;
// its TestCorruptChunkIsNeverServed reached the second.)
func TestPrefetchReadsTheNextWindow(t *testing.T) {
	for _, tc := range []struct {
		name  string
		fails bool // the first load of the next window's first chunk fails
	}{
		{"every load succeeds", false},
		{"a load fails", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newTestSchedule()
			ds := catalog.NewDataset("d", "", nil, testIndex(t, 6, 10))
			js := jobstream.Stream{DS: ds, Seed: 9, Window: 2}
			e, err := s.orders.Epoch(js, 0)
			if err != nil {
				t.Fatal(err)
			}
			bad := ds.ChunkKey(e.WindowChunks(1)[0])
			failed := false // the cache's loads run on its goroutines, one after another here
			cache := chunkcache.New(chunkcache.Config{Capacity: 1 << 30, Policy: NewPolicy(s.Snapshot, s.Ticks),
				Loader: chunkcache.LoaderFunc(func(_ context.Context, k chunkcache.Key, _ []byte) error {
					if tc.fails && k == bad && !failed {
						failed = true
						return errors.New("connection reset")
					}
					return nil
				})})
			t.Cleanup(cache.Close)
			p := newPrefetcher(t, s, cache)
			f := mustBegin(t, s, js, 0, 0, 4) // batch 0: positions 0..3, window 0
			uses := s.Advance(js, 0, 4, 1)
			var got []int
			for _, u := range uses {
				got = append(got, u.Chunk)
			}
			if want := append(slices.Clone(e.WindowChunks(0)), e.WindowChunks(1)...); !slices.Equal(got, want) {
				t.Fatalf("the first batch queues chunks %v, want windows 0 and 1's, %v", got, want)
			}
			p.Enqueue(uses)
			for len(p.queue) > 0 {
				p.fetch(<-p.queue)
			}
			s.Finish(f)
			var next []chunkcache.Request
			for _, c := range e.WindowChunks(1) {
				next = append(next, ds.ChunkRequest(c))
			}
			wantMisses := int64(0)
			if tc.fails {
				wantMisses = 1
				if cache.Contains(bad) {
					t.Fatal("a chunk whose prefetch failed is in the cache")
				}
				if p.Enqueue(uses); len(p.queue) != 1 {
					t.Fatalf("%d chunks queued again, want the one whose prefetch failed", len(p.queue))
				}
				<-p.queue
			}
			before := cache.Stats()
			lease, err := cache.Acquire(context.Background(), next) // batch 5: positions 20..24, window 1
			if err != nil {
				t.Fatal(err)
			}
			lease.Release()
			if st := cache.Stats(); before.PrefetchLoads != int64(len(uses)) || st.Misses-before.Misses != wantMisses {
				t.Errorf("%d chunks prefetched of %d queued; the next window's batch missed %d, want %d",
					before.PrefetchLoads, len(uses), st.Misses-before.Misses, wantMisses)
			}
		})
	}
}

// admitsCache is a prefetchCache that asks admit of each of its victims
// and records those admit accepts.
type admitsCache struct {
	victims, admitted []chunkcache.Key
}

func (*admitsCache) Contains(chunkcache.Key) bool { return false }

func (a *admitsCache) Prefetch(_ context.Context, _ chunkcache.Request, admit func(chunkcache.Key) bool) (chunkcache.PrefetchResult, error) {
	for _, k := range a.victims {
		if admit(k) {
			a.admitted = append(a.admitted, k)
		}
	}
	return chunkcache.PrefetchLoaded, nil
}

// TestPrefetchOfAStandInSparesOwnChunks: a chunk read standing in for its
// owner displaces chunks no stream needs and other stand-ins needed after
// it, never a chunk this node owns, however much later that is needed
// (TestStandInsNeverEvictOwnChunks is the same rule in the cache's
// order); a chunk this node owns displaces either.
func TestPrefetchOfAStandInSparesOwnChunks(t *testing.T) {
	ds := catalog.NewDataset("d", "", nil, testIndex(t, 5, 8))
	// Chunk 0 is read; 1 and 2 are this node's own, needed later and not
	// at all; 3 a stand-in needed later; 4 the own chunk read.
	dist := map[int]int64{0: 10, 1: 1000, 2: Never, 3: 500, 4: 10}
	standIn := map[int]bool{0: true, 3: true}
	key := func(c int) chunkcache.Key { return ds.ChunkKey(c) }
	chunk := func(k chunkcache.Key) int { c, _ := ds.ChunkOf(k); return c }
	for _, tc := range []struct {
		read int
		want []int
	}{{0, []int{2, 3}}, {4, []int{1, 2, 3}}} {
		cache := &admitsCache{victims: []chunkcache.Key{key(1), key(2), key(3)}}
		p := NewPrefetcher(PrefetcherConfig{Cache: cache, Distance: func(k chunkcache.Key) int64 { return dist[chunk(k)] },
			StandIn: func(k chunkcache.Key) bool { return standIn[chunk(k)] },
			Tally:   noTally{}, Registry: prometheus.NewRegistry(), Log: zerolog.Nop()})
		p.workers = 1 // no workers run: fetched by hand
		p.Enqueue([]Use{{Stream: jobstream.Stream{DS: ds}, Chunk: tc.read}})
		p.fetch(<-p.queue)
		p.Close()
		var got []int
		for _, k := range cache.admitted {
			got = append(got, chunk(k))
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("prefetch of chunk %d (stand-in: %t) may displace %v, want %v", tc.read, standIn[tc.read], got, tc.want)
		}
	}
}
