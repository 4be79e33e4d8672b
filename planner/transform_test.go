package planner

import (
	"context"
	"testing"
	"time"

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
