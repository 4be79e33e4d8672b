package planner

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/brandgw/brand/api"
	"github.com/brandgw/brand/shuffle"
)

// TestPlanEpochsAreTheEdited (issue 80, case 6): a plan's epochs are
// those the job's edits make, as the slow references lay them out — an
// exclusion's epochs shorter from its step on, an append's longer, an
// epoch of drop_last that an exclusion leaves without a batch — each
// epoch's samples the reference order's and its batches the reference
// trace's, batches_per_epoch the first planned epoch's; on one gateway
// and for a cluster alike. Before, every epoch was the dataset's
// unedited.
func TestPlanEpochsAreTheEdited(t *testing.T) {
	d := Dataset{ChunkSizes: equalSizes(12, 100), Counts: slices.Repeat([]int{10}, 12)}
	excluded := func(t *testing.T, j Job, e int) []int { return referenceExcludedOrder(t, d, j, e) }
	appended := func(t *testing.T, j Job, e int) []int { return referenceAppendedOrder(t, d, j, e) }
	chain := testExclusion(d, []int{2}, 0, 30)
	next := testExclusion(d, []int{5}, 1, 17)
	next.Previous = chain
	for i := range next.Drop {
		next.Drop[i] |= chain.Drop[i]
	}
	for _, c := range []struct {
		name  string
		cut   shuffle.Params
		first int
		edit  *Edit
		order func(t *testing.T, j Job, e int) []int
	}{
		{"an exclusion from a step of epoch 0", shuffle.Params{Seed: 3, Window: 3, BatchSize: 4, World: 2}, 0, testExclusion(d, []int{2, 9}, 0, 37), nil},
		{"an exclusion from a step of epoch 1", shuffle.Params{Seed: 3, Window: 2, BatchSize: 5, World: 3, DropLast: true}, 0, testExclusion(d, []int{4}, 1, 60), nil},
		{"planned from the exclusion's epoch", shuffle.Params{Seed: 8, Window: 12, BatchSize: 7, World: 1}, 2, testExclusion(d, []int{1, 3}, 2, 19), nil},
		{"a chain of exclusions", shuffle.Params{Seed: 5, Window: 2, BatchSize: 5, World: 2}, 0, next, nil},
		{"an exclusion leaving epochs of no batch", shuffle.Params{Seed: 1, Window: 4, BatchSize: 8, World: 4, DropLast: true}, 0,
			testExclusion(d, []int{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}, 1, 0), nil},
		{"an append", shuffle.Params{Seed: 3, Window: 2, BatchSize: 4, World: 1}, 0, &Edit{Version: "a", Chunks: 8, Epoch: 1, From: 28}, appended},
		{"an append, drop_last", shuffle.Params{Seed: 9, Window: 3, BatchSize: 3, World: 3, DropLast: true}, 0, &Edit{Version: "a", Chunks: 5, Epoch: 0, From: 11}, appended},
	} {
		t.Run(c.name, func(t *testing.T) {
			order := c.order
			if order == nil {
				order = excluded
			}
			j := Job{Params: c.cut, FirstEpoch: c.first, Epochs: 4, Edit: c.edit}
			var want []api.PlanEpoch
			for e := c.first; e < c.first+j.Epochs; e++ {
				o := order(t, j, e)
				batches := 0
				for _, a := range referenceCut(t, d, j, e, o) {
					if a.Start {
						batches++
					}
				}
				want = append(want, api.PlanEpoch{Epoch: e, Samples: len(o), Batches: batches})
			}
			if slices.Equal(want, slices.Repeat(want[:1], len(want))) {
				t.Fatalf("the case's epochs are all alike: %v", want)
			}
			p, err := MakePlan(context.Background(), PlanInput{Dataset: d, Job: j, CacheBytes: 500, BackendBytesPerSec: 1 << 30})
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(p.Epochs, want) || p.BatchesPerEpoch != want[0].Batches {
				t.Errorf("the plan's epochs %v, %d batches per epoch; the references' %v", p.Epochs, p.BatchesPerEpoch, want)
			}
			var each []string
			for _, e := range want {
				each = append(each, fmt.Sprint(e.Batches))
			}
			if slices.Equal(each, slices.Repeat(each[:1], len(each))) {
				each = each[:1] // one figure where every epoch has it
			}
			var b bytes.Buffer
			if err := p.WriteText(&b); err != nil || !strings.Contains(b.String(), strings.Join(each, ", ")+" global batches per epoch") {
				t.Errorf("the report does not give each epoch's batches %v: %v\n%s", each, err, b.String())
			}
			cp, err := MakeClusterPlan(context.Background(), ClusterInput{Dataset: d, Job: j, IndexKey: 7, Nodes: 3, NodeCacheBytes: 200})
			if err != nil {
				t.Fatal(err)
			}
			var got []api.PlanEpoch
			for _, e := range cp.Epochs {
				got = append(got, api.PlanEpoch{Epoch: e.Epoch, Samples: e.Samples, Batches: e.Batches})
			}
			if !slices.Equal(got, want) || cp.BatchesPerEpoch != want[0].Batches {
				t.Errorf("the cluster plan's epochs %v, %d batches per epoch; the references' %v", got, cp.BatchesPerEpoch, want)
			}
			// Each epoch's figures are its own: one of no batch reads
			// nothing and accesses nothing.
			for i, e := range cp.Epochs {
				if want[i].Batches == 0 && (e.Accesses != 0 || e.DeliveredBytes != 0) {
					t.Errorf("epoch %d, of no batch: %+v", e.Epoch, e)
				}
			}
		})
	}
}

