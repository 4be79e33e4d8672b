package planner

import (
	"context"
	"errors"
	"testing"

	"github.com/brandgw/brand/api"
	"github.com/brandgw/brand/internal/job/features"
	"github.com/brandgw/brand/internal/job/query"
	"github.com/brandgw/brand/shuffle"
)

// fuzzBudget keeps each fuzzed plan to a millisecond or so: the gateway's
// budget would let one input take seconds.
func fuzzBudget() Budget { return Budget{Walk: 1 << 16, Trace: 1 << 13, Simulate: 1 << 17} }

// fuzzDataset stands for the dataset a request names: a few chunks, as
// many as its name is long (mod 8) more than 4, of 10 samples each.
func fuzzDataset(name string) Dataset {
	d := equalDataset(4+len(name)%8, 10, 1000)
	if len(name)%3 == 0 {
		d.Counts[0] = 0 // a chunk with no samples
	}
	return d
}

// FuzzPlanParams sends query strings through GET /plan's parameter
// table (mix=, mix_block, mix_samples, the job's and the plan's
// options) and what they reach: the mixture's construction as a
// gateway's orders make it (shuffle.NewMixture, a span of its epoch) and
// the plan a gateway computes, within a small budget. Whatever the
// query, nothing panics, every refusal is of the kind the gateway maps
// to 400 (a bad request, or the table of features' refusal), or 404 for a
// number out of range, and a plan ends, made,
// refused or out of budget. The seed corpus is the queries below and
// those in testdata/fuzz/FuzzPlanParams (the security review's).
func FuzzPlanParams(f *testing.F) {
	for _, q := range []string{
		"mix=web:0.7,code:0.3",
		"mix=aa:1,bb:1&mix_samples=16777216&mix_block=16777216&epochs=20&nodes=4096",
		"mix=aa:1,bb:1&mix_samples=16777216&mix_block=1&epochs=20",
		"mix=a:1,b:1.100001&mix_block=1&mix_samples=4194304",
		"mix=a:0.333333,b:0.5,c:0.166667&mix_block=64&batch_size=4&world=2",
		"batch_size=3&window=1&epochs=2&cache_size=10KiB&disk_cache_size=20KiB",
		"nodes=3&world=6&drop_last=true&first_epoch=7",
		"epochs=20&window=64&prefetch_windows=64&consume=1MiB&bandwidth=10MiB",
		"mix=x:1&mix_samples=1&batch_size=65536&drop_last=true",
	} {
		f.Add(q)
	}
	limits := query.Limits{MaxBatchSize: 65536, MaxWindow: 65536, MaxWorld: 65536, MaxEpoch: query.MaxEpoch, MaxBatchBytes: 256 << 20}
	base := query.Query{Job: api.Job{Dataset: "default", Params: shuffle.Params{Seed: 5, Window: 2, BatchSize: 8, World: 1}},
		Plan: api.PlanOptions{CacheBytes: 8000, Epochs: 3, BackendBytesPerSec: 1 << 30, PrefetchWindows: 1}}
	f.Fuzz(func(t *testing.T, raw string) {
		q, err := query.Parse(raw, query.PlanParams, base, limits)
		if err != nil {
			if !errors.Is(err, query.ErrBadRequest) && !errors.Is(err, query.ErrOutOfRange) && !errors.Is(err, features.ErrIncompatible) {
				t.Fatalf("%q: %v, neither a bad request, out of range nor the table's refusal", raw, err)
			}
			return
		}
		job := q.Job
		var plan any
		if len(job.Mix) == 0 {
			plan, err = planJob(context.Background(), fuzzDataset(job.Dataset), 7, job, q.Plan, nil, fuzzBudget())
		} else {
			checkMixture(t, raw, job)
			ds, keys := make([]Dataset, len(job.Mix)), make([]uint64, len(job.Mix))
			for i, c := range job.Mix {
				ds[i], keys[i] = fuzzDataset(c.Dataset), uint64(i)
			}
			plan, err = planMix(context.Background(), ds, keys, job, q.Plan, fuzzBudget())
		}
		switch {
		case err == nil && plan == nil:
			t.Fatalf("%q: neither a plan nor an error", raw)
		case err != nil && !errors.Is(err, ErrInvalid) && !errors.Is(err, ErrBudget):
			t.Fatalf("%q: %v, neither invalid input nor out of budget", raw, err)
		}
	})
}

// checkMixture builds job's mixture as a gateway's orders do and reads
// the start of its first epoch from a span, when its blocks are small
// enough for a fuzzer's pace.
func checkMixture(t *testing.T, raw string, job api.Job) {
	weights, err := job.Mix.IntWeights()
	if err != nil {
		t.Fatalf("%q: parsed, yet its weights fail: %v", raw, err)
	}
	sizes := make([]int, len(job.Mix))
	for i, c := range job.Mix {
		for _, n := range fuzzDataset(c.Dataset).Counts {
			sizes[i] += n
		}
	}
	m, err := shuffle.NewMixture(weights, sizes, job.Block(), job.MixSamples)
	if err != nil {
		if !errors.Is(err, shuffle.ErrInvalid) {
			t.Fatalf("%q: NewMixture: %v, not ErrInvalid", raw, err)
		}
		return
	}
	if m.Block() > 1<<16 {
		return
	}
	sp := m.Span(job.Seed, 0, 0, min(m.SpanBlocks(), m.NumSamples()/m.Block()))
	n := min(sp.End(), 64)
	if got, want := sp.AppendRange(nil, 0, n), m.AppendRange(nil, job.Seed, 0, 0, n); len(got) != n || len(want) != n {
		t.Fatalf("%q: %d and %d draws of %d", raw, len(got), len(want), n)
	}
}
