package shuffle

import (
	"math/rand/v2"
	"slices"
	"testing"
)

// dropOf is the Drop of ids over counts.
func dropOf(counts []int, ids ...int) *Drop {
	n := 0
	for _, k := range counts {
		n += k
	}
	b := make([]uint64, (n+63)/64)
	for _, id := range ids {
		b[id/64] |= 1 << (id % 64)
	}
	return NewDrop(b, counts)
}

// without is ids from position from on without those d drops.
func without(ids []int, d *Drop, from int) []int {
	out := slices.Clone(ids[:min(from, len(ids))])
	for _, id := range ids[min(from, len(ids)):] {
		if !d.Dropped(id) {
			out = append(out, id)
		}
	}
	return out
}

// checkWindows holds an order's windows to its samples: each window's
// chunks are those its samples are of, its start the samples before it,
// and WindowOf the window holding each position.
func checkWindows(t *testing.T, o Base, counts []int) {
	t.Helper()
	first := make([]int, len(counts)+1)
	for c, k := range counts {
		first[c+1] = first[c] + k
	}
	pos := 0
	for w := range o.NumWindows() {
		if o.WindowStart(w) != pos {
			t.Fatalf("window %d starts at %d; %d samples before it", w, o.WindowStart(w), pos)
		}
		var cs []int
		for _, id := range o.Window(w) {
			c, _ := slices.BinarySearch(first, id+1)
			if !slices.Contains(cs, c-1) {
				cs = append(cs, c-1)
			}
			if o.WindowOf(pos) != w {
				t.Fatalf("WindowOf(%d) = %d; want %d", pos, o.WindowOf(pos), w)
			}
			pos++
		}
		got := slices.Sorted(slices.Values(o.WindowChunks(w)))
		if slices.Sort(cs); !slices.Equal(got, cs) {
			t.Fatalf("window %d names chunks %v; its samples are of %v", w, got, cs)
		}
	}
	if pos != o.NumSamples() {
		t.Fatalf("%d samples in the windows; NumSamples %d", pos, o.NumSamples())
	}
}

// TestEditedEpochOfExclusions: a chain of exclusions is the plain order
// with each one's samples left out from its position on, and in every
// later epoch from the start.
func TestEditedEpochOfExclusions(t *testing.T) {
	counts := []int{5, 3, 6, 4, 5, 2, 7}
	d1 := dropOf(counts, 0, 4, 9, 10, 11, 12)          // chunk 0's 0 and 4, chunk 2's 9..12
	d2 := dropOf(counts, 0, 4, 9, 10, 11, 12, 5, 6, 7) // and all of chunk 1
	chain := []Edit{{Epoch: 1, From: 7, Drop: d1}, {Epoch: 1, From: 20, Drop: d2}}
	for e := range uint64(4) {
		plain, err := NewEpoch(counts, 3, e, 2)
		if err != nil {
			t.Fatal(err)
		}
		want := orderIDs(plain)
		switch e {
		case 0:
		case 1:
			want = without(without(want, d1, 7), d2, 20)
		default:
			want = without(want, d2, 0)
		}
		got, err := EditedEpoch(counts, chain, 3, e, 2)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(orderIDs(got), want) {
			t.Errorf("epoch %d: %v, want %v", e, orderIDs(got), want)
		}
		checkWindows(t, got, counts)
	}
}

