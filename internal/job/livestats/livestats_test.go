package livestats

import (
	"context"
	"fmt"
	"iter"
	"maps"
	"math"
	"slices"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"github.com/brandgw/brand/api"
	"github.com/brandgw/brand/internal/batch/layout"
	"github.com/brandgw/brand/internal/cache/evict"
	"github.com/brandgw/brand/internal/job/catalog"
	"github.com/brandgw/brand/internal/testsupport/catalogtest"
)

// fourChunks is a dataset of 4 chunks of 4 samples; chunk c is (c+1) ×
// 4 KiB.
func fourChunks(t *testing.T, name string) *catalog.Dataset {
	return catalogtest.Sized(t, name, []int64{4096, 2 * 4096, 3 * 4096, 4 * 4096}, 4)
}

// series returns the value of every series of metric name whose labels
// include want.
func series(t *testing.T, reg *prometheus.Registry, name string, want map[string]string) []float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var out []float64
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			match := true
			for k, v := range want {
				match = match && labels[k] == v
			}
			if !match {
				continue
			}
			switch {
			case m.GetGauge() != nil:
				out = append(out, m.GetGauge().GetValue())
			case m.GetCounter() != nil:
				out = append(out, m.GetCounter().GetValue())
			}
		}
	}
	return out
}

// event is a batch served (Batch) or a chunk read ahead (Prefetched).
type event struct {
	served *Served
	// A prefetch of chunk for epoch, from the disk tier if disk.
	prefetch bool
	epoch    uint64
	chunk    int
	bytes    int64
	disk     bool
}

func batch(epoch uint64, samples int, chunks []int, loads int, loaded, disk int64, wait time.Duration) event {
	return event{served: &Served{Epoch: epoch, EpochSamples: 16, Samples: samples, Chunks: chunks, Loads: loads, LoadedBytes: loaded, DiskBytes: disk, StoreBytes: loaded - disk, Wait: wait}}
}

// withGETs is e whose loads from the store sent n requests.
func withGETs(e event, n int64) event {
	e.served.StoreGETs = n
	return e
}

func prefetched(epoch uint64, chunk int, bytes int64, disk bool) event {
	return event{prefetch: true, epoch: epoch, chunk: chunk, bytes: bytes, disk: disk}
}

