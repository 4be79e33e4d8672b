package shuffle

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
)

// stratShape is one random stratified epoch for the property tests.
type stratShape struct {
	counts, strata []int
	numStrata      int
	seed, epoch    uint64
	window         int
}

func (s stratShape) String() string {
	return fmt.Sprintf("counts=%v strata=%v numStrata=%d seed=%d epoch=%d window=%d",
		s.counts, s.strata, s.numStrata, s.seed, s.epoch, s.window)
}

// randomStratShapes returns n deterministic random stratified epochs:
// uniform and skewed strata, empty strata, one stratum, empty chunks.
func randomStratShapes(n int) []stratShape {
	r := rand.New(rand.NewPCG(2026, 11))
	out := make([]stratShape, n)
	for i := range out {
		chunks := r.IntN(60)
		counts := make([]int, chunks)
		for c := range counts {
			if r.IntN(6) > 0 {
				counts[c] = r.IntN(12)
			}
		}
		numStrata := 1 + r.IntN(6)
		strata := make([]int, chunks)
		skew := r.IntN(2) == 0
		for c := range strata {
			strata[c] = r.IntN(numStrata)
			if skew && r.IntN(2) == 0 {
				strata[c] = 0
			}
		}
		out[i] = stratShape{counts, strata, numStrata, r.Uint64(), r.Uint64N(100), 1 + r.IntN(9)}
	}
	return out
}

func mustStratified(t testing.TB, s stratShape) *Epoch {
	t.Helper()
	e, err := NewStratifiedEpoch(s.counts, s.strata, s.numStrata, s.seed, s.epoch, s.window)
	if err != nil {
		t.Fatalf("%v: NewStratifiedEpoch: %v", s, err)
	}
	return e
}

// TestStratifiedIsNewEpochOverItsOrder: the chunk order is a permutation of
// the chunks, and everything past it (windows, their starts, their sample
// permutations, batches) is exactly what NewEpoch computes for that chunk
// order: the same window streams over the same chunk lists.
func TestStratifiedIsNewEpochOverItsOrder(t *testing.T) {
	for _, s := range randomStratShapes(300) {
		e := mustStratified(t, s)
		order := e.ChunkOrder()
		if !slices.Equal(slices.Sorted(slices.Values(order)), iota(len(s.counts))) {
			t.Fatalf("%v: chunk order %v is not a permutation", s, order)
		}
		first, err := firstIDs(s.counts, s.window)
		if err != nil {
			t.Fatal(err)
		}
		plain := newEpoch(first, slices.Clone(order), s.seed, s.epoch, s.window)
		if e.NumSamples() != sum(s.counts) || e.NumWindows() != plain.NumWindows() {
			t.Fatalf("%v: %d samples in %d windows", s, e.NumSamples(), e.NumWindows())
		}
		for w := range e.NumWindows() + 1 {
			if e.WindowStart(w) != plain.WindowStart(w) {
				t.Fatalf("%v: WindowStart(%d) = %d, want %d", s, w, e.WindowStart(w), plain.WindowStart(w))
			}
		}
		for w := range e.NumWindows() {
			// The window's sample permutation is the window stream's
			// Fisher–Yates over its chunks' IDs, as in NewEpoch.
			var ids []int
			for _, c := range e.WindowChunks(w) {
				ids = append(ids, iota(first[c+1])[first[c]:]...)
			}
			st := newStream(s.seed, s.epoch, domainWindow, uint64(w))
			st.Shuffle(ids, 0)
			if got := e.Window(w); !slices.Equal(got, ids) {
				t.Fatalf("%v: Window(%d) = %v, want %v", s, w, got, ids)
			}
		}
		n := e.NumSamples()
		if got, want := e.AppendRange(nil, 0, n), plain.AppendRange(nil, 0, n); !slices.Equal(got, want) {
			t.Fatalf("%v: epoch order %v, NewEpoch over the same chunk order gives %v", s, got, want)
		}
	}
}

