package shuffle

import (
	"slices"
	"testing"
)

// orderIDs are the sample IDs of o in order.
func orderIDs(o Base) []int {
	var out []int
	for w := range o.NumWindows() {
		out = append(out, o.Window(w)...)
	}
	return out
}

// TestAppendedEpochOfOneRecord holds a chain of one record to the single
// record's merge, and its other epochs to the plain orders.
func TestAppendedEpochOfOneRecord(t *testing.T) {
	counts := []int{3, 4, 2, 5, 3, 4, 2}
	chain := []Grown{{Chunks: 4, Epoch: 1, From: 5}}
	for e := range uint64(3) {
		got, err := AppendedEpoch(counts, chain, 7, e, 2)
		if err != nil {
			t.Fatal(err)
		}
		var want Base
		switch e {
		case 0:
			want, err = NewEpoch(counts[:4], 7, e, 2)
		case 1:
			want, err = NewAppended(counts, 4, 7, e, 2, 5)
		default:
			want, err = NewEpoch(counts, 7, e, 2)
		}
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(orderIDs(got), orderIDs(want)) {
			t.Errorf("epoch %d: %v, want %v", e, orderIDs(got), orderIDs(want))
		}
	}
}

// TestAppendedEpochOfAChain: two records in one epoch and one in the
// next; each epoch serves every sample of its version once, and the
// positions before each record's from are those of the order before it.
func TestAppendedEpochOfAChain(t *testing.T) {
	counts := []int{3, 4, 2, 5, 3, 4, 2, 3, 3}
	// Versions of 3, 5, 7 and 9 chunks: two records in epoch 1, one in 2.
	chain := []Grown{{Chunks: 3, Epoch: 1, From: 2}, {Chunks: 5, Epoch: 1, From: 9}, {Chunks: 7, Epoch: 2, From: 4}}
	samples := func(chunks int) int {
		n := 0
		for _, c := range counts[:chunks] {
			n += c
		}
		return n
	}
	for e, chunks := range []int{3, 7, 9, 9} {
		o, err := AppendedEpoch(counts, chain, 11, uint64(e), 1)
		if err != nil {
			t.Fatal(err)
		}
		got := orderIDs(o)
		s := slices.Sorted(slices.Values(got))
		for i := range samples(chunks) {
			if i >= len(s) || s[i] != i {
				t.Fatalf("epoch %d: samples %v, want each of 0..%d once", e, s, samples(chunks)-1)
			}
		}
		if len(s) != samples(chunks) {
			t.Fatalf("epoch %d: %d samples, want %d", e, len(s), samples(chunks))
		}
		if e == 3 {
			want, _ := NewEpoch(counts, 11, 3, 1)
			if !slices.Equal(got, orderIDs(want)) {
				t.Errorf("epoch 3 is not the whole version's order")
			}
		}
	}
	// Each record keeps the order before it up to its from.
	for i, g := range chain {
		before, err := AppendedEpoch(counts[:g.Chunks], chain[:i:i], 11, g.Epoch, 1)
		if i == 0 {
			before, err = NewEpoch(counts[:g.Chunks], 11, g.Epoch, 1)
		}
		if err != nil {
			t.Fatal(err)
		}
		total := len(counts)
		if i+1 < len(chain) {
			total = chain[i+1].Chunks
		}
		after, err := AppendedEpoch(counts[:total], chain[:i+1], 11, g.Epoch, 1)
		if err != nil {
			t.Fatal(err)
		}
		if b, a := orderIDs(before), orderIDs(after); !slices.Equal(b[:g.From], a[:g.From]) {
			t.Errorf("record %d: positions before %d of epoch %d changed: %v, then %v", i, g.From, g.Epoch, b[:g.From], a[:g.From])
		}
	}
	if _, err := AppendedEpoch(counts, []Grown{{Chunks: 5, Epoch: 1}, {Chunks: 3, Epoch: 1}}, 11, 1, 1); err == nil {
		t.Error("a chain whose versions shrink was taken")
	}
}