// TestFiguresOfServedBatches: what a hand-made sequence of batches and
// prefetches cost each epoch and the job, in /stats and in the metrics.
// The dataset has 16 samples in 4 chunks of 1, 2, 3 and 4 k.
func TestFiguresOfServedBatches(t *testing.T) {
	const k = 4096 // chunk c is (c+1)k
	ms := time.Millisecond
	tests := []struct {
		name   string
		events []event
		epochs []api.EpochStat // Dataset, Index, Seed, Window filled in
		job    api.JobStat
	}{
		{
			name: "two halves of an epoch: complete",
			events: []event{
				batch(0, 8, []int{0, 1}, 2, 3*k, 0, 10*ms),  // chunks 0 and 1 from the store
				batch(0, 8, []int{1, 2}, 1, 3*k, 3*k, 5*ms), // 1 a hit, 2 from the disk tier
			},
			epochs: []api.EpochStat{{Epoch: 0, Accesses: 4, Loads: 3, BackendBytes: 3 * k, DiskBytes: 3 * k, HitRatio: 0.25, Complete: true}},
			job:    api.JobStat{Batches: 2, Samples: 16, Accesses: 4, Loads: 3, BackendBytes: 3 * k, DiskBytes: 3 * k, HitRatio: 0.25, WaitSeconds: 0.015},
		},
		{
			name:   "half an epoch: not complete",
			events: []event{batch(0, 8, []int{0, 1}, 0, 0, 0, 0)},
			epochs: []api.EpochStat{{Epoch: 0, Accesses: 2, Loads: 0, HitRatio: 1}},
			job:    api.JobStat{Batches: 1, Samples: 8, Accesses: 2, HitRatio: 1},
		},
		{
			name: "a prefetched chunk is a load of the epoch that first uses it, once",
			events: []event{
				prefetched(0, 3, 4*k, false),
				batch(0, 4, []int{3, 0}, 1, 1*k, 0, 0), // 3 was read ahead; 0 loaded now
				batch(0, 4, []int{3}, 0, 0, 0, 0),
			},
			epochs: []api.EpochStat{{Epoch: 0, Accesses: 3, Loads: 2, BackendBytes: 5 * k, HitRatio: 1 - 2.0/3}},
			job:    api.JobStat{Batches: 2, Samples: 8, Accesses: 3, Loads: 2, BackendBytes: 5 * k, HitRatio: 1 - 2.0/3},
		},
		{
			name: "a prefetch from the disk tier",
			events: []event{
				prefetched(0, 3, 4*k, true),
				batch(0, 4, []int{3}, 0, 0, 0, 0),
			},
			epochs: []api.EpochStat{{Epoch: 0, Accesses: 1, Loads: 1, DiskBytes: 4 * k, HitRatio: 0}},
			job:    api.JobStat{Batches: 1, Samples: 4, Accesses: 1, Loads: 1, DiskBytes: 4 * k, HitRatio: 0},
		},
		{
			name:   "the store's requests, as the bill counts them",
			events: []event{withGETs(batch(0, 8, []int{0, 1}, 2, 3*k, 0, 0), 5), withGETs(batch(1, 8, []int{2}, 1, 3*k, 0, 0), 2)},
			epochs: []api.EpochStat{
				{Epoch: 0, Accesses: 2, Loads: 2, BackendBytes: 3 * k, StoreGETs: 5, HitRatio: 0},
				{Epoch: 1, Accesses: 1, Loads: 1, BackendBytes: 3 * k, StoreGETs: 2, HitRatio: 0},
			},
			job: api.JobStat{Batches: 2, Samples: 16, Accesses: 3, Loads: 3, BackendBytes: 6 * k, StoreGETs: 7, HitRatio: 0},
		},
		{
			name:   "never more loads than accesses",
			events: []event{batch(0, 4, []int{2}, 3, 3*k, 0, 0)},
			epochs: []api.EpochStat{{Epoch: 0, Accesses: 1, Loads: 1, BackendBytes: 3 * k, HitRatio: 0}},
			job:    api.JobStat{Batches: 1, Samples: 4, Accesses: 1, Loads: 1, BackendBytes: 3 * k, HitRatio: 0},
		},
		{
			name: "interleaved epochs, each its own",
			events: []event{
				batch(1, 8, []int{0}, 1, 1*k, 0, 0),
				batch(0, 8, []int{1}, 1, 2*k, 0, 0),
				batch(1, 8, []int{0, 2}, 1, 3*k, 0, 0),
			},
			epochs: []api.EpochStat{
				{Epoch: 0, Accesses: 1, Loads: 1, BackendBytes: 2 * k, HitRatio: 0},
				{Epoch: 1, Accesses: 3, Loads: 2, BackendBytes: 4 * k, HitRatio: 1 - 2.0/3, Complete: true},
			},
			job: api.JobStat{Batches: 3, Samples: 24, Accesses: 4, Loads: 3, BackendBytes: 6 * k, HitRatio: 0.25},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			reg := prometheus.NewRegistry()
			s := New(reg, 1<<20, nil, nil, zerolog.Nop())
			defer s.Close()
			ds := fourChunks(t, "d")
			js := layout.Stream{DS: ds, Seed: 1, Window: 2, Name: "j"}
			for _, e := range tt.events {
				if e.prefetch {
					s.Prefetched(js, e.epoch, e.chunk, e.bytes, e.disk)
					continue
				}
				b := *e.served
				b.Stream = js
				s.Batch(b)
			}
			for i := range tt.epochs {
				tt.epochs[i].Dataset, tt.epochs[i].Index, tt.epochs[i].Seed, tt.epochs[i].Window, tt.epochs[i].Job = "d", ds.ID(), 1, 2, "j"
			}
			if got := s.Snapshot(); !slices.EqualFunc(got, tt.epochs, sameEpoch) {
				t.Errorf("epochs\n%+v\nwant\n%+v", got, tt.epochs)
			}
			tt.job.Dataset, tt.job.Index, tt.job.Seed, tt.job.Window, tt.job.Job = "d", ds.ID(), 1, 2, "j"
			if got := s.Jobs(); len(got) != 1 || !sameJob(got[0], tt.job) {
				t.Errorf("jobs %+v, want %+v", got, tt.job)
			}
			// The metrics say the same.
			for _, e := range tt.epochs {
				l := map[string]string{"job": "j", "epoch": fmt.Sprint(e.Epoch)}
				if got := series(t, reg, "brand_epoch_backend_bytes", l); len(got) != 1 || got[0] != float64(e.BackendBytes) {
					t.Errorf("epoch %d: brand_epoch_backend_bytes %v, want %d", e.Epoch, got, e.BackendBytes)
				}
				l["policy"] = "live"
				if got := series(t, reg, "brand_epoch_hit_ratio", l); len(got) != 1 || !near(got[0], e.HitRatio) {
					t.Errorf("epoch %d: brand_epoch_hit_ratio{policy=live} %v, want %v", e.Epoch, got, e.HitRatio)
				}
			}
			j := map[string]string{"job": "j"}
			for name, want := range map[string]float64{
				"brand_job_backend_bytes_total": float64(tt.job.BackendBytes),
				"brand_job_store_gets_total":    float64(tt.job.StoreGETs),
				"brand_job_batches_total":       float64(tt.job.Batches),
				"brand_job_wait_seconds_total":  tt.job.WaitSeconds,
			} {
				if got := series(t, reg, name, j); len(got) != 1 || !near(got[0], want) {
					t.Errorf("%s %v, want %v", name, got, want)
				}
			}
		})
	}
}

