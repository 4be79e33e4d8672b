package plans_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/brandgw/brand/api"
	"github.com/brandgw/brand/internal/job/catalog"
	"github.com/brandgw/brand/internal/job/chain"
	"github.com/brandgw/brand/internal/job/plans"
	"github.com/brandgw/brand/internal/job/query"
	"github.com/brandgw/brand/internal/job/resolve"
	"github.com/brandgw/brand/internal/testsupport/catalogtest"
	"github.com/brandgw/brand/planner"
	"github.com/brandgw/brand/s3backend"
)

// edit makes e of job run over the dataset raw names with r's editor,
// as the edit endpoints do.
func edit(t *testing.T, r *resolve.Resolver, raw string, e resolve.NewEdit) *chain.Link {
	t.Helper()
	ctx := context.Background()
	ej, err := r.Edits().EditJob(ctx, "run", raw, e.Kind)
	if err != nil {
		t.Fatal(err)
	}
	made, _, _, err := r.Edits().Make(ctx, ej, e)
	if err != nil {
		t.Fatal(err)
	}
	return made
}

// TestPlanOfAnEditedJob: a plan of a named job (GET and POST /plan) is
// of the job its batches are, under the chain of edits stored under its
// name (package resolve), which its job names: from a cold cache that
// holds the dataset, the epoch after an exclusion reads every chunk but
// those it empties, where the job unnamed, or before its edit, reads
// them all; after two appends, the job's samples are the newest
// version's and its edit names both, each after the one before. What
// the planner makes of an edit is planner's TestPlanWithExclusion,
// TestTraceWithAnExtendedExclusion and TestPlanWithAppend.
func TestPlanOfAnEditedJob(t *testing.T) {
	ctx := context.Background()
	st, err := s3backend.NewLocal(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	ix := indexOf(t, "", 12, 10)
	ds := catalog.NewDataset("test", "file:///test", st, ix)
	var r *resolve.Resolver
	m := newMaker(t, []*catalog.Dataset{ds}, func(c *plans.Config) { r = c.Jobs.(*resolve.Resolver) })
	var total, empty int64
	var keys []string
	for c := range 12 {
		total += ix.Chunk(c).Size
		if c == 3 || c == 7 {
			empty += ix.Chunk(c).Size
			for i := range 10 {
				keys = append(keys, ix.SampleKey(c*10+i))
			}
		}
	}
	const job = "job=run&seed=7&window=2&batch_size=5&world=2"
	plan := func(q string) *planner.Plan {
		got, _ := planned(t, m, fmt.Sprintf("%s&cache_size=%d&epochs=2&first_epoch=1", q, total), &planner.Plan{})
		return got.(*planner.Plan)
	}
	shared := func(name string) *planner.SharedPlan {
		j := map[string]any{"seed": 7, "window": 2, "batch_size": 5, "world": 2, "epochs": 2, "first_epoch": 1, "name": name}
		body, _ := json.Marshal(map[string]any{"dataset": "test", "cache_size": total, "jobs": []any{j}})
		p, err := m.Shared(ctx, bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		b, _ := json.Marshal(p)
		var sp planner.SharedPlan
		if err := json.Unmarshal(b, &sp); err != nil {
			t.Fatal(err)
		}
		return &sp
	}
	before := plan(job)
	x := edit(t, r, "dataset=test&"+job, resolve.NewEdit{Kind: chain.Exclude, FromStep: 3, Keys: append(keys, ix.SampleKey(1))})
	with, unnamed := plan(job), plan(strings.TrimPrefix(job, "job=run&"))
	named, anon := shared("run"), shared("")
	for _, tc := range []struct {
		name string
		got  int64
		want int64
	}{
		{"the job before its exclusion", before.LRU.Epochs[0].BackendBytes, total},
		{"the job unnamed", unnamed.LRU.Epochs[0].BackendBytes, total},
		{"the job with its exclusion", with.LRU.Epochs[0].BackendBytes, total - empty},
		{"the job with its exclusion, optimal", with.Optimal.Epochs[0].BackendBytes, total - empty},
		{"POST /plan, the job named", named.LRU.BackendBytes, total - empty},
		{"POST /plan, unnamed", anon.LRU.BackendBytes, total},
	} {
		if tc.got != tc.want {
			t.Errorf("%s: epoch 1 reads %d bytes from the store; want %d", tc.name, tc.got, tc.want)
		}
	}
	if e := with.Job.Edit; e == nil || e.Version != x.Version || e.From != 30 || before.Job.Edit != nil || unnamed.Job.Edit != nil {
		t.Errorf("the plans' jobs name the edit %+v (before: %+v, unnamed: %+v); want %s from position 30", e, before.Job.Edit, unnamed.Job.Edit, x.Version)
	}
	if e := named.Jobs[0].Edit; e == nil || e.Version != x.Version {
		t.Errorf("POST /plan's job names the edit %+v; want %s", e, x.Version)
	}

	// Two appends of a dataset served in place, the second in the epoch
	// after the first's.
	st2, err := s3backend.NewLocal(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	vs := catalogtest.Grown(t, "grown", st2, 10, 6, 8, 10)
	m = newMaker(t, vs[2:], func(c *plans.Config) { r = c.Jobs.(*resolve.Resolver) })
	grown := "dataset=grown&job=run&seed=7&window=2&batch_size=5&world=1&index=" + vs[0].ID()
	a1 := edit(t, r, grown, resolve.NewEdit{Kind: chain.Append, FromStep: 3, Index: vs[1].ID()})
	a2 := edit(t, r, grown, resolve.NewEdit{Kind: chain.Append, FromStep: 20, Index: vs[2].ID(), Previous: a1.Version})
	got, _ := planned(t, m, grown+"&epochs=3", &planner.Plan{})
	p := got.(*planner.Plan)
	if e := p.Job.Edit; p.Samples != 100 || e == nil || e.Version != a2.Version || e.Epoch != 1 || e.Previous == nil || e.Previous.Version != a1.Version || e.Previous.From != 15 {
		t.Errorf("the plan of the job with two appends: %d samples, edit %+v; want 100 samples, %s in epoch 1 after %s from position 15", p.Samples, e, a2.Version, a1.Version)
	}
}

// planEdit is a plan's edit as the planner takes it (planner's editOf).
func planEdit(x *api.PlanEdit) *planner.Edit {
	if x == nil {
		return nil
	}
	return &planner.Edit{Version: x.Version, Epoch: int(x.Epoch), From: x.From, Chunks: x.Chunks, Samples: x.Samples, Drop: x.Drop, Previous: planEdit(x.Previous)}
}

// TestTraceOfAnEditedJob: the trace a plan of a named job simulates
// (planner.Trace of its chain as PlanEdit gives it) is the job's batches
// as they are laid out (package resolve, then layout): each global
// batch's distinct chunks, in order of first use, over three epochs —
// for a job with two exclusions in turn, and one with two appends, one
// in the epoch after the other's. The gateway's live figures of such a
// job were held to its plan's this way, through HTTP.
func TestTraceOfAnEditedJob(t *testing.T) {
	ctx := context.Background()
	st, err := s3backend.NewLocal(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	ix := indexOf(t, "", 12, 10)
	tar := catalog.NewDataset("test", "file:///test", st, ix)
	st2, err := s3backend.NewLocal(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	vs := catalogtest.Grown(t, "grown", st2, 10, 6, 8, 10)
	for _, tc := range []struct {
		name  string
		ds    *catalog.Dataset
		job   string
		edits func(r *resolve.Resolver, job string)
	}{
		{"two exclusions", tar, "dataset=test&job=run&seed=7&window=2&batch_size=5&world=2", func(r *resolve.Resolver, job string) {
			x := edit(t, r, job, resolve.NewEdit{Kind: chain.Exclude, FromStep: 3, Keys: []string{ix.SampleKey(31), ix.SampleKey(32), ix.SampleKey(77)}})
			var whole []string
			for i := range 10 {
				whole = append(whole, ix.SampleKey(50+i))
			}
			edit(t, r, job, resolve.NewEdit{Kind: chain.Exclude, FromStep: 14, Keys: whole, Previous: x.Version})
		}},
		{"two appends", vs[2], "dataset=grown&job=run&seed=7&window=2&batch_size=4&world=2&index=" + vs[0].ID(), func(r *resolve.Resolver, job string) {
			a := edit(t, r, job, resolve.NewEdit{Kind: chain.Append, FromStep: 2, Index: vs[1].ID()})
			edit(t, r, job, resolve.NewEdit{Kind: chain.Append, FromStep: 13, Index: vs[2].ID(), Previous: a.Version})
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var r *resolve.Resolver
			newMaker(t, []*catalog.Dataset{tc.ds}, func(c *plans.Config) { r = c.Jobs.(*resolve.Resolver) })
			tc.edits(r, tc.job)
			q, err := query.Parse(tc.job, query.JobParams, query.Query{}, r.Limits())
			if err != nil {
				t.Fatal(err)
			}
			j, err := r.Resolve(ctx, q, 0, -1, 0)
			if err != nil {
				t.Fatal(err)
			}
			job := j.Query.Job
			want, err := planner.Trace(planner.DatasetOf(j.Source.DS.Index), planner.Job{Params: job.Params, Epochs: 3, Edit: planEdit(plans.PlanEdit(j.Source.Edit))})
			if err != nil {
				t.Fatal(err)
			}
			var got []planner.Access
			for e := range uint64(3) {
				j, err := r.Resolve(ctx, q, e, -1, 0)
				if err != nil {
					t.Fatal(err)
				}
				n, _, err := r.Orders().Extent(j.Source, job, e)
				if err != nil {
					t.Fatal(err)
				}
				for m := range uint64(n) {
					seen := map[int]bool{}
					for rank := range job.World {
						jr := job
						jr.Rank = rank
						b, err := r.Orders().Layout(ctx, j.Source, jr, e, m)
						if err != nil {
							t.Fatal(err)
						}
						for _, id := range b.Parts[0].Samples.IDs {
							if c := b.Parts[0].Samples.DS.Index.ChunkOf(id); !seen[c] {
								seen[c] = true
								got = append(got, planner.Access{Chunk: int32(c), Epoch: int32(e), Start: len(seen) == 1})
							}
						}
					}
				}
			}
			if len(got) != len(want) {
				t.Fatalf("%d chunk accesses laid out, the plan's trace %d", len(got), len(want))
			}
			for i := range got {
				if got[i] != want[i] {
					t.Fatalf("access %d: laid out %+v, the plan's trace %+v", i, got[i], want[i])
				}
			}
		})
	}
}
