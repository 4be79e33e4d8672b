package shuffle

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
)

// shape is one random job for the property tests.
type shape struct {
	counts               []int
	seed, epoch          uint64
	window, batch, world int
	dropLast             bool
}

func (s shape) String() string {
	return fmt.Sprintf("counts=%v seed=%d epoch=%d window=%d batch=%d world=%d drop_last=%t",
		s.counts, s.seed, s.epoch, s.window, s.batch, s.world, s.dropLast)
}

// randomShapes returns n deterministic random shapes: empty and tiny
// datasets, empty chunks, windows larger than the dataset, batches larger
// than the epoch and world sizes that do not divide anything.
func randomShapes(n int) []shape {
	r := rand.New(rand.NewPCG(2024, 6))
	shapes := make([]shape, n)
	for i := range shapes {
		counts := make([]int, r.IntN(25))
		for c := range counts {
			if r.IntN(5) > 0 {
				counts[c] = r.IntN(30)
			}
		}
		shapes[i] = shape{
			counts:   counts,
			seed:     r.Uint64(),
			epoch:    r.Uint64N(1000),
			window:   1 + r.IntN(8),
			batch:    1 + r.IntN(20),
			world:    1 + r.IntN(5),
			dropLast: r.IntN(2) == 0,
		}
	}
	return shapes
}

func mustEpoch(t testing.TB, s shape) *Epoch {
	t.Helper()
	e, err := NewEpoch(s.counts, s.seed, s.epoch, s.window)
	if err != nil {
		t.Fatalf("%v: NewEpoch: %v", s, err)
	}
	return e
}

func sum(counts []int) int {
	n := 0
	for _, k := range counts {
		n += k
	}
	return n
}

// TestEpochIsPermutation: the epoch order holds every sample exactly once,
// windows hold only their own chunks' samples, window starts and WindowOf
// agree, and AppendRange agrees with Window for every range boundary.
func TestEpochIsPermutation(t *testing.T) {
	for _, s := range randomShapes(300) {
		e := mustEpoch(t, s)
		n := sum(s.counts)
		if e.NumSamples() != n || e.NumChunks() != len(s.counts) || e.WindowSize() != s.window {
			t.Fatalf("%v: NumSamples %d NumChunks %d WindowSize %d", s, e.NumSamples(), e.NumChunks(), e.WindowSize())
		}
		if got := slices.Sorted(slices.Values(e.ChunkOrder())); !slices.Equal(got, iota(len(s.counts))) {
			t.Fatalf("%v: ChunkOrder %v is not a permutation", s, e.ChunkOrder())
		}
		if want := (len(s.counts) + s.window - 1) / s.window; e.NumWindows() != want {
			t.Fatalf("%v: NumWindows %d, want %d", s, e.NumWindows(), want)
		}

		first := make([]int, len(s.counts)+1)
		for c, k := range s.counts {
			first[c+1] = first[c] + k
		}
		var all, chunks []int
		for w := range e.NumWindows() {
			wc := e.WindowChunks(w)
			chunks = append(chunks, wc...)
			ids := e.Window(w)
			if e.WindowStart(w) != len(all) || e.WindowStart(w+1)-e.WindowStart(w) != len(ids) {
				t.Fatalf("%v: window %d starts at %d with %d samples; WindowStart %d, %d",
					s, w, len(all), len(ids), e.WindowStart(w), e.WindowStart(w+1))
			}
			var want []int
			for _, c := range wc {
				want = append(want, iota(first[c+1])[first[c]:]...)
			}
			if !slices.Equal(slices.Sorted(slices.Values(ids)), slices.Sorted(slices.Values(want))) {
				t.Fatalf("%v: window %d holds %v, not exactly the samples of its chunks %v", s, w, ids, wc)
			}
			for p := range ids {
				if got := e.WindowOf(len(all) + p); got != w {
					t.Fatalf("%v: WindowOf(%d) = %d, want %d", s, len(all)+p, got, w)
				}
			}
			all = append(all, ids...)
		}
		if !slices.Equal(chunks, e.ChunkOrder()) {
			t.Fatalf("%v: windows' chunks %v differ from ChunkOrder %v", s, chunks, e.ChunkOrder())
		}
		if e.WindowStart(e.NumWindows()) != n {
			t.Fatalf("%v: WindowStart(NumWindows) = %d, want %d", s, e.WindowStart(e.NumWindows()), n)
		}
		if !slices.Equal(slices.Sorted(slices.Values(all)), iota(n)) {
			t.Fatalf("%v: epoch order is not a permutation of the samples", s)
		}
		// Every range that starts or ends on a batch-ish boundary, plus
		// ranges crossing windows.
		for start := 0; start <= n; start += 1 + start%3 {
			for _, end := range []int{start, min(start+1, n), min(start+7, n), min(start+40, n), n} {
				if got := e.AppendRange(nil, start, end); !slices.Equal(got, all[start:end]) {
					t.Fatalf("%v: AppendRange(%d, %d) = %v, want %v", s, start, end, got, all[start:end])
				}
			}
		}
		if got := e.AppendRange([]int{-1}, 0, n); got[0] != -1 || !slices.Equal(got[1:], all) {
			t.Fatalf("%v: AppendRange does not append to dst", s)
		}
	}
}