func near(a, b float64) bool { return math.Abs(a-b) < 1e-9 }

// sameEpoch compares two epochs' figures, their ratios to a rounding.
func sameEpoch(a, b api.EpochStat) bool {
	if (a.Optimal == nil) != (b.Optimal == nil) || a.Optimal != nil && !near(*a.Optimal, *b.Optimal) || !near(a.HitRatio, b.HitRatio) {
		return false
	}
	a.HitRatio, b.HitRatio, a.Optimal, b.Optimal = 0, 0, nil, nil
	return a == b
}

// sameJob compares two jobs' figures, their ratios and seconds to a
// rounding.
func sameJob(a, b api.JobStat) bool {
	if !near(a.HitRatio, b.HitRatio) || !near(a.WaitSeconds, b.WaitSeconds) {
		return false
	}
	a.HitRatio, b.HitRatio, a.WaitSeconds, b.WaitSeconds = 0, 0, 0, 0
	return a == b
}

// traced is one batch of the trace an Optimizer is given.
type traced struct {
	je     evict.JobEpoch
	chunks []int32
}

// fakeOptimizer hands every trace it is given to calls and answers ratios.
type fakeOptimizer struct {
	ratios map[evict.JobEpoch]float64
	calls  chan optimizerCall
}

type optimizerCall struct {
	sizes    []int64
	capacity int64
	trace    []traced
}

func (f *fakeOptimizer) OptimalHitRatios(_ context.Context, sizes []int64, capacity int64, batches iter.Seq2[evict.JobEpoch, []int32]) (map[evict.JobEpoch]float64, error) {
	c := optimizerCall{sizes: slices.Clone(sizes), capacity: capacity}
	for je, chunks := range batches {
		c.trace = append(c.trace, traced{je, slices.Clone(chunks)})
	}
	f.calls <- c
	return maps.Clone(f.ratios), nil
}

