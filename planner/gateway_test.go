package planner

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"testing"

	"github.com/brandgw/brand/api"
	"github.com/brandgw/brand/chunkindex"
	"github.com/brandgw/brand/cluster"
	"github.com/brandgw/brand/importance"
	"github.com/brandgw/brand/shuffle"
)

// gatewayIndex is an index of chunks chunks of perChunk 512-byte samples,
// each chunk a tar with a header block per sample and two closing blocks.
func gatewayIndex(t *testing.T, chunks, perChunk int) *chunkindex.Index {
	t.Helper()
	var cs []chunkindex.Chunk
	var ss []chunkindex.Sample
	for c := range chunks {
		cs = append(cs, chunkindex.Chunk{Key: fmt.Sprintf("c%04d.tar", c), Size: int64(2*perChunk+2) * 512, ETag: fmt.Sprint(c), Samples: perChunk})
		for i := range perChunk {
			ss = append(ss, chunkindex.Sample{Key: fmt.Sprintf("s%d-%d", c, i), Chunk: c, Offset: int64(2*i+1) * 512, Length: 512})
		}
	}
	ix, err := chunkindex.New(cs, ss)
	if err != nil {
		t.Fatal(err)
	}
	return ix
}

// planDataOf describes ix's dataset, read whole, as the gateway does for
// a tar dataset: no store sizes.
func planDataOf(ix *chunkindex.Index) api.PlanDataset {
	return api.PlanDataset{ID: ix.ID(), Counts: ix.SampleCounts(), Sizes: DatasetOf(ix).ChunkSizes}
}

// ForGateway.Plan answers a single gateway's plan without nodes and the
// cluster prediction with them, over the index's own ownership key.
func TestForGatewayPlan(t *testing.T) {
	ix := gatewayIndex(t, 24, 10)
	job := shuffle.Params{Seed: 3, Window: 4, BatchSize: 8, World: 4}
	scores := make([]float32, ix.NumSamples())
	for i := range scores {
		scores[i] = float32(i%7) * float32(1+i/40)
	}
	snap, err := importance.NewSnapshot(ix, "train", 0, scores)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		o    api.PlanOptions
		snap *importance.Snapshot
		want func() (any, error)
	}{
		{"single gateway", api.PlanOptions{CacheBytes: 40 << 10, Epochs: 2, BackendBytesPerSec: 1 << 20}, nil,
			func() (any, error) {
				return MakePlan(context.Background(), PlanInput{Dataset: DatasetOf(ix), Job: Job{Params: job, Epochs: 2}, CacheBytes: 40 << 10, BackendBytesPerSec: 1 << 20})
			}},
		{"importance", api.PlanOptions{CacheBytes: 40 << 10, Epochs: 3, FirstEpoch: 1, BackendBytesPerSec: 1 << 20}, snap,
			func() (any, error) {
				return MakePlan(context.Background(), PlanInput{Dataset: DatasetOf(ix), Job: Job{Params: job, FirstEpoch: 1, Epochs: 3}, CacheBytes: 40 << 10,
					BackendBytesPerSec: 1 << 20, Importance: &Importance{Snapshot: snap, Hot: 3}})
			}},
		{"four nodes", api.PlanOptions{CacheBytes: 20 << 10, Epochs: 3, FirstEpoch: 1, BackendBytesPerSec: 1 << 20, Nodes: 4}, nil,
			func() (any, error) {
				return MakeClusterPlan(context.Background(), ClusterInput{Dataset: DatasetOf(ix), Job: Job{Params: job, FirstEpoch: 1, Epochs: 3},
					IndexKey: cluster.IndexKey(ix.ID()), Nodes: 4, NodeCacheBytes: 20 << 10})
			}},
		{"one node", api.PlanOptions{CacheBytes: 20 << 10, Epochs: 2, BackendBytesPerSec: 1 << 20, Nodes: 1}, nil,
			func() (any, error) {
				return MakeClusterPlan(context.Background(), ClusterInput{Dataset: DatasetOf(ix), Job: Job{Params: job, Epochs: 2},
					IndexKey: cluster.IndexKey(ix.ID()), Nodes: 1, NodeCacheBytes: 20 << 10})
			}},
		{"single gateway with a disk", api.PlanOptions{CacheBytes: 40 << 10, DiskCacheBytes: 60 << 10, Epochs: 2, BackendBytesPerSec: 1 << 20}, nil,
			func() (any, error) {
				return MakePlan(context.Background(), PlanInput{Dataset: DatasetOf(ix), Job: Job{Params: job, Epochs: 2}, CacheBytes: 40 << 10, DiskCacheBytes: 60 << 10,
					BackendBytesPerSec: 1 << 20})
			}},
		{"importance with a disk", api.PlanOptions{CacheBytes: 40 << 10, DiskCacheBytes: 60 << 10, Epochs: 3, FirstEpoch: 1, BackendBytesPerSec: 1 << 20}, snap,
			func() (any, error) {
				return MakePlan(context.Background(), PlanInput{Dataset: DatasetOf(ix), Job: Job{Params: job, FirstEpoch: 1, Epochs: 3}, CacheBytes: 40 << 10,
					DiskCacheBytes: 60 << 10, BackendBytesPerSec: 1 << 20, Importance: &Importance{Snapshot: snap, Hot: 3}})
			}},
		{"four nodes with disks", api.PlanOptions{CacheBytes: 20 << 10, DiskCacheBytes: 30 << 10, Epochs: 3, BackendBytesPerSec: 1 << 20, Nodes: 4}, nil,
			func() (any, error) {
				return MakeClusterPlan(context.Background(), ClusterInput{Dataset: DatasetOf(ix), Job: Job{Params: job, Epochs: 3},
					IndexKey: cluster.IndexKey(ix.ID()), Nodes: 4, NodeCacheBytes: 20 << 10, NodeDiskCacheBytes: 30 << 10})
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			aj := api.Job{Params: job}
			if tt.snap != nil {
				aj.Importance = api.Importance{Job: "train", Version: tt.snap.Version(), Hot: 3}
			}
			got, err := ForGateway{}.Plan(context.Background(), planDataOf(ix), aj, tt.o, tt.snap)
			if err != nil {
				t.Fatal(err)
			}
			want, err := tt.want()
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("got %+v\nwant %+v", got, want)
			}
			var disk bool
			switch p := got.(type) {
			case *Plan:
				disk = p.Disk != nil
			case *ClusterPlan:
				disk = p.NodeDiskCacheBytes != 0
			}
			if disk != (tt.o.DiskCacheBytes != 0) {
				t.Errorf("disk figures: %t; want them only with a disk", disk)
			}
		})
	}
	if _, err := (ForGateway{}).Plan(context.Background(), planDataOf(ix), api.Job{Params: job}, api.PlanOptions{Epochs: 2, Nodes: api.MaxPlanNodes + 1}, nil); err == nil {
		t.Errorf("%d nodes planned; want an error", api.MaxPlanNodes+1)
	}
	if _, err := (ForGateway{}).Plan(context.Background(), planDataOf(ix), api.Job{Params: job}, api.PlanOptions{Epochs: 2, Nodes: 4, CacheBytes: 1 << 20}, snap); !errors.Is(err, ErrInvalid) {
		t.Errorf("importance over 4 nodes: %v; want ErrInvalid", err)
	}
}

