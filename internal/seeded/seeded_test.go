package seeded

import (
	"math/rand/v2"
	"slices"
	"testing"
)

// TestPCGKnownValues pins math/rand/v2's PCG, which the shuffle builds on.
// Go promises PCG's algorithm will not change; if it ever did, every job's
// order would change with it, and this test is where that must surface.
// The values are those published in Go's own pcg_test.go, and are also
// reproduced by testdata/reference.py.
func TestPCGKnownValues(t *testing.T) {
	p := rand.NewPCG(1, 2)
	want := []uint64{0xc4f5a58656eef510, 0x9dcec3ad077dec6c, 0xc8d04605312f8088, 0xcbedc0dcb63ac19a, 0x3bf98798cae97950}
	for i, w := range want {
		if got := p.Uint64(); got != w {
			t.Fatalf("NewPCG(1, 2) output %d = %#x, want %#x", i, got, w)
		}
	}
}

// TestMix64 checks the finalizer against SplitMix64's reference outputs for
// seed 0 (Vigna's splitmix64.c: state += golden; return mix(state)).
// The shuffle's domains (package shuffle), for its worked-example seeds.
const (
	domainChunks uint64 = 0x6272616e6463686b // "brandchk"
	domainWindow uint64 = 0x6272616e6477696e // "brandwin"
)

func TestMix64(t *testing.T) {
	want := []uint64{0xe220a8397b1dcdaf, 0x6e789e6aa1b965f4, 0x06c45d188009454f}
	var state uint64
	for i, w := range want {
		state += golden
		if got := Mix64(state); got != w {
			t.Errorf("splitmix64(0) output %d = %#x, want %#x", i, got, w)
		}
	}
	if Mix64(0) != 0 {
		t.Errorf("Mix64(0) = %#x, want 0", Mix64(0))
	}
}

// TestStreamKnownValues pins the seed derivation, the Stream outputs and
// bounded() on values computed independently by testdata/reference.py.
func TestStreamKnownValues(t *testing.T) {
	s1, s2 := Seeds(42, 0, domainChunks, 0)
	if s1 != 0xc38b726d6c6319b9 || s2 != 0x19f8142b83e3d932 {
		t.Errorf("Seeds(42, 0, chunks, 0) = %#x, %#x; want 0xc38b726d6c6319b9, 0x19f8142b83e3d932", s1, s2)
	}
	s := New(42, 0, domainChunks, 0)
	for i, w := range []uint64{0xcfe8d62240006e63, 0xb60951c3d59c0aad, 0xbca65d44a3c0f6fa} {
		if got := s.Uint64(); got != w {
			t.Errorf("chunk stream output %d = %#x, want %#x", i, got, w)
		}
	}

	s1, s2 = Seeds(42, 0, domainWindow, 3)
	if s1 != 0xebc11e336e04e29f || s2 != 0xa47984042759f5d3 {
		t.Errorf("Seeds(42, 0, window, 3) = %#x, %#x; want 0xebc11e336e04e29f, 0xa47984042759f5d3", s1, s2)
	}
	s = New(42, 0, domainWindow, 3)
	bounds := []uint64{1, 2, 3, 10, 100, 1000, 1000000}
	want := []uint64{0, 1, 0, 2, 81, 938, 33087}
	for i, n := range bounds {
		if got := s.Bounded(n); got != want[i] {
			t.Errorf("bounded(%d) draw %d = %d, want %d", n, i, got, want[i])
		}
	}
}

// TestBoundedRejects proves the golden bounded vector exercises the
// rejection loop: for n just above 2^63 about half of all draws are
// rejected, so the PCG must have advanced more times than bounded was called.
func TestBoundedRejects(t *testing.T) {
	const calls = 32
	var s Stream
	s.Seed(1, 2)
	for range calls {
		if v := s.Bounded(1<<63 + 1); v > 1<<63 {
			t.Fatalf("bounded(2^63+1) = %d, out of range", v)
		}
	}
	ref := rand.NewPCG(1, 2)
	draws := 0
	for *ref != s.pcg {
		ref.Uint64()
		draws++
		if draws > 100*calls {
			t.Fatal("could not find the stream's position")
		}
	}
	if draws <= calls {
		t.Errorf("%d calls took %d draws: the rejection loop never ran", calls, draws)
	}
}

// TestBoundedUniform is a coarse uniformity check: a biased reduction (for
// example x % n) at a bound near 2^64·(2/3) would skew these counts far
// outside the tolerance. The stream is seeded, so the test is deterministic.
func TestBoundedUniform(t *testing.T) {
	for _, n := range []uint64{3, 7, 1<<63 + 1<<62} {
		const draws = 60000
		var s Stream
		s.Seed(n, 99)
		buckets := make([]int, 3)
		for range draws {
			v := s.Bounded(n)
			if v >= n {
				t.Fatalf("bounded(%d) = %d", n, v)
			}
			// Three equal-width buckets of [0, n) (n=7 is close enough).
			buckets[min(v/((n+2)/3), 2)]++
		}
		for b, k := range buckets {
			expect := draws / 3
			if n == 7 {
				expect = draws * []int{3, 3, 1}[b] / 7
			}
			if k < expect*95/100 || k > expect*105/100 {
				t.Errorf("bounded(%d): bucket %d holds %d of %d draws, expected about %d", n, b, k, draws, expect)
			}
		}
	}
}

// TestShuffleStop checks that stopping the Fisher–Yates loop early leaves
// the tail exactly as the full shuffle does, which AppendRange relies on.
func TestShuffleStop(t *testing.T) {
	for _, n := range []int{0, 1, 2, 3, 17, 100} {
		full := make([]int, n)
		for i := range full {
			full[i] = i
		}
		s := New(1, 2, domainWindow, uint64(n))
		s.Shuffle(full, 0)
		for stop := 0; stop <= n; stop++ {
			part := make([]int, n)
			for i := range part {
				part[i] = i
			}
			s := New(1, 2, domainWindow, uint64(n))
			s.Shuffle(part, stop)
			if !slices.Equal(part[stop:], full[stop:]) {
				t.Fatalf("n=%d stop=%d: tail %v, full shuffle tail %v", n, stop, part[stop:], full[stop:])
			}
		}
		// A permutation of 0..n-1.
		sorted := slices.Clone(full)
		slices.Sort(sorted)
		for i, v := range sorted {
			if v != i {
				t.Fatalf("n=%d: shuffle is not a permutation: %v", n, full)
			}
		}
	}
}
