package planner

import (
	"cmp"
	"context"
	"fmt"
	"iter"
	"math"
	"time"

	"github.com/brandgw/brand/api"
	"github.com/brandgw/brand/cluster"
	"github.com/brandgw/brand/importance"
	"github.com/brandgw/brand/internal/cache/evict"
	"github.com/brandgw/brand/shuffle"
)

// ForGateway is the planner as the gateway uses it, through an interface of
// the gateway's that speaks only in types of the packages below both
// (api, importance, cluster). The gateway therefore does not link the
// planner; `brand serve` passes ForGateway{} in its configuration. The
// gateway describes the data a job reads as an api.PlanDataset: the
// dataset's index, or the view a job naming columns= reads, with each
// chunk's bytes in the cache and in the store.
type ForGateway struct{}

// Plan answers GET /plan: MakePlan for job over the data d describes, a
// *Plan, with its importance figures when snap (the snapshot
// job.Importance names, which the gateway loaded) is not nil; or with
// o.Nodes set, MakeClusterPlan for that many nodes each with a cache of
// o.CacheBytes, a *ClusterPlan, with its importance figures for one
// node (a gateway) only.
// o.DiskCacheBytes, if not 0, is a disk tier below the cache (each
// node's). Every plan a gateway computes is within the Gateway budget
// (GatewayWalk, GatewayTrace, GatewaySimulate).
//
// With o.Transform (a job naming a pipeline), the plan answers the
// pipeline's questions too (PlanTransform): the cores a node needs for
// o.ImagesPerSec, and, for one gateway, whether caching decoded images
// would pay.
func (ForGateway) Plan(ctx context.Context, d api.PlanDataset, job api.Job, o api.PlanOptions, snap *importance.Snapshot) (any, error) {
	return planJob(ctx, datasetOfPlan(d), ownerKey(d), job, o, snap, gatewayBudget())
}

// Resize answers GET /plan?nodes_after=N: MakeResizePlan for job over the
// data d describes, from membership from (the gateway's agreed one; nil:
// o.Nodes planned nodes, at least one) to o.NodesAfter nodes
// (ResizedMembers), with each node's cache o.CacheBytes, the job at the
// start of o.FirstEpoch and the hand-over's o.PrefetchWindows, a
// *ResizePlan. A named job's edits (o.Edit) lay its windows out as its
// batches are.
func (ForGateway) Resize(_ context.Context, d api.PlanDataset, job api.Job, o api.PlanOptions, from *cluster.Membership) (any, error) {
	if from == nil {
		from = PlannedMembers(max(o.Nodes, 1))
	}
	return MakeResizePlan(ResizeInput{Dataset: datasetOfPlan(d), IndexKey: ownerKey(d),
		Job: Job{Params: job.Params, FirstEpoch: o.FirstEpoch, Epochs: 1, Edit: editOf(o.Edit)}, From: from, To: ResizedMembers(from, o.NodesAfter),
		PrefetchWindows: o.PrefetchWindows, NodeCacheBytes: o.CacheBytes, StoreBytesPerSec: o.BackendBytesPerSec, PeerBytesPerSec: o.PeerBytesPerSec})
}

// TransformOf is a plan's pipeline input from a server's costs.
func TransformOf(o api.PlanOptions) (TransformInput, bool) {
	c := o.Transform
	if c == nil {
		return TransformInput{}, false
	}
	return TransformInput{Pipeline: c.Pipeline, ImagesPerSec: o.ImagesPerSec, PerImage: time.Duration(c.CPUPerImage),
		Measured: c.Measured, DecodePerImage: time.Duration(c.DecodePerImage), DecodedFactor: c.DecodedFactor, Workers: c.Workers}, true
}