// TestEditedEpochAppendThenExclude: an append and later an exclusion in
// one epoch, and the reverse: the positions before each edit are the
// order before it, the exclusion leaves out its samples after its own
// position only, the new chunks' samples are read once, and the next
// epoch is the whole new version's order without the samples excluded.
func TestEditedEpochAppendThenExclude(t *testing.T) {
	counts := []int{5, 3, 6, 4, 5, 2, 7, 3, 4}
	const old = 6 // the version the job read: 25 samples; the append adds 14
	for _, tc := range []struct {
		name  string
		chain []Edit
	}{
		{"append, then exclude", []Edit{{Epoch: 1, From: 6, Chunks: old}, {Epoch: 1, From: 18, Drop: dropOf(counts, 1, 2, 30, 31)}}},
		{"exclude, then append", []Edit{{Epoch: 1, From: 6, Drop: dropOf(counts[:old], 1, 2, 20)}, {Epoch: 1, From: 18, Chunks: old}}},
		{"exclude in an epoch, append in the next", []Edit{{Epoch: 0, From: 9, Drop: dropOf(counts[:old], 1, 2, 20)}, {Epoch: 1, From: 11, Chunks: old}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for e := range uint64(3) {
				got, err := EditedEpoch(counts, tc.chain, 5, e, 2)
				if err != nil {
					t.Fatal(err)
				}
				ids := orderIDs(got)
				var vc []int // the version the epoch reads
				if e <= 1 {
					vc = counts[:old]
				} else {
					vc = counts
				}
				if e == 1 {
					vc = counts // the append's epoch reads the new chunks too
				}
				checkWindows(t, got, vc)
				// Each edit's prefix: the order of the chain before it.
				for k, ed := range tc.chain {
					if ed.Epoch != e {
						continue
					}
					// The chain before edit k reads the version its
					// appends grew, not the chunks appended later.
					v := len(counts)
					if j := slices.IndexFunc(tc.chain[k:], func(x Edit) bool { return x.Chunks > 0 }); j >= 0 {
						v = tc.chain[k+j].Chunks
					}
					before, err := EditedEpoch(counts[:v], tc.chain[:k], 5, e, 2)
					if err != nil {
						t.Fatal(err)
					}
					pre := orderIDs(before)
					if n := min(ed.From, len(pre)); !slices.Equal(ids[:n], pre[:n]) {
						t.Errorf("epoch %d: edit %d changes positions before its own %d", e, k, ed.From)
					}
				}
				// Each sample at most once, and exactly those the rules keep.
				seen := map[int]bool{}
				for _, id := range ids {
					if seen[id] {
						t.Fatalf("epoch %d: sample %d twice", e, id)
					}
					seen[id] = true
				}
				n := 0
				for _, k := range vc {
					n += k
				}
				var last *Drop // the exclusion in force at the epoch's end
				for _, ed := range tc.chain {
					if ed.Drop != nil && ed.Epoch <= e {
						last = ed.Drop
					}
				}
				for id := range n {
					if !seen[id] && (last == nil || !last.Dropped(id)) {
						t.Errorf("epoch %d: sample %d neither read nor excluded", e, id)
					}
					if seen[id] && last != nil && last.Dropped(id) && e > tc.chain[0].Epoch && e > tc.chain[len(tc.chain)-1].Epoch {
						t.Errorf("epoch %d: excluded sample %d read", e, id)
					}
				}
			}
		})
	}
}

// TestEditedEpochOfAppendsIsAppendedEpoch: a chain of appends alone is
// the order appends always had (AppendedEpoch's goldens): the composition
// changes no existing order.
func TestEditedEpochOfAppendsIsAppendedEpoch(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for range 200 {
		counts := make([]int, 4+r.IntN(12))
		for c := range counts {
			counts[c] = 1 + r.IntN(9)
		}
		chunks := []int{1 + r.IntN(len(counts)/2)}
		for len(chunks) < 3 && chunks[len(chunks)-1] < len(counts)-1 {
			chunks = append(chunks, chunks[len(chunks)-1]+1+r.IntN(len(counts)-chunks[len(chunks)-1]-1))
		}
		var edits []Edit
		var epoch uint64
		for _, c := range chunks {
			epoch += uint64(r.IntN(2))
			edits = append(edits, Edit{Epoch: epoch, From: r.IntN(30), Chunks: c})
		}
		window := 1 + r.IntN(4)
		for e := range epoch + 2 {
			got, err := EditedEpoch(counts, edits, 9, e, window)
			if err != nil {
				t.Fatal(err)
			}
			// AppendedEpoch's own merge, written before edits composed:
			// the version before the epoch, each record of the epoch merged.
			old := chunks[0]
			for i, ed := range edits {
				if ed.Epoch < e {
					old = len(counts)
					if i+1 < len(edits) {
						old = edits[i+1].Chunks
					}
				}
			}
			var want Base
			want, err = NewEpoch(counts[:old], 9, e, window)
			if err != nil {
				t.Fatal(err)
			}
			for i, ed := range edits {
				if ed.Epoch != e {
					continue
				}
				v := len(counts)
				if i+1 < len(edits) {
					v = edits[i+1].Chunks
				}
				if want, err = NewAppendedOver(want, counts[:v], ed.Chunks, 9, e, window, ed.From, i); err != nil {
					t.Fatal(err)
				}
			}
			if !slices.Equal(orderIDs(got), orderIDs(want)) {
				t.Fatalf("counts %v, chain %+v, epoch %d: %v, want %v", counts, edits, e, orderIDs(got), orderIDs(want))
			}
		}
	}
}

// TestEditedEpochRefusesNonChains: edits out of order, of both kinds or
// neither, or appends that shrink the version.
func TestEditedEpochRefusesNonChains(t *testing.T) {
	counts := []int{2, 2, 2, 2}
	d := dropOf(counts, 1)
	for _, chain := range [][]Edit{
		{{Epoch: 2, Drop: d}, {Epoch: 1, Drop: d}},
		{{Epoch: 1, Chunks: 2, Drop: d}},
		{{Epoch: 1}},
		{{Epoch: 1, Chunks: 3}, {Epoch: 1, Chunks: 2}},
		{{Epoch: 1, Chunks: 5}},
		{{Epoch: 1, From: -1, Drop: d}},
	} {
		if _, err := EditedEpoch(counts, chain, 1, 1, 1); err == nil {
			t.Errorf("chain %+v taken", chain)
		}
	}
}