func iota(n int) []int {
	s := make([]int, n)
	for i := range s {
		s[i] = i
	}
	return s
}

// TestBatchesCoverEpoch: over all batches and ranks every sample appears
// exactly once, except the dropped tail with drop_last; the concatenation
// over ranks of batch m is global positions [m*B*world, ...); slices are
// full-sized except the final one(s) without drop_last.
func TestBatchesCoverEpoch(t *testing.T) {
	for _, s := range randomShapes(300) {
		e := mustEpoch(t, s)
		n := e.NumSamples()
		all := e.AppendRange(nil, 0, n)
		g := s.batch * s.world
		nb := NumBatches(n, s.batch, s.world, s.dropLast)
		want := n / g
		if !s.dropLast && n%g != 0 {
			want++
		}
		if nb != want {
			t.Fatalf("%v: NumBatches = %d, want %d", s, nb, want)
		}
		covered := 0
		for m := range nb {
			var global []int
			for r := range s.world {
				b, err := e.Batch(m, s.batch, s.world, r, s.dropLast)
				if err != nil {
					t.Fatalf("%v: Batch(%d, rank %d): %v", s, m, r, err)
				}
				if b == nil {
					t.Fatalf("%v: Batch(%d, rank %d) returned nil", s, m, r)
				}
				if len(b) > s.batch || (s.dropLast && len(b) != s.batch) {
					t.Fatalf("%v: Batch(%d, rank %d) has %d samples", s, m, r, len(b))
				}
				start, end, err := BatchRange(n, m, s.batch, s.world, r, s.dropLast)
				if err != nil || end-start != len(b) {
					t.Fatalf("%v: BatchRange(%d, rank %d) = %d, %d, %v for a batch of %d", s, m, r, start, end, err, len(b))
				}
				global = append(global, b...)
			}
			lo, hi := m*g, min((m+1)*g, n)
			if !slices.Equal(global, all[lo:hi]) {
				t.Fatalf("%v: batch %d over ranks = %v, want positions [%d, %d) = %v", s, m, global, lo, hi, all[lo:hi])
			}
			covered += len(global)
		}
		wantCovered := n
		if s.dropLast {
			wantCovered = n - n%g
		}
		if covered != wantCovered {
			t.Fatalf("%v: batches cover %d samples, want %d", s, covered, wantCovered)
		}
	}
}

// TestOrderIndependentOfWorld: the sample at every epoch position is the same
// whatever the world size and batch size; only the cut into slices differs.
func TestOrderIndependentOfWorld(t *testing.T) {
	for _, s := range randomShapes(100) {
		e := mustEpoch(t, s)
		n := e.NumSamples()
		var ref []int
		for _, geo := range []struct{ batch, world int }{{1, 1}, {s.batch, 1}, {s.batch, 3}, {2, s.world}, {5, 4}} {
			var got []int
			for m := range NumBatches(n, geo.batch, geo.world, false) {
				for r := range geo.world {
					b, err := e.Batch(m, geo.batch, geo.world, r, false)
					if err != nil {
						t.Fatalf("%v: Batch(%d, %d, %d, %d): %v", s, m, geo.batch, geo.world, r, err)
					}
					got = append(got, b...)
				}
			}
			if ref == nil {
				ref = got
			} else if !slices.Equal(got, ref) {
				t.Fatalf("%v: order for batch %d world %d differs from world 1", s, geo.batch, geo.world)
			}
		}
	}
}

