package livestats

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"github.com/brandgw/brand/internal/batch/layout"
	"github.com/brandgw/brand/internal/cache/evict"
)

// TestOptimumOfInterleavedEpochs is the reproduction of a wrong optimum:
// batch 0 of epoch 0, then batch 0 of epoch 1 (its chunk prefetched for it
// first), then the rest of epoch 0. Epoch 0's optimum is computed on its
// whole demand as it arrived (it was computed on batch 0 alone and showed
// 0), and published in the snapshot and the metrics; epoch 1, barely
// begun, has no optimum and no negative hit ratio from the chunk
// prefetched for it.
func TestOptimumOfInterleavedEpochs(t *testing.T) {
	reg := prometheus.NewRegistry()
	opt := &fakeOptimizer{calls: make(chan optimizerCall, 1), ratios: map[evict.JobEpoch]float64{{Job: 1, Epoch: 0}: 0.75}}
	s := New(reg, 1<<20, opt, nil, zerolog.Nop())
	js := layout.Stream{DS: fourChunks(t, "d"), Seed: 3, Window: 2} // 16 samples in 4 chunks
	batch := func(epoch uint64, chunk int) {
		s.Batch(Served{Stream: js, Epoch: epoch, EpochSamples: 16, Samples: 4, Chunks: []int{chunk}, Loads: 1})
	}
	batch(0, 0)
	s.Prefetched(js, 1, 2, 3*4096, false)
	batch(1, 2) // the prefetched chunk, and a load of it counted too
	for c := 1; c < 4; c++ {
		batch(0, c)
	}
	call := <-opt.calls
	s.Close() // waits for the optimum to be published

	var epoch0 []int32
	for _, b := range call.trace {
		if b.je == (evict.JobEpoch{Job: 1, Epoch: 0}) {
			epoch0 = append(epoch0, b.chunks...)
		}
	}
	if len(call.trace) != 5 || len(epoch0) != 4 {
		t.Errorf("the optimizer was given %+v; want the 5 batches as they arrived, epoch 0's 4 among them", call.trace)
	}
	st := s.Snapshot()
	if len(st) != 2 {
		t.Fatalf("%d epochs: %+v", len(st), st)
	}
	e0, e1 := st[0], st[1]
	if e0.Epoch != 0 || !e0.Complete || e0.Optimal == nil || *e0.Optimal != 0.75 {
		t.Errorf("epoch 0: %+v, want a complete epoch with its optimum", e0)
	}
	if e1.HitRatio < 0 || e1.Loads > e1.Accesses || e1.Complete || e1.Optimal != nil {
		t.Errorf("epoch 1, one batch served: %+v; want loads within accesses, not complete, no optimum", e1)
	}
	if got := series(t, reg, "brand_epoch_hit_ratio", map[string]string{"epoch": "0", "policy": "optimal"}); len(got) != 1 || got[0] != 0.75 {
		t.Errorf("epoch 0's optimal hit ratio series %v, want 0.75", got)
	}
	if got := series(t, reg, "brand_epoch_hit_ratio", map[string]string{"epoch": "1", "policy": "optimal"}); len(got) != 0 {
		t.Errorf("the incomplete epoch 1 has an optimal hit ratio series %v", got)
	}
}
