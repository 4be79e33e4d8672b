package gopcache

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
)

// plan is a horizon whose samples each want a few frames of one or two
// GOPs of one video: sample n at position start+n wants frames of GOP
// gops[n] (and the next GOP's first frame when next[n]).
type plan struct {
	h    Horizon
	uses map[int][]Use // by GOP
	want [][]Key       // by sample: its GOPs
	own  []map[int]Use // by sample: its use of each GOP
}

func newPlan(id string, start int, gops []int, frames int) *plan {
	p := &plan{uses: map[int][]Use{}}
	for n, g := range gops {
		pos := start + n
		f := int64(g*100 + n%frames)
		u := Use{Pos: pos, Frames: []int64{f}}
		p.uses[g] = append(p.uses[g], u)
		p.want = append(p.want, []Key{{Horizon: id, Video: 0, GOP: g}})
		p.own = append(p.own, map[int]Use{g: u})
	}
	p.h = Horizon{ID: id, Start: start, End: start + len(gops), Uses: func(_, g int) []Use { return p.uses[g] }}
	return p
}

// serve serves the samples at positions batch of p through b, as the
// clip stage does: each GOP they want acquired (a fill decodes it),
// released, then the positions served. It returns the fills.
func serve(t *testing.T, b *Book, p *plan, batch []int) (fills, kept int) {
	t.Helper()
	byKey := map[Key][]Use{}
	var keys []Key
	for _, pos := range batch {
		n := pos - p.h.Start
		for _, k := range p.want[n] {
			if _, ok := byKey[k]; !ok {
				keys = append(keys, k)
			}
			byKey[k] = append(byKey[k], p.own[n][k.GOP])
		}
	}
	slices.SortFunc(keys, func(a, b Key) int { return a.GOP - b.GOP })
	for _, k := range keys {
		d := b.Acquire(&p.h, k, byKey[k], nil, 10)
		if !d.Hit {
			fills++
			for _, u := range byKey[k] {
				for _, f := range u.Frames {
					if _, ok := slices.BinarySearch(d.Frames, f); !ok {
						t.Fatalf("%v: a fill of %v without frame %d the batch wants", k, d.Frames, f)
					}
				}
			}
		}
		if d.Keep {
			kept++
			b.Filled(k)
		}
		if d.Hit || d.Keep {
			b.Release(k)
		}
		if b.Used() > b.Limit() {
			t.Fatalf("%d bytes held over the limit %d", b.Used(), b.Limit())
		}
	}
	b.Served(&p.h, batch)
	return fills, kept
}

// TestBookDecodesOnce: with room for a horizon's GOPs, each GOP is
// decoded once for every sample that wants it, whatever order the
// horizon's batches come in (ranks ask at once), and nothing is held once
// every sample is served.
func TestBookDecodesOnce(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 1))
	for trial := range 50 {
		gops := make([]int, 60)
		for i := range gops {
			gops[i] = r.IntN(8)
		}
		p := newPlan(fmt.Sprint("h", trial), 1000, gops, 5)
		b := NewBook(1 << 20)
		var batches [][]int
		for s := 0; s < len(gops); s += 4 {
			var batch []int
			for n := s; n < min(s+4, len(gops)); n++ {
				batch = append(batch, 1000+n)
			}
			batches = append(batches, batch)
		}
		if trial%2 == 1 {
			r.Shuffle(len(batches), func(i, j int) { batches[i], batches[j] = batches[j], batches[i] })
		}
		fills := 0
		for _, batch := range batches {
			f, _ := serve(t, b, p, batch)
			fills += f
		}
		distinct := len(p.uses)
		if fills != distinct {
			t.Fatalf("trial %d: %d fills for %d GOPs", trial, fills, distinct)
		}
		if b.Used() != 0 || b.Len() != 0 || len(b.horizons) != 0 {
			t.Fatalf("trial %d: %d bytes, %d entries, %d horizons left after every sample was served", trial, b.Used(), b.Len(), len(b.horizons))
		}
	}
}