// TestStratifiedOneStratum: with one stratum the order is that stratum's
// own Fisher–Yates permutation of all chunks, a uniform permutation drawn
// from the "brandstr" stream rather than NewEpoch's "brandchk".
func TestStratifiedOneStratum(t *testing.T) {
	for _, s := range randomStratShapes(100) {
		s.numStrata = 1
		s.strata = make([]int, len(s.counts))
		e := mustStratified(t, s)
		want := iota(len(s.counts))
		st := newStream(s.seed, s.epoch, domainStratum, 0)
		st.Shuffle(want, 0)
		if !slices.Equal(e.ChunkOrder(), want) {
			t.Fatalf("%v: chunk order %v, want stratum 0's permutation %v", s, e.ChunkOrder(), want)
		}
	}
	// Uniform: over many epochs each chunk of 4 is first a quarter of the
	// time.
	const epochs = 4000
	first := make([]int, 4)
	for ep := range uint64(epochs) {
		e, err := NewStratifiedEpoch([]int{1, 1, 1, 1}, []int{0, 0, 0, 0}, 1, 99, ep, 2)
		if err != nil {
			t.Fatal(err)
		}
		first[e.ChunkOrder()[0]]++
	}
	for c, n := range first {
		// Binomial(4000, 1/4): sd ≈ 27.
		if n < epochs/4-130 || n > epochs/4+130 {
			t.Errorf("chunk %d first in %d of %d epochs, expected about %d", c, n, epochs, epochs/4)
		}
	}
}

// TestStratifiedEqualStrataRoundRobin: with S strata of equal size the
// places coincide across strata, so the order deals one chunk of each
// stratum per round, and a window of a multiple of S chunks holds exactly
// window/S of each (64 chunks, 4 strata of 16, window 8: exactly 2 each).
func TestStratifiedEqualStrataRoundRobin(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	for _, tc := range []struct{ chunks, strata, window int }{
		{64, 4, 8}, {64, 4, 4}, {60, 3, 6}, {256, 4, 8}, {48, 16, 16}, {10, 2, 2},
	} {
		for ep := range uint64(20) {
			strata := make([]int, tc.chunks)
			for c := range strata {
				strata[c] = c % tc.strata
			}
			// Which chunks form a stratum does not matter, only its size.
			r.Shuffle(len(strata), func(i, j int) { strata[i], strata[j] = strata[j], strata[i] })
			counts := make([]int, tc.chunks)
			for c := range counts {
				counts[c] = 1 + r.IntN(5)
			}
			e, err := NewStratifiedEpoch(counts, strata, tc.strata, r.Uint64(), ep, tc.window)
			if err != nil {
				t.Fatal(err)
			}
			for w := range e.NumWindows() {
				per := make([]int, tc.strata)
				for _, c := range e.WindowChunks(w) {
					per[strata[c]]++
				}
				for k, n := range per {
					if n != tc.window/tc.strata {
						t.Fatalf("%+v epoch %d: window %d holds %d chunks of stratum %d (%v), want %d", tc, ep, w, n, k, per, tc.window/tc.strata)
					}
				}
			}
			// Rounds: positions [iS, (i+1)S) hold one chunk of each
			// stratum, in the same order of strata every round.
			order := e.ChunkOrder()
			for i := 0; i < tc.chunks; i += tc.strata {
				for j := range tc.strata {
					if strata[order[i+j]] != strata[order[j]] {
						t.Fatalf("%+v epoch %d: round %d deals strata in another order than round 0", tc, ep, i/tc.strata)
					}
				}
			}
		}
	}
}