// TestDeterministicAndDistinct: the same inputs always give the same order
// (also from a fresh Epoch), and different epochs or seeds give different
// ones for any dataset large enough to tell.
func TestDeterministicAndDistinct(t *testing.T) {
	counts := []int{50, 0, 37, 64, 12, 80, 5, 44, 61, 9, 70, 33}
	base := shape{counts: counts, seed: 77, epoch: 0, window: 3}
	order := func(s shape) []int {
		e := mustEpoch(t, s)
		return e.AppendRange(nil, 0, e.NumSamples())
	}
	ref := order(base)
	if again := order(base); !slices.Equal(ref, again) {
		t.Fatal("same inputs gave different orders")
	}
	variants := []shape{base, base, base, base}
	variants[0].epoch = 1
	variants[1].epoch = 2
	variants[2].seed = 78
	variants[3].seed = 77 ^ domainChunks ^ domainWindow
	for _, v := range variants {
		if got := order(v); slices.Equal(got, ref) {
			t.Errorf("%v gives the same order as %v", v, base)
		}
	}
	// Epochs also reorder the chunks, not only the samples within windows.
	e0, e1 := mustEpoch(t, base), mustEpoch(t, variants[0])
	if slices.Equal(e0.ChunkOrder(), e1.ChunkOrder()) {
		t.Error("epochs 0 and 1 share a chunk order")
	}
	// Windows of one epoch use independent streams: two windows of equal
	// shape must not be permuted identically.
	eq := mustEpoch(t, shape{counts: []int{8, 8, 8, 8}, seed: 1, window: 1})
	w0, w1 := e0Offsets(eq, 0), e0Offsets(eq, 1)
	if slices.Equal(w0, w1) {
		t.Errorf("windows 0 and 1 are permuted identically: %v", w0)
	}
}

// e0Offsets returns window w's samples as offsets within their chunk, which
// reveals the permutation independently of the chunk's ID range.
func e0Offsets(e *Epoch, w int) []int {
	ids := e.Window(w)
	lo := slices.Min(ids)
	for i := range ids {
		ids[i] -= lo
	}
	return ids
}

// TestChunksOfRange: the chunks of a range are exactly the distinct chunks
// of its samples in first-use order, all within the touched windows.
func TestChunksOfRange(t *testing.T) {
	for _, s := range randomShapes(150) {
		e := mustEpoch(t, s)
		n := e.NumSamples()
		first := make([]int, len(s.counts)+1)
		for c, k := range s.counts {
			first[c+1] = first[c] + k
		}
		chunkOf := func(id int) int {
			for c := range s.counts {
				if id >= first[c] && id < first[c+1] {
					return c
				}
			}
			t.Fatalf("sample %d in no chunk", id)
			return -1
		}
		for start := 0; start < n; start += 1 + n/7 {
			end := min(n, start+1+s.batch*s.world)
			var want []int
			for _, id := range e.AppendRange(nil, start, end) {
				if c := chunkOf(id); !slices.Contains(want, c) {
					want = append(want, c)
				}
			}
			got := e.ChunksOfRange(start, end)
			if !slices.Equal(got, want) {
				t.Fatalf("%v: ChunksOfRange(%d, %d) = %v, want %v", s, start, end, got, want)
			}
			var touched []int
			for w := e.WindowOf(start); w <= e.WindowOf(end-1); w++ {
				touched = append(touched, e.WindowChunks(w)...)
			}
			for _, c := range got {
				if !slices.Contains(touched, c) || s.counts[c] == 0 {
					t.Fatalf("%v: ChunksOfRange(%d, %d) includes chunk %d outside the touched windows %v or empty", s, start, end, c, touched)
				}
			}
		}
		if got := e.ChunksOfRange(n, n); len(got) != 0 {
			t.Fatalf("%v: ChunksOfRange of an empty range = %v", s, got)
		}
	}
}