// TestPlanOfNoBatches (issue 80, case 6): a job of drop_last and fewer
// samples than one global batch is planned as the gateway serves it —
// every epoch its samples and no batch, nothing read, nothing that
// stalls — on one gateway, for a cluster, for a mixture, and beside
// another job in a shared cache, which reads alone what it reads with
// it. Before, each was refused (ErrInvalid, "no batches").
func TestPlanOfNoBatches(t *testing.T) {
	ctx := context.Background()
	d := equalDataset(10, 4, 100)
	empty := Job{Params: shuffle.Params{Seed: 1, Window: 2, BatchSize: 41, World: 1, DropLast: true}, Epochs: 2}
	want := []api.PlanEpoch{{Epoch: 0, Samples: 40}, {Epoch: 1, Samples: 40}}
	p, err := MakePlan(ctx, PlanInput{Dataset: d, Job: empty, CacheBytes: 1000, BackendBytesPerSec: 1, ConsumeBytesPerSec: 1e9})
	if err != nil {
		t.Fatalf("MakePlan: %v", err)
	}
	if !slices.Equal(p.Epochs, want) || p.BatchesPerEpoch != 0 || p.LRU.Accesses != 0 || p.Optimal.BackendBytes != 0 ||
		p.SteadyEpochsStall || p.ColdEpochStalls || p.WorkingSetBytes != 0 || p.MinNoStallCacheBytes != 0 || p.Quality.Batches != 0 {
		t.Errorf("the plan of no batches: %+v", p)
	}
	if _, err := json.Marshal(p); err != nil {
		t.Errorf("the plan of no batches does not encode: %v", err)
	}
	cp, err := MakeClusterPlan(ctx, ClusterInput{Dataset: d, Job: empty, Nodes: 2, NodeCacheBytes: 500})
	if err != nil {
		t.Fatalf("MakeClusterPlan: %v", err)
	}
	if len(cp.Epochs) != 2 || cp.BatchesPerEpoch != 0 {
		t.Fatalf("the cluster plan of no batches: %+v", cp)
	}
	for i, e := range cp.Epochs {
		if e.Epoch != i || e.Samples != 40 || e.Batches != 0 || e.Accesses != 0 || e.StoreBytes != 0 {
			t.Errorf("the cluster plan's epoch %d: %+v", i, e)
		}
	}
	mix := mixGoldenInput()
	mix.Job.DropLast, mix.Job.BatchSize, mix.Mix.Block, mix.Mix.Samples = true, 100, 5, 50
	mp, err := MakePlan(ctx, mix)
	if err != nil {
		t.Fatalf("MakePlan of a mixture: %v", err)
	}
	if mp.BatchesPerEpoch != 0 || len(mp.Epochs) != mix.Job.Epochs || mp.Epochs[0].Samples != 50 || mp.Epochs[0].Batches != 0 || mp.Optimal.Accesses != 0 {
		t.Errorf("the mixture's plan of no batches: %d batches, epochs %v, %d accesses", mp.BatchesPerEpoch, mp.Epochs, mp.Optimal.Accesses)
	}
	if _, err := MakeClusterPlan(ctx, ClusterInput{Mix: mix.Mix, Job: mix.Job, Nodes: 2, NodeCacheBytes: 1 << 20}); err != nil {
		t.Errorf("MakeClusterPlan of a mixture: %v", err)
	}
	other := Job{Params: shuffle.Params{Seed: 2, Window: 2, BatchSize: 4, World: 1}, Epochs: 2}
	alone, err := MakeSharedPlan(ctx, SharedInput{Dataset: d, CacheBytes: 600, Jobs: []SharedJob{{Job: other, Name: "other"}}})
	if err != nil {
		t.Fatal(err)
	}
	for _, jobs := range [][]SharedJob{{{Job: other, Name: "other"}, {Job: empty, Name: "empty"}}, {{Job: empty, Name: "empty"}, {Job: other, Name: "other"}}} {
		sp, err := MakeSharedPlan(ctx, SharedInput{Dataset: d, CacheBytes: 600, Jobs: jobs})
		if err != nil {
			t.Fatalf("MakeSharedPlan: %v", err)
		}
		for _, r := range []Result{sp.LRU, sp.Optimal} {
			if len(r.Jobs) != 2 {
				t.Fatalf("%v: %d jobs' figures; want 2: %+v", r.Policy, len(r.Jobs), r.Jobs)
			}
			for i, jr := range r.Jobs {
				if jr.Job != i || (jobs[i].Name == "empty") != (jr.Accesses == 0) {
					t.Errorf("%v: job %d (%s): %+v", r.Policy, i, jobs[i].Name, jr)
				}
			}
		}
		if got, want := fmt.Sprint(sp.Optimal.Epochs), fmt.Sprint(alone.Optimal.Epochs); got != want {
			t.Errorf("beside a job of no batches, the other reads %s; alone %s", got, want)
		}
	}
}

