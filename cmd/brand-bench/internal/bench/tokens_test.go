package bench

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/brandgw/brand/format/megatron/megatrontest"
)

// writeCorpus writes what the project's Megatron writer writes for the
// same documents, token j being j.
func TestWriteCorpusIsMegatrons(t *testing.T) {
	lengths := []int{3, 1, 700, 42}
	prefix := filepath.Join(t.TempDir(), "c")
	n, err := writeCorpus(prefix, lengths)
	if err != nil {
		t.Fatal(err)
	}
	var docs [][]int64
	var j int64
	for _, l := range lengths {
		d := make([]int64, l)
		for k := range d {
			d[k] = j
			j++
		}
		docs = append(docs, d)
	}
	if n != j {
		t.Fatalf("%d tokens, want %d", n, j)
	}
	wantBin, wantIdx := megatrontest.Files("int32", docs)
	for ext, want := range map[string][]byte{".bin": wantBin, ".idx": wantIdx} {
		got, err := os.ReadFile(prefix + ext)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s differs from megatrontest.Files'", ext)
		}
	}
}

// pieceCheck counts fill, cuts of documents shorter than seq, and whether
// every token was read once, from position_ids alone.
func TestPieceCheck(t *testing.T) {
	const P, E = tokensPad, tokensEOS
	type seqn struct{ ids, pos []int32 }
	long := seqn{[]int32{8, 9, 10, 11, 12, 13, 14, 15}, []int32{0, 1, 2, 3, 4, 5, 6, 7}}
	tests := []struct {
		name      string
		lengths   []int
		concat    bool
		seqs      []seqn
		fill      float64
		shortCuts int
		exact     bool
	}{
		{"bestfit whole", []int{3, 5, 10}, false, []seqn{long,
			{[]int32{16, 17, 0, 1, 2, P, P, P}, []int32{0, 1, 0, 1, 2, 0, 1, 2}},
			{[]int32{3, 4, 5, 6, 7, P, P, P}, []int32{0, 1, 2, 3, 4, 0, 1, 2}}}, 18.0 / 24, 0, true},
		{"a short document cut", []int{3, 5, 10}, false, []seqn{long,
			{[]int32{16, 17, 0, 1, 2, 3, 4, 5}, []int32{0, 1, 0, 1, 2, 0, 1, 2}},
			{[]int32{6, 7, P, P, P, P, P, P}, []int32{0, 1, 0, 1, 2, 3, 4, 5}}}, 18.0 / 24, 1, true},
		{"a document missing", []int{3, 5, 10}, false, []seqn{long,
			{[]int32{16, 17, 3, 4, 5, 6, 7, P}, []int32{0, 1, 0, 1, 2, 3, 4, 0}}}, 15.0 / 16, 0, false},
		{"a piece that skips a token", []int{3, 5}, false, []seqn{
			{[]int32{0, 1, 2, 3, 5, 5, 6, 7}, []int32{0, 1, 2, 0, 1, 2, 3, 4}}}, 1, 0, false},
		{"concat", []int{3, 5}, true, []seqn{
			{[]int32{0, 1, 2, E, 3, 4, 5, 6}, []int32{0, 1, 2, 3, 0, 1, 2, 3}},
			{[]int32{7, E, P, P, P, P, P, P}, []int32{0, 1, 0, 1, 2, 3, 4, 5}}}, 10.0 / 16, 1, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			starts := make([]int64, len(tt.lengths)+1)
			for i, l := range tt.lengths {
				starts[i+1] = starts[i] + int64(l)
			}
			c := newPieceCheck(tt.lengths, starts, 8, tt.concat)
			for _, s := range tt.seqs {
				c.add(s.ids, s.pos)
			}
			if c.fill() != tt.fill || c.shortCuts != tt.shortCuts || c.exact() != tt.exact {
				t.Errorf("fill %v, short cuts %d, exact %v; want %v, %d, %v", c.fill(), c.shortCuts, c.exact(), tt.fill, tt.shortCuts, tt.exact)
			}
		})
	}
}
