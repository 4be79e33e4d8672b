package resolve

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"github.com/brandgw/brand/api"
	"github.com/brandgw/brand/internal/batch/layout"
	"github.com/brandgw/brand/internal/cluster/membership"
	"github.com/brandgw/brand/internal/job/catalog"
	"github.com/brandgw/brand/internal/job/chain"
	"github.com/brandgw/brand/internal/job/query"
	"github.com/brandgw/brand/internal/job/spec"
	"github.com/brandgw/brand/internal/testsupport/catalogtest"
	"github.com/brandgw/brand/s3backend"
	"github.com/brandgw/brand/shuffle"
	"github.com/brandgw/brand/transform"
)

type noPipelines struct{}

func (noPipelines) Get(name string) (*transform.Pipeline, error) {
	return nil, fmt.Errorf("%w: no pipeline %s here", query.ErrBadRequest, name)
}

// resolver resolves jobs over datasets "a" (the default) and "b", each of
// 4 chunks of 5 samples on a store of its own, as a single gateway does.
func resolver(t *testing.T) *Resolver {
	t.Helper()
	cat := catalog.New([]string{"a", "b"}, "a", catalog.NewMetrics(prometheus.NewRegistry()), zerolog.Nop())
	for _, name := range []string{"a", "b"} {
		st, err := s3backend.NewLocal(t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		cat.Add(catalog.NewDataset(name, "file:///"+name, st, catalogtest.Dataset(t, name, 4, 5).Index))
	}
	cat.MarkReady()
	var limits query.Limits
	limits.Fill()
	return New(Config{Catalog: cat, Versions: membership.Solo{Held: cat.HeldIDs}, Orders: layout.New(nil), Pipelines: noPipelines{}, Limits: limits,
		Defaults: query.Query{Job: api.Job{Dataset: "a", Params: shuffle.Params{Seed: 1, BatchSize: 4, Window: 2, World: 1}}}})
}

func parse(t *testing.T, r *Resolver, raw string) query.Query {
	t.Helper()
	q, err := query.Parse(raw, query.JobParams, r.Defaults(), r.Limits())
	if err != nil {
		t.Fatalf("%s: %v", raw, err)
	}
	return q
}

// A job's stored edits are its features: a job with an exclusion over
// dataset a, read as a mixture of a and b under its name, is refused with
// the table's message, never resolved without its exclusion; read over a
// it is resolved under its chain.
func TestResolveAChainReadAsAMixture(t *testing.T) {
	ctx := context.Background()
	r := resolver(t)
	ej, err := r.Edits().EditJob(ctx, "run", "dataset=a&batch_size=2&world=1", chain.Exclude)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, _, err := r.Edits().Make(ctx, ej, NewEdit{Kind: chain.Exclude, FromStep: 3, Keys: []string{"a/1/2"}}); err != nil {
		t.Fatal(err)
	}
	_, err = r.Resolve(ctx, parse(t, r, "mix=a:1,b:1&job=run&batch_size=2"), 0, -1, 0)
	want := spec.Lookup(spec.Mix, spec.Exclusion).Message
	if !errors.Is(err, spec.ErrIncompatible) || !strings.HasSuffix(err.Error(), want) {
		t.Fatalf("a job with an exclusion read as a mixture: %v; want the table's %q", err, want)
	}
	j, err := r.Resolve(ctx, parse(t, r, "dataset=a&job=run&batch_size=2"), 0, -1, 0)
	if err != nil {
		t.Fatal(err)
	}
	if j.Source.Edit == nil || j.Query.Job.Edit != j.Source.Edit.Version || !j.Features.Has(spec.Exclusion) {
		t.Fatalf("the job over its dataset: %+v, features %v", j.Source.Edit, j.Features.List())
	}
	if _, err := r.Resolve(ctx, parse(t, r, "dataset=b&job=run&batch_size=2"), 0, -1, 0); err != nil {
		t.Fatalf("the job's name over another dataset, which keeps no chain of it: %v", err)
	}
}

// The table answers what a request names before what it reads is looked
// for: a pair it refuses is its refusal, whatever the dataset (here one
// that does not exist); an edit's own feature is checked beside the
// request's.
func TestResolveRefusesBeforeReading(t *testing.T) {
	ctx := context.Background()
	r := resolver(t)
	_, err := r.Resolve(ctx, parse(t, r, "dataset=nope&seq=16&job=j"), 0, -1, spec.Of(spec.Exclusion))
	if want := spec.Lookup(spec.Tokens, spec.Exclusion).Message; !errors.Is(err, spec.ErrIncompatible) || !strings.HasSuffix(err.Error(), want) {
		t.Fatalf("%v; want the table's %q", err, want)
	}
	if _, err := r.Edits().EditJob(ctx, "run", "mix=a:1,b:1", chain.Append); !errors.Is(err, spec.ErrIncompatible) {
		t.Fatalf("an append of a mixture: %v", err)
	}
	if _, err := r.Resolve(ctx, parse(t, r, "dataset=nope"), 0, -1, 0); !errors.Is(err, catalog.ErrUnknown) {
		t.Fatalf("a dataset that does not exist: %v", err)
	}
}