func TestOutOfRange(t *testing.T) {
	e := mustEpoch(t, shape{counts: []int{10, 10, 5}, seed: 1, window: 2})
	// 25 samples, batch 4, world 3: 3 batches (2 with drop_last).
	tests := []struct {
		m, rank  int
		dropLast bool
		msg      string
	}{
		{m: 3, rank: 0, msg: "batch 3 not in [0, 3)"},
		{m: -1, rank: 0, msg: "batch -1 not in [0, 3)"},
		{m: 2, rank: 0, dropLast: true, msg: "batch 2 not in [0, 2)"},
		{m: 1000, rank: 2, dropLast: true, msg: "batch 1000 not in [0, 2)"},
		{m: 0, rank: 3, msg: "rank 3 out of range [0, 3)"},
		{m: 0, rank: -1, msg: "rank -1 out of range [0, 3)"},
	}
	for _, tt := range tests {
		t.Run(tt.msg, func(t *testing.T) {
			b, err := e.Batch(tt.m, 4, 3, tt.rank, tt.dropLast)
			if !errors.Is(err, ErrOutOfRange) {
				t.Fatalf("Batch(%d, rank %d) = %v, %v; want ErrOutOfRange", tt.m, tt.rank, b, err)
			}
			if !strings.Contains(err.Error(), tt.msg) {
				t.Errorf("error %q does not state %q", err, tt.msg)
			}
		})
	}
	// The final batch without drop_last: rank 0 gets 1 sample, ranks 1 and
	// 2 get valid empty slices.
	for r, want := range []int{1, 0, 0} {
		b, err := e.Batch(2, 4, 3, r, false)
		if err != nil || len(b) != want {
			t.Errorf("Batch(2, rank %d) = %v, %v; want %d samples", r, b, err, want)
		}
	}
	// An epoch shorter than one global batch has no batch with drop_last.
	if _, err := e.Batch(0, 100, 1, 0, true); !errors.Is(err, ErrOutOfRange) || !strings.Contains(err.Error(), "[0, 0)") {
		t.Errorf("Batch beyond a short epoch: %v", err)
	}
}

func TestInvalid(t *testing.T) {
	tests := []struct {
		name   string
		counts []int
		window int
		batch  int
		world  int
		rank   int
		msg    string
		param  bool // Params.Validate must reject it too (counts are not Params)
	}{
		{name: "window 0", counts: []int{1}, window: 0, batch: 1, world: 1, msg: "window 0", param: true},
		{name: "window negative", counts: []int{1}, window: -3, batch: 1, world: 1, msg: "window -3", param: true},
		{name: "negative count", counts: []int{1, -2}, window: 1, batch: 1, world: 1, msg: "counts[1] = -2"},
		{name: "count overflow", counts: []int{math.MaxInt, 1}, window: 1, batch: 1, world: 1, msg: "overflows"},
		{name: "batch 0", counts: []int{1}, window: 1, batch: 0, world: 1, msg: "batch size 0", param: true},
		{name: "batch negative", counts: []int{1}, window: 1, batch: -4, world: 1, msg: "batch size -4", param: true},
		{name: "world 0", counts: []int{1}, window: 1, batch: 1, world: 0, msg: "world size 0", param: true},
		{name: "batch×world overflow", counts: []int{1}, window: 1, batch: math.MaxInt / 2, world: 3, msg: "overflows", param: true},
		{name: "rank negative", counts: []int{1}, window: 1, batch: 1, world: 2, rank: -1, msg: "rank -1", param: true},
		{name: "rank = world", counts: []int{1}, window: 1, batch: 1, world: 2, rank: 2, msg: "rank 2", param: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e, err := NewEpoch(tt.counts, 0, 0, tt.window)
			if err == nil {
				_, err = e.Batch(0, tt.batch, tt.world, tt.rank, false)
				if _, _, rerr := BatchRange(e.NumSamples(), 0, tt.batch, tt.world, tt.rank, false); !errors.Is(rerr, ErrInvalid) {
					t.Errorf("BatchRange: %v; want ErrInvalid", rerr)
				}
			} else if e != nil {
				t.Error("NewEpoch returned an Epoch with an error")
			}
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("got %v; want ErrInvalid", err)
			}
			if !strings.Contains(err.Error(), tt.msg) {
				t.Errorf("error %q does not name %q", err, tt.msg)
			}

			p := Params{Window: tt.window, BatchSize: tt.batch, World: tt.world, Rank: tt.rank}
			switch perr := p.Validate(); {
			case !tt.param && perr != nil:
				t.Errorf("Validate(%+v) = %v; want nil", p, perr)
			case tt.param && (!errors.Is(perr, ErrInvalid) || !strings.Contains(perr.Error(), tt.msg)):
				t.Errorf("Validate(%+v) = %v; want ErrInvalid naming %q", p, perr, tt.msg)
			}
		})
	}
	if err := (Params{Window: 1, BatchSize: 1, World: 1}).Validate(); err != nil {
		t.Errorf("Validate of minimal valid params: %v", err)
	}
	if _, _, err := BatchRange(-1, 0, 1, 1, 0, false); !errors.Is(err, ErrInvalid) {
		t.Errorf("BatchRange with n = -1: %v", err)
	}
	if got := NumBatches(10, 0, 1, false); got != 0 {
		t.Errorf("NumBatches with batch size 0 = %d, want 0", got)
	}
}

