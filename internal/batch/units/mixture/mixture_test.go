package mixture_test

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/brandgw/brand/internal/batch/units/unitstest"

	"github.com/brandgw/brand/internal/batch/layout"
	"github.com/brandgw/brand/internal/batch/units"
	umix "github.com/brandgw/brand/internal/batch/units/mixture"

	"github.com/brandgw/brand/api"
	"github.com/brandgw/brand/cluster"
	"github.com/brandgw/brand/internal/job/catalog"
	"github.com/brandgw/brand/internal/testsupport/catalogtest"
	"github.com/brandgw/brand/shuffle"
)

// mixSets are three datasets of 300, 120 and 20 samples, the smallest
// smaller than its share of a mixture epoch.
var mixSets = []struct {
	name             string
	chunks, perChunk int
}{{"web", 12, 25}, {"code", 6, 20}, {"books", 2, 10}}

const testMix = "web:0.5,code:0.3,books:0.2"

// mixDatasets are mixSets's datasets.
func mixDatasets(t *testing.T) []*catalog.Dataset {
	t.Helper()
	ds := make([]*catalog.Dataset, len(mixSets))
	for i, s := range mixSets {
		ds[i] = catalogtest.Dataset(t, s.name, s.chunks, s.perChunk)
	}
	return ds
}

// mixJob is the job of the query string raw (mix= or mix_schedule=
// among its parameters), defaults batch 8, window 2, seed 5, as the
// gateway parses it, and the source it reads over ds.
func mixJob(t *testing.T, o *layout.Orders, ds []*catalog.Dataset, raw string) (api.Job, layout.Source) {
	t.Helper()
	job := unitstest.ParseJob(t, raw, 8)
	byName := map[string]*catalog.Dataset{}
	for _, d := range ds {
		byName[d.Name] = d
	}
	comps := make([]*catalog.Dataset, len(job.Mix))
	for i, c := range job.Mix {
		comps[i] = byName[c.Dataset]
	}
	m, err := unitstest.Mixture(o, job.Mix, comps, job)
	if err != nil {
		t.Fatalf("%s: %v", raw, err)
	}
	return job, layout.Source{Unit: m}
}

// mixSample is a served sample of a mixture: its component and key.
type mixSample struct {
	comp int
	key  string
}

// layGlobal lays out global batch b of epoch (every rank's batch, in
// rank order).
func layGlobal(t *testing.T, o *layout.Orders, src layout.Source, job api.Job, epoch, b uint64) []mixSample {
	t.Helper()
	var out []mixSample
	for r := range max(job.World, 1) {
		j := job
		j.Rank = r
		bt, err := o.Layout(context.Background(), src, j, epoch, b)
		if err != nil {
			t.Fatalf("epoch %d batch %d rank %d: %v", epoch, b, r, err)
		}
		comps := bt.Components()
		for i := range bt.Len() {
			ds, _, in := bt.Sample(i)
			if ds != unitstest.Mixed(src).DS[comps[i]] || !strings.HasPrefix(in.Key, ds.Name+"/") {
				t.Fatalf("sample %s tagged as component %d (%s)", in.Key, comps[i], unitstest.Mixed(src).DS[comps[i]].Name)
			}
			out = append(out, mixSample{comps[i], in.Key})
		}
	}
	return out
}

// epochBatches lays out every global batch of epochs [0, epochs).
func epochBatches(t *testing.T, o *layout.Orders, src layout.Source, job api.Job, epochs int) [][]mixSample {
	t.Helper()
	var out [][]mixSample
	for e := range uint64(epochs) {
		info, err := o.Info(src, job, e)
		if err != nil {
			t.Fatal(err)
		}
		for b := range uint64(info.Batches) {
			out = append(out, layGlobal(t, o, src, job, e, b))
		}
	}
	return out
}

// passesOnce checks that each component's samples, in stream order, come
// once a pass (sizes[i] samples), and a whole pass holds every sample.
func passesOnce(t *testing.T, streams [][]string, sizes []int) {
	t.Helper()
	for i, keys := range streams {
		for p := 0; p < len(keys); p += sizes[i] {
			pass := keys[p:min(p+sizes[i], len(keys))]
			seen := map[string]int{}
			for _, k := range pass {
				seen[k]++
			}
			for k, n := range seen {
				if n != 1 {
					t.Fatalf("%s pass %d: %s served %d times", mixSets[i].name, p/sizes[i], k, n)
				}
			}
			if len(pass) == sizes[i] && len(seen) != sizes[i] {
				t.Fatalf("%s pass %d: %d distinct of %d", mixSets[i].name, p/sizes[i], len(seen), sizes[i])
			}
		}
	}
}

