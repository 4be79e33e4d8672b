package sequences

import (
	"context"
	"testing"

	"github.com/brandgw/brand/seqpack"
)

// BenchmarkPack: one batch of 8 sequences of 4,096 tokens packed from
// uint16 documents of 50 to 1,500 tokens (bestfit-like pieces), on one
// goroutine; b.SetBytes counts the tokens' int32 output.
func BenchmarkPack(b *testing.B) {
	const seq, n = 4096, 8
	var docs [][]byte
	var seqs []seqpack.Sequence
	var at [][]int
	for range n {
		var q seqpack.Sequence
		var a []int
		room := seq
		for l := 50; room > 0; l = l*7%1500 + 50 {
			l = min(l, room)
			toks := make([]int64, l)
			for i := range toks {
				toks[i] = int64(i * 31 % 50000)
			}
			docs = append(docs, docSample(b, "d", "<u2", 2, toks))
			q.Pieces = append(q.Pieces, seqpack.Piece{Doc: len(docs) - 1, Len: l})
			a = append(a, len(docs)-1)
			room -= l
		}
		seqs, at = append(seqs, q), append(at, a)
	}
	keys := make([]string, n)
	for i := range keys {
		keys[i] = Key(0, i)
	}
	s := New(Config{Workers: serial{}, MaxBytes: 1 << 30})
	b.SetBytes(n * seq * 4)
	b.ReportAllocs()
	for b.Loop() {
		out, err := s.Pack(context.Background(), Request{Spec: Spec{Seq: seq, DType: "uint16"}, Keys: keys, Seqs: seqs, At: at, Docs: docs})
		if err != nil {
			b.Fatal(err)
		}
		out.Release()
	}
	b.ReportMetric(float64(b.N)*n*seq/b.Elapsed().Seconds()/1e6, "Mtokens/s")
}

// serial runs the work on the caller's goroutine.
type serial struct{}

func (serial) Run(_ context.Context, n int, f func(int)) error {
	for i := range n {
		f(i)
	}
	return nil
}

func (serial) Buffer(_ context.Context, n int64, _ bool) ([]byte, func(), error) {
	return make([]byte, 0, n), func() {}, nil
}

func (serial) Decode(context.Context, int64, bool) (func(), error) { return func() {}, nil }