// TestBatchRangeExtremes: batch boundaries near math.MaxInt do not overflow.
func TestBatchRangeExtremes(t *testing.T) {
	// n = 2^63-1 and b = ceil(n/3): the last batch's rank 1 slice would start
	// at 3b > MaxInt if computed naively.
	n := math.MaxInt
	b := math.MaxInt/3 + 1
	if nb := NumBatches(n, b, 2, false); nb != 2 {
		t.Fatalf("NumBatches = %d, want 2", nb)
	}
	start, end, err := BatchRange(n, 1, b, 2, 1, false)
	if err != nil || start != n || end != n {
		t.Errorf("last rank of last batch: [%d, %d), %v; want empty at %d", start, end, err, n)
	}
	start, end, err = BatchRange(n, 1, b, 2, 0, false)
	if err != nil || start != 2*b || end != n {
		t.Errorf("first rank of last batch: [%d, %d), %v; want [%d, %d)", start, end, err, 2*b, n)
	}
	if nb := NumBatches(n, b, 2, true); nb != 1 {
		t.Errorf("NumBatches with drop_last = %d, want 1", nb)
	}
}

// TestConcurrentUse runs many goroutines on one Epoch; with -race it proves
// the Epoch is read-only after construction.
func TestConcurrentUse(t *testing.T) {
	counts := make([]int, 64)
	for c := range counts {
		counts[c] = 20 + c%7
	}
	e := mustEpoch(t, shape{counts: counts, seed: 9, window: 4})
	want := e.AppendRange(nil, 0, e.NumSamples())
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for g := range 8 {
		wg.Go(func() {
			world := 1 + g%3
			var got []int
			for m := range NumBatches(e.NumSamples(), 16, world, false) {
				for r := range world {
					b, err := e.Batch(m, 16, world, r, false)
					if err != nil {
						errs <- err
						return
					}
					got = append(got, b...)
				}
				_ = e.ChunksOfRange(m*16*world, min((m+1)*16*world, e.NumSamples()))
			}
			if !slices.Equal(got, want) {
				errs <- fmt.Errorf("goroutine %d saw a different order", g)
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// TestPanics: programmer errors on window indexes and ranges panic with a
// message that states the valid range.
func TestPanics(t *testing.T) {
	e := mustEpoch(t, shape{counts: []int{3, 4}, seed: 1, window: 1})
	tests := []struct {
		name string
		fn   func()
		msg  string
	}{
		{"WindowChunks", func() { e.WindowChunks(2) }, "window 2 outside [0, 2)"},
		{"Window", func() { e.Window(-1) }, "window -1 outside [0, 2)"},
		{"WindowStart", func() { e.WindowStart(3) }, "WindowStart(3) outside [0, 2]"},
		{"WindowOf", func() { e.WindowOf(7) }, "WindowOf(7) outside [0, 7)"},
		{"AppendRange", func() { e.AppendRange(nil, 5, 8) }, "AppendRange(5, 8) outside [0, 7]"},
		{"AppendRange reversed", func() { e.AppendRange(nil, 5, 4) }, "AppendRange(5, 4)"},
		{"ChunksOfRange", func() { e.ChunksOfRange(-1, 2) }, "outside [0, 7]"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			defer func() {
				r := recover()
				if s, ok := r.(string); !ok || !strings.Contains(s, tt.msg) {
					t.Errorf("panic %v; want one containing %q", r, tt.msg)
				}
			}()
			tt.fn()
		})
	}
}