// TestOptimumOfCompleteEpochs: once an epoch is complete, the optimizer
// is given the demand of every job merged as it arrived — each batch's
// job and epoch, its chunks numbered densely across dataset versions in
// first-use order, their sizes, the cache's capacity — and its answer is
// published for the complete epochs only.
func TestOptimumOfCompleteEpochs(t *testing.T) {
	const k = 4096 // chunk c is (c+1)k
	reg := prometheus.NewRegistry()
	opt := &fakeOptimizer{calls: make(chan optimizerCall)}
	s := New(reg, 5*k, opt, nil, zerolog.Nop())
	d, e := fourChunks(t, "d"), fourChunks(t, "e")
	a := layout.Stream{DS: d, Seed: 1, Window: 2}
	b := layout.Stream{DS: d, Seed: 2, Window: 2}
	c := layout.Stream{DS: e, Seed: 1, Window: 2}
	// Job IDs are given in order of first batch: a 1, b 2, c 3.
	opt.ratios = map[evict.JobEpoch]float64{{Job: 1, Epoch: 0}: 0.5, {Job: 2, Epoch: 0}: 0.9, {Job: 3, Epoch: 0}: 0.25}
	s.Batch(Served{Stream: a, Epoch: 0, EpochSamples: 16, Samples: 8, Chunks: []int{2, 0}, Loads: 2})
	s.Batch(Served{Stream: b, Epoch: 0, EpochSamples: 16, Samples: 8, Chunks: []int{1}, Loads: 1})
	s.Batch(Served{Stream: c, Epoch: 0, EpochSamples: 4, Samples: 4, Chunks: []int{0}, Loads: 1}) // complete
	call := <-opt.calls
	s.Batch(Served{Stream: a, Epoch: 0, EpochSamples: 16, Samples: 8, Chunks: []int{0, 3}, Loads: 1}) // complete
	call2 := <-opt.calls
	s.Close() // waits for the second computation to be published

	// d's chunks 2, 0, 1 are 0, 1, 2; e's chunk 0 (another dataset) is 3.
	want := optimizerCall{sizes: []int64{3 * k, 1 * k, 2 * k, 1 * k}, capacity: 5 * k, trace: []traced{
		{evict.JobEpoch{Job: 1, Epoch: 0}, []int32{0, 1}},
		{evict.JobEpoch{Job: 2, Epoch: 0}, []int32{2}},
		{evict.JobEpoch{Job: 3, Epoch: 0}, []int32{3}},
	}}
	if !sameCall(call, want) {
		t.Errorf("first optimizer call %+v, want %+v", call, want)
	}
	want.sizes = append(want.sizes, 4*k) // d's chunk 3
	want.trace = append(want.trace, traced{evict.JobEpoch{Job: 1, Epoch: 0}, []int32{1, 4}})
	if !sameCall(call2, want) {
		t.Errorf("second optimizer call %+v, want %+v", call2, want)
	}
	optimal := map[uint64]float64{} // by seed, of dataset d
	for _, st := range s.Snapshot() {
		switch {
		case st.Dataset == "e" && (st.Optimal == nil || *st.Optimal != 0.25):
			t.Errorf("e's complete epoch: optimum %v, want 0.25", st.Optimal)
		case st.Dataset == "d" && st.Optimal != nil:
			optimal[st.Seed] = *st.Optimal
		}
	}
	if want := map[uint64]float64{1: 0.5}; !maps.Equal(optimal, want) {
		t.Errorf("optima of d's epochs by seed %v, want %v (b's epoch is not complete)", optimal, want)
	}
	if got := series(t, reg, "brand_epoch_hit_ratio", map[string]string{"dataset": "d", "seed": "1", "policy": "optimal"}); len(got) != 1 || got[0] != 0.5 {
		t.Errorf("brand_epoch_hit_ratio{policy=optimal} of a's epoch %v, want 0.5", got)
	}
	if got := series(t, reg, "brand_epoch_hit_ratio", map[string]string{"dataset": "d", "seed": "2", "policy": "optimal"}); len(got) != 0 {
		t.Errorf("an incomplete epoch has an optimal hit ratio %v", got)
	}
}

func sameCall(a, b optimizerCall) bool {
	return slices.Equal(a.sizes, b.sizes) && a.capacity == b.capacity &&
		slices.EqualFunc(a.trace, b.trace, func(x, y traced) bool { return x.je == y.je && slices.Equal(x.chunks, y.chunks) })
}

// TestTraceBounded: the demand trace keeps at most statsTrace chunk
// accesses, dropping its older half; an epoch that lost batches to that,
// and the first epoch left of a job that lost its start (whose cache state
// before it is unknown), get no optimum; a later epoch does.
func TestTraceBounded(t *testing.T) {
	reg := prometheus.NewRegistry()
	s := New(reg, 1<<20, nil, nil, zerolog.Nop()) // no goroutine: the optimum is computed below
	opt := &fakeOptimizer{calls: make(chan optimizerCall, 1), ratios: map[evict.JobEpoch]float64{}}
	s.optimum = opt
	defer s.Close()
	js := layout.Stream{DS: fourChunks(t, "d"), Seed: 1, Window: 2}
	const per = statsTrace / 16 // accesses per batch: 16 batches fill the trace
	chunks := make([]int, per)
	for i := range chunks {
		chunks[i] = i % 4
	}
	// Epoch 0 in 8 batches, epoch 1 in 10, epoch 2 in 2: the 17th batch
	// (epoch 1's 9th) drops the oldest 8, all of epoch 0.
	for e, n := range []int{8, 10, 2} {
		for range n {
			s.Batch(Served{Stream: js, Epoch: uint64(e), EpochSamples: n, Samples: 1, Chunks: chunks})
			if s.traced > statsTrace {
				t.Fatalf("the trace holds %d accesses, more than %d", s.traced, statsTrace)
			}
		}
		opt.ratios[evict.JobEpoch{Job: 1, Epoch: uint64(e)}] = 0.1 * float64(e+1)
	}
	if len(s.trace) != 12 {
		t.Fatalf("the trace holds %d batches, want 12 (20 less the 8 dropped)", len(s.trace))
	}
	s.computeOptimum(slices.Clone(s.trace))
	<-opt.calls
	got := map[uint64]bool{}
	for _, st := range s.Snapshot() {
		if !st.Complete {
			t.Errorf("epoch %d not complete", st.Epoch)
		}
		got[st.Epoch] = st.Optimal != nil
	}
	// Epoch 0 lost its batches; epoch 1, the first left, lacks the cache
	// state epoch 0 left it.
	if want := map[uint64]bool{0: false, 1: false, 2: true}; !maps.Equal(got, want) {
		t.Errorf("epochs with an optimum %v, want %v", got, want)
	}
}

