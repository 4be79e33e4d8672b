package planner

import (
	"context"
	"math"
	"testing"
	"time"

	"github.com/brandgw/brand/api"
	"github.com/brandgw/brand/shuffle"
)

// TestPlanTransform: caching decoded images pays when the cache holds the
// dataset decoded (the same store reads, every decode saved) and not when
// it holds a sliver of it (no decode saved, more read); the cores are the
// rate times the cost.
func TestPlanTransform(t *testing.T) {
	d := Dataset{}
	for range 40 {
		d.ChunkSizes = append(d.ChunkSizes, 100<<10)
		d.Counts = append(d.Counts, 20)
	}
	in := PlanInput{Dataset: d, Job: Job{Params: shuffle.Params{Seed: 1, Window: 4, BatchSize: 16, World: 1}, Epochs: 3},
		BackendBytesPerSec: 100 << 20}
	ti := TransformInput{Pipeline: "p", ImagesPerSec: 2500, PerImage: 2 * time.Millisecond, DecodePerImage: time.Millisecond,
		DecodedFactor: 6, Workers: 4}
	for _, tc := range []struct {
		name  string
		cache int64
		pays  bool
	}{
		{"the dataset decoded fits", 7 * 4000 << 10, true},
		{"a sliver of it", 500 << 10, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in.CacheBytes = tc.cache
			p, err := MakePlan(context.Background(), in)
			if err != nil {
				t.Fatal(err)
			}
			tp, err := PlanTransform(context.Background(), in, p, ti)
			if err != nil {
				t.Fatal(err)
			}
			if tp.Cores != 5 || tp.CoresNeeded != 5 || tp.Enough {
				t.Errorf("cores %v (%d), enough %t; want 5, too few", tp.Cores, tp.CoresNeeded, tp.Enough)
			}
			dc := tp.DecodedCache
			if dc == nil || dc.Pays != tc.pays || dc.EquivalentCacheBytes != tc.cache/6 {
				t.Fatalf("decoded cache %+v, want pays %t", dc, tc.pays)
			}
		})
	}
}

// TestForGatewayTransform: a gateway's plan for a job naming a pipeline
// answers from the node's costs as they come (calibrated or measured,
// its workers): the cores are the rate times the CPU per image,
// rounded up for those needed, enough when the workers are as many;
// caching decoded images holds less of the dataset (no better hit ratio,
// no fewer store bytes), and pays exactly when the decode time it saves
// exceeds the store time it adds.
func TestForGatewayTransform(t *testing.T) {
	ix := gatewayIndex(t, 24, 10)
	job := api.Job{Params: shuffle.Params{Seed: 1, Window: 4, BatchSize: 16, World: 1}}
	for _, tc := range []struct {
		name       string
		costs      api.TransformCosts
		rate       float64
		cores      float64
		need       int
		enough, on bool // on: the decoded-cache question answered
	}{
		{"calibrated, enough", api.TransformCosts{Pipeline: "p", CPUPerImage: 1500e3, DecodePerImage: 1e6, DecodedFactor: 6, Workers: 2}, 1000, 1.5, 2, true, true},
		{"measured, too few", api.TransformCosts{Pipeline: "p", CPUPerImage: 2500e3, Measured: true, DecodePerImage: 1e6, DecodedFactor: 3, Workers: 2}, 1000, 2.5, 3, false, true},
		{"no decoded factor", api.TransformCosts{Pipeline: "p", CPUPerImage: 1e6, Workers: 4}, 4000, 4, 4, true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := api.PlanOptions{CacheBytes: 100 << 10, Epochs: 2, BackendBytesPerSec: 1 << 20, ImagesPerSec: tc.rate, Transform: &tc.costs}
			p, err := ForGateway{}.Plan(context.Background(), planDataOf(ix), job, o, nil)
			if err != nil {
				t.Fatal(err)
			}
			tp := p.(*Plan).Transform
			if tp == nil || tp.Pipeline != "p" || tp.Measured != tc.costs.Measured || tp.CPUPerImageMs != float64(tc.costs.CPUPerImage)/1e6 ||
				tp.Workers != tc.costs.Workers || math.Abs(tp.Cores-tc.cores) > 1e-9 || tp.CoresNeeded != tc.need || tp.Enough != tc.enough {
				t.Fatalf("transform plan %+v", tp)
			}
			d := tp.DecodedCache
			if (d != nil) != tc.on {
				t.Fatalf("decoded cache %+v, want one: %t", d, tc.on)
			}
			if d != nil && (d.Factor != tc.costs.DecodedFactor || d.DecodedHitRatio > d.HitRatio || d.DecodedStoreBytesPerEpoch < d.StoreBytesPerEpoch ||
				d.Pays != (d.DecodeSecondsSaved > d.StoreSecondsAdded)) {
				t.Errorf("decoded cache %+v", d)
			}
		})
	}
}