// TestMixtureContract is the mixture's contract with three datasets of
// 300, 120 and 20 samples at weights 0.5, 0.3, 0.2, batch 8 × world 4
// (K = 32, an epoch of 448): every global batch holds each component
// within one sample of its weight, the cumulative counts stay within one
// of the weights at every batch boundary, each component's samples appear
// exactly once per pass (books, 20 samples for a share of ~90, repeats 4½
// times an epoch; web continues into the next epoch), and the epoch's
// description tells the components apart and where each starts.
func TestMixtureContract(t *testing.T) {
	o := units.Orders(nil)
	job, src := mixJob(t, o, mixDatasets(t), "mix="+testMix+"&world=4")
	weights := []float64{0.5, 0.3, 0.2}
	sizes := []int{300, 120, 20}
	const B, world = 8, 4
	e0, err := o.Info(src, job, 0)
	if err != nil {
		t.Fatal(err)
	}
	if e0.Samples != 448 || e0.Batches != 14 || e0.Mix == nil || e0.Mix.Block != 32 || len(e0.Mix.Components) != 3 {
		t.Fatalf("epoch info %+v", e0)
	}
	sum := 0
	for i, c := range e0.Mix.Components {
		sum += c.EpochSamples
		if c.Dataset != mixSets[i].name || c.Samples != sizes[i] || c.FirstPass != 0 || c.FirstIndex != 0 {
			t.Fatalf("component %d: %+v", i, c)
		}
	}
	if sum != 448 {
		t.Fatalf("components' epoch samples sum to %d", sum)
	}
	streams := make([][]string, 3) // each component's keys, in stream order
	cum := make([]int, 3)
	pos := 0
	for epoch := range uint64(2) {
		for b := range uint64(14) {
			got := layGlobal(t, o, src, job, epoch, b)
			if len(got) != B*world {
				t.Fatalf("epoch %d batch %d: %d samples", epoch, b, len(got))
			}
			count := make([]int, 3)
			for _, s := range got {
				count[s.comp]++
				streams[s.comp] = append(streams[s.comp], s.key)
			}
			pos += B * world
			for i, w := range weights {
				cum[i] += count[i]
				if d := float64(count[i]) - w*B*world; d <= -1 || d >= 1 {
					t.Fatalf("epoch %d global batch %d holds %d of %s; want within one of %.1f", epoch, b, count[i], mixSets[i].name, w*B*world)
				}
				// Blocks restart each epoch: cumulative within the epoch.
				inEpoch := pos - int(epoch)*448
				if d := float64(cum[i]-int(epoch)*e0.Mix.Components[i].EpochSamples) - w*float64(inEpoch); d <= -1 || d >= 1 {
					t.Fatalf("after epoch %d batch %d: %d of %s; want within one of %.2f", epoch, b, cum[i], mixSets[i].name, w*float64(inEpoch))
				}
			}
		}
	}
	passesOnce(t, streams, sizes)
	if n := len(streams[2]); n < 4*20 {
		t.Fatalf("books served %d samples over two epochs; want its ~180", n)
	}
	// Epoch 1 starts where epoch 0 left each component.
	e1, err := o.Info(src, job, 1)
	if err != nil {
		t.Fatal(err)
	}
	for i, c := range e1.Mix.Components {
		q := e0.Mix.Components[i].EpochSamples
		if c.FirstPass != uint64(q/sizes[i]) || c.FirstIndex != q%sizes[i] {
			t.Fatalf("epoch 1 component %d starts at %+v; want pass %d index %d", i, c, q/sizes[i], q%sizes[i])
		}
	}
	if _, err := o.Layout(context.Background(), src, job, 0, 14); err == nil {
		t.Error("a batch past the epoch's end was laid out")
	}
}