// planJob is Plan over dataset d, whose index's key is key, within b.
func planJob(ctx context.Context, d Dataset, key uint64, job api.Job, o api.PlanOptions, snap *importance.Snapshot, b Budget) (any, error) {
	if o.Nodes > 0 {
		in := ClusterInput{
			Dataset:            d,
			Job:                Job{Params: job.Params, FirstEpoch: o.FirstEpoch, Epochs: o.Epochs, Edit: editOf(o.Edit)},
			IndexKey:           key,
			Nodes:              o.Nodes,
			MemberIDs:          o.MemberIDs,
			NodeCacheBytes:     o.CacheBytes,
			NodeDiskCacheBytes: o.DiskCacheBytes,
			Prices:             o.Prices,
			Budget:             b,
		}
		if snap != nil {
			// One node's (a gateway's); several refuse it (the table's
			// importance × cluster, not planned, 501 before a plan).
			in.Importance = &Importance{Snapshot: snap, Hot: job.Importance.Hot}
		}
		cp, err := MakeClusterPlan(ctx, in)
		if err == nil {
			cp.Assignment = o.Assignment
		}
		if t, ok := TransformOf(o); ok && err == nil {
			// Each node transforms the samples of its chunks: its share.
			t.ImagesPerSec /= float64(o.Nodes)
			cp.Transform = TransformCores(t)
		}
		return cp, err
	}
	in := PlanInput{
		Dataset:            d,
		Job:                Job{Params: job.Params, FirstEpoch: o.FirstEpoch, Epochs: o.Epochs, Edit: editOf(o.Edit)},
		CacheBytes:         o.CacheBytes,
		DiskCacheBytes:     o.DiskCacheBytes,
		BackendBytesPerSec: o.BackendBytesPerSec,
		ConsumeBytesPerSec: o.ConsumeBytesPerSec,
		PrefetchWindows:    o.PrefetchWindows,
		Prices:             o.Prices,
		Budget:             b,
	}
	if snap != nil {
		in.Importance = &Importance{Snapshot: snap, Hot: job.Importance.Hot}
	}
	p, err := MakePlan(ctx, in)
	if t, ok := TransformOf(o); ok && err == nil {
		p.Transform, err = PlanTransform(ctx, in, p, t)
	}
	return p, err
}

// editOf is a job's chain of edits as the planner takes it. An edit of
// an epoch past every epoch a plan can simulate is in none planned.
func editOf(x *api.PlanEdit) *Edit {
	if x == nil {
		return nil
	}
	y := &Edit{Version: x.Version, Epoch: int(min(x.Epoch, math.MaxInt32)), From: x.From, Chunks: x.Chunks, Samples: x.Samples, Drop: x.Drop,
		Previous: editOf(x.Previous)}
	if x.Epoch > math.MaxInt32 {
		y.From = 0
	}
	return y
}

// MaxGatewayMixSamples bounds the mixture epoch MixPlan plans when it is
// longer than the components' samples summed: a plan's time and memory
// grow with the epochs' samples, which mix_samples would otherwise let a
// request choose without limit.
const MaxGatewayMixSamples = 1 << 24

// MixPlan answers GET /plan?mix=: Plan for job over the mixture job.Mix,
// ds[i] describing the data of its component i, each component's chunks
// owned by its own index's key in a cluster (o.Nodes set), a *Plan or a
// *ClusterPlan with its Mix. A mixture has no importance mode, and its
// epoch (job.MixSamples) is at most the larger of the components' samples
// summed and MaxGatewayMixSamples.
func (ForGateway) MixPlan(ctx context.Context, pds []api.PlanDataset, job api.Job, o api.PlanOptions) (any, error) {
	if len(pds) != len(job.Mix) {
		return nil, fmt.Errorf("%w: %d datasets for a mixture of %d", ErrInvalid, len(pds), len(job.Mix))
	}
	ds, keys := make([]Dataset, len(pds)), make([]uint64, len(pds))
	for i, pd := range pds {
		ds[i], keys[i] = datasetOfPlan(pd), ownerKey(pd)
	}
	return planMix(ctx, ds, keys, job, o, gatewayBudget())
}

