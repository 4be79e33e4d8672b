package livestats_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"github.com/brandgw/brand/api"
	"github.com/brandgw/brand/internal/batch/layout"
	"github.com/brandgw/brand/internal/batch/units"
	"github.com/brandgw/brand/internal/batch/units/mixture"
	"github.com/brandgw/brand/internal/job/catalog"
	"github.com/brandgw/brand/internal/job/features"
	"github.com/brandgw/brand/internal/job/livestats"
	"github.com/brandgw/brand/shuffle"
)

// mixtureOf is a mixture of n test datasets of equal weights, and a
// job of batches of batch over it.
func mixtureOf(t *testing.T, n, batch int) (*mixture.Mixed, api.Job) {
	t.Helper()
	var ds []*catalog.Dataset
	var names []string
	for i := range n {
		name := fmt.Sprintf("s%03d", i)
		ds = append(ds, livestats.FourChunks(t, name))
		names = append(names, name+":1")
	}
	mix, err := api.ParseMix(strings.Join(names, ","))
	if err != nil {
		t.Fatal(err)
	}
	job := api.Job{Params: shuffle.Params{Seed: 1, Window: 2, BatchSize: batch, World: 1}}
	mj := job
	mj.Mix = mix
	orders := units.Orders(nil)
	mx, err := orders.Compose(orders.UnitOf(features.Requested(mj)), ds, mj)
	if err != nil {
		t.Fatal(err)
	}
	return mx.(*mixture.Mixed), job
}

// mixBatch is batch k of a mixture of n sources: its parts take one
// sample each from components k·parts, k·parts+1, ... in turn, as the
// batches of a mixture of more sources than a batch's samples do.
func mixBatch(mx *mixture.Mixed, job api.Job, k, parts int) (*layout.Batch, livestats.Served) {
	n := len(mx.DS)
	// One long epoch: the figures of a new epoch cost the same whatever
	// the sources.
	b := &layout.Batch{Source: layout.Source{Unit: mx}, Job: job, EpochSamples: 1 << 20, Start: k * parts, End: (k + 1) * parts}
	sv := livestats.Served{Stream: livestats.MixJob(b), Epoch: b.Epoch, EpochSamples: b.EpochSamples, Samples: parts, Mix: mx}
	for p := range parts {
		c := (k*parts + p) % n
		s := mx.Stream(c, job)
		b.Parts = append(b.Parts, layout.Part{Comp: c, Stream: s, Epoch: b.Epoch})
		sv.Parts = append(sv.Parts, livestats.PartServed{Stream: s, Comp: c, Samples: 1, Chunks: []int{k % 4}, Loads: 1, StoreBytes: 4096})
	}
	return b, sv
}

// TestMixtureFiguresCostPerBatchNotPerSource: a mixture is one job,
// whatever its number of components: serving a batch of it costs the
// same allocations over 100 sources as over 2, one set of job series,
// and one entry of the demand trace, which the optimum's computation
// copies and tags. Before, each component stream was a job of its own: a mixture
// of more components than statsJobs replaced a stream's figures and
// series at nearly every part (issue 43's schedule bench: 60 MB of the
// 142 MB a gateway over 100 sources allocated in 200 batches).
func TestMixtureFiguresCostPerBatchNotPerSource(t *testing.T) {
	const parts = 8
	cost := func(n int) (float64, int) {
		mx, job := mixtureOf(t, n, parts)
		reg := prometheus.NewRegistry()
		s := livestats.New(reg, 1<<20, nil, nil, zerolog.Nop())
		defer s.Close()
		k, served := 0, 0
		batch := func() {
			b, sv := mixBatch(mx, job, k, parts)
			k++
			s.Follow(b)
			s.Batch(sv)
			served++
		}
		for range 2 * n { // every component seen
			batch()
		}
		// The batch's own making is the test's: counted apart.
		made := testing.AllocsPerRun(100, func() { mixBatch(mx, job, k, parts); k++ })
		allocs := testing.AllocsPerRun(100, batch) - made
		if traced := len(livestats.Traced(s)); traced != served {
			t.Errorf("%d sources: %d batches served, %d in the demand trace: want one a batch, whatever its parts", n, served, traced)
		}
		return allocs, len(livestats.Series(t, reg, "brand_job_batches_total", nil))
	}
	a2, s2 := cost(2)
	a100, s100 := cost(100)
	t.Logf("allocations a batch of %d parts: %.0f over 2 sources, %.0f over 100; job series %d and %d", parts, a2, a100, s2, s100)
	if s2 != 1 || s100 != 1 {
		t.Errorf("a mixture's batches made %d job series over 2 sources, %d over 100: want one, the mixture's", s2, s100)
	}
	// Each part traces its chunks (an allocation) and counts in the
	// mixture's figures; nothing else may grow with the sources.
	if a100 > a2+4 {
		t.Errorf("%.0f allocations to count a batch of a mixture of 100 sources, %.0f of one of 2", a100, a2)
	}
}

// TestMixtureBatchTracesEachChunkOnce: two parts of a mixture's batch
// that read two passes of one component may share a chunk; the batch's
// demand, from which the optimum is computed, names each chunk once, and
// its accesses are its distinct chunks. The optimum's simulation refused
// a batch naming a chunk twice: it panicked the first time the bench's
// mixture of 100 sources completed an epoch.
func TestMixtureBatchTracesEachChunkOnce(t *testing.T) {
	mx, job := mixtureOf(t, 2, 4)
	s := livestats.New(prometheus.NewRegistry(), 1<<20, nil, nil, zerolog.Nop())
	defer s.Close()
	b := &layout.Batch{Source: layout.Source{Unit: mx}, Job: job, EpochSamples: 32, Start: 0, End: 4}
	sv := livestats.Served{Stream: livestats.MixJob(b), Epoch: 0, EpochSamples: 32, Samples: 4, Mix: mx}
	s0, s1 := mx.Stream(0, job), mx.Stream(1, job)
	for _, p := range []livestats.PartServed{
		{Stream: s0, Comp: 0, Samples: 1, Chunks: []int{3}, Loads: 1},
		{Stream: s1, Comp: 1, Samples: 2, Chunks: []int{3, 0}, Loads: 2},
		{Stream: s0, Comp: 0, Samples: 1, Chunks: []int{3, 1}, Loads: 1}, // the next pass
	} {
		b.Parts = append(b.Parts, layout.Part{Comp: p.Comp, Stream: p.Stream})
		sv.Parts = append(sv.Parts, p)
	}
	s.Follow(b)
	s.Batch(sv)
	if trace := livestats.Traced(s); len(trace) != 1 || len(trace[0]) != 4 {
		t.Fatalf("the trace: %+v, want one batch of 4 chunks (s000's 3 and 1, s001's 3 and 0)", trace)
	}
	if accesses, loads := livestats.EpochCounts(s, livestats.MixJob(b), 0); accesses != 4 || loads != 4 {
		t.Errorf("the epoch's accesses and loads: %d and %d, want 4 and 4", accesses, loads)
	}
}
