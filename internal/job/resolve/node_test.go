package resolve_test

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"github.com/brandgw/brand/api"
	gcluster "github.com/brandgw/brand/cluster"
	"github.com/brandgw/brand/internal/batch/layout"
	"github.com/brandgw/brand/internal/batch/units"
	"github.com/brandgw/brand/internal/cluster/membership"
	"github.com/brandgw/brand/internal/job/catalog"
	"github.com/brandgw/brand/internal/job/query"
	"github.com/brandgw/brand/internal/job/resolve"
	"github.com/brandgw/brand/internal/testsupport/catalogtest"
	"github.com/brandgw/brand/s3backend"
	"github.com/brandgw/brand/shuffle"
	"github.com/brandgw/brand/transform"
)

// The resolvers of these tests are nodes as a gateway wires them
// (gateway.New): a catalog of datasets on local stores, the index
// versions of a single gateway (membership.Solo) unless a test gives
// others, orders of their own, and no pipeline. Several nodes over the
// same stores are a cluster's members, or a node and the same node
// restarted.

// newNode resolves jobs over the datasets ds, the first the default, as
// one gateway does; mutate changes its configuration first.
func newNode(t *testing.T, mutate func(*resolve.Config), ds ...*catalog.Dataset) (*resolve.Resolver, *catalog.Catalog) {
	t.Helper()
	var names []string
	for _, d := range ds {
		if !slices.Contains(names, d.Name) {
			names = append(names, d.Name)
		}
	}
	cat := catalog.New(names, names[0], catalog.NewMetrics(prometheus.NewRegistry()), zerolog.Nop())
	for _, d := range ds {
		cat.Add(d)
	}
	cat.MarkReady()
	var limits query.Limits
	limits.Fill()
	cfg := resolve.Config{Catalog: cat, Versions: membership.Solo{Held: cat.HeldIDs}, Orders: units.Orders(nil), Pipelines: noPipelines{}, Limits: limits,
		Defaults: query.Query{Job: api.Job{Dataset: names[0], Params: shuffle.Params{Seed: 1, BatchSize: 4, Window: 2, World: 1}}}}
	if mutate != nil {
		mutate(&cfg)
	}
	return resolve.New(cfg), cat
}

type noPipelines struct{}

func (noPipelines) Get(name string) (*transform.Pipeline, error) {
	return nil, fmt.Errorf("%w: no pipeline %s here", query.ErrBadRequest, name)
}

// parse parses raw as a request's query string to r.
func parse(t *testing.T, r *resolve.Resolver, raw string) query.Query {
	t.Helper()
	q, err := query.Parse(raw, query.JobParams, r.Defaults(), r.Limits())
	if err != nil {
		t.Fatalf("%s: %v", raw, err)
	}
	return q
}

// localStore is an empty store in a directory of its own.
func localStore(t *testing.T) s3backend.Store {
	t.Helper()
	st, err := s3backend.NewLocal(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// stored is catalogtest's dataset name of chunks × perChunk samples
// (sample i of chunk c keyed name/c/i) on a store of its own, where a
// named job's edits over it are kept.
func stored(t *testing.T, name string, chunks, perChunk int) *catalog.Dataset {
	t.Helper()
	return catalog.NewDataset(name, "file:///"+name, localStore(t), catalogtest.Dataset(t, name, chunks, perChunk).Index)
}

// cluster is n nodes over the datasets ds, each asking every other
// member when it takes an edit (Config.Others), as the gateway's
// othersOf does over the transport; mutate changes each node's
// configuration first (Node is set to "node K").
func cluster(t *testing.T, n int, mutate func(*resolve.Config), ds ...*catalog.Dataset) []*resolve.Resolver {
	t.Helper()
	nodes := make([]*resolve.Resolver, n)
	for k := range nodes {
		nodes[k], _ = newNode(t, func(c *resolve.Config) {
			c.Node = "node " + strconv.Itoa(k)
			c.Others = func(ctx context.Context, q resolve.Question) ([]resolve.Answer, error) {
				var as []resolve.Answer
				for j, o := range nodes {
					if j == k {
						continue
					}
					a, err := o.Edits().Answer(ctx, q)
					if err != nil {
						return nil, err
					}
					as = append(as, a)
				}
				return as, nil
			}
			if mutate != nil {
				mutate(c)
			}
		}, ds...)
	}
	return nodes
}

// members are index versions as a cluster of several nodes has them:
// a single gateway's, under a membership of its own.
type members struct {
	membership.Solo
	ms *gcluster.Membership
}

func (m members) Members(context.Context, string) (*gcluster.Membership, error) { return m.ms, nil }

// batch lays out batch m of epoch of the job whose query is raw, as a
// request for it is (Resolver.Batch: recorded as served).
func batch(t *testing.T, r *resolve.Resolver, raw string, epoch, m int) *layout.Batch {
	t.Helper()
	b, _, err := r.Batch(context.Background(), raw, strconv.Itoa(epoch), strconv.Itoa(m))
	if err != nil {
		t.Fatalf("%s: epoch %d batch %d: %v", raw, epoch, m, err)
	}
	return b
}

// keys are the keys of the samples b serves, in order.
func keys(b *layout.Batch) []string {
	var ks []string
	for _, p := range b.Parts {
		for _, id := range p.Samples.IDs {
			ks = append(ks, p.Samples.DS.Index.SampleKey(id))
		}
	}
	return ks
}

// read is what a step of a job served: each rank's batch's keys and
// ETag.
type read struct {
	keys  []string
	etags []string
}

// step reads step m of epoch of the job whose query is raw (without
// rank=) at world ranks.
func step(t *testing.T, r *resolve.Resolver, raw string, world, epoch, m int) read {
	t.Helper()
	var s read
	for rank := range world {
		b := batch(t, r, fmt.Sprintf("%s&rank=%d", raw, rank), epoch, m)
		s.keys = append(s.keys, keys(b)...)
		s.etags = append(s.etags, b.ETag)
	}
	return s
}

// epochOf reads every step of epoch from step from on, and counts each
// key served.
func epochOf(t *testing.T, r *resolve.Resolver, raw string, world, epoch, from int) (steps []read, seen map[string]int) {
	t.Helper()
	j, err := r.Epoch(context.Background(), raw, strconv.Itoa(epoch), "")
	if err != nil {
		t.Fatal(err)
	}
	n, _, err := r.Orders().Extent(j.Source, j.Query.Job, j.Epoch)
	if err != nil {
		t.Fatal(err)
	}
	seen = map[string]int{}
	for m := from; m < n; m++ {
		s := step(t, r, raw, world, epoch, m)
		for _, k := range s.keys {
			seen[k]++
		}
		steps = append(steps, s)
	}
	return steps, seen
}
