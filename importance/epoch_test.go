package importance

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/brandgw/brand/shuffle"
)

type epochCase struct {
	name   string
	counts []int
	scores func(counts []int) []float32
	window int
	hot    int
}

func sumInts(a []int) int {
	s := 0
	for _, v := range a {
		s += v
	}
	return s
}

func epochCases() []epochCase {
	skewed := func(c []int) []float32 { return skewedScores(sumInts(c), 5) }
	clustered := func(c []int) []float32 { return clusteredScores(c, 5) }
	equal := func(c []int) []float32 {
		s := make([]float32, sumInts(c))
		for i := range s {
			s[i] = 0.7
		}
		return s
	}
	few := func(c []int) []float32 { // four distinct values: large tie groups
		s := make([]float32, sumInts(c))
		for i := range s {
			s[i] = float32(i % 4)
		}
		return s
	}
	uneven := []int{5, 0, 17, 1, 9, 0, 0, 33, 2, 8, 12, 4}
	return []epochCase{
		{"skewed 32x16 w4", uniformCounts(32, 16), skewed, 4, 0},
		{"skewed 32x16 w4 hot6", uniformCounts(32, 16), skewed, 4, 6},
		{"clustered 32x16 w3 hot4", uniformCounts(32, 16), clustered, 3, 4},
		{"clustered uneven w2", uneven, clustered, 2, 0},
		{"skewed uneven w5 hot100", uneven, skewed, 5, 100},
		{"equal 10x7 w3", uniformCounts(10, 7), equal, 3, 0},
		{"ties 20x8 w8 hot3", uniformCounts(20, 8), few, 8, 3},
		{"one chunk", []int{9}, skewed, 4, 1},
		{"one sample", []int{0, 1, 0}, skewed, 1, 0},
		{"empty dataset", []int{0, 0}, skewed, 2, 1},
	}
}

func TestEpochProperties(t *testing.T) {
	for _, tc := range epochCases() {
		t.Run(tc.name, func(t *testing.T) {
			snap := mustSnapshot(t, tc.scores(tc.counts))
			for ep := range uint64(5) {
				e := mustEpoch(t, tc.counts, snap, 11, ep, tc.window, tc.hot)
				checkEpoch(t, e, tc.counts)
				if t.Failed() {
					t.Fatalf("epoch %d", ep)
				}
				// Deterministic: a second computation agrees.
				if again := mustEpoch(t, tc.counts, snap, 11, ep, tc.window, tc.hot); !slices.Equal(wholeOrder(again), wholeOrder(e)) {
					t.Fatalf("epoch %d: two computations differ", ep)
				}
			}
		})
	}
}

