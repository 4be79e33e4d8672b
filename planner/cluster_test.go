package planner

import (
	"bytes"
	"context"
	"errors"
	"math"
	"testing"

	"github.com/brandgw/brand/cluster"
	"github.com/brandgw/brand/shuffle"
)

func mustClusterPlan(t *testing.T, in ClusterInput) *ClusterPlan {
	t.Helper()
	p, err := MakeClusterPlan(context.Background(), in)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// One node is MakePlan's model: the same order, the same trace, the same
// optimal policy, so the same store bytes and the same quality, and
// nothing crosses nodes.
func TestClusterPlanOneNodeIsMakePlan(t *testing.T) {
	tests := []struct {
		name string
		in   PlanInput
	}{
		{"golden input", goldenInput()},
		{"uneven, drop_last", PlanInput{Dataset: unevenDataset(),
			Job:        Job{Params: shuffle.Params{Seed: 3, Window: 3, BatchSize: 7, World: 3, DropLast: true}, FirstEpoch: 2, Epochs: 3},
			CacheBytes: 9000, BackendBytesPerSec: 1}},
		{"cache below one chunk", PlanInput{Dataset: equalDataset(20, 10, 100),
			Job:        Job{Params: shuffle.Params{Seed: 5, Window: 2, BatchSize: 4, World: 4}, Epochs: 2},
			CacheBytes: 50, BackendBytesPerSec: 1}},
		{"batch larger than the cache", PlanInput{Dataset: equalDataset(50, 4, 100),
			Job:        Job{Params: shuffle.Params{Seed: 9, Window: 50, BatchSize: 30, World: 2}, Epochs: 3},
			CacheBytes: 1000, BackendBytesPerSec: 1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			want := mustPlan(t, tt.in)
			got := mustClusterPlan(t, ClusterInput{Dataset: tt.in.Dataset, Job: tt.in.Job, IndexKey: 42, Nodes: 1, NodeCacheBytes: tt.in.CacheBytes})
			if len(got.Epochs) != len(want.Optimal.Epochs) {
				t.Fatalf("%d epochs, want %d", len(got.Epochs), len(want.Optimal.Epochs))
			}
			for i, e := range got.Epochs {
				w := want.Optimal.Epochs[i]
				if e.Epoch != w.Epoch || e.StoreBytes != w.BackendBytes || e.Accesses != w.Accesses || e.Hits != w.Hits {
					t.Errorf("epoch %d: store %d, %d accesses, %d hits; MakePlan's optimal: epoch %d, %d, %d, %d",
						e.Epoch, e.StoreBytes, e.Accesses, e.Hits, w.Epoch, w.BackendBytes, w.Accesses, w.Hits)
				}
				if e.MaxNodeStoreBytes != e.StoreBytes || e.CrossNodeBytes != 0 || e.CrossNodeBytesPlain != 0 || e.BalancedSamples != 0 {
					t.Errorf("epoch %d: one node, yet %+v", e.Epoch, e)
				}
			}
			if got.Locality != want.Quality || got.PlainCut != want.Quality {
				t.Errorf("quality: locality %+v, plain cut %+v; MakePlan's %+v", got.Locality, got.PlainCut, want.Quality)
			}
			if got.DatasetBytes != want.DatasetBytes || got.Samples != want.Samples || got.BatchesPerEpoch != want.BatchesPerEpoch {
				t.Errorf("shape %d bytes, %d samples, %d batches; MakePlan's %d, %d, %d",
					got.DatasetBytes, got.Samples, got.BatchesPerEpoch, want.DatasetBytes, want.Samples, want.BatchesPerEpoch)
			}
		})
	}
}

// referenceCluster recomputes the cross-node figures sample by sample from
// the shuffle's own batches (Epoch.Batch, which is the plain cut), the
// cluster's owners and homes, and cluster.Assign over sample IDs.
type referenceEpoch struct {
	delivered, cross, crossCut float64 // bytes
	moved, crossSamples        int
}

func referenceCluster(t *testing.T, in ClusterInput) []referenceEpoch {
	t.Helper()
	d, j := in.Dataset, in.Job
	var first []int
	n := 0
	for _, k := range d.Counts {
		first = append(first, n)
		n += k
	}
	chunkOf := func(id int) int {
		for c := len(first) - 1; c >= 0; c-- {
			if id >= first[c] && d.Counts[c] > 0 {
				return c
			}
		}
		t.Fatalf("sample %d outside the dataset", id)
		return -1
	}
	weight := func(c int) float64 { return float64(d.ChunkSizes[c]) / float64(d.Counts[c]) }
	owners := cluster.BoundedOwners(in.IndexKey, d.Counts, cluster.Positions(in.Nodes))
	var out []referenceEpoch
	for e := j.FirstEpoch; e < j.FirstEpoch+j.Epochs; e++ {
		ep, err := shuffle.NewEpoch(d.Counts, j.Seed, uint64(e), j.Window)
		if err != nil {
			t.Fatal(err)
		}
		var re referenceEpoch
		for m := range shuffle.NumBatches(n, j.BatchSize, j.World, j.DropLast) {
			var ids, own, share []int
			for r := range j.World {
				b, err := ep.Batch(m, j.BatchSize, j.World, r, j.DropLast)
				if err != nil {
					t.Fatal(err)
				}
				home := cluster.Home(r, j.World, in.Nodes)
				for _, id := range b {
					c := chunkOf(id)
					re.delivered += weight(c)
					if owners[c] != home {
						re.crossCut += weight(c)
					}
					ids = append(ids, id)
					own = append(own, owners[c])
				}
				share = append(share, len(b))
			}
			a, err := cluster.Assign(ids, own, share, in.Nodes)
			if err != nil {
				t.Fatal(err)
			}
			re.moved += a.Moved
			for r, rank := range a.Ranks {
				for _, id := range rank {
					if c := chunkOf(id); owners[c] != cluster.Home(r, j.World, in.Nodes) {
						re.cross += weight(c)
						re.crossSamples++
					}
				}
			}
		}
		out = append(out, re)
	}
	return out
}

func TestClusterPlanMatchesReference(t *testing.T) {
	tests := []struct {
		name string
		in   ClusterInput
	}{
		{"4 nodes, 8 ranks", ClusterInput{Dataset: equalDataset(64, 20, 2000),
			Job: Job{Params: shuffle.Params{Seed: 1, Window: 8, BatchSize: 16, World: 8}, Epochs: 3}, IndexKey: 7, Nodes: 4, NodeCacheBytes: 40000}},
		{"3 nodes, 5 ranks, uneven, drop_last", ClusterInput{Dataset: unevenDataset(),
			Job: Job{Params: shuffle.Params{Seed: 2, Window: 4, BatchSize: 6, World: 5, DropLast: true}, FirstEpoch: 1, Epochs: 2}, IndexKey: 99, Nodes: 3, NodeCacheBytes: 5000}},
		{"more nodes than ranks", ClusterInput{Dataset: equalDataset(40, 8, 800),
			Job: Job{Params: shuffle.Params{Seed: 3, Window: 6, BatchSize: 10, World: 3}, Epochs: 2}, IndexKey: 1, Nodes: 7, NodeCacheBytes: 0}},
		{"one node", ClusterInput{Dataset: unevenDataset(),
			Job: Job{Params: shuffle.Params{Seed: 4, Window: 2, BatchSize: 5, World: 2}, Epochs: 2}, IndexKey: 5, Nodes: 1, NodeCacheBytes: 3000}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := mustClusterPlan(t, tt.in)
			ref := referenceCluster(t, tt.in)
			if len(p.Epochs) != len(ref) {
				t.Fatalf("%d epochs, want %d", len(p.Epochs), len(ref))
			}
			for i, e := range p.Epochs {
				r := ref[i]
				if e.DeliveredBytes != int64(math.Round(r.delivered)) || e.CrossNodeBytes != int64(math.Round(r.cross)) ||
					e.CrossNodeBytesPlain != int64(math.Round(r.crossCut)) || e.BalancedSamples != r.moved {
					t.Errorf("epoch %d: delivered %d, cross %d, plain cut %d, moved %d; reference %.0f, %.0f, %.0f, %d",
						e.Epoch, e.DeliveredBytes, e.CrossNodeBytes, e.CrossNodeBytesPlain, e.BalancedSamples,
						r.delivered, r.cross, r.crossCut, r.moved)
				}
				// Assign keeps what it can on the owner: the samples it
				// moves are exactly those that cross nodes.
				if r.moved != r.crossSamples || e.BalancingBytes != e.CrossNodeBytes {
					t.Errorf("epoch %d: %d samples moved but %d cross; balancing %d bytes, cross %d",
						e.Epoch, r.moved, r.crossSamples, e.BalancingBytes, e.CrossNodeBytes)
				}
				if e.CrossNodeBytes > e.CrossNodeBytesPlain {
					t.Errorf("epoch %d: locality crosses %d bytes, more than the plain cut's %d", e.Epoch, e.CrossNodeBytes, e.CrossNodeBytesPlain)
				}
			}
		})
	}
}

