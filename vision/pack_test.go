package vision

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/brandgw/brand/internal/seeded"
	"github.com/brandgw/brand/shuffle"
)

// referencePack is the packing as NewEpoch's doc states it, written
// plainly: per window, the samples of tokens sorted longest first by a
// stable insertion sort, each put in the bin whose room is least among
// those with room and image room for it (the first opened among equals)
// by a scan of every bin, else a new bin; the bins then permuted by the
// stream (seed, epoch, "brandvis", window).
func referencePack(windows [][]int, items []Item, seq, maxImages int, seed, epoch uint64) []Sequence {
	var out []Sequence
	for w, ids := range windows {
		var order []int // positions in the window
		for pos, id := range ids {
			if items[id].Tokens == 0 {
				continue
			}
			order = append(order, pos)
			for k := len(order) - 1; k > 0 && items[ids[order[k]]].Tokens > items[ids[order[k-1]]].Tokens; k-- {
				order[k], order[k-1] = order[k-1], order[k]
			}
		}
		type bin struct {
			samples      []int
			used, images int
		}
		var bins []bin
		for _, pos := range order {
			it := items[ids[pos]]
			best := -1
			for b := range bins {
				room := seq - bins[b].used
				fits := room >= it.Tokens && (maxImages == 0 || bins[b].images+it.Images <= maxImages)
				if fits && (best < 0 || room < seq-bins[best].used) {
					best = b
				}
			}
			if best < 0 {
				bins = append(bins, bin{})
				best = len(bins) - 1
			}
			bins[best].samples = append(bins[best].samples, ids[pos])
			bins[best].used += it.Tokens
			bins[best].images += it.Images
		}
		perm := make([]int, len(bins))
		for i := range perm {
			perm[i] = i
		}
		s := seeded.New(seed, epoch, 0x6272616e64766973, uint64(w))
		s.Shuffle(perm, 0)
		for _, q := range perm {
			out = append(out, Sequence{Samples: bins[q].samples, Pad: seq - bins[q].used})
		}
	}
	return out
}

// windowsOf is an order's windows.
func windowsOf(o interface {
	NumWindows() int
	Window(int) []int
}) [][]int {
	var ws [][]int
	for w := range o.NumWindows() {
		ws = append(ws, o.Window(w))
	}
	return ws
}

// randomItems are n samples of a VLM-like mix: a caption of 5–80 tokens
// and 0–3 images of 64–1,024 vision tokens, some samples skipped (0).
func randomItems(rng *rand.Rand, n, seq int) []Item {
	items := make([]Item, n)
	for i := range items {
		if rng.IntN(20) == 0 {
			continue // skipped
		}
		it := Item{Tokens: 5 + rng.IntN(76), Images: rng.IntN(4)}
		for range it.Images {
			it.Tokens += 64 + rng.IntN(961)
		}
		it.Tokens = min(it.Tokens, seq)
		items[i] = it
	}
	return items
}

// TestEpochIsReference: NewEpoch's sequences are the reference packer's,
// sample for sample and pad for pad, over shuffled epochs of many
// windows, with and without a cap of images; every sample not skipped
// is in exactly one sequence; no sequence is over seq or the cap.
func TestEpochIsReference(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 70))
	for _, tc := range []struct{ n, perChunk, window, seq, cap int }{
		{300, 10, 4, 2048, 0},
		{300, 10, 4, 2048, 2},
		{1000, 25, 8, 4096, 3},
		{1000, 25, 40, 1024, 1},
		{57, 57, 1, 8192, 0},
	} {
		t.Run(fmt.Sprintf("n%d-seq%d-cap%d", tc.n, tc.seq, tc.cap), func(t *testing.T) {
			items := randomItems(rng, tc.n, tc.seq)
			if tc.cap > 0 {
				for i := range items {
					items[i].Images = min(items[i].Images, tc.cap)
				}
			}
			counts := make([]int, (tc.n+tc.perChunk-1)/tc.perChunk)
			for c := range counts {
				counts[c] = min(tc.perChunk, tc.n-c*tc.perChunk)
			}
			for ep := range uint64(2) {
				order, err := shuffle.NewEpoch(counts, 42, ep, tc.window)
				if err != nil {
					t.Fatal(err)
				}
				e, err := NewEpoch(order, func(id int) Item { return items[id] }, tc.seq, tc.cap, 42, ep)
				if err != nil {
					t.Fatal(err)
				}
				want := referencePack(windowsOf(order), items, tc.seq, tc.cap, 42, ep)
				if e.NumSequences() != len(want) {
					t.Fatalf("epoch %d: %d sequences; the reference packs %d", ep, e.NumSequences(), len(want))
				}
				seen := make([]int, tc.n)
				pad, total := 0, 0
				for i, w := range want {
					got := e.Sequence(i)
					if !slices.Equal(got.Samples, w.Samples) || got.Pad != w.Pad {
						t.Fatalf("epoch %d, sequence %d: %+v; the reference's %+v", ep, i, got, w)
					}
					used, images := 0, 0
					for _, id := range got.Samples {
						seen[id]++
						used += items[id].Tokens
						images += items[id].Images
					}
					if used+got.Pad != tc.seq || got.Pad < 0 || tc.cap > 0 && images > tc.cap {
						t.Fatalf("sequence %d: %d tokens, pad %d, %d images", i, used, got.Pad, images)
					}
					pad += got.Pad
					total += tc.seq
				}
				for id, n := range seen {
					if want := min(items[id].Tokens, 1); n != want {
						t.Fatalf("sample %d (%+v) in %d sequences; want %d", id, items[id], n, want)
					}
				}
				t.Logf("epoch %d: %d sequences, fill %.4f", ep, len(want), 1-float64(pad)/float64(total))
			}
		})
	}
}

// TestEpochRefusesWhatItCannotHold: an item longer than seq, or of more
// images than the cap, is ErrTooLong: NewEpoch never cuts a sample.
func TestEpochRefusesWhatItCannotHold(t *testing.T) {
	order, err := shuffle.NewEpoch([]int{3}, 1, 0, 1)
	if err != nil {
		t.Fatal(err)
	}
	for _, items := range [][]Item{{{Tokens: 10}, {Tokens: 65}, {Tokens: 3, Images: 1}}, {{Tokens: 10}, {Tokens: 5, Images: 3}, {Tokens: 3, Images: 1}}} {
		_, err := NewEpoch(order, func(id int) Item { return items[id] }, 64, 2, 1, 0)
		if !errors.Is(err, ErrTooLong) {
			t.Errorf("%v: %v; want ErrTooLong", items, err)
		}
	}
}
