package tokens

import (
	"slices"
	"testing"

	"github.com/brandgw/brand/internal/batch/layout"

	"github.com/brandgw/brand/chunkindex"
	"github.com/brandgw/brand/seqpack"
)

// A token batch served without documents of a damaged chunk (skip mode)
// leaves out exactly the sequences that need one, names the documents,
// keeps the other sequences' read positions and components, and has a
// partial ETag.
func TestWithoutDocuments(t *testing.T) {
	seqs := []seqpack.Sequence{
		{Pieces: []seqpack.Piece{{Doc: 10, Len: 3}, {Doc: 11, Len: 1}}},
		{Pieces: []seqpack.Piece{{Doc: 12, Len: 4}}},
		{Pieces: []seqpack.Piece{{Doc: 11, Offset: 1, Len: 2}, {Doc: 13, Len: 1}}, Pad: 1},
		{Pieces: []seqpack.Piece{{Doc: 13, Offset: 1, Len: 2}}, Pad: 2},
	}
	keys := []string{"d/10", "d/11", "d/12", "d/13"}
	info := make([]chunkindex.Sample, len(keys))
	for i, k := range keys {
		info[i].Key = k
	}
	b := &layout.Batch{ETag: `"full"`, Parts: []layout.Part{{Samples: layout.Samples{IDs: []int{10, 11, 12, 13}, Info: info}}},
		Take:    []layout.Take{{At: 0}, {At: 1}, {At: 2}, {At: 3}},
		Content: &TokenBatch{Seqs: seqs, Pos: []int{40, 41, 42, 43}, At: [][]int{{0, 1}, {2}, {1, 3}, {3}}, split: []int{1, 0, 2, 1}, Comps: []int{0, 1, 0, 2}}}
	nb := withoutDocs(b, []int{1}) // document 11
	if !slices.Equal(nb.Missing, []int{0, 2}) || !slices.Equal(nb.MissingKeys, []string{"d/11"}) {
		t.Fatalf("missing %v %v, want sequences [0 2] and document d/11", nb.Missing, nb.MissingKeys)
	}
	tb := nb.Content.(*TokenBatch)
	if nb.Len() != 2 || !slices.EqualFunc(tb.At, [][]int{{2}, {3}}, slices.Equal) || !slices.Equal(tb.Comps, []int{1, 2}) || !slices.Equal(tb.Pos, []int{41, 43}) ||
		tb.NonPad != 6 || tb.Split != 1 {
		t.Fatalf("kept %d sequences, at %v, comps %v, nonpad %d, split %d", nb.Len(), tb.At, tb.Comps, tb.NonPad, tb.Split)
	}
	if nb.ETag == b.ETag || nb.ETag != withoutDocs(b, []int{1}).ETag || nb.ETag == withoutDocs(b, []int{3}).ETag {
		t.Fatalf("partial ETag %s of %s: not one a set of missing documents", nb.ETag, b.ETag)
	}
	if b.Len() != 4 || withoutDocs(b, nil) != b {
		t.Fatal("the full batch changed")
	}
}

// withoutDocs is b, whose content is a TokenBatch, without the
// documents at read positions missing.
func withoutDocs(b *layout.Batch, missing []int) *layout.Batch {
	nb, _ := b.Content.(*TokenBatch).Without(b, missing)
	return nb
}
