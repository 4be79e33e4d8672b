package resolve_test

import (
	"context"
	"errors"
	"github.com/brandgw/brand/api"
	"strings"
	"testing"

	gcluster "github.com/brandgw/brand/cluster"
	"github.com/brandgw/brand/internal/cluster/membership"
	"github.com/brandgw/brand/internal/job/catalog"
	"github.com/brandgw/brand/internal/job/chain"
	"github.com/brandgw/brand/internal/job/features"
	"github.com/brandgw/brand/internal/job/query"
	"github.com/brandgw/brand/internal/job/resolve"
	"github.com/brandgw/brand/internal/testsupport/catalogtest"
)

// TestTableAtEveryStep holds the resolver to the table of features at
// each step of a resolution (Resolve): what a request names — its
// parameters, and an edit's or a plan's own feature — is the table's to
// refuse before its dataset is looked up, whatever the dataset; what is
// known only once it is read is checked after: a dataset served in place
// (in-place), a membership of several nodes (cluster), the kinds of the
// edits stored under the job's name (exclusion, append), a stored
// schedule read by the job or kept under its name. A job the table lets
// through is resolved with every feature it has. A refusal is the
// table's own (its message), from every entry point that resolves: a
// job's batches, an edit's job (Editor.EditJob), a schedule's edit
// (Editor.CheckScheduleEdit).
func TestTableAtEveryStep(t *testing.T) {
	ctx := context.Background()
	g := catalogtest.Grown(t, "g", localStore(t), 5, 4)[0]
	ds := []*catalog.Dataset{stored(t, "a", 4, 5), stored(t, "b", 4, 5), g}
	solo, _ := newNode(t, nil, ds...)
	three, err := gcluster.NewMembership([]string{"http://n0.test", "http://n1.test", "http://n2.test"})
	if err != nil {
		t.Fatal(err)
	}
	clustered, _ := newNode(t, func(c *resolve.Config) { c.Versions = members{membership.Solo{Held: c.Catalog.HeldIDs}, three} }, ds...)

	// Job run keeps an exclusion over a; job mixed, a stored schedule;
	// job both, a schedule and an exclusion over one of its datasets.
	exclude := func(job string) {
		ej, err := solo.Edits().EditJob(ctx, job, "dataset=a&batch_size=2", chain.Exclude)
		if err != nil {
			t.Fatal(err)
		}
		if _, _, _, err := solo.Edits().Make(ctx, ej, resolve.NewEdit{Kind: chain.Exclude, FromStep: 3, Keys: []string{"a/1/2"}}); err != nil {
			t.Fatal(err)
		}
	}
	exclude("run")
	exclude("both")
	for _, job := range []string{"mixed", "both"} {
		if _, err := solo.Edits().EditSchedule(ctx, job, "0:a:1,b:1", api.BucketStages{}, 0, false, ""); err != nil {
			t.Fatal(err)
		}
	}

	resolveRaw := func(r *resolve.Resolver, raw string, extra ...features.Feature) func() (*resolve.Job, error) {
		return func() (*resolve.Job, error) {
			q, err := query.Parse(raw, query.JobParams, r.Defaults(), r.Limits())
			if err != nil {
				return nil, err // a pair of parameters is refused as they are parsed
			}
			return r.Resolve(ctx, q, 0, -1, features.Of(extra...))
		}
	}
	editJob := func(name, raw, kind string) func() (*resolve.Job, error) {
		return func() (*resolve.Job, error) {
			ej, err := solo.Edits().EditJob(ctx, name, raw, kind)
			if err != nil {
				return nil, err
			}
			return ej.Job, nil
		}
	}
	scheduleEdit := func(name string) func() (*resolve.Job, error) {
		return func() (*resolve.Job, error) { return nil, solo.Edits().CheckScheduleEdit(ctx, name) }
	}
	for _, tc := range []struct {
		name string
		call func() (*resolve.Job, error)
		// refused is the pair whose cell refuses the job; else err is
		// the error it is answered, or has and lacks what the resolved
		// job's features hold and do not.
		refused   [2]features.Feature
		err       error
		has, lack []features.Feature
	}{
		{name: "a pair of parameters, whatever the dataset", call: resolveRaw(solo, "dataset=nope&seq=16&balance=bytes&world=2"), refused: [2]features.Feature{features.Tokens, features.BalanceB}},
		{name: "an edit's feature with the request's, whatever the dataset", call: resolveRaw(solo, "dataset=nope&seq=16&job=j", features.Exclusion), refused: [2]features.Feature{features.Tokens, features.Exclusion}},
		{name: "an edit's job names its kind", call: editJob("run", "mix=a:1,b:1", chain.Append), refused: [2]features.Feature{features.Mix, features.Append}},
		{name: "nothing refused: the dataset is looked up", call: resolveRaw(solo, "dataset=nope"), err: catalog.ErrUnknown},
		{name: "in place is known once the dataset is read", call: resolveRaw(solo, "dataset=g&balance=bytes&world=2"), refused: [2]features.Feature{features.InPlace, features.BalanceB}},
		{name: "in place, of a dataset not there", call: resolveRaw(solo, "dataset=nope&balance=bytes&world=2"), err: catalog.ErrUnknown},
		{name: "the same request over tar chunks", call: resolveRaw(solo, "dataset=a&balance=bytes&world=2"), has: []features.Feature{features.BalanceB}, lack: []features.Feature{features.InPlace}},
		{name: "in place, resolved", call: resolveRaw(solo, "dataset=g"), has: []features.Feature{features.InPlace, features.Dataset}, lack: []features.Feature{features.Cluster}},
		{name: "a cluster is known once the membership is", call: resolveRaw(clustered, "dataset=g"), has: []features.Feature{features.Cluster, features.InPlace}},
		{name: "a plan's feature on a cluster", call: resolveRaw(clustered, "dataset=a", features.Resize), has: []features.Feature{features.Cluster, features.Resize}},
		{name: "a chain is known once it is read", call: resolveRaw(solo, "mix=a:1,b:1&job=run&batch_size=2"), refused: [2]features.Feature{features.Mix, features.Exclusion}},
		{name: "a chain over its dataset", call: resolveRaw(solo, "dataset=a&job=run&batch_size=2"), has: []features.Feature{features.Exclusion}, lack: []features.Feature{features.Append}},
		{name: "the job's name over a dataset it keeps no chain over", call: resolveRaw(solo, "dataset=b&job=run&batch_size=2"), lack: []features.Feature{features.Exclusion}},
		{name: "the same mixture unnamed", call: resolveRaw(solo, "mix=a:1,b:1&batch_size=2"), has: []features.Feature{features.Mix}, lack: []features.Feature{features.Exclusion}},
		{name: "a stored schedule with a chain over a component", call: resolveRaw(solo, "job=both&schedule=latest&batch_size=2"), refused: [2]features.Feature{features.Schedule, features.Exclusion}},
		{name: "a stored schedule", call: resolveRaw(solo, "job=mixed&schedule=latest&batch_size=2"), has: []features.Feature{features.Schedule}, lack: []features.Feature{features.Dataset}},
		{name: "an exclusion of a job that keeps a schedule", call: editJob("mixed", "dataset=a&batch_size=2", chain.Exclude), refused: [2]features.Feature{features.Schedule, features.Exclusion}},
		{name: "a schedule's edit of a job that keeps a chain", call: scheduleEdit("run"), refused: [2]features.Feature{features.Schedule, features.Exclusion}},
		{name: "a schedule's edit of a job that keeps none", call: scheduleEdit("mixed")},
		{name: "an edit's job, resolved", call: editJob("next", "dataset=a&batch_size=2", chain.Exclude), has: []features.Feature{features.Exclusion, features.Dataset}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			j, err := tc.call()
			if tc.refused != [2]features.Feature{} {
				cell := features.Lookup(tc.refused[0], tc.refused[1])
				if cell.Verdict != features.Refuse {
					t.Skipf("the table no longer refuses %s with %s", tc.refused[0], tc.refused[1])
				}
				if !features.IsRefusal(err) || !strings.HasSuffix(err.Error(), cell.Message) {
					t.Fatalf("%v; want the table's refusal %q", err, cell.Message)
				}
				return
			}
			if !errors.Is(err, tc.err) || tc.err != nil && err == nil {
				t.Fatalf("%v; want %v", err, tc.err)
			}
			if j == nil {
				return
			}
			for _, f := range tc.has {
				if !j.Features.Has(f) || !j.Source.Features.Has(f) {
					t.Errorf("the job resolved lacks %s: %v", f, j.Features.List())
				}
			}
			for _, f := range tc.lack {
				if j.Features.Has(f) {
					t.Errorf("the job resolved has %s: %v", f, j.Features.List())
				}
			}
		})
	}
}