// TestClusterPlanOfOneNodeInImportance (issue 80, case 6): a prediction
// for one node, a gateway, takes importance mode, its figures the
// gateway's plan's (and text's); for several nodes, which the planner
// does not model, it is refused. Before, one node was refused too.
func TestClusterPlanOfOneNodeInImportance(t *testing.T) {
	in := importanceGoldenInput(t)
	want := mustPlan(t, in)
	cin := ClusterInput{Dataset: in.Dataset, Job: in.Job, Nodes: 1, NodeCacheBytes: in.CacheBytes, Importance: in.Importance}
	cp, err := MakeClusterPlan(context.Background(), cin)
	if err != nil {
		t.Fatal(err)
	}
	got, _ := json.Marshal(cp.Importance)
	wantJSON, _ := json.Marshal(want.Importance)
	if cp.Importance == nil || string(got) != string(wantJSON) {
		t.Errorf("one node's importance figures\n%s\nwant the gateway's\n%s", got, wantJSON)
	}
	var b bytes.Buffer
	if err := cp.WriteText(&b); err != nil || !strings.Contains(b.String(), "Importance  snapshot "+in.Importance.Snapshot.Version()) {
		t.Errorf("the report of one node in importance mode: %v\n%s", err, b.String())
	}
	cin.Nodes = 2
	if _, err := MakeClusterPlan(context.Background(), cin); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "one node, not for 2") {
		t.Errorf("2 nodes in importance mode: %v; want ErrInvalid", err)
	}
}