// checkEpoch checks every structural promise of an Epoch.
func checkEpoch(t *testing.T, e *Epoch, counts []int) {
	t.Helper()
	n := sumInts(counts)
	first := make([]int, len(counts)+1)
	for c, k := range counts {
		first[c+1] = first[c] + k
	}
	chunkOf := func(id int) int {
		c, _ := slices.BinarySearch(first, id+1)
		return c - 1
	}
	if e.NumSamples() != n || e.NumChunks() != len(counts) {
		t.Fatalf("NumSamples %d NumChunks %d, want %d %d", e.NumSamples(), e.NumChunks(), n, len(counts))
	}
	// Each chunk read at most once; draws only from read, non-empty chunks;
	// draws sum to n.
	read := make(map[int]bool)
	for _, c := range e.ChunkOrder() {
		if read[c] {
			t.Fatalf("chunk %d read twice", c)
		}
		read[c] = true
	}
	total := 0
	for c := range counts {
		d := e.Draws(c)
		total += d
		if (d > 0) != read[c] || d > 0 && counts[c] == 0 || d < 0 {
			t.Fatalf("chunk %d: %d draws, read %v, %d samples", c, d, read[c], counts[c])
		}
	}
	if total != n {
		t.Fatalf("draws sum to %d, want %d", total, n)
	}
	if e.NumRead() != len(e.ChunkOrder()) || e.NumWindows() != (e.NumRead()+e.WindowSize()-1)/e.WindowSize() {
		t.Fatalf("NumRead %d, NumWindows %d, window %d", e.NumRead(), e.NumWindows(), e.WindowSize())
	}
	// Draws follow the targets W_c·A within one, but for the last chunk
	// read, which takes what is left.
	a := e.scale
	order := e.ChunkOrder()
	for k, c := range order {
		if x := e.ChunkWeight(c) * a; k < len(order)-1 && math.Abs(float64(e.Draws(c))-x) > 1 {
			t.Errorf("chunk %d: %d draws, target %.3f", c, e.Draws(c), x)
		}
	}
	// Windows: their samples come from their chunks, Draws(c) of each.
	var all []int
	for w := range e.NumWindows() {
		ids := e.Window(w)
		if len(ids) != e.WindowStart(w+1)-e.WindowStart(w) {
			t.Fatalf("window %d: %d samples, starts say %d", w, len(ids), e.WindowStart(w+1)-e.WindowStart(w))
		}
		per := make(map[int]int)
		for _, id := range ids {
			per[chunkOf(id)]++
		}
		for _, c := range e.WindowChunks(w) {
			if per[c] != e.Draws(c) {
				t.Fatalf("window %d: %d samples of chunk %d, want %d", w, per[c], c, e.Draws(c))
			}
			delete(per, c)
		}
		if len(per) != 0 {
			t.Fatalf("window %d: samples of chunks %v outside it", w, per)
		}
		for pos := e.WindowStart(w); pos < e.WindowStart(w+1); pos++ {
			if e.WindowOf(pos) != w {
				t.Fatalf("WindowOf(%d) = %d, want %d", pos, e.WindowOf(pos), w)
			}
		}
		all = append(all, ids...)
	}
	if len(all) != n || e.WindowStart(e.NumWindows()) != n {
		t.Fatalf("order of %d samples, want %d", len(all), n)
	}
	// Ranges and batches are cuts of the same order.
	r := rand.New(rand.NewPCG(uint64(n), 9))
	for range 20 {
		if n == 0 {
			break
		}
		start := r.IntN(n + 1)
		end := start + r.IntN(n-start+1)
		if got := e.AppendRange(nil, start, end); !slices.Equal(got, all[start:end]) {
			t.Fatalf("AppendRange(%d, %d) = %v, want %v", start, end, got, all[start:end])
		}
	}
	var batches []int
	for m := range shuffle.NumBatches(n, 3, 2, false) {
		for rank := range 2 {
			b, err := e.Batch(m, 3, 2, rank, false)
			if err != nil {
				t.Fatal(err)
			}
			batches = append(batches, b...)
		}
	}
	if !slices.Equal(batches, all) && n > 0 {
		t.Fatalf("batches %v, order %v", batches, all)
	}
	if n > 0 {
		got := e.ChunksOfRange(0, n)
		slices.Sort(got)
		want := slices.Sorted(slices.Values(e.ChunkOrder()))
		if !slices.Equal(got, want) {
			t.Fatalf("ChunksOfRange(0, n) = %v, want the chunks read %v", got, want)
		}
	}
}

// With all scores equal there is nothing to prefer: every chunk is read
// and draws exactly as many samples as it holds, as in the uniform epoch.
func TestEqualScoresReadEveryChunkOnce(t *testing.T) {
	counts := []int{7, 0, 3, 64, 1, 12}
	scores := make([]float32, sumInts(counts))
	for i := range scores {
		scores[i] = 2.5
	}
	e := mustEpoch(t, counts, mustSnapshot(t, scores), 1, 3, 2, 2)
	for c, k := range counts {
		if e.Draws(c) != k {
			t.Errorf("chunk %d: %d draws, want its %d samples", c, e.Draws(c), k)
		}
	}
}

// The hot chunks are the heaviest, come first, and never take more than
// HotShare of the epoch.
func TestHotChunks(t *testing.T) {
	counts := uniformCounts(64, 16)
	snap := mustSnapshot(t, clusteredScores(counts, 2))
	for ep := range uint64(4) {
		e := mustEpoch(t, counts, snap, 5, ep, 4, 6)
		got := slices.Sorted(slices.Values(e.ChunkOrder()[:6]))
		want := slices.Sorted(slices.Values(heaviestOrder(e)[:6]))
		if !slices.Equal(got, want) {
			t.Errorf("epoch %d: first chunks %v, want the 6 heaviest %v", ep, got, want)
		}
	}

	// hot as large as the dataset: the hot set is the heaviest chunks whose
	// targets fit in HotShare of the draws, and other chunks are read too.
	e := mustEpoch(t, counts, snap, 5, 0, 4, len(counts))
	n, a := e.NumSamples(), e.scale
	isHot := make(map[int]bool)
	var x float64
	for _, c := range heaviestOrder(e) {
		xc := e.ChunkWeight(c) * a
		if x+xc > HotShare*float64(n) {
			break
		}
		x += xc
		isHot[c] = true
	}
	hotDraws := 0
	for _, c := range e.ChunkOrder()[:len(isHot)] {
		if !isHot[c] {
			t.Fatalf("chunk %d among the first %d, not in the hot set", c, len(isHot))
		}
		hotDraws += e.Draws(c)
	}
	if hotDraws > n/2+1 || len(isHot) == 0 || len(isHot) >= e.NumRead() {
		t.Errorf("hot set of %d chunks takes %d of %d draws; %d chunks read", len(isHot), hotDraws, n, e.NumRead())
	}
}