// TestMixtureResumeAtAnotherWorldSize: a mixture read at world 4 for 5
// batches resumes with offset=160 and the same mix_block at world 3, 8
// and 1, and the whole epoch is the uninterrupted sequence, sample for
// sample; without the block the job started with, the order is another.
func TestMixtureResumeAtAnotherWorldSize(t *testing.T) {
	o := units.Orders(nil)
	ds := mixDatasets(t)
	read := func(q string, batches int) []mixSample {
		job, src := mixJob(t, o, ds, "mix="+testMix+"&"+q)
		if batches < 0 {
			info, err := o.Info(src, job, 3)
			if err != nil {
				t.Fatal(err)
			}
			batches = info.Batches
		}
		var out []mixSample
		for b := range uint64(batches) {
			out = append(out, layGlobal(t, o, src, job, 3, b)...)
		}
		return out
	}
	whole := read("mix_block=32&world=4", 14)
	if len(whole) != 448 {
		t.Fatalf("the epoch has %d samples", len(whole))
	}
	head := read("mix_block=32&world=4", 5)
	for _, world := range []int{3, 8, 1} {
		t.Run(fmt.Sprintf("world 4 to %d", world), func(t *testing.T) {
			got := append(append([]mixSample(nil), head...), read(fmt.Sprintf("mix_block=32&offset=160&world=%d", world), -1)...)
			if fmt.Sprint(got) != fmt.Sprint(whole) {
				t.Fatalf("resumed at world %d: %d samples differ from the uninterrupted epoch's %d", world, len(got), len(whole))
			}
		})
	}
	if other := read("world=3", 1); fmt.Sprint(other) == fmt.Sprint(whole[:24]) {
		t.Fatal("mix_block did not change the order")
	}
}

// testSchedule changes the mixture at step 5 (within epoch 0: 14 steps an
// epoch with batch 8 × world 4) and ramps to web alone over steps [20,
// 30), across the boundary of epochs 1 and 2.
const testSchedule = "0:web:0.5,code:0.3,books:0.2;5:web:0.2,code:0.2,books:0.6;20~30:web:1,code:0,books:0"

// TestScheduleContract: a schedule holds, in every global batch (one
// step), the counts the schedule gives its step; each component's samples
// over three epochs, across two phase changes and a ramp, are whole
// passes, each sample once a pass; an epoch's description tells where
// each stream starts: where the epoch before left it.
func TestScheduleContract(t *testing.T) {
	o := units.Orders(nil)
	job, src := mixJob(t, o, mixDatasets(t), "mix_schedule="+strings.ReplaceAll(testSchedule, ";", "%3B")+"&world=4")
	steps := epochBatches(t, o, src, job, 3)
	if len(steps) != 42 {
		t.Fatalf("%d global batches, want 42", len(steps))
	}
	s, err := api.ParseSchedule(testSchedule)
	if err != nil {
		t.Fatal(err)
	}
	phases, _ := s.Phases()
	sizes := []int{300, 120, 20}
	sched, err := shuffle.NewSchedule(phases, []shuffle.Passes{shuffle.EqualPasses(300), shuffle.EqualPasses(120), shuffle.EqualPasses(20)}, 32, 0)
	if err != nil {
		t.Fatal(err)
	}
	streams := make([][]string, 3)
	for st, samples := range steps {
		mo, err := sched.Epoch(uint64(st / 14))
		if err != nil {
			t.Fatal(err)
		}
		want := mo.BlockCounts(st % 14)
		got := make([]int, 3)
		for _, x := range samples {
			got[x.comp]++
			streams[x.comp] = append(streams[x.comp], x.key)
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("step %d: counts %v, the schedule's %v", st, got, want)
		}
		if st >= 30 && (got[1] != 0 || got[2] != 0) {
			t.Errorf("step %d, after the ramp to web alone: %v", st, got)
		}
	}
	passesOnce(t, streams, sizes)
	info, err := o.Info(src, job, 1)
	if err != nil || info.Mix == nil {
		t.Fatalf("epoch info: %+v %v", info, err)
	}
	e0, _ := sched.Epoch(0)
	for i, c := range info.Mix.Components {
		at := uint64(e0.EpochSamples(i))
		if c.FirstPass*uint64(sizes[i])+uint64(c.FirstIndex) != at {
			t.Errorf("epoch 1 starts %s at pass %d index %d, want stream position %d", c.Dataset, c.FirstPass, c.FirstIndex, at)
		}
	}
}

