package usetable

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/brandgw/brand/internal/cache/chunkcache"
	"github.com/brandgw/brand/internal/job/catalog"
)

// handTable is a use table built by hand over two versions of dataset d,
// six chunks of 3,072 bytes each:
//
//	version 1  chunk 0: in stream A's window, and needed again at 3000
//	           chunk 1: in the windows of streams A and B
//	           chunks 2, 3: one later window, needed at 5000
//	           chunk 4: needed at 9000
//	           chunk 5: needed by no stream; importance weight 0.5
//	version 2  chunk 2: needed at 7000; the others by no stream
//
// Stream A is between batches, its next request expected at 1000, of
// weight 2; stream B has had a batch in flight since 400. The first
// stream to leave its window is expected to at 10000.
func handTable(t *testing.T) (*Snapshot, map[string]chunkcache.Key) {
	t.Helper()
	v1 := catalog.NewDataset("d", "", nil, testIndex(t, 6, 4))
	v2 := catalog.NewDataset("d", "", nil, testIndexVersion(t, 6, 4, "v2-"))
	a, b := &clock{}, &clock{}
	a.next.Store(1000)
	a.weight.Store(math.Float64bits(2))
	b.inflight.Store(true)
	b.oldest.Store(400)
	b.weight.Store(math.Float64bits(1))
	table := &Snapshot{crossing: 10000, datasets: map[string][]datasetUses{"d": {
		{ds: v1, dist: []int64{3000, Never, 5000, 5000, 9000, Never}, weight: []float32{1, 1, 1, 1, 1, 0.5}},
		{ds: v2, dist: []int64{Never, Never, 7000, Never, Never, Never}},
	}}, clocks: map[hotChunk][]*clock{{v1, 0}: {a}, {v1, 1}: {a, b}}}
	keys := map[string]chunkcache.Key{}
	for c := range 6 {
		keys[fmt.Sprintf("v1/%d", c)] = v1.ChunkKey(c)
		keys[fmt.Sprintf("v2/%d", c)] = v2.ChunkKey(c)
	}
	return table, keys
}

// TestUseTableDistance: a chunk's key is the soonest of its fixed use and
// the clocks of the streams whose window holds it; a chunk no stream needs
// is Never, or its importance far key.
func TestUseTableDistance(t *testing.T) {
	tests := []struct {
		name   string
		chunk  string
		now    int64
		want   int64
		needed bool // by some stream: evicted after every chunk that is not
	}{
		{"in A's window, A on time: now plus the time to its next request, halved by its weight", "v1/0", 900, 900 + 100/2, true},
		{"A late: expected again twice as late as it is, halved", "v1/0", 1200, 1200 + 2*200/2, true},
		{"A late enough that its fixed use comes first", "v1/0", 2500, 3000, true},
		{"in two streams' windows: the sooner, B's batch in flight since 400", "v1/1", 900, 400, true},
		{"a batch in flight keeps its key however late", "v1/1", 5000, 400, true},
		{"fixed when the table was built, whatever now", "v1/2", 900, 5000, true},
		{"fixed, read much later", "v1/2", 1 << 40, 5000, true},
		{"the same window", "v1/3", 900, 5000, true},
		{"needed by no stream, of weight 0.5: Never less one and the weight in 1/65536ths", "v1/5", 900, Never - 1 - 32768, false},
		{"another version's chunk: that version's uses", "v2/2", 900, 7000, true},
		{"needed by no stream, without importance weights", "v2/0", 900, Never, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			table, keys := handTable(t)
			if got := table.DistanceAt(keys[tt.chunk], tt.now); got != tt.want {
				t.Errorf("DistanceAt(%s, %d) = %d, want %d", tt.chunk, tt.now, got, tt.want)
			}
			table.now = func() int64 { return tt.now }
			if got := table.Distance(keys[tt.chunk]); got != tt.want {
				t.Errorf("Distance(%s) at %d = %d, want %d", tt.chunk, tt.now, got, tt.want)
			}
			if Needed(tt.want) != tt.needed {
				t.Errorf("Needed(%d) = %t, want %t", tt.want, Needed(tt.want), tt.needed)
			}
		})
	}
	table, keys := handTable(t)
	unknown := []chunkcache.Key{
		{Dataset: "e", Object: keys["v1/0"].Object, ETag: keys["v1/0"].ETag}, // another dataset
		{Dataset: "d", Object: keys["v1/0"].Object, ETag: "v3-0"},            // a version no stream reads
	}
	for _, k := range unknown {
		if got := table.DistanceAt(k, 900); got != Never {
			t.Errorf("DistanceAt(%v) = %d, want Never", k, got)
		}
	}
	var none *Snapshot // no table published yet
	if none.Distance(keys["v1/0"]) != Never || none.DistanceAt(keys["v1/0"], 0) != Never || none.Prefetchable(keys["v1/0"]) || none.Displaces(0, 0) || none.Hot() != nil {
		t.Error("a nil table answers as if some chunk were needed")
	}
}