// heaviestOrder returns the chunks by weight descending, ties by ID.
func heaviestOrder(e *Epoch) []int {
	c := make([]int, e.NumChunks())
	for i := range c {
		c[i] = i
	}
	slices.SortStableFunc(c, func(x, y int) int {
		switch {
		case e.ChunkWeight(x) > e.ChunkWeight(y):
			return -1
		case e.ChunkWeight(x) < e.ChunkWeight(y):
			return 1
		}
		return 0
	})
	return c
}

// Over many epochs every sample is drawn (the floor and the random chunk
// keys leave none out), and important samples more often than others.
func TestFloorAndPreference(t *testing.T) {
	counts := uniformCounts(16, 16)
	n := sumInts(counts)
	scores := skewedScores(n, 8)
	snap := mustSnapshot(t, scores)
	const epochs = 300
	drawn := make([]int, n)
	for ep := range uint64(epochs) {
		e := mustEpoch(t, counts, snap, 3, ep, 4, 0)
		for _, id := range wholeOrder(e) {
			drawn[id]++
		}
	}
	e := mustEpoch(t, counts, snap, 3, 0, 4, 0)
	ids := make([]int, n)
	for i := range ids {
		ids[i] = i
	}
	slices.SortFunc(ids, func(x, y int) int { return int(math.Copysign(1, e.SampleWeight(x)-e.SampleWeight(y))) })
	dec := n / 10
	var low, high int
	minRate := math.Inf(1)
	for i, id := range ids {
		rate := float64(drawn[id]) / epochs
		minRate = min(minRate, rate)
		if i < dec {
			low += drawn[id]
		}
		if i >= n-dec {
			high += drawn[id]
		}
	}
	t.Logf("lowest draw rate %.3f per epoch; top decile drawn %.2f× the bottom decile", minRate, float64(high)/float64(low))
	// A floor sample weighs a tenth of the mean chunk's per-sample weight
	// times about two (K), and its chunk is read about half the epochs:
	// about 0.2 draws an epoch.
	if minRate < 0.08 {
		t.Errorf("a sample is drawn %.3f times an epoch; the floor promises about 0.2", minRate)
	}
	if r := float64(high) / float64(low); r < 4 || r > 12 {
		t.Errorf("top decile drawn %.2f× the bottom decile, want between 4 and 12 (weights 0.95 against 0.1)", r)
	}
}

func TestNewEpochRejects(t *testing.T) {
	snap := mustSnapshot(t, []float32{1, 2, 3})
	for _, tt := range []struct {
		name   string
		counts []int
		snap   *Snapshot
		window int
		hot    int
	}{
		{"no snapshot", []int{3}, nil, 1, 0},
		{"window 0", []int{3}, snap, 0, 0},
		{"negative hot", []int{3}, snap, 1, -1},
		{"negative count", []int{4, -1}, snap, 1, 0},
		{"overflow", []int{3, math.MaxInt}, snap, 1, 0},
		{"snapshot too short", []int{3, 1}, snap, 1, 0},
	} {
		if _, err := NewEpoch(tt.counts, tt.snap, 0, 0, tt.window, tt.hot); !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: %v, want ErrInvalid", tt.name, err)
		}
	}
}

// TestNewOrder: the chooser picks the importance order with a snapshot
// and the uniform shuffle otherwise, each exactly as its own constructor
// computes it.
func TestNewOrder(t *testing.T) {
	counts := []int{3, 2, 4, 1}
	snap := mustSnapshot(t, skewedScores(10, 1))
	uniform, _ := shuffle.NewEpoch(counts, 1, 3, 2)
	sampled, _ := NewEpoch(counts, snap, 1, 3, 2, 1)
	for _, tt := range []struct {
		name string
		spec OrderSpec
		want Order
	}{
		{"uniform", OrderSpec{Counts: counts, Seed: 1, Epoch: 3, Window: 2}, uniform},
		{"importance", OrderSpec{Counts: counts, Seed: 1, Epoch: 3, Window: 2, Snapshot: snap, Hot: 1}, sampled},
	} {
		o, err := NewOrder(tt.spec)
		if err != nil {
			t.Fatalf("%s: %v", tt.name, err)
		}
		if got, want := o.AppendRange(nil, 0, 10), tt.want.AppendRange(nil, 0, 10); !slices.Equal(got, want) || !slices.Equal(o.ChunkOrder(), tt.want.ChunkOrder()) {
			t.Errorf("%s: %v (chunks %v), want %v (chunks %v)", tt.name, got, o.ChunkOrder(), want, tt.want.ChunkOrder())
		}
	}
	for _, spec := range []OrderSpec{
		{Counts: counts, Seed: 1},
		{Counts: counts, Seed: 1, Snapshot: snap},
	} {
		if o, err := NewOrder(spec); o != nil || err == nil {
			t.Errorf("%+v: %v, %v; want a nil Order and an error", spec, o, err)
		}
	}
}