// A schedule of one phase lays its mixture's batches out, sample for
// sample; the ETag names the schedule, so two schedules that agree on a
// batch still name it apart, and apart from the mixture of their first
// phase.
func TestScheduleOfOnePhaseIsItsMixture(t *testing.T) {
	o := units.Orders(nil)
	ds := mixDatasets(t)
	mixJ, mixSrc := mixJob(t, o, ds, "mix="+testMix+"&world=2")
	oneJ, oneSrc := mixJob(t, o, ds, "mix_schedule=0:"+testMix+"&world=2")
	for _, e := range []uint64{0, 2} {
		for b := range uint64(7) {
			if a, s := layGlobal(t, o, mixSrc, mixJ, e, b), layGlobal(t, o, oneSrc, oneJ, e, b); fmt.Sprint(a) != fmt.Sprint(s) {
				t.Fatalf("epoch %d batch %d: the one-phase schedule lays out other samples than mix=", e, b)
			}
		}
	}
	etag := func(q string) string {
		job, src := mixJob(t, o, ds, q+"&world=4")
		bt, err := o.Layout(context.Background(), src, job, 0, 0)
		if err != nil {
			t.Fatal(err)
		}
		return bt.ETag
	}
	a := etag("mix_schedule=" + strings.ReplaceAll(testSchedule, ";", "%3B"))
	other := strings.Replace(testSchedule, "20~30", "21~30", 1) // agrees on step 0
	if b := etag("mix_schedule=" + strings.ReplaceAll(other, ";", "%3B")); a == b || a == "" {
		t.Fatalf("two schedules share the ETag %q", a)
	}
	if b := etag("mix=" + testMix); a == b {
		t.Fatalf("a schedule and its first phase's mixture share the ETag %q", a)
	}
}

// A job whose stored schedule was edited twice mid-run (v1 to step 6, v2
// with a ramp to step 18, v3 from there: the schedules a job's versions
// hold, as internal/job/jobsched chains them), resumed after the second edit
// at world 2 with the same mixing block (offset= its position), reads
// exactly what a job of the final schedule reads uninterrupted at world
// 4, each component's samples once a pass: the steps before each edit
// are the same under the versions before and after it.
func TestScheduleResumeAfterTwoEdits(t *testing.T) {
	o := units.Orders(nil)
	ds := mixDatasets(t)
	const v1 = "0:web:0.5,code:0.3,books:0.2"
	const v2 = v1 + ";6:web:0.6,code:0.3,books:0.1;20~30:web:1,code:0,books:0"
	const v3 = v1 + ";6:web:0.6,code:0.3,books:0.1;18:web:0.2,code:0.7,books:0.1"
	run := func(sched, extra string, epoch uint64, from, to int) []mixSample {
		t.Helper()
		job, src := mixJob(t, o, ds, "mix_schedule="+strings.ReplaceAll(sched, ";", "%3B")+extra)
		var out []mixSample
		for b := from; b < to; b++ {
			out = append(out, layGlobal(t, o, src, job, epoch, uint64(b))...)
		}
		return out
	}
	const world4 = "&world=4" // K = 32: 14 steps an epoch
	edited := run(v1, world4, 0, 0, 6)
	edited = append(edited, run(v2, world4, 0, 6, 14)...)
	edited = append(edited, run(v2, world4, 1, 0, 4)...)
	edited = append(edited, run(v3, "&world=2&mix_block=32&offset=128", 1, 0, 20)...)
	edited = append(edited, run(v3, "&world=2&mix_block=32", 2, 0, 28)...)
	var whole []mixSample
	for e := range uint64(3) {
		whole = append(whole, run(v3, world4, e, 0, 14)...)
	}
	if fmt.Sprint(edited) != fmt.Sprint(whole) {
		t.Fatalf("the edited, resumed run laid out %d samples, not the %d of the final schedule's run", len(edited), len(whole))
	}
	if fmt.Sprint(run(v1, world4, 0, 6, 7)) == fmt.Sprint(run(v3, world4, 0, 6, 7)) {
		t.Fatal("step 6 is the same under v1 and v3: the test checks nothing")
	}
	streams := make([][]string, 3)
	for _, s := range edited {
		streams[s.comp] = append(streams[s.comp], s.key)
	}
	passesOnce(t, streams, []int{300, 120, 20})
}