// TestUseTablePrefetchable: with the hot chunks (v1/0, v1/1) first, then
// the others soonest first, a chunk may be read ahead if it is among those
// that fit in the cache together; a window (chunks of one key) that does
// not fit whole is left out whole, and nothing is if the hot chunks do not
// fit.
func TestUseTablePrefetchable(t *testing.T) {
	const chunk = 3072
	tests := []struct {
		name     string
		capacity int64
		want     []string
	}{
		{"the hot chunks do not fit", 2*chunk - 1, nil},
		{"room for the hot chunks only", 2 * chunk, []string{"v1/0", "v1/1"}},
		{"half the window at 5000: left out whole", 3 * chunk, []string{"v1/0", "v1/1"}},
		{"the window at 5000", 4 * chunk, []string{"v1/0", "v1/1", "v1/2", "v1/3"}},
		{"and the other version's use at 7000", 5 * chunk, []string{"v1/0", "v1/1", "v1/2", "v1/3", "v2/2"}},
		{"every use", 6 * chunk, []string{"v1/0", "v1/1", "v1/2", "v1/3", "v1/4", "v2/2"}},
		{"room to spare: still only chunks some stream needs", 1 << 30, []string{"v1/0", "v1/1", "v1/2", "v1/3", "v1/4", "v2/2"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			table, keys := handTable(t)
			table.finish(tt.capacity)
			var got []string
			for name, k := range keys {
				if table.Prefetchable(k) {
					got = append(got, name)
				}
			}
			slices.Sort(got)
			if !slices.Equal(got, tt.want) {
				t.Errorf("prefetchable %v, want %v", got, tt.want)
			}
			var hot []string
			for _, k := range table.Hot() {
				for name, kk := range keys {
					if kk == k {
						hot = append(hot, name)
					}
				}
			}
			slices.Sort(hot)
			if want := []string{"v1/0", "v1/1"}; !slices.Equal(hot, want) {
				t.Errorf("hot %v, want %v", hot, want)
			}
		})
	}
}

// TestUseTableDisplaces: the first stream leaves its window at 10000; a
// prefetch needed by then, or less than its read's lead after, may evict
// chunks still needed later, unless several streams share the cache or a
// stream's readers straddle two windows.
func TestUseTableDisplaces(t *testing.T) {
	tests := []struct {
		name             string
		shared, straddle bool
		need, lead       int64
		want             bool
	}{
		{"needed when the first stream leaves its window", false, false, 10000, 0, true},
		{"needed before", false, false, 50, 0, true},
		{"needed just after, no lead", false, false, 10001, 0, false},
		{"needed after, within the read's lead", false, false, 12000, 2000, true},
		{"needed after the lead", false, false, 12001, 2000, false},
		{"a negative lead counts as none", false, false, 10001, -5, false},
		{"several streams share the cache", true, false, 50, 0, false},
		{"a stream's readers straddle two windows", false, true, 50, 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			table, _ := handTable(t)
			table.shared, table.straddle = tt.shared, tt.straddle
			if got := table.Displaces(tt.need, tt.lead); got != tt.want {
				t.Errorf("Displaces(%d, %d) = %t, want %t", tt.need, tt.lead, got, tt.want)
			}
		})
	}
}