// The store bytes are each node's own simulation over the accesses to the
// chunks it owns: checked against Trace filtered by owner and Simulate,
// and against the two caches whose answer is known without simulating.
func TestClusterPlanStoreBytes(t *testing.T) {
	d := equalDataset(60, 10, 1000)
	job := Job{Params: shuffle.Params{Seed: 11, Window: 5, BatchSize: 8, World: 6}, Epochs: 3}
	const key, nodes = 1234, 3
	owners := cluster.BoundedOwners(key, d.Counts, cluster.Positions(nodes))
	owned := make([]int64, nodes)
	for c, k := range owners {
		owned[k] += d.ChunkSizes[c]
	}
	tests := []struct {
		name  string
		cache int64
		cold  int64   // -1: not known in closed form
		warm  []int64 // nil: not known in closed form
	}{
		{"no cache", 0, -1, nil},
		{"a third of a node's share", owned[0] / 3, -1, nil},
		{"every node holds what it owns", max(owned[0], owned[1], owned[2]), 60000, []int64{0, 0}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := mustClusterPlan(t, ClusterInput{Dataset: d, Job: job, IndexKey: key, Nodes: nodes, NodeCacheBytes: tt.cache})
			// The reference: the order's trace, per owner.
			want := make([]int64, job.Epochs)
			for k := range nodes {
				var tr []Access
				for e := range job.Epochs {
					ep, err := shuffle.NewEpoch(d.Counts, job.Seed, uint64(e), job.Window)
					if err != nil {
						t.Fatal(err)
					}
					g := job.BatchSize * job.World
					for m := 0; m*g < ep.NumSamples(); m++ {
						start := true
						for _, c := range ep.ChunksOfRange(m*g, min((m+1)*g, ep.NumSamples())) {
							if owners[c] == k {
								tr = append(tr, Access{Chunk: int32(c), Epoch: int32(e), Start: start})
								start = false
							}
						}
					}
				}
				for _, r := range Simulate(tr, d.ChunkSizes, tt.cache, Belady).Epochs {
					want[r.Epoch] += r.BackendBytes
				}
			}
			for i, e := range p.Epochs {
				if e.StoreBytes != want[i] {
					t.Errorf("epoch %d: %d store bytes, the per-owner simulation reads %d", e.Epoch, e.StoreBytes, want[i])
				}
			}
			if tt.cold >= 0 && p.Epochs[0].StoreBytes != tt.cold {
				t.Errorf("cold epoch reads %d, want %d", p.Epochs[0].StoreBytes, tt.cold)
			}
			for i, w := range tt.warm {
				if got := p.Epochs[i+1].StoreBytes; got != w {
					t.Errorf("warm epoch %d reads %d, want %d", i+1, got, w)
				}
			}
		})
	}
}

