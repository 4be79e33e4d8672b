package plans_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"github.com/brandgw/brand/api"
	"github.com/brandgw/brand/chunkindex"
	gcluster "github.com/brandgw/brand/cluster"
	"github.com/brandgw/brand/internal/batch/units"
	"github.com/brandgw/brand/internal/cluster/membership"
	"github.com/brandgw/brand/internal/job/catalog"
	"github.com/brandgw/brand/internal/job/plans"
	"github.com/brandgw/brand/internal/job/query"
	"github.com/brandgw/brand/internal/job/resolve"
	"github.com/brandgw/brand/planner"
	"github.com/brandgw/brand/s3backend"
	"github.com/brandgw/brand/shuffle"
	"github.com/brandgw/brand/transform"
)

// indexOf is an index of chunks chunks of perChunk samples each, named
// with prefix, their sizes varying (1 to 3 KiB a sample, in tar blocks) as packed
// samples' do. A plan reads only the index.
func indexOf(t *testing.T, prefix string, chunks, perChunk int) *chunkindex.Index {
	t.Helper()
	var cs []chunkindex.Chunk
	var ss []chunkindex.Sample
	id := 0
	for c := range chunks {
		var off int64
		for range perChunk {
			n := int64(512 * (2 + (id*37)%5))
			ss = append(ss, chunkindex.Sample{Key: fmt.Sprintf("%ss%05d", prefix, id), Chunk: c, Offset: off, Length: n})
			off += n
			id++
		}
		cs = append(cs, chunkindex.Chunk{Key: fmt.Sprintf("%schunks/%06d.tar", prefix, c), Size: off, ETag: fmt.Sprint(prefix, c), Samples: perChunk})
	}
	ix, err := chunkindex.New(cs, ss)
	if err != nil {
		t.Fatal(err)
	}
	return ix
}

// noPipelines names none.
type noPipelines struct{}

func (noPipelines) Get(name string) (*transform.Pipeline, error) {
	return nil, fmt.Errorf("%w: no pipelines here", query.ErrBadRequest)
}

// resolverOf resolves jobs over cat as a single gateway does: the version
// a job pins, else the one served; no pipeline, no stored schedule.
func resolverOf(cat *catalog.Catalog, limits query.Limits) *resolve.Resolver {
	return resolve.New(resolve.Config{Catalog: cat, Versions: membership.Solo{Held: cat.HeldIDs}, Orders: units.Orders(nil), Pipelines: noPipelines{}, Limits: limits})
}

// testDefaults are a plan's defaults in these tests: dataset "test", seed
// 42, window 2, batch size 8, world 1, a cache of 64 MiB.
var testParams = shuffle.Params{Seed: 42, Window: 2, BatchSize: 8, World: 1}

// newMaker plans over the datasets ds (the first the default) with
// planner.ForGateway, as a single gateway with testParams's defaults
// does; mutate changes its configuration first.
func newMaker(t *testing.T, ds []*catalog.Dataset, mutate func(*plans.Config)) *plans.Maker {
	t.Helper()
	names := make([]string, len(ds))
	for i, d := range ds {
		names[i] = d.Name
	}
	cat := catalog.New(names, names[0], catalog.NewMetrics(prometheus.NewRegistry()), zerolog.Nop())
	for _, d := range ds {
		cat.Add(d)
	}
	cat.MarkReady()
	var limits query.Limits
	limits.Fill()
	cfg := plans.Config{Planner: planner.ForGateway{}, Jobs: resolverOf(cat, limits), Limits: limits,
		Defaults: query.Query{Job: api.Job{Dataset: names[0], Params: testParams}},
		Options:  api.PlanOptions{CacheBytes: 64 << 20, BackendBytesPerSec: 1 << 30, PrefetchWindows: 1}}
	if mutate != nil {
		mutate(&cfg)
	}
	return plans.New(cfg)
}

// tarDataset is a dataset named name over ix, its chunks read whole.
func tarDataset(name string, ix *chunkindex.Index) *catalog.Dataset {
	return catalog.NewDataset(name, "file:///"+name, nil, ix)
}

// loaded is the dataset in st as the gateway loads it (a dataset served
// in place with its decoder).
func loaded(t *testing.T, st s3backend.Store, spec catalog.Spec) *catalog.Dataset {
	t.Helper()
	spec.Name, spec.URL, spec.Store = "test", "file:///test", st
	d, err := catalog.Load(context.Background(), spec, s3backend.Config{}, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// twoNodes is a membership of two nodes other than the planned ones.
func twoNodes(t *testing.T) *gcluster.Membership {
	t.Helper()
	ms, err := gcluster.NewMembership([]string{"http://a.test:8080", "http://b.test:8080"})
	if err != nil {
		t.Fatal(err)
	}
	return ms
}