// TestUseTableKeeps: the cache keeps until its use a chunk keyed within
// the soonest-needed chunks that fill it (keeps, here 8000); one keyed
// later goes before its use, and a prefetch may displace it — unless
// several jobs share the cache, or the current windows do not fit in it
// (then nothing is prefetched at all).
func TestUseTableKeeps(t *testing.T) {
	tests := []struct {
		name                    string
		shared, hotFits, phased bool
		d                       int64
		want                    bool
	}{
		{"within the chunks that fill the cache", false, true, true, 8000, true},
		{"after them", false, true, true, 8001, false},
		{"after them, several jobs on the cache", true, true, true, 8001, true},
		{"the current windows do not fit", false, false, true, 8001, true},
		{"after them, no phase change ahead", false, true, false, 8001, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			table, _ := handTable(t)
			table.shared, table.hotFits, table.phased, table.keeps = tt.shared, tt.hotFits, tt.phased, 8000
			if got := table.Keeps(tt.d); got != tt.want {
				t.Errorf("Keeps(%d) = %t, want %t", tt.d, got, tt.want)
			}
		})
	}
	var none *Snapshot
	if !none.Keeps(1) {
		t.Error("without a table, a chunk is not kept")
	}
}

// TestPublishedKeys: the keys a schedule publishes for one job stream
// over 16 chunks of 32 samples, in windows of two chunks (8 windows of
// 64 samples an epoch), worked out from the time frame (doc.go). Its pace
// is the default, 10,000 samples a second (100 µs a sample; /weight),
// since no two of its requests are rateSpan apart; its later windows are
// keyed from where its edge stood when the table was built — at its
// first request, the only window change — and the chunks it has read
// this epoch by their window in the next; its current window comes from
// its clock. Keys are nanoseconds after the first request (t0), to the
// nanosecond (the time per sample is a float).
func TestPublishedKeys(t *testing.T) {
	const sample = float64(100 * time.Microsecond)
	const ms = int64(time.Millisecond)
	type request struct {
		at       int64 // ns after t0
		pos, end int
		weight   float64
		finished bool
	}
	tests := []struct {
		name     string
		requests []request
		read     int64   // when the keys are read, after t0
		edge     int     // the edge when the table was built
		perNs    float64 // time per sample: sample / weight
		current  int     // the window the stream is in
		hot      int64   // the key of its chunks
	}{
		{"the first batch in flight: needed since it began", []request{{0, 0, 16, 1, false}}, 0, 0, sample, 0, 0},
		{"between batches, no gap known: its next request expected now", []request{{0, 0, 16, 1, true}}, 0, 0, sample, 0, 0},
		{"a batch in flight keeps its key as time passes", []request{{0, 0, 16, 1, false}}, 3 * ms, 0, sample, 0, 0},
		{"a gap of 2 ms: its next request expected 2 ms after its last batch",
			[]request{{0, 0, 16, 1, true}, {2 * ms, 16, 32, 1, true}}, 2 * ms, 0, sample, 0, 4 * ms},
		{"1 ms late: expected again twice as late",
			[]request{{0, 0, 16, 1, true}, {2 * ms, 16, 32, 1, true}}, 5 * ms, 0, sample, 0, 5*ms + 2*ms},
		{"weight 2: its uses twice as near",
			[]request{{0, 0, 16, 2, true}, {2 * ms, 16, 32, 2, true}}, 2 * ms, 0, sample / 2, 0, 2*ms + (4*ms-2*ms)/2},
		{"starting in the last window: the chunks read this epoch by their window in the next",
			[]request{{0, 448, 464, 1, false}}, 0, 448, sample, 7, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := newClocked(t, 1<<40, 0)
			js := c.stream(1, 2)
			t0 := c.now
			for _, r := range tt.requests {
				c.now = t0.Add(time.Duration(r.at))
				f, err := c.Begin(js, 0, r.pos, 0, 16, r.weight, Rank{})
				if err != nil {
					t.Fatal(err)
				}
				c.advance(js, 0, r.end)
				if r.finished {
					c.Finish(f)
				}
			}
			base := c.nowAt(t0)
			table := c.Snapshot()
			this, _ := c.orders.Epoch(js, 0)
			next, _ := c.orders.Epoch(js, 1)
			var hot []chunkcache.Key
			for ch := range 16 {
				k := c.ds.ChunkKey(ch)
				w := int(this.ChunkWindow[ch])
				var want int64
				switch {
				case w == tt.current:
					want = base + tt.hot
					hot = append(hot, k)
				case w > tt.current:
					want = base + int64(float64(64*w-tt.edge)*tt.perNs)
				default:
					want = base + int64(float64(512-tt.edge+64*int(next.ChunkWindow[ch]))*tt.perNs)
				}
				if got := table.DistanceAt(k, base+tt.read); got < want-1 || got > want+1 {
					t.Errorf("chunk %d (window %d, next epoch's %d): key t0%+v, want t0%+v",
						ch, w, next.ChunkWindow[ch], time.Duration(got-base), time.Duration(want-base))
				}
			}
			got := slices.Clone(table.Hot())
			sortKeys := func(ks []chunkcache.Key) {
				slices.SortFunc(ks, func(a, b chunkcache.Key) int { return strings.Compare(a.Object, b.Object) })
			}
			sortKeys(got)
			sortKeys(hot)
			if !slices.Equal(got, hot) {
				t.Errorf("hot %v, want window %d's chunks %v", got, tt.current, hot)
			}
		})
	}
}

