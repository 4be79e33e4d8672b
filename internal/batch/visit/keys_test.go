package visit_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"github.com/brandgw/brand/api"
	"github.com/brandgw/brand/internal/batch/layout"
	"github.com/brandgw/brand/internal/batch/tensorize"
	"github.com/brandgw/brand/internal/batch/units"
	"github.com/brandgw/brand/internal/batch/visit"
	"github.com/brandgw/brand/internal/job/catalog"
	"github.com/brandgw/brand/internal/job/features"
	"github.com/brandgw/brand/internal/job/livestats"
	"github.com/brandgw/brand/internal/server/stopper"
	"github.com/brandgw/brand/internal/testsupport/catalogtest"
	"github.com/brandgw/brand/shuffle"
	"github.com/brandgw/brand/transform"
)

// keyStage is copyStage recording the key each sample is transformed
// under, by dataset and name, in the order asked.
type keyStage struct {
	copyStage
	mu   sync.Mutex
	keys []sampleKey
}

type sampleKey struct {
	dataset, name string
	key           transform.Key
}

func (s *keyStage) Apply(ctx context.Context, req tensorize.Request) (*tensorize.Output, error) {
	s.mu.Lock()
	for _, smp := range req.Samples {
		s.keys = append(s.keys, sampleKey{smp.Dataset, smp.Name, smp.Key})
	}
	s.mu.Unlock()
	return s.copyStage.Apply(ctx, req)
}

func (s *keyStage) take() []sampleKey {
	s.mu.Lock()
	defer s.mu.Unlock()
	k := s.keys
	s.keys = nil
	return k
}

// keyedBatches is Batches with a stage that records keys (no premade
// batches), reading the datasets' batches through orders.
func keyedBatches(t *testing.T) (*visit.Batches, *keyStage, *layout.Orders) {
	t.Helper()
	set, err := transform.NewSet(transform.Config{Pipelines: map[string]transform.Spec{"plain": {}}}, transform.Options{})
	if err != nil {
		t.Fatal(err)
	}
	stage := &keyStage{copyStage: copyStage{set}}
	orders := units.Orders(nil)
	l := &log{}
	part := stopper.New().Group("premade")
	t.Cleanup(part.Stop)
	v := visit.New(visit.Config{UseTable: &fakeUseTable{log: l}, Prefetch: fakePrefetch{l}, Windows: 1, Orders: orders, Peers: fakePeers{log: l, nodes: 1},
		Reader: bytesReader{fakeReader{log: l}}, Stats: livestats.New(prometheus.NewRegistry(), 1<<20, nil, nil, zerolog.Nop()),
		Stage: stage, Group: part})
	return v, stage, orders
}

// readEpoch reads every batch of an epoch of src for every rank of job's
// world and returns the keys the stage was asked for.
func readEpoch(t *testing.T, v *visit.Batches, stage *keyStage, orders *layout.Orders, src layout.Source, job api.Job, epoch uint64) []sampleKey {
	t.Helper()
	batches, _, err := orders.Extent(src, job, epoch)
	if err != nil {
		t.Fatal(err)
	}
	for m := range uint64(batches) {
		for r := range job.World {
			j := job
			j.Rank = r
			b, err := orders.Layout(context.Background(), src, j, epoch, m)
			if err != nil {
				t.Fatal(err)
			}
			s, err := v.Read(context.Background(), b)
			if err != nil {
				t.Fatal(err)
			}
			s.Release()
		}
	}
	return stage.take()
}

// idOf is the ID of catalogtest.Dataset's sample name/c/i.
func idOf(t *testing.T, name string) uint64 {
	var ds string
	var c, i uint64
	if _, err := fmt.Sscanf(name, "%1s/%d/%d", &ds, &c, &i); err != nil {
		t.Fatalf("sample name %q: %v", name, err)
	}
	return 4*c + i
}