// TestBoundedJobsAndEpochs: figures are kept for the statsJobs streams
// served most recently and, per stream, the statsEpochs highest epochs;
// the others are dropped with their metric series. A batch of an epoch
// older than those kept still counts in its job's totals.
func TestBoundedJobsAndEpochs(t *testing.T) {
	reg := prometheus.NewRegistry()
	s := New(reg, 1<<20, nil, nil, zerolog.Nop())
	defer s.Close()
	ds := fourChunks(t, "d")
	stream := func(seed uint64) layout.Stream { return layout.Stream{DS: ds, Seed: seed, Window: 2} }
	serve := func(js layout.Stream, epoch uint64) {
		s.Batch(Served{Stream: js, Epoch: epoch, EpochSamples: 16, Samples: 1, Chunks: []int{0}, Loads: 1, LoadedBytes: 1024, StoreBytes: 1024})
	}
	at := time.Unix(1000, 0)
	s.clock = func() time.Time { return at }
	for seed := range uint64(statsJobs) {
		serve(stream(seed+1), 0)
	}
	serve(stream(99), 0) // one more than kept, while every job kept was served within statsJobIdle: not kept
	at = at.Add(statsJobIdle)
	serve(stream(1), 0)  // seed 1 served again: seed 2 is now the least recent, idle for statsJobIdle
	serve(stream(99), 0) // takes seed 2's place
	var seeds []uint64
	for _, j := range s.Jobs() {
		seeds = append(seeds, j.Seed)
	}
	want := []uint64{1}
	for seed := uint64(3); seed <= statsJobs; seed++ {
		want = append(want, seed)
	}
	want = append(want, 99)
	if !slices.Equal(seeds, want) {
		t.Errorf("jobs kept %v, want %v", seeds, want)
	}
	if got := series(t, reg, "brand_job_batches_total", map[string]string{"seed": "99"}); len(got) != 1 || got[0] != 1 {
		t.Errorf("the job that took a place counts %v batches in its series, want [1]: its batch while not kept counts in no job's", got)
	}
	for _, name := range []string{"brand_job_batches_total", "brand_epoch_backend_bytes"} {
		if got := series(t, reg, name, nil); len(got) != statsJobs {
			t.Errorf("%d series of %s, want %d", len(got), name, statsJobs)
		}
	}
	if got := series(t, reg, "brand_job_batches_total", map[string]string{"seed": "2"}); len(got) != 0 {
		t.Errorf("the dropped job's series is still exported: %v", got)
	}

	one := stream(1)
	for e := range uint64(statsEpochs + 4) {
		serve(one, e)
	}
	serve(one, 2) // older than the epochs kept
	var epochs []uint64
	for _, st := range s.Snapshot() {
		if st.Seed == 1 {
			epochs = append(epochs, st.Epoch)
		}
	}
	var wantEpochs []uint64
	for e := uint64(4); e < statsEpochs+4; e++ {
		wantEpochs = append(wantEpochs, e)
	}
	if !slices.Equal(epochs, wantEpochs) {
		t.Errorf("epochs kept %v, want %v", epochs, wantEpochs)
	}
	if got := series(t, reg, "brand_epoch_backend_bytes", map[string]string{"seed": "1"}); len(got) != statsEpochs {
		t.Errorf("%d epoch series of the stream, want %d", len(got), statsEpochs)
	}
	for _, j := range s.Jobs() {
		if j.Seed == 1 && j.Batches != 2+statsEpochs+4+1 {
			t.Errorf("stream of seed 1 counts %d batches, want %d", j.Batches, 2+statsEpochs+4+1)
		}
	}
}