// planMix is MixPlan over datasets ds, whose indexes' keys are keys,
// within b.
func planMix(ctx context.Context, ds []Dataset, keys []uint64, job api.Job, o api.PlanOptions, b Budget) (any, error) {
	var phases []shuffle.SchedulePhase
	var weights []uint64
	var err error
	if len(job.Schedule) > 0 {
		// A schedule: its phases in the order of its first phase's datasets.
		if phases, err = job.Schedule.Phases(); err == nil {
			weights = phases[0].Weights
		}
	} else {
		weights, err = job.Mix.IntWeights()
	}
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	total := 0
	for _, d := range ds {
		for _, n := range d.Counts {
			total += n
		}
	}
	if limit := max(total, MaxGatewayMixSamples); job.MixSamples > limit {
		return nil, fmt.Errorf("%w: mix_samples %d: a plan's mixture epoch is at most %d samples (the components' samples summed, or %d)",
			ErrInvalid, job.MixSamples, limit, MaxGatewayMixSamples)
	}
	mix := &Mix{Block: job.Block(), Samples: job.MixSamples, Phases: phases}
	for i, c := range job.Mix {
		mix.Components = append(mix.Components, MixComponent{Name: c.Dataset, Weight: weights[i], Dataset: ds[i], IndexKey: keys[i]})
	}
	j := Job{Params: job.Params, FirstEpoch: o.FirstEpoch, Epochs: o.Epochs}
	if o.Nodes > 0 {
		return MakeClusterPlan(ctx, ClusterInput{
			Mix:                mix,
			Job:                j,
			Nodes:              o.Nodes,
			NodeCacheBytes:     o.CacheBytes,
			NodeDiskCacheBytes: o.DiskCacheBytes,
			Budget:             b,
		})
	}
	return MakePlan(ctx, PlanInput{
		Mix:                mix,
		Job:                j,
		CacheBytes:         o.CacheBytes,
		DiskCacheBytes:     o.DiskCacheBytes,
		BackendBytesPerSec: o.BackendBytesPerSec,
		ConsumeBytesPerSec: o.ConsumeBytesPerSec,
		PrefetchWindows:    o.PrefetchWindows,
		Budget:             b,
	})
}

// SharedPlan answers POST /plan: MakeSharedPlan for jobs (every field
// given: the gateway filled its defaults) reading the data d describes
// through one cache of cacheBytes, a *SharedPlan.
func (ForGateway) SharedPlan(ctx context.Context, d api.PlanDataset, jobs []api.SharedPlanJob, cacheBytes int64) (any, error) {
	in := SharedInput{Dataset: datasetOfPlan(d), CacheBytes: cacheBytes, Jobs: make([]SharedJob, len(jobs)), Budget: gatewayBudget()}
	for i, j := range jobs {
		in.Jobs[i] = SharedJob{
			Job: Job{
				Params:     shuffle.Params{Seed: j.Seed, Window: j.Window, BatchSize: j.BatchSize, World: j.World, DropLast: j.DropLast},
				FirstEpoch: j.FirstEpoch,
				Epochs:     j.Epochs,
				Edit:       editOf(j.Edit),
			},
			Name:  j.Name,
			Speed: j.Speed,
			Start: j.Start,
		}
	}
	return MakeSharedPlan(ctx, in)
}

