package dataset

import (
	"context"
	"testing"

	"github.com/brandgw/brand/internal/gen/synth"
)

// benchSpec is 2,000 samples of about 32 KiB: 64 MiB, a typical chunk.
func benchSpec() synth.Spec {
	return synth.Spec{Samples: 2000, MeanBytes: 32 << 10, Classes: 10, Seed: 1}
}

// BenchmarkPack measures packing into a local store (page cache, no
// network): the cost of walking, reading, tar-writing and CRCs.
func BenchmarkPack(b *testing.B) {
	ctx := context.Background()
	src := writeTree(b, benchSpec())
	b.SetBytes(benchSpec().TotalBytes())
	for b.Loop() {
		if _, err := Pack(ctx, src, newLocal(b), PackOptions{ChunkSize: 8 << 20, Shuffle: true}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkVerify measures reading and checking every chunk of a local
// store.
func BenchmarkVerify(b *testing.B) {
	ctx := context.Background()
	st := newLocal(b)
	res, err := Pack(ctx, writeTree(b, benchSpec()), st, PackOptions{ChunkSize: 8 << 20})
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(res.Index.TotalBytes())
	for b.Loop() {
		rep, err := Verify(ctx, st, res.Index, 4, nil)
		if err != nil || !rep.OK() {
			b.Fatal(err, rep)
		}
	}
}

// BenchmarkIndexShards measures indexing chunks already in a local store.
func BenchmarkIndexShards(b *testing.B) {
	ctx := context.Background()
	st := newLocal(b)
	res, err := Pack(ctx, writeTree(b, benchSpec()), st, PackOptions{ChunkSize: 8 << 20})
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(res.Index.TotalBytes())
	for b.Loop() {
		if _, err := IndexShards(ctx, st, IndexOptions{}); err != nil {
			b.Fatal(err)
		}
	}
}