// TestPlanEpochBytesAreTheEdited (issue 80, case 6): a plan's
// epoch_bytes (and epoch_store_bytes) is what its first planned epoch
// serves under the job's edits — the dataset's bytes in proportion to
// the epoch's samples served, fewer after an exclusion, more after an
// append, as batches_per_epoch is its batches — on one gateway and for a
// cluster; and the steady stall verdict weighs each steady epoch's reads
// against the time the trainer takes over that epoch's own bytes. Before,
// both were the dataset's unedited: an exclusion's plan told a trainer
// it kept up where its shorter epochs stall (and the reverse after an
// append).
func TestPlanEpochBytesAreTheEdited(t *testing.T) {
	ctx := context.Background()
	d := Dataset{ChunkSizes: equalSizes(12, 100), StoreSizes: equalSizes(12, 60), Counts: slices.Repeat([]int{10}, 12)}
	const backend = 1000.0
	differ := 0 // verdicts the unedited epochs would have given otherwise
	for _, c := range []struct {
		name  string
		cut   shuffle.Params
		first int
		edit  *Edit
	}{
		{"an exclusion, planned from the epoch after it", shuffle.Params{Seed: 3, Window: 3, BatchSize: 4, World: 2}, 1, testExclusion(d, []int{2, 9}, 0, 37)},
		{"an exclusion from epoch 1, drop_last", shuffle.Params{Seed: 3, Window: 2, BatchSize: 5, World: 3, DropLast: true}, 0, testExclusion(d, []int{4, 5, 6}, 1, 0)},
		{"an append from epoch 1", shuffle.Params{Seed: 9, Window: 2, BatchSize: 4, World: 1}, 0, &Edit{Version: "a", Chunks: 6, Epoch: 1, From: 0}},
	} {
		t.Run(c.name, func(t *testing.T) {
			j := Job{Params: c.cut, FirstEpoch: c.first, Epochs: 3, Edit: c.edit}
			// bytes is epoch i's served bytes, of d's sizes or store sizes
			// (all: n), as the plan's epochs have their samples.
			bytes := func(p *Plan, i int, all int64) float64 {
				return math.Round(float64(all) * float64(served(j.Params, p.Epochs[i].Samples)) / float64(p.Samples))
			}
			unedited := func(p *Plan, all int64) float64 {
				return math.Round(float64(all) * float64(served(j.Params, p.Samples)) / float64(p.Samples))
			}
			p, err := MakePlan(ctx, PlanInput{Dataset: d, Job: j, CacheBytes: 600, BackendBytesPerSec: backend})
			if err != nil {
				t.Fatal(err)
			}
			edited := p.Epochs[0].Samples != p.Samples // the first planned epoch is not the dataset's
			if float64(p.EpochBytes) != bytes(p, 0, 1200) || float64(p.EpochStoreBytes) != bytes(p, 0, 720) || edited && p.EpochBytes == int64(unedited(p, 1200)) {
				t.Errorf("epoch_bytes %d, epoch_store_bytes %d; the first planned epoch (%+v of %d samples) serves %v and %v",
					p.EpochBytes, p.EpochStoreBytes, p.Epochs[0], p.Samples, bytes(p, 0, 1200), bytes(p, 0, 720))
			}
			cp, err := MakeClusterPlan(ctx, ClusterInput{Dataset: d, Job: j, IndexKey: 7, Nodes: 2, NodeCacheBytes: 300})
			if err != nil {
				t.Fatal(err)
			}
			if cp.EpochBytes != p.EpochBytes {
				t.Errorf("the cluster plan's epoch_bytes %d; the first planned epoch serves %d", cp.EpochBytes, p.EpochBytes)
			}
			for cache := int64(0); cache <= 1200; cache += 100 {
				for _, consume := range []float64{500, 1000, 1500, 2000, 3000, 4000, 6000, 10000} {
					p, err := MakePlan(ctx, PlanInput{Dataset: d, Job: j, CacheBytes: cache, BackendBytesPerSec: backend, ConsumeBytesPerSec: consume})
					if err != nil {
						t.Fatal(err)
					}
					stall, was := cache < p.WorkingSetBytes, cache < p.WorkingSetBytes
					for _, e := range p.Optimal.Epochs[1:] {
						read := float64(e.BackendBytes)
						stall = stall || read > bytes(p, e.Epoch-c.first, 1200)*backend/consume
						was = was || read > unedited(p, 1200)*backend/consume
					}
					if p.SteadyEpochsStall != stall {
						t.Errorf("cache %d, consuming %v B/s: steady_epochs_stall %t; the epochs served (%+v), each read in its own time, say %t",
							cache, consume, p.SteadyEpochsStall, p.Epochs, stall)
					}
					if stall != was {
						differ++
					}
				}
			}
		})
	}
	if differ == 0 {
		t.Error("no verdict the unedited epochs give otherwise: the cases do not tell the two apart")
	}
}