// TestStratifiedSpread: for any strata, a stratum's chunks sit at the
// centres of their shares, so among the first p chunks stratum k has
// n_k·t ± ½ for the place t reached, and p = Σ_k of those: the count is
// within ½ + S·n_k/(2C) of p·n_k/C, and a window (a difference of two
// prefixes) within 1 + S·n_k/C of window·n_k/C. Within a stratum the
// chunks appear in the order of its own permutation.
func TestStratifiedSpread(t *testing.T) {
	for _, s := range randomStratShapes(300) {
		e := mustStratified(t, s)
		chunks := len(s.counts)
		size := make([]int, s.numStrata)
		for _, k := range s.strata {
			size[k]++
		}
		order := e.ChunkOrder()
		// prefix[p][k]: chunks of stratum k among the first p.
		prefix := make([][]int, chunks+1)
		prefix[0] = make([]int, s.numStrata)
		for p, c := range order {
			prefix[p+1] = slices.Clone(prefix[p])
			prefix[p+1][s.strata[c]]++
		}
		for p := range chunks + 1 {
			for k, nk := range size {
				// |count·C − p·n_k| ≤ C/2 + S·n_k/2, in integers.
				dev := 2 * (prefix[p][k]*chunks - p*nk)
				if dev < 0 {
					dev = -dev
				}
				if dev > chunks+s.numStrata*nk {
					t.Fatalf("%v: first %d chunks hold %d of stratum %d's %d", s, p, prefix[p][k], k, nk)
				}
			}
		}
		for w := range e.NumWindows() {
			lo, hi := w*s.window, min((w+1)*s.window, chunks)
			for k, nk := range size {
				dev := (prefix[hi][k]-prefix[lo][k])*chunks - (hi-lo)*nk
				if dev < 0 {
					dev = -dev
				}
				if dev > chunks+s.numStrata*nk {
					t.Fatalf("%v: window %d holds %d of stratum %d's %d", s, w, prefix[hi][k]-prefix[lo][k], k, nk)
				}
			}
		}
		for k := range s.numStrata {
			var members, seen []int
			for c, sk := range s.strata {
				if sk == k {
					members = append(members, c)
				}
			}
			st := newStream(s.seed, s.epoch, domainStratum, uint64(k))
			st.Shuffle(members, 0)
			for _, c := range order {
				if s.strata[c] == k {
					seen = append(seen, c)
				}
			}
			if !slices.Equal(seen, members) {
				t.Fatalf("%v: stratum %d's chunks appear as %v, its permutation is %v", s, k, seen, members)
			}
		}
	}
}

func TestStratifiedErrors(t *testing.T) {
	tests := []struct {
		name           string
		counts, strata []int
		numStrata      int
		window         int
	}{
		{"fewer strata than chunks", []int{1, 2, 3}, []int{0, 1}, 2, 2},
		{"more strata than chunks", []int{1, 2}, []int{0, 1, 1}, 2, 2},
		{"no strata", []int{1}, []int{0}, 0, 2},
		{"stratum past numStrata", []int{1, 2}, []int{0, 2}, 2, 2},
		{"negative stratum", []int{1, 2}, []int{-1, 0}, 2, 2},
		{"window 0", []int{1, 2}, []int{0, 1}, 2, 0},
		{"negative count", []int{1, -2}, []int{0, 1}, 2, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e, err := NewStratifiedEpoch(tt.counts, tt.strata, tt.numStrata, 1, 0, tt.window)
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("NewStratifiedEpoch = %v, %v; want ErrInvalid", e, err)
			}
		})
	}
	// Strata with no chunks are allowed, and so are no chunks at all.
	for _, tc := range []struct {
		counts, strata []int
		numStrata      int
	}{{[]int{3, 4}, []int{2, 2}, 5}, {nil, nil, 3}} {
		e, err := NewStratifiedEpoch(tc.counts, tc.strata, tc.numStrata, 1, 0, 2)
		if err != nil || e.NumChunks() != len(tc.counts) || e.NumSamples() != sum(tc.counts) {
			t.Errorf("NewStratifiedEpoch(%v, %v, %d) = %v, %v", tc.counts, tc.strata, tc.numStrata, e, err)
		}
	}
}