// TestBookEvictsFurthest: without room for every GOP, an entry whose next
// sample comes later than the GOP wanted now goes first; one wanted sooner
// than the GOP stays, and the GOP is then decoded for its batch alone.
func TestBookEvictsFurthest(t *testing.T) {
	// Positions 0..5 want GOPs 1, 2, 3, 1, 3, 2: two GOPs of one frame
	// fit (each 10 bytes).
	p := newPlan("h", 0, []int{1, 2, 3, 1, 3, 2}, 1)
	b := NewBook(20)
	serve(t, b, p, []int{0}) // GOP 1 kept (next at 3)
	serve(t, b, p, []int{1}) // GOP 2 kept (next at 5)
	if got := b.Frames(Key{"h", 0, 1}); got == nil {
		t.Fatal("GOP 1 not held")
	}
	// GOP 3 (next at 4) evicts GOP 2 (next at 5), not GOP 1 (next at 3).
	d := b.Acquire(&p.h, Key{"h", 0, 3}, []Use{p.own[2][3]}, nil, 10)
	if !d.Keep || len(d.Evicted) != 1 || d.Evicted[0] != (Key{"h", 0, 2}) {
		t.Fatalf("GOP 3: %+v, want it kept, GOP 2 evicted", d)
	}
	b.Filled(Key{"h", 0, 3})
	b.Release(Key{"h", 0, 3})
	b.Served(&p.h, []int{2})
	// Position 3 hits GOP 1, 4 hits GOP 3; 5 decodes GOP 2 again, alone.
	if f, _ := serve(t, b, p, []int{3}); f != 0 {
		t.Fatal("GOP 1 decoded again")
	}
	if f, _ := serve(t, b, p, []int{4}); f != 0 {
		t.Fatal("GOP 3 decoded again")
	}
	if f, k := serve(t, b, p, []int{5}); f != 1 || k != 0 {
		t.Fatalf("GOP 2 at its last sample: %d fills, %d kept; want 1 alone", f, k)
	}
	// A GOP wanted sooner than anything held is not admitted over it.
	q := newPlan("q", 0, []int{7, 8, 9, 9, 8, 7}, 1)
	b = NewBook(20)
	serve(t, b, q, []int{0}) // 7 kept, next at 5
	serve(t, b, q, []int{1}) // 8 kept, next at 4
	d = b.Acquire(&q.h, Key{"q", 0, 9}, []Use{q.own[2][9]}, nil, 10)
	if !d.Keep || len(d.Evicted) != 1 || d.Evicted[0] != (Key{"q", 0, 7}) {
		t.Fatalf("GOP 9 (next at 3): %+v, want GOP 7 (next at 5) evicted", d)
	}
}

// TestBookAlone: a GOP no other sample of the horizon wants is decoded
// for its batch and not held; a batch served again finds its GOP dropped
// and decodes it alone, what it wants only.
func TestBookAlone(t *testing.T) {
	p := newPlan("h", 0, []int{1, 1, 2}, 3)
	b := NewBook(1 << 10)
	if f, k := serve(t, b, p, []int{0, 1}); f != 1 || k != 0 {
		t.Fatalf("GOP 1 wanted by its batch alone: %d fills, %d kept", f, k)
	}
	if f, k := serve(t, b, p, []int{0, 1}); f != 1 || k != 0 || b.Len() != 0 {
		t.Fatalf("the batch again: %d fills, %d kept, %d held", f, k, b.Len())
	}
	// A GOP too large for the whole limit.
	q := newPlan("q", 0, []int{1, 1}, 1)
	b = NewBook(5)
	if f, k := serve(t, b, q, []int{0}); f != 1 || k != 0 {
		t.Fatalf("a GOP over the limit: %d fills, %d kept", f, k)
	}
}

// TestBookFrames: a kept fill holds the frames every sample not yet
// served wants, of those can allows, and the batch's own whatever can
// says; a hit needs every frame the batch wants.
func TestBookFrames(t *testing.T) {
	uses := []Use{{Pos: 0, Frames: []int64{1, 2}}, {Pos: 1, Frames: []int64{2, 3}}, {Pos: 2, Frames: []int64{5, 9}}}
	h := Horizon{ID: "h", Start: 0, End: 3, Uses: func(int, int) []Use { return uses }}
	b := NewBook(1 << 10)
	k := Key{"h", 0, 0}
	d := b.Acquire(&h, k, uses[:1], func(pts int64) bool { return pts != 9 }, 1)
	if !d.Keep || !slices.Equal(d.Frames, []int64{1, 2, 3, 5}) || d.Bytes != 4 {
		t.Fatalf("%+v: want frames 1, 2, 3, 5 kept (9 cannot be decoded)", d)
	}
	b.Filled(k)
	b.Release(k)
	b.Served(&h, []int{0})
	if d := b.Acquire(&h, k, uses[1:2], nil, 1); !d.Hit {
		t.Fatalf("position 1: %+v, want a hit", d)
	}
	b.Release(k)
	b.Served(&h, []int{1})
	if d := b.Acquire(&h, k, uses[2:], nil, 1); d.Hit || d.Keep || !d.Short || !slices.Equal(d.Frames, []int64{5, 9}) {
		t.Fatalf("position 2, wanting a frame the entry lacks: %+v, want 5 and 9 decoded alone", d)
	}
}

// TestBookStale: a horizon no batch touches for StaleTicks batches gives
// its GOPs up before any other's, though its next sample is the nearest.
func TestBookStale(t *testing.T) {
	p := newPlan("old", 0, []int{1, 1}, 1)
	b := NewBook(10)
	serve(t, b, p, []int{0}) // GOP 1 of "old" kept: its next sample, at 1, never comes
	pairs := make([]int, 2*StaleTicks+4)
	for i := range pairs {
		pairs[i] = 10 + i/2 // each GOP wanted by two samples in a row
	}
	q := newPlan("new", 0, pairs, 1)
	kept := 0
	for pos := range pairs {
		_, k := serve(t, b, q, []int{pos})
		kept += k
		if pos < StaleTicks && k > 0 {
			t.Fatalf("position %d: a GOP kept over the old horizon's, wanted sooner", pos)
		}
	}
	if b.Frames(Key{"old", 0, 1}) != nil || kept == 0 {
		t.Fatalf("the stale horizon's GOP still held (%d of the new one's kept)", kept)
	}
}
