package visit_test

import (
	"bytes"
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"github.com/brandgw/brand/api"
	"github.com/brandgw/brand/internal/batch/layout"
	"github.com/brandgw/brand/internal/batch/tensorize"
	"github.com/brandgw/brand/internal/batch/units"
	"github.com/brandgw/brand/internal/batch/visit"
	"github.com/brandgw/brand/internal/job/livestats"
	"github.com/brandgw/brand/internal/server/stopper"
	"github.com/brandgw/brand/internal/testsupport/catalogtest"
	"github.com/brandgw/brand/shuffle"
	"github.com/brandgw/brand/transform"
)

// countingStage is copyStage counting the images it transforms: one a
// sample.
type countingStage struct {
	copyStage
	images atomic.Int64
}

func (s *countingStage) Apply(ctx context.Context, req tensorize.Request) (*tensorize.Output, error) {
	out, err := s.copyStage.Apply(ctx, req)
	if err == nil {
		out.Images = len(req.Samples)
		s.images.Add(int64(out.Images))
	}
	return out, err
}

// premadeBatches is Batches of a single gateway with a transform stage
// and room for premade batches, reading a dataset of 16 samples in
// batches of 4 under the pipeline "plain".
func premadeBatches(t *testing.T) (*visit.Batches, *countingStage, func(m uint64) *layout.Batch) {
	t.Helper()
	set, err := transform.NewSet(transform.Config{Pipelines: map[string]transform.Spec{"plain": {}}}, transform.Options{})
	if err != nil {
		t.Fatal(err)
	}
	stage := &countingStage{copyStage: copyStage{set}}
	orders := units.Orders(nil)
	l := &log{}
	part := stopper.New().Group("premade")
	t.Cleanup(part.Stop)
	v := visit.New(visit.Config{UseTable: &fakeUseTable{log: l}, Prefetch: fakePrefetch{l}, Windows: 1, Orders: orders, Peers: fakePeers{log: l, nodes: 1},
		Reader: bytesReader{fakeReader{log: l}}, Stats: livestats.New(prometheus.NewRegistry(), 1<<20, nil, nil, zerolog.Nop()),
		Stage: stage, Group: part, PremadeBytes: 1 << 20})
	job := api.Job{Params: shuffle.Params{Seed: 5, BatchSize: 4, Window: 2, World: 1}, Transform: "plain"}
	src := layout.Source{DS: catalogtest.Dataset(t, "a", 4, 4)}
	batchOf := func(m uint64) *layout.Batch {
		b, err := orders.Layout(context.Background(), src, job, 0, m)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	return v, stage, batchOf
}

// read reads batch b as its request does, and releases it.
func read(t *testing.T, v *visit.Batches, b *layout.Batch) {
	t.Helper()
	s, err := v.Read(context.Background(), b)
	if err != nil {
		t.Fatal(err)
	}
	if s.Batch.Len() != 4 {
		t.Fatalf("batch %d: %d samples", b.Batch, s.Batch.Len())
	}
	s.Release()
}

// bodyOf reads batch b as its request does and returns its bytes.
func bodyOf(t *testing.T, v *visit.Batches, b *layout.Batch) []byte {
	t.Helper()
	s, err := v.Read(context.Background(), b)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Release()
	var out []byte
	for _, p := range s.Parts {
		out = append(out, p...)
	}
	if len(out) == 0 {
		t.Fatalf("batch %d: no bytes", b.Batch)
	}
	return out
}

// waitPremade waits until a premade batch's bytes are held.
func waitPremade(t *testing.T, v *visit.Batches) {
	t.Helper()
	for deadline := time.Now().Add(20 * time.Second); v.PremadeStats().Bytes == 0; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("no batch premade: %+v", v.PremadeStats())
		}
	}
}

// TestPremade: once a rank's batch is served, its next batch is
// transformed in the background, and the rank's next request takes it
// (a hit, no image transformed twice), with the bytes the batch has when
// it is not premade (read first by another Batches).
func TestPremade(t *testing.T) {
	v, stage, batchOf := premadeBatches(t)
	read(t, v, batchOf(0))
	waitPremade(t, v)
	if st := v.PremadeStats(); st.Started != 1 {
		t.Fatalf("premade: %+v, want batch 1 started", st)
	}
	if n := stage.images.Load(); n != 8 {
		t.Fatalf("%d images transformed for batches 0 and 1 ahead, want 8", n)
	}
	premade := bodyOf(t, v, batchOf(1))
	if st := v.PremadeStats(); st.Hits != 1 {
		t.Errorf("premade: %+v, want the next request's hit", st)
	}
	other, _, layout2 := premadeBatches(t)
	if direct := bodyOf(t, other, layout2(1)); !bytes.Equal(premade, direct) || other.PremadeStats().Hits != 0 {
		t.Errorf("batch 1 premade is not batch 1 read on request (%+v)", other.PremadeStats())
	}
	// Batch 2 is being made ahead now: at most its 4 images more.
	if n := stage.images.Load(); n > 12 {
		t.Errorf("%d images transformed: batch 1 was transformed again", n)
	}
}

// TestPremadeAfterItsRequest: a client that reads ahead itself asks for
// a rank's batch 1 before batch 0 is served. Batch 1 is then not premade
// once batch 0 is: every image is transformed once.
func TestPremadeAfterItsRequest(t *testing.T) {
	v, stage, batchOf := premadeBatches(t)
	read(t, v, batchOf(1))
	read(t, v, batchOf(0))
	// Work ahead is claimed within the request that starts it: batch 2,
	// after batch 1's; none after batch 0's, whose next batch was asked for.
	if st := v.PremadeStats(); st.Started != 1 {
		t.Errorf("premade: %+v, want only batch 2 started", st)
	}
	waitPremade(t, v)
	if n := stage.images.Load(); n != 12 {
		t.Errorf("%d images transformed for batches 1, 0 and 2 ahead, want 12", n)
	}
}