// TestMixtureLocality: on a cluster of three, a mixture's global batches
// (and a schedule's) are assigned to six ranks by locality: over an
// epoch, each rank takes at most 35 % of its samples from chunks another
// node owns than its home (windows of 6 chunks split 3, 2 and 2 by
// weight: a component of two chunks cannot be on all three nodes, so
// some must cross), against at least half (about two thirds) with
// locality=false; either way every global step holds the same samples.
// Which node reads a chunk and which serves a rank are the gateway's and
// the cluster's (integration's TestMixtureClusterOnMinIO).
func TestMixtureLocality(t *testing.T) {
	o := units.Orders(nil)
	ds := mixDatasets(t)
	ms, err := cluster.NewMembership([]string{"http://10.0.0.1:7700", "http://10.0.0.2:7700", "http://10.0.0.3:7700"})
	if err != nil {
		t.Fatal(err)
	}
	const world = 6
	for _, mix := range []string{"mix=" + testMix, "mix_schedule=" + url.QueryEscape("0:"+testMix+";4:web:0.2,code:0.2,books:0.6")} {
		steps := map[bool][]string{} // locality → each step's samples, sorted
		for _, locality := range []bool{true, false} {
			job, src := mixJob(t, o, ds, fmt.Sprintf("%s&window=6&world=%d&locality=%t", mix, world, locality))
			src.Members = ms
			info, err := o.Info(src, job, 0)
			if err != nil {
				t.Fatal(err)
			}
			cross, all := 0, 0
			for b := range uint64(info.Batches) {
				var step []string
				for r := range world {
					j := job
					j.Rank = r
					bt, err := o.Layout(context.Background(), src, j, 0, b)
					if err != nil {
						t.Fatal(err)
					}
					for i := range bt.Len() {
						d, id, in := bt.Sample(i)
						if d.Owners(ms)[d.Index.Sample(id).Chunk] != cluster.Home(r, world, ms.Len()) {
							cross++
						}
						all++
						step = append(step, in.Key)
					}
				}
				slices.Sort(step)
				steps[locality] = append(steps[locality], strings.Join(step, ","))
			}
			share := float64(cross) / float64(all)
			t.Logf("%s, locality=%t: %.1f%% of %d samples from another node's chunks", mix, locality, 100*share, all)
			if locality && share > 0.35 || !locality && share < 0.5 {
				t.Errorf("%s, locality=%t: %.1f%% of the samples cross nodes", mix, locality, 100*share)
			}
		}
		if !slices.Equal(steps[true], steps[false]) {
			t.Errorf("%s: locality changed which samples a step holds", mix)
		}
	}
}

// The security review's mixture request: a mixing block and an epoch of
// 2^24 samples. Each batch of it once shuffled a block of 2^24 slots:
// 0.6–1.7 CPU-seconds and 140–540 MB a request, 3.3 GB for 24 at once.
// A mixture's epoch is now read a span at a time, each span built once
// for every request that asks at once and kept, so 24 such batches laid
// out at once allocate about one span, under MaxMixSpanBytes. A mixture
// whose rounding rule would take more than shuffle's bound to build is
// refused (shuffle.ErrInvalid, a 400) naming the bound: weights 1:1.100001 repeat
// their rounding only every 2,100,001 blocks.
func TestMixtureRequestsBounded(t *testing.T) {
	o := units.Orders(nil)
	ds := mixDatasets(t)
	job, src := mixJob(t, o, ds, "mix=web:1,code:1&mix_block=16777216&mix_samples=16777216")
	const requests = 24
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	var wg sync.WaitGroup
	errs := make([]error, requests)
	for i := range requests {
		wg.Go(func() { _, errs[i] = o.Layout(context.Background(), src, job, 0, 0) })
	}
	wg.Wait()
	runtime.ReadMemStats(&after)
	for i, err := range errs {
		if err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
	}
	allocated := after.TotalAlloc - before.TotalAlloc
	t.Logf("%d layouts allocated %d MiB in all", requests, allocated>>20)
	if allocated > umix.MaxMixSpanBytes {
		t.Errorf("%d concurrent layouts allocated %d MiB; bound %d MiB", requests, allocated>>20, umix.MaxMixSpanBytes>>20)
	}
	past := unitstest.ParseJob(t, "mix=web:1,code:1.100001&mix_block=1&mix_samples=4194304", 8)
	if _, err := unitstest.Mixture(o, past.Mix, ds[:2], past); !errors.Is(err, shuffle.ErrInvalid) || !strings.Contains(err.Error(), strconv.Itoa(shuffle.MaxMixWork)) {
		t.Errorf("a mixture past shuffle.MaxMixWork: %v; want a bad request naming %d", err, shuffle.MaxMixWork)
	}
}