// TestTransformKeys: each sample is transformed under its own key —
// transform.SampleKey of the job's seed, its dataset, its epoch and its
// ID — whoever reads it: world 1 and world 4, and a resume from an offset
// at another batch size, ask for the same key of every sample.
func TestTransformKeys(t *testing.T) {
	v, stage, orders := keyedBatches(t)
	src := layout.Source{DS: catalogtest.Dataset(t, "a", 4, 4)} // 16 samples
	job := func(batch, world, offset int) api.Job {
		return api.Job{Params: shuffle.Params{Seed: 11, Window: 2, BatchSize: batch, World: world, Offset: offset}, Transform: "plain"}
	}
	all := map[string]transform.Key{}
	for _, k := range readEpoch(t, v, stage, orders, src, job(4, 1, 0), 3) {
		if want := transform.SampleKey(11, "a", 3, idOf(t, k.name)); k.dataset != "a" || k.key != want {
			t.Errorf("%s of %s: key %+v, want %+v", k.name, k.dataset, k.key, want)
		}
		all[k.name] = k.key
	}
	if len(all) != 16 {
		t.Fatalf("world 1: %d samples", len(all))
	}
	for _, tc := range []struct {
		name string
		job  api.Job
		n    int
	}{{"world 4", job(1, 4, 0), 16}, {"offset 5, batch 3", job(3, 1, 5), 11}} {
		got := readEpoch(t, v, stage, orders, src, tc.job, 3)
		for _, k := range got {
			if k.key != all[k.name] {
				t.Errorf("%s: %s's key %+v differs from world 1's %+v", tc.name, k.name, k.key, all[k.name])
			}
		}
		if len(got) != tc.n {
			t.Errorf("%s: %d samples, want %d", tc.name, len(got), tc.n)
		}
	}
}

// TestMixtureTransformKeys: in a mixture each sample is keyed by its own
// dataset and its component's pass: two datasets holding samples of the
// same IDs draw apart, and a component that repeats within an epoch
// draws afresh on each pass.
func TestMixtureTransformKeys(t *testing.T) {
	v, stage, orders := keyedBatches(t)
	a, b := catalogtest.Dataset(t, "a", 4, 4), catalogtest.Dataset(t, "b", 4, 4) // 16 samples each
	mix, err := api.ParseMix("a:3,b:1")
	if err != nil {
		t.Fatal(err)
	}
	job := api.Job{Params: shuffle.Params{Seed: 4, Window: 2, BatchSize: 64, World: 1}, Transform: "plain", Mix: mix, MixSamples: 64}
	m, err := orders.Compose(orders.UnitOf(features.Requested(job)), []*catalog.Dataset{a, b}, job)
	if err != nil {
		t.Fatal(err)
	}
	// 64 samples an epoch: a's 16 three times over (passes 0, 1, 2), b's once.
	keys := readEpoch(t, v, stage, orders, layout.Source{Unit: m}, job, 0)
	if len(keys) != 64 {
		t.Fatalf("%d samples", len(keys))
	}
	passes := map[string][]int{} // a's name → its keys' passes
	for _, k := range keys {
		id := idOf(t, k.name)
		if k.dataset == "b" {
			if k.key != transform.SampleKey(4, "b", 0, id) || k.key == transform.SampleKey(4, "a", 0, id) {
				t.Errorf("b's %s: key %+v, not b's own of pass 0", k.name, k.key)
			}
			continue
		}
		for pass := range uint64(4) {
			if k.key == transform.SampleKey(4, "a", pass, id) {
				passes[k.name] = append(passes[k.name], int(pass))
			}
		}
	}
	for name, ps := range passes {
		slices.Sort(ps)
		if !slices.Equal(ps, []int{0, 1, 2}) {
			t.Errorf("a's %s was keyed with passes %v, want one key of each of passes 0, 1, 2", name, ps)
		}
	}
	if len(passes) != 16 {
		t.Errorf("%d of a's samples keyed by their own dataset", len(passes))
	}
}