// TestSharedSeriesSurviveEviction: a mixture's component and the plain
// job of the same dataset, seed, window and name are two streams with one
// set of labels. When the plain one is dropped, its series go; the
// component's figures are exported again under the same labels from its
// next batch on, not written to series no longer registered.
func TestSharedSeriesSurviveEviction(t *testing.T) {
	reg := prometheus.NewRegistry()
	s := New(reg, 1<<20, nil, nil, zerolog.Nop())
	defer s.Close()
	ds := fourChunks(t, "d")
	plain := layout.Stream{DS: ds, Seed: 1, Window: 2, Name: "j"}
	comp := plain
	comp.Mix = "m"
	serve := func(js layout.Stream) {
		s.Batch(Served{Stream: js, Epoch: 0, EpochSamples: 16, Samples: 1, Chunks: []int{0}, Loads: 1, LoadedBytes: 1024, StoreBytes: 1024})
	}
	at := time.Unix(1000, 0)
	s.clock = func() time.Time { return at }
	serve(plain)
	at = at.Add(statsJobIdle)
	serve(comp)
	for seed := range uint64(statsJobs - 1) {
		serve(layout.Stream{DS: ds, Seed: 100 + seed, Window: 2})
	}
	// plain, served longest ago and statsJobIdle before the others, was dropped with the labels' series.
	serve(comp)
	l := map[string]string{"seed": "1", "job": "j"}
	if got := series(t, reg, "brand_job_batches_total", l); len(got) != 1 || got[0] != 1 {
		t.Errorf("the component's brand_job_batches_total %v after the plain job was dropped, want [1]", got)
	}
	l["epoch"] = "0"
	if got := series(t, reg, "brand_epoch_backend_bytes", l); len(got) != 1 || got[0] != 2048 {
		t.Errorf("the component's brand_epoch_backend_bytes %v, want [2048]", got)
	}
}

// TestManyJobsKeepTheirPlaces: more jobs served at once than statsJobs
// (1,024 jobs of their own on one gateway, each a batch in turn) leave
// the jobs kept in their places: the others' batches count in no job's
// figures, and no series is dropped or made for them. Each batch dropped
// one job's figures and series and made another's before: a sixth of the
// gateway's CPU, and series that lived a batch.
func TestManyJobsKeepTheirPlaces(t *testing.T) {
	reg := prometheus.NewRegistry()
	s := New(reg, 1<<20, nil, nil, zerolog.Nop())
	defer s.Close()
	at := time.Unix(1000, 0)
	s.clock = func() time.Time { return at }
	ds := fourChunks(t, "d")
	const jobs = 200
	for round := range 3 {
		for seed := range uint64(jobs) {
			s.Batch(Served{Stream: layout.Stream{DS: ds, Seed: seed + 1, Window: 2}, Epoch: 0, EpochSamples: 16, Samples: 1, Chunks: []int{0}, Loads: 1, LoadedBytes: 1024, StoreBytes: 1024})
			at = at.Add(time.Millisecond) // 200 jobs a round: none idle for statsJobIdle
		}
		var seeds []uint64
		for _, j := range s.Jobs() {
			seeds = append(seeds, j.Seed)
			if j.Batches != int64(round+1) {
				t.Errorf("round %d: job of seed %d counts %d batches, want %d", round, j.Seed, j.Batches, round+1)
			}
		}
		slices.Sort(seeds)
		if len(seeds) != statsJobs || seeds[0] != 1 || seeds[len(seeds)-1] != statsJobs {
			t.Fatalf("round %d: jobs kept %v, want the first %d served", round, seeds, statsJobs)
		}
	}
	if got := series(t, reg, "brand_job_batches_total", nil); len(got) != statsJobs {
		t.Errorf("%d series of brand_job_batches_total, want %d", len(got), statsJobs)
	}
	// The trace names the jobs kept and one ID for all the others, so
	// that the optimum takes it (the planner's bound is 65,536 jobs).
	s.mu.Lock()
	ids := map[int]bool{}
	for _, b := range s.trace {
		ids[b.job] = true
	}
	s.mu.Unlock()
	if len(ids) != statsJobs+1 {
		t.Errorf("the trace names %d jobs, want the %d kept and one for the others", len(ids), statsJobs)
	}
}
