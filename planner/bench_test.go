package planner

import (
	"context"
	"fmt"
	"testing"

	"github.com/brandgw/brand/shuffle"
)

// benchDataset is 10,000 chunks of 100 samples (1,000,000 samples) of about
// 64 MiB each, the sizes varying by up to 4 MiB in 512-byte tar blocks.
func benchDataset() Dataset {
	d := Dataset{ChunkSizes: make([]int64, 10_000), Counts: make([]int, 10_000)}
	for c := range d.Counts {
		d.Counts[c] = 100
		d.ChunkSizes[c] = 64<<20 + int64(c*7919%8192)*512
	}
	return d
}

func benchJob(window int) Job {
	return Job{Params: shuffle.Params{Seed: 1, Window: window, BatchSize: 256, World: 1}, Epochs: 3}
}

// BenchmarkTrace measures the demand trace of three epochs of a
// 1,000,000-sample, 10,000-chunk dataset with batch 256, for a 32-chunk
// window and for a full shuffle.
func BenchmarkTrace(b *testing.B) {
	d := benchDataset()
	for _, window := range []int{32, 10_000} {
		b.Run(fmt.Sprintf("window=%d", window), func(b *testing.B) {
			var n int
			for b.Loop() {
				tr, err := Trace(d, benchJob(window))
				if err != nil {
					b.Fatal(err)
				}
				n = len(tr)
			}
			b.ReportMetric(float64(n), "accesses")
		})
	}
}

// BenchmarkSimulate replays that trace through a cache of half the dataset
// under each policy. The trace is computed once, outside the timing.
func BenchmarkSimulate(b *testing.B) {
	d := benchDataset()
	var total int64
	for _, size := range d.ChunkSizes {
		total += size
	}
	for _, window := range []int{32, 10_000} {
		tr, err := Trace(d, benchJob(window))
		if err != nil {
			b.Fatal(err)
		}
		for _, p := range []Policy{LRU, Belady} {
			b.Run(fmt.Sprintf("window=%d/%v", window, p), func(b *testing.B) {
				b.ReportAllocs()
				var r Result
				for b.Loop() {
					r = Simulate(tr, d.ChunkSizes, total/2, p)
				}
				b.ReportMetric(float64(len(tr)), "accesses")
				b.ReportMetric(r.HitRatio, "hit-ratio")
			})
		}
	}
}

// BenchmarkSimulateTiers replays that trace through a cache of a tenth of
// the dataset with a disk of half the dataset below it, under each policy.
func BenchmarkSimulateTiers(b *testing.B) {
	d := benchDataset()
	var total int64
	for _, size := range d.ChunkSizes {
		total += size
	}
	for _, window := range []int{32, 10_000} {
		tr, err := Trace(d, benchJob(window))
		if err != nil {
			b.Fatal(err)
		}
		for _, p := range []Policy{LRU, Belady} {
			b.Run(fmt.Sprintf("window=%d/%v", window, p), func(b *testing.B) {
				b.ReportAllocs()
				var r Result
				for b.Loop() {
					r = simulateTiers(tr, d.ChunkSizes, total/10, total/2, p)
				}
				b.ReportMetric(float64(len(tr)), "accesses")
				b.ReportMetric(float64(r.DiskBytes)/float64(r.BackendBytes+r.DiskBytes), "disk-share")
			})
		}
	}
}

// BenchmarkSimulateImportance replays the same traces under the
// importance-aware policy, chunk weights drawn from a fixed generator.
func BenchmarkSimulateImportance(b *testing.B) {
	d := benchDataset()
	var total int64
	for _, size := range d.ChunkSizes {
		total += size
	}
	weights := make([]float64, len(d.ChunkSizes))
	for c := range weights {
		weights[c] = float64(c*7919%1000) / 1000
	}
	for _, window := range []int{32, 10_000} {
		tr, err := Trace(d, benchJob(window))
		if err != nil {
			b.Fatal(err)
		}
		b.Run(fmt.Sprintf("window=%d", window), func(b *testing.B) {
			b.ReportAllocs()
			var r Result
			for b.Loop() {
				r = simulateImportance(tr, d.ChunkSizes, weights, total/2)
			}
			b.ReportMetric(float64(len(tr)), "accesses")
			b.ReportMetric(r.HitRatio, "hit-ratio")
		})
	}
}

// BenchmarkMakePlan is the whole report for the same dataset with an 8 GiB
// cache: the trace, the full shuffle's quality, and the binary search for
// the smallest no-stall cache (about 30 Belady runs: the sizes' common
// divisor is one 512-byte tar block).
func BenchmarkMakePlan(b *testing.B) {
	for _, window := range []int{32, 1000} {
		b.Run(fmt.Sprintf("window=%d", window), func(b *testing.B) {
			in := PlanInput{Dataset: benchDataset(), Job: benchJob(window), CacheBytes: 8 << 30,
				BackendBytesPerSec: 1 << 30, ConsumeBytesPerSec: 2 << 30}
			b.ReportAllocs()
			for b.Loop() {
				if _, err := MakePlan(context.Background(), in); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkClusterPlan is the cluster prediction at the scale the issue
// names: 4,096 chunks of 256 samples (1,048,576 samples), three epochs,
// window 8, batch 64, world 2048 over 256 nodes and world 8 over 4 nodes,
// the cluster's cache 140 % of the dataset.
func BenchmarkClusterPlan(b *testing.B) {
	for _, shape := range []struct{ nodes, world int }{{4, 8}, {256, 2048}} {
		b.Run(fmt.Sprintf("nodes=%d/world=%d", shape.nodes, shape.world), func(b *testing.B) {
			in := reportInput(shape.nodes, 8, 1.4)
			in.Job.World = shape.world
			b.ReportAllocs()
			for b.Loop() {
				if _, err := MakeClusterPlan(context.Background(), in); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