// ForGateway plans the data a gateway describes with its store sizes (a
// dataset served in place, or a view of some of its fields): the plans
// MakePlan, MakeClusterPlan, MakeResizePlan and MakeSharedPlan make of
// the dataset with those store sizes.
func TestForGatewayStoreSizes(t *testing.T) {
	d := inPlaceDataset()
	pd := api.PlanDataset{ID: "0123456789abcdef", Counts: d.Counts, Sizes: d.ChunkSizes, StoreSizes: d.StoreSizes}
	key := cluster.IndexKey(pd.ID)
	params := shuffle.Params{Seed: 3, Window: 4, BatchSize: 4, World: 2}
	job := Job{Params: params, Epochs: 2}
	ctx := context.Background()
	o := api.PlanOptions{CacheBytes: 5000, DiskCacheBytes: 3000, Epochs: 2, BackendBytesPerSec: 1 << 20}
	check := func(name string, got any, err error, want any, werr error) {
		t.Helper()
		if err != nil || werr != nil {
			t.Fatalf("%s: %v, %v", name, err, werr)
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s: %+v\nwant %+v", name, got, want)
		}
	}
	got, err := ForGateway{}.Plan(ctx, pd, api.Job{Params: params}, o, nil)
	want, werr := MakePlan(ctx, PlanInput{Dataset: d, Job: job, CacheBytes: 5000, DiskCacheBytes: 3000, BackendBytesPerSec: 1 << 20})
	check("plan", got, err, want, werr)
	if want.DatasetStoreBytes == 0 {
		t.Error("a plan of store sizes without their total")
	}
	o.Nodes = 3
	got, err = ForGateway{}.Plan(ctx, pd, api.Job{Params: params}, o, nil)
	wantCl, werr := MakeClusterPlan(ctx, ClusterInput{Dataset: d, Job: job, IndexKey: key, Nodes: 3, NodeCacheBytes: 5000, NodeDiskCacheBytes: 3000})
	check("cluster", got, err, wantCl, werr)
	o.NodesAfter = 5
	got, err = ForGateway{}.Resize(ctx, pd, api.Job{Params: params}, o, nil)
	wantRs, werr := MakeResizePlan(ResizeInput{Dataset: d, IndexKey: key, Job: Job{Params: params, Epochs: 1}, From: PlannedMembers(3), To: PlannedMembers(5),
		NodeCacheBytes: 5000, StoreBytesPerSec: 1 << 20, PeerBytesPerSec: DefaultPeerBytesPerSec})
	check("resize", got, err, wantRs, werr)
	got, err = ForGateway{}.SharedPlan(ctx, pd, []api.SharedPlanJob{{Seed: 3, Window: 4, BatchSize: 4, World: 2, Epochs: 2, Speed: 1}}, 5000)
	wantSh, werr := MakeSharedPlan(ctx, SharedInput{Dataset: d, CacheBytes: 5000, Jobs: []SharedJob{{Job: job, Speed: 1}}})
	check("shared", got, err, wantSh, werr)
	mix, err := api.ParseMix("inplace:1,tar:1")
	if err != nil {
		t.Fatal(err)
	}
	tar := gatewayIndex(t, 6, 4)
	o.Nodes, o.NodesAfter = 0, 0
	got, err = ForGateway{}.MixPlan(ctx, []api.PlanDataset{pd, planDataOf(tar)}, api.Job{Params: params, Mix: mix}, o)
	wantMx, werr := MakePlan(ctx, PlanInput{Job: job, CacheBytes: 5000, DiskCacheBytes: 3000, BackendBytesPerSec: 1 << 20, Mix: &Mix{Components: []MixComponent{
		{Name: "inplace", Weight: 1, Dataset: d, IndexKey: key}, {Name: "tar", Weight: 1, Dataset: DatasetOf(tar), IndexKey: cluster.IndexKey(tar.ID())}}}})
	check("mixture", got, err, wantMx, werr)
}