// OptimalHitRatios simulates the optimal policy (Belady) with a cache of
// capacity bytes on a demand trace given batch by batch — each batch's job
// and epoch and its distinct chunks (IDs into sizes, their bytes in the
// cache) in first-use order, in the order the batches were served, every
// job's merged — and returns each job's epochs' hit ratios.
func (ForGateway) OptimalHitRatios(ctx context.Context, sizes []int64, capacity int64, batches iter.Seq2[evict.JobEpoch, []int32]) (map[evict.JobEpoch]float64, error) {
	var trace []Access
	jobs := map[int]uint16{} // the gateway's job IDs, numbered densely for the trace
	var ids []int
	for je, chunks := range batches {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		j, ok := jobs[je.Job]
		if !ok {
			if len(jobs) > math.MaxUint16 {
				return nil, fmt.Errorf("%w: more than %d jobs in one trace", ErrInvalid, math.MaxUint16+1)
			}
			j = uint16(len(jobs))
			jobs[je.Job] = j
			ids = append(ids, je.Job)
		}
		if je.Epoch > math.MaxInt32 {
			return nil, fmt.Errorf("%w: epoch %d beyond the planner's %d", ErrInvalid, je.Epoch, math.MaxInt32)
		}
		for i, c := range chunks {
			trace = append(trace, Access{Chunk: c, Epoch: int32(je.Epoch), Job: j, Start: i == 0})
		}
	}
	res := Simulate(trace, sizes, capacity, Belady)
	out := map[evict.JobEpoch]float64{}
	add := func(job int, epochs []EpochResult) {
		for _, e := range epochs {
			if e.Accesses > 0 {
				out[evict.JobEpoch{Job: job, Epoch: uint64(e.Epoch)}] = e.HitRatio
			}
		}
	}
	if len(res.Jobs) == 0 { // one job
		if len(ids) > 0 {
			add(ids[0], res.Epochs)
		}
		return out, nil
	}
	for _, jr := range res.Jobs {
		add(ids[jr.Job], jr.Epochs)
	}
	return out, nil
}

// TracePlan answers /plan for a job whose demand the gateway computed
// itself (a clip job's: batches of the chunks its clips need, which the
// planner cannot derive from a dataset's counts): the trace simulated
// through a cache of o.CacheBytes under the gateway's policy (NextUse,
// keyed by the windows of t.Orders; Belady's rule on the known future
// when t has no orders), under Belady's rule ("optimal") and under LRU,
// each chunk's store bytes counted as a miss reads them. It answers
// {"policy": ..., "optimal": ..., "lru": ...}, Results whose epochs are
// the trace's.
func (ForGateway) TracePlan(ctx context.Context, d api.PlanDataset, t api.PlanTrace, o api.PlanOptions) (any, error) {
	m := newMeter(ctx, gatewayBudget())
	var trace []Access
	var batchOf []int32
	for k, b := range t.Batches {
		for i, c := range b.Chunks {
			if c < 0 || int(c) >= len(d.Sizes) {
				return nil, fmt.Errorf("%w: a batch names chunk %d of %d", ErrInvalid, c, len(d.Sizes))
			}
			trace = append(trace, Access{Chunk: c, Epoch: int32(b.Epoch), Start: i == 0})
			batchOf = append(batchOf, int32(k))
		}
		if err := m.trace(len(b.Chunks)); err != nil {
			return nil, err
		}
	}
	store := d.StoreSizes
	if store == nil {
		store = d.Sizes
	}
	s := newSimulator(trace, d.Sizes, store, m)
	cache := max(o.CacheBytes, 0)
	belady, err := s.run(cache, Belady)
	if err != nil {
		return nil, err
	}
	lru, err := s.run(cache, LRU)
	if err != nil {
		return nil, err
	}
	policy := belady
	if len(t.Orders) > 0 {
		w, err := newWindowTrace(t, len(d.Sizes))
		if err != nil {
			return nil, err
		}
		if policy, err = s.serve(newWindowCache(s.sizes, cache, w, batchOf), cache, s.disk(0, NextUse, nil), NextUse); err != nil {
			return nil, err
		}
	}
	return map[string]Result{"policy": policy, "optimal": belady, "lru": lru}, nil
}

// ownerKey is the key a cluster hashes d's chunks to their owners by:
// its lineage's root's (api.PlanDataset.Root).
func ownerKey(d api.PlanDataset) uint64 { return cluster.IndexKey(cmp.Or(d.Root, d.ID)) }