func TestClusterPlanInvalid(t *testing.T) {
	good := ClusterInput{Dataset: equalDataset(10, 5, 100),
		Job: Job{Params: shuffle.Params{Window: 2, BatchSize: 4, World: 2}, Epochs: 2}, Nodes: 2, NodeCacheBytes: 1000}
	tests := []struct {
		name  string
		edit  func(*ClusterInput)
		field string
	}{
		{"one epoch", func(in *ClusterInput) { in.Job.Epochs = 1 }, "epochs"},
		{"no nodes", func(in *ClusterInput) { in.Nodes = 0 }, "nodes"},
		{"too many nodes", func(in *ClusterInput) { in.Nodes = MaxNodes + 1 }, "nodes"},
		{"negative cache", func(in *ClusterInput) { in.NodeCacheBytes = -1 }, "cache"},
		{"cluster cache overflows", func(in *ClusterInput) { in.NodeCacheBytes = math.MaxInt64/2 + 1 }, "overflows"},
		{"bad window", func(in *ClusterInput) { in.Job.Window = 0 }, "window"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := good
			tt.edit(&in)
			_, err := MakeClusterPlan(context.Background(), in)
			if !errors.Is(err, ErrInvalid) || !bytes.Contains([]byte(err.Error()), []byte(tt.field)) {
				t.Errorf("error %v; want ErrInvalid naming %q", err, tt.field)
			}
		})
	}
	if _, err := MakeClusterPlan(context.Background(), good); err != nil {
		t.Errorf("the valid input fails: %v", err)
	}
}

func TestClusterPlanContextCanceled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := MakeClusterPlan(ctx, ClusterInput{Dataset: equalDataset(10, 5, 100),
		Job: Job{Params: shuffle.Params{Window: 2, BatchSize: 4, World: 2}, Epochs: 2}, Nodes: 2})
	if !errors.Is(err, context.Canceled) {
		t.Errorf("error %v; want context.Canceled", err)
	}
}

// clusterGoldenInput is small but shows everything: four nodes, two ranks
// each, a cache that holds most of a node's share, locality at work.
func clusterGoldenInput() ClusterInput {
	return ClusterInput{
		Dataset:        equalDataset(64, 100, 1<<20),
		Job:            Job{Params: shuffle.Params{Seed: 7, Window: 8, BatchSize: 32, World: 8}, Epochs: 3},
		IndexKey:       cluster.IndexKey("golden"),
		Nodes:          4,
		NodeCacheBytes: 12 << 20,
	}
}

func TestClusterWriteTextGolden(t *testing.T) {
	p := mustClusterPlan(t, clusterGoldenInput())
	var b bytes.Buffer
	if err := p.WriteText(&b); err != nil {
		t.Fatal(err)
	}
	checkGolden(t, "cluster.txt", b.Bytes())
}