// TestNoSampleTwiceInARow: WebDataset readers group consecutive members by
// key, so a window must never hold a sample twice in a row.
func TestNoSampleTwiceInARow(t *testing.T) {
	counts := make([]int, 32)
	for c := range counts {
		counts[c] = 16
	}
	ds := dataset{id: "repeats", n: 512}
	scores := make([]float32, 512)
	for i := range scores {
		scores[i] = float32(i%7) * float32(i%5) // many ties and a long tail
	}
	snap, err := NewSnapshot(ds, "j", 0, scores)
	if err != nil {
		t.Fatal(err)
	}
	repeats := 0
	for epoch := range uint64(50) {
		e, err := NewEpoch(counts, snap, 3, epoch, 2, 4)
		if err != nil {
			t.Fatal(err)
		}
		for w := range e.NumWindows() {
			ids := e.Window(w)
			seen := map[int]bool{}
			for i, id := range ids {
				if i > 0 && ids[i-1] == id {
					t.Fatalf("epoch %d window %d: sample %d twice in a row at %d", epoch, w, id, i)
				}
				if seen[id] {
					repeats++
				}
				seen[id] = true
			}
		}
	}
	if repeats == 0 {
		t.Fatal("no sample was drawn twice: the test proves nothing")
	}
}

func TestSeparateRepeats(t *testing.T) {
	for _, tc := range []struct{ in, want []int }{
		{[]int{1, 1, 2}, []int{1, 2, 1}},
		{[]int{1, 1, 1, 2, 3}, []int{1, 2, 1, 3, 1}},
		{[]int{3, 2, 2}, []int{2, 3, 2}}, // nothing different after: moved back
		{[]int{2, 2, 2}, []int{2, 2, 2}}, // all one sample: stays
		{[]int{}, []int{}},
	} {
		a := append([]int{}, tc.in...)
		SeparateRepeats(a)
		if fmt.Sprint(a) != fmt.Sprint(tc.want) {
			t.Errorf("SeparateRepeats(%v) = %v, want %v", tc.in, a, tc.want)
		}
	}
}

// TestWindowPanics: the window accessors panic on exactly the indexes and
// positions outside the epoch, as shuffle.Epoch's do.
func TestWindowPanics(t *testing.T) {
	e := mustEpoch(t, []int{3, 4, 2}, mustSnapshot(t, []float32{1, 2, 3, 4, 5, 6, 7, 8, 9}), 1, 1, 2, 0)
	nw, n := e.NumWindows(), e.NumSamples()
	tests := []struct {
		name  string
		fn    func()
		panic bool
	}{
		{"WindowChunks(-1)", func() { e.WindowChunks(-1) }, true},
		{"WindowChunks(last)", func() { e.WindowChunks(nw - 1) }, false},
		{"WindowChunks(NumWindows)", func() { e.WindowChunks(nw) }, true},
		{"Window(-1)", func() { e.Window(-1) }, true},
		{"Window(NumWindows)", func() { e.Window(nw) }, true},
		{"WindowStart(-1)", func() { e.WindowStart(-1) }, true},
		{"WindowStart(NumWindows)", func() { e.WindowStart(nw) }, false},
		{"WindowStart(NumWindows+1)", func() { e.WindowStart(nw + 1) }, true},
		{"WindowOf(-1)", func() { e.WindowOf(-1) }, true},
		{"WindowOf(last)", func() { e.WindowOf(n - 1) }, false},
		{"WindowOf(NumSamples)", func() { e.WindowOf(n) }, true},
		{"AppendRange past the end", func() { e.AppendRange(nil, 0, n+1) }, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			defer func() {
				if r := recover(); (r != nil) != tt.panic {
					t.Errorf("panic %v; want a panic: %t", r, tt.panic)
				}
			}()
			tt.fn()
		})
	}
}
