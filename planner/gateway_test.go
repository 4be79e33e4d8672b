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
			got, err := ForGateway{}.Plan(context.Background(), ix, aj, tt.o, tt.snap)
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
	if _, err := (ForGateway{}).Plan(context.Background(), ix, api.Job{Params: job}, api.PlanOptions{Epochs: 2, Nodes: api.MaxPlanNodes + 1}, nil); err == nil {
		t.Errorf("%d nodes planned; want an error", api.MaxPlanNodes+1)
	}
	if _, err := (ForGateway{}).Plan(context.Background(), ix, api.Job{Params: job}, api.PlanOptions{Epochs: 2, Nodes: 4, CacheBytes: 1 << 20}, snap); !errors.Is(err, ErrInvalid) {
		t.Errorf("importance over 4 nodes: %v; want ErrInvalid", err)
	}
}