// TestUseTableDistanceOverGrownVersions: a chunk that two versions of a
// dataset share (an appended version extends the one before it with the
// same objects) is keyed by the soonest use any version's streams make,
// whichever version the table lists first. An appended job's batches
// before a record's first step read the version before it while its
// newest version is in the table too; keyed by the first version listed
// alone (the streams' map order), a chunk the older version's stream
// needed next was keyed as needed by none and evicted first: a chain of
// appends read 4,119 store bytes in an epoch its plan put at 3,375
// (a gateway serving a chain of appends, against its plan).
func TestUseTableDistanceOverGrownVersions(t *testing.T) {
	older := catalog.NewDataset("d", "", nil, testIndex(t, 4, 4))
	grown := catalog.NewDataset("d", "", nil, testIndex(t, 6, 4))
	if older.ChunkKey(2) != grown.ChunkKey(2) {
		t.Fatal("the fixture's versions do not share their first chunks")
	}
	hot := &clock{}
	hot.inflight.Store(true)
	hot.oldest.Store(300)
	for _, order := range [][]int{{0, 1}, {1, 0}} {
		uses := []datasetUses{
			{ds: older, dist: []int64{Never, Never, 2000, Never}},
			{ds: grown, dist: []int64{Never, 8000, Never, Never, 4000, Never}},
		}
		table := &Snapshot{datasets: map[string][]datasetUses{"d": {uses[order[0]], uses[order[1]]}},
			clocks: map[hotChunk][]*clock{{older, 3}: {hot}}, hotFits: true, horizon: 2500}
		for _, tc := range []struct {
			chunk        int
			want         int64
			prefetchable bool
		}{
			{0, Never, false},
			{1, 8000, false}, // the grown version's use
			{2, 2000, true},  // the older version's use, within the horizon
			{3, 300, true},   // in the older version's stream's window
			{4, 4000, false}, // the grown version's only
		} {
			k := grown.ChunkKey(tc.chunk)
			if got := table.DistanceAt(k, 900); got != tc.want {
				t.Errorf("versions listed %v: chunk %d keyed %d; want %d", order, tc.chunk, got, tc.want)
			}
			if got := table.Prefetchable(k); got != tc.prefetchable {
				t.Errorf("versions listed %v: chunk %d prefetchable %v; want %v", order, tc.chunk, got, tc.prefetchable)
			}
		}
	}
}
