package planner

import (
	"context"
	"math"
	"testing"

	"github.com/brandgw/brand/shuffle"
)

func TestQualityMeterHandChecked(t *testing.T) {
	q := newQualityMeter(5, 4)
	// World 2, batch 4: rank 0 takes 0 0 0 1 (2 chunks, 3/4 from chunk 0),
	// rank 1 the short tail 2 3 (2 chunks, 1/2).
	q.add(0, []int32{0, 0, 0, 1, 2, 3})
	// A full global batch of one chunk per rank: 1 chunk, share 1 each.
	q.add(0, []int32{4, 4, 4, 4, 1, 1, 1, 1})
	got := q.quality()
	want := Quality{
		Batches:                    4,
		MeanDistinctChunksPerBatch: (2 + 2 + 1 + 1) / 4.0,
		MaxChunkShare:              (0.75 + 0.5 + 1 + 1) / 4,
		WorstChunkShare:            1,
	}
	if got != want {
		t.Errorf("quality = %+v, want %+v", got, want)
	}
	if (&qualityMeter{}).quality() != (Quality{}) {
		t.Error("no batches should give the zero Quality")
	}
}

// TestQualityWindowOneVsFull: with window 1 and chunks holding a whole
// number of batches, every batch comes from a single chunk; a full shuffle
// draws on as many chunks as sampling without replacement predicts.
func TestQualityWindowOneVsFull(t *testing.T) {
	const chunks, per, batch = 100, 64, 32
	counts := make([]int, chunks)
	for c := range counts {
		counts[c] = per
	}
	in := PlanInput{
		Dataset:            Dataset{ChunkSizes: equalSizes(chunks, 1000), Counts: counts},
		Job:                Job{Params: shuffle.Params{Seed: 11, Window: 1, BatchSize: batch, World: 2}, Epochs: 2},
		CacheBytes:         10_000,
		BackendBytesPerSec: 1,
	}
	p, err := MakePlan(context.Background(), in)
	if err != nil {
		t.Fatal(err)
	}
	wantBatches := 2 * chunks * per / batch
	one := Quality{Batches: wantBatches, MeanDistinctChunksPerBatch: 1, MaxChunkShare: 1, WorstChunkShare: 1}
	if p.Quality != one {
		t.Errorf("window 1: %+v, want %+v", p.Quality, one)
	}

	// E[distinct] = chunks × (1 − P(a chunk is absent from a batch)), the
	// probability being hypergeometric: C(n−per, batch) / C(n, batch).
	n := float64(chunks * per)
	absent := 1.0
	for i := range batch {
		absent *= (n - per - float64(i)) / (n - float64(i))
	}
	expect := chunks * (1 - absent)
	f := p.FullShuffle
	if f.Batches != wantBatches || math.Abs(f.MeanDistinctChunksPerBatch-expect) > 0.05*expect {
		t.Errorf("full shuffle: %+v; want %d batches and about %.2f distinct chunks", f, wantBatches, expect)
	}
	if f.MaxChunkShare >= 0.25 || f.WorstChunkShare > 0.5 || f.WorstChunkShare < f.MaxChunkShare {
		t.Errorf("full shuffle shares %+v: one chunk should never dominate a batch", f)
	}

	// A window of every chunk is the full shuffle itself.
	in.Job.Window = chunks
	p, err = MakePlan(context.Background(), in)
	if err != nil {
		t.Fatal(err)
	}
	if p.Quality != f || p.FullShuffle != f {
		t.Errorf("window = chunks: quality %+v and full %+v, want both %+v", p.Quality, p.FullShuffle, f)
	}
}
