package planner

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/brandgw/brand/api"
	"github.com/brandgw/brand/shuffle"
)

func mustSharedPlan(t *testing.T, in SharedInput) *SharedPlan {
	t.Helper()
	p, err := MakeSharedPlan(context.Background(), in)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func sharedJob(seed uint64, window, batch, world, epochs int) SharedJob {
	return SharedJob{Job: Job{Params: shuffle.Params{Seed: seed, Window: window, BatchSize: batch, World: world}, Epochs: epochs}}
}

// datasetBytes is the bytes of d's chunks, and of those with samples: the
// chunks a job reads.
func datasetBytes(d Dataset) (all, read int64) {
	for c, size := range d.ChunkSizes {
		all += size
		if d.Counts[c] > 0 {
			read += size
		}
	}
	return all, read
}

func TestMakeSharedPlanInvalid(t *testing.T) {
	good := SharedInput{
		Dataset:    equalDataset(8, 10, 100),
		Jobs:       []SharedJob{sharedJob(1, 2, 4, 1, 2), sharedJob(2, 2, 4, 1, 2)},
		CacheBytes: 300,
	}
	if _, err := MakeSharedPlan(context.Background(), good); err != nil {
		t.Fatalf("valid input: %v", err)
	}
	tests := []struct {
		name   string
		change func(in *SharedInput)
	}{
		{"no jobs", func(in *SharedInput) { in.Jobs = nil }},
		{"too many jobs", func(in *SharedInput) {
			in.Jobs = nil
			for i := range MaxSharedJobs + 1 {
				in.Jobs = append(in.Jobs, sharedJob(uint64(i), 2, 4, 1, 1))
			}
		}},
		{"negative speed", func(in *SharedInput) { in.Jobs[1].Speed = -1 }},
		{"NaN speed", func(in *SharedInput) { in.Jobs[1].Speed = math.NaN() }},
		{"infinite speed", func(in *SharedInput) { in.Jobs[0].Speed = math.Inf(1) }},
		{"negative start", func(in *SharedInput) { in.Jobs[1].Start = -0.5 }},
		{"NaN start", func(in *SharedInput) { in.Jobs[0].Start = math.NaN() }},
		{"infinite start", func(in *SharedInput) { in.Jobs[1].Start = math.Inf(1) }},
		{"window 0", func(in *SharedInput) { in.Jobs[1].Window = 0 }},
		{"batch size 0", func(in *SharedInput) { in.Jobs[0].BatchSize = 0 }},
		{"world 0", func(in *SharedInput) { in.Jobs[1].World = 0 }},
		{"no epochs", func(in *SharedInput) { in.Jobs[0].Epochs = 0 }},
		{"negative first epoch", func(in *SharedInput) { in.Jobs[1].FirstEpoch = -1 }},
		{"dataset", func(in *SharedInput) { in.Dataset.Counts = in.Dataset.Counts[:3] }},
		{"negative cache", func(in *SharedInput) { in.CacheBytes = -1 }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := good
			in.Dataset = Dataset{ChunkSizes: good.Dataset.ChunkSizes, Counts: good.Dataset.Counts}
			in.Jobs = append([]SharedJob(nil), good.Jobs...)
			tt.change(&in)
			if p, err := MakeSharedPlan(context.Background(), in); !errors.Is(err, ErrInvalid) {
				t.Errorf("MakeSharedPlan = %v, %v; want an error wrapping ErrInvalid", p, err)
			}
			if in.CacheBytes >= 0 {
				if tr, err := SharedTrace(in.Dataset, in.Jobs); !errors.Is(err, ErrInvalid) {
					t.Errorf("SharedTrace = %d accesses, %v; want an error wrapping ErrInvalid", len(tr), err)
				}
			}
		})
	}
}

func TestMakeSharedPlanContextCanceled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := MakeSharedPlan(ctx, SharedInput{Dataset: equalDataset(8, 10, 100), Jobs: []SharedJob{sharedJob(1, 2, 4, 1, 2)}, CacheBytes: 300})
	if !errors.Is(err, context.Canceled) {
		t.Errorf("error %v; want context.Canceled", err)
	}
}

// One job of speed 1 is the job alone: its LRU and optimal figures are
// Simulate's over Trace, and so MakePlan's; partitioned gives the one job
// the whole cache, which is the optimal figure again.
func TestSharedPlanOneJobIsSimulate(t *testing.T) {
	tests := []struct {
		name  string
		d     Dataset
		job   SharedJob
		cache int64
	}{
		{"equal chunks", equalDataset(32, 20, 1000), sharedJob(3, 4, 8, 2, 3), 9000},
		{"uneven chunks", unevenDataset(), sharedJob(5, 3, 4, 1, 3), 8000},
		{"drop_last, first epoch 2", equalDataset(24, 13, 500), func() SharedJob {
			j := sharedJob(7, 5, 10, 3, 2)
			j.DropLast, j.FirstEpoch = true, 2
			return j
		}(), 4000},
		{"whole dataset cached", equalDataset(16, 10, 100), sharedJob(1, 4, 8, 1, 3), 1600},
		{"explicit speed 1", equalDataset(20, 10, 100), func() SharedJob {
			j := sharedJob(9, 4, 8, 1, 2)
			j.Speed = 1
			return j
		}(), 700},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := mustSharedPlan(t, SharedInput{Dataset: tt.d, Jobs: []SharedJob{tt.job}, CacheBytes: tt.cache})
			tr, err := Trace(tt.d, tt.job.Job)
			if err != nil {
				t.Fatal(err)
			}
			for _, c := range []struct {
				got    Result
				policy Policy
			}{{p.LRU, LRU}, {p.Optimal, Belady}} {
				want := Simulate(tr, tt.d.ChunkSizes, tt.cache, c.policy)
				got := c.got
				if len(got.Jobs) > 0 {
					// Figures per job, if given, are the one job's: the totals.
					j := got.Jobs[0]
					if len(got.Jobs) != 1 || j.Job != 0 || j.BackendBytes != want.BackendBytes || j.Hits != want.Hits ||
						!reflect.DeepEqual(j.Epochs, want.Epochs) {
						t.Errorf("%v: the one job's figures %+v are not the totals %+v", c.policy, got.Jobs, want)
					}
					got.Jobs = nil
				}
				if !reflect.DeepEqual(got, want) {
					t.Errorf("%v: shared plan %+v\nSimulate    %+v", c.policy, got, want)
				}
			}
			if p.Partitioned.BackendBytes != p.Optimal.BackendBytes || p.Partitioned.Hits != p.Optimal.Hits {
				t.Errorf("partitioned %d bytes, %d hits; the job alone with the whole cache is optimal's %d, %d",
					p.Partitioned.BackendBytes, p.Partitioned.Hits, p.Optimal.BackendBytes, p.Optimal.Hits)
			}
			// MakePlan reports the same figures.
			plan := mustPlan(t, PlanInput{Dataset: tt.d, Job: tt.job.Job, CacheBytes: tt.cache, BackendBytesPerSec: 1})
			if plan.LRU.BackendBytes != p.LRU.BackendBytes || plan.Optimal.BackendBytes != p.Optimal.BackendBytes {
				t.Errorf("MakePlan reads %d (LRU), %d (optimal); the shared plan %d, %d",
					plan.LRU.BackendBytes, plan.Optimal.BackendBytes, p.LRU.BackendBytes, p.Optimal.BackendBytes)
			}
			all, _ := datasetBytes(tt.d)
			if want := float64(p.Optimal.BackendBytes) / float64(all) / float64(tt.job.Epochs); math.Abs(p.OptimalReads-want) > 1e-12 {
				t.Errorf("optimal reads per job-epoch %v, want %v", p.OptimalReads, want)
			}
		})
	}
}

// J identical jobs that start together, with the whole dataset cached,
// read it once between them: 1/J of a dataset per job-epoch over J jobs of
// E epochs is one dataset, whatever the policy.
func TestSharedPlanIdenticalJobsReadOnce(t *testing.T) {
	for _, d := range []Dataset{equalDataset(24, 10, 1000), unevenDataset()} {
		for _, jobs := range []int{1, 2, 5} {
			t.Run(fmt.Sprintf("%d chunks, %d jobs", len(d.Counts), jobs), func(t *testing.T) {
				all, read := datasetBytes(d)
				in := SharedInput{Dataset: d, CacheBytes: all}
				for range jobs {
					in.Jobs = append(in.Jobs, sharedJob(11, 4, 6, 2, 3))
				}
				p := mustSharedPlan(t, in)
				for _, r := range []Result{p.LRU, p.Optimal} {
					if r.BackendBytes != read {
						t.Errorf("%v reads %d bytes; the dataset's chunks with samples are %d", r.Policy, r.BackendBytes, read)
					}
				}
				want := float64(read) / float64(all) / float64(jobs*3)
				if math.Abs(p.OptimalReads-want) > 1e-12 || math.Abs(p.LRUReads-want) > 1e-12 {
					t.Errorf("reads per job-epoch %v (optimal), %v (LRU); want %v", p.OptimalReads, p.LRUReads, want)
				}
				if p.JobEpochs != jobs*3 {
					t.Errorf("%d job-epochs, want %d", p.JobEpochs, jobs*3)
				}
			})
		}
	}
}

// sharedCases are jobs that share a cache in different ways: other seeds,
// a slower job, a job that starts later, another window.
func sharedCases() []struct {
	name string
	in   SharedInput
} {
	with := func(j SharedJob, speed, start float64, name string) SharedJob {
		j.Speed, j.Start, j.Name = speed, start, name
		return j
	}
	d := equalDataset(40, 16, 1000)
	return []struct {
		name string
		in   SharedInput
	}{
		{"two seeds", SharedInput{Dataset: d, CacheBytes: 16000,
			Jobs: []SharedJob{with(sharedJob(1, 4, 8, 1, 3), 1, 0, "a"), with(sharedJob(2, 4, 8, 1, 3), 1, 0, "b")}}},
		{"one seed, half speed", SharedInput{Dataset: d, CacheBytes: 12000,
			Jobs: []SharedJob{with(sharedJob(1, 4, 8, 1, 3), 1, 0, "fast"), with(sharedJob(1, 4, 8, 1, 2), 0.5, 0, "slow")}}},
		{"same job, started later", SharedInput{Dataset: d, CacheBytes: 20000,
			Jobs: []SharedJob{with(sharedJob(3, 4, 8, 2, 3), 1, 0, ""), with(sharedJob(3, 4, 8, 2, 3), 1, 0.5, "late")}}},
		{"three jobs, speeds and starts", SharedInput{Dataset: d, CacheBytes: 24000,
			Jobs: []SharedJob{with(sharedJob(1, 4, 8, 1, 3), 1, 0, "a"), with(sharedJob(2, 6, 4, 2, 2), 0.5, 0.25, "b"),
				with(sharedJob(1, 4, 8, 1, 3), 1, 1, "c")}}},
		{"uneven chunks", SharedInput{Dataset: unevenDataset(), CacheBytes: 12000,
			Jobs: []SharedJob{with(sharedJob(4, 3, 5, 1, 3), 1, 0, "a"), with(sharedJob(5, 3, 5, 1, 3), 0.5, 0.5, "b")}}},
	}
}

// The optimal policy over the merged trace reads no more than LRU over
// it, nor than the jobs each alone with a share of the cache (which the
// merged cache could imitate, and better, since it holds a chunk two jobs
// read once).
func TestSharedPlanOptimalReadsLeast(t *testing.T) {
	for _, tt := range sharedCases() {
		t.Run(tt.name, func(t *testing.T) {
			p := mustSharedPlan(t, tt.in)
			t.Logf("reads per job-epoch: LRU %.3f, optimal %.3f, partitioned %.3f", p.LRUReads, p.OptimalReads, p.PartitionedReads)
			if p.Optimal.BackendBytes > p.LRU.BackendBytes {
				t.Errorf("optimal reads %d bytes, LRU %d", p.Optimal.BackendBytes, p.LRU.BackendBytes)
			}
			if p.Optimal.BackendBytes > p.Partitioned.BackendBytes {
				t.Errorf("optimal reads %d bytes, partitioned %d", p.Optimal.BackendBytes, p.Partitioned.BackendBytes)
			}
			if p.OptimalReads > p.LRUReads || p.OptimalReads > p.PartitionedReads {
				t.Errorf("reads per job-epoch: optimal %v, LRU %v, partitioned %v", p.OptimalReads, p.LRUReads, p.PartitionedReads)
			}
		})
	}
}

// Each job's figures add up to the totals, per job over its epochs and over
// the jobs; JobReads is a job's share in datasets per epoch.
func TestSharedPlanJobsSumToTotals(t *testing.T) {
	for _, tt := range sharedCases() {
		t.Run(tt.name, func(t *testing.T) {
			p := mustSharedPlan(t, tt.in)
			all, _ := datasetBytes(tt.in.Dataset)
			for _, r := range []Result{p.LRU, p.Optimal, p.Partitioned} {
				if len(r.Jobs) != len(tt.in.Jobs) {
					t.Fatalf("%v: %d jobs' figures for %d jobs", r.Policy, len(r.Jobs), len(tt.in.Jobs))
				}
				var hits, accesses int
				var bytes int64
				var reads float64
				for i, j := range r.Jobs {
					if j.Job != i {
						t.Errorf("%v: figures %d are job %d's", r.Policy, i, j.Job)
					}
					var eh, ea int
					var eb int64
					for _, e := range j.Epochs {
						eh, ea, eb = eh+e.Hits, ea+e.Accesses, eb+e.BackendBytes
					}
					if eh != j.Hits || ea != j.Accesses || eb != j.BackendBytes {
						t.Errorf("%v: job %d's epochs sum to %d hits, %d accesses, %d bytes; its totals are %d, %d, %d",
							r.Policy, i, eh, ea, eb, j.Hits, j.Accesses, j.BackendBytes)
					}
					if len(j.Epochs) != tt.in.Jobs[i].Epochs {
						t.Errorf("%v: job %d has %d epochs' figures, ran %d", r.Policy, i, len(j.Epochs), tt.in.Jobs[i].Epochs)
					}
					hits, accesses, bytes = hits+j.Hits, accesses+j.Accesses, bytes+j.BackendBytes
					reads += p.JobReads(r, i) * float64(tt.in.Jobs[i].Epochs)
				}
				if hits != r.Hits || accesses != r.Accesses || bytes != r.BackendBytes {
					t.Errorf("%v: jobs sum to %d hits, %d accesses, %d bytes; totals %d, %d, %d",
						r.Policy, hits, accesses, bytes, r.Hits, r.Accesses, r.BackendBytes)
				}
				if want := float64(r.BackendBytes) / float64(all); math.Abs(reads-want) > 1e-9 {
					t.Errorf("%v: JobReads × epochs sum to %v datasets; the total is %v", r.Policy, reads, want)
				}
			}
			// Every job reads the same in LRU and optimal: the merged trace
			// holds each job's accesses once.
			for i := range tt.in.Jobs {
				if p.LRU.Jobs[i].Accesses != p.Optimal.Jobs[i].Accesses || p.LRU.Jobs[i].Accesses != p.Partitioned.Jobs[i].Accesses {
					t.Errorf("job %d: %d, %d, %d accesses under LRU, optimal and partitioned", i,
						p.LRU.Jobs[i].Accesses, p.Optimal.Jobs[i].Accesses, p.Partitioned.Jobs[i].Accesses)
				}
			}
		})
	}
}

// WindowBytes is the sum over the jobs of each one's largest window, here
// computed from the windows' samples rather than their chunk lists.
func TestSharedPlanWindowBytes(t *testing.T) {
	largest := func(t *testing.T, d Dataset, j Job) int64 {
		t.Helper()
		first := make([]int, len(d.Counts)+1)
		for c, n := range d.Counts {
			first[c+1] = first[c] + n
		}
		ep, err := shuffle.NewEpoch(d.Counts, j.Seed, uint64(j.FirstEpoch), j.Window)
		if err != nil {
			t.Fatal(err)
		}
		var most int64
		for w := range ep.NumWindows() {
			seen := map[int]bool{}
			var b int64
			for _, id := range ep.Window(w) {
				c := 0
				for first[c+1] <= id {
					c++
				}
				if !seen[c] {
					seen[c] = true
					b += d.ChunkSizes[c]
				}
			}
			most = max(most, b)
		}
		return most
	}
	for _, tt := range sharedCases() {
		// Every chunk gets a sample: the reference finds a window's chunks
		// through its samples, and so never sees a chunk without any,
		// which largestWindow counts (a gateway never reads nor pins one).
		counts := slices.Clone(tt.in.Dataset.Counts)
		for c, n := range counts {
			counts[c] = max(n, 1)
		}
		tt.in.Dataset.Counts = counts
		t.Run(tt.name, func(t *testing.T) {
			p := mustSharedPlan(t, tt.in)
			var want int64
			for _, j := range tt.in.Jobs {
				want += largest(t, tt.in.Dataset, j.Job)
			}
			if p.WindowBytes != want {
				t.Errorf("window bytes %d, want %d", p.WindowBytes, want)
			}
		})
	}
}

// sharedGoldenInput is three jobs over the golden plan's dataset: two
// seeds, one job at half speed starting a quarter epoch late, a cache below
// the sum of their windows.
func sharedGoldenInput() SharedInput {
	d := goldenInput().Dataset
	j := func(name string, seed uint64, speed, start float64) SharedJob {
		return SharedJob{Job: Job{Params: shuffle.Params{Seed: seed, Window: 4, BatchSize: 32, World: 2}, Epochs: 3}, Name: name, Speed: speed, Start: start}
	}
	return SharedInput{
		Dataset:    d,
		Jobs:       []SharedJob{j("train", 7, 1, 0), j("ablation", 8, 1, 0), j("eval", 7, 0.5, 0.25)},
		CacheBytes: 768 << 20,
	}
}

func TestSharedWriteTextGolden(t *testing.T) {
	p := mustSharedPlan(t, sharedGoldenInput())
	var b bytes.Buffer
	if err := p.WriteText(&b); err != nil {
		t.Fatal(err)
	}
	checkGolden(t, "shared.txt", b.Bytes())

	js, err := json.MarshalIndent(p, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	checkGolden(t, "shared.json", append(js, '\n'))
	var back SharedPlan
	if err := json.Unmarshal(js, &back); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(&back, p) {
		t.Errorf("JSON round trip changed the plan")
	}
}

// The report names what a cache above or below the jobs' windows means,
// and a single job gets no per-job table (its figures are the totals).
func TestSharedWriteTextCases(t *testing.T) {
	in := sharedGoldenInput()
	in.CacheBytes = 8 << 30
	p := mustSharedPlan(t, in)
	var b bytes.Buffer
	if err := p.WriteText(&b); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"the cache holds them all at once", "1/3 of the cache", "reads per epoch", "2      eval"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("report lacks %q:\n%s", want, &b)
		}
	}

	in.Jobs = in.Jobs[:1]
	in.CacheBytes = 100 << 20
	p = mustSharedPlan(t, in)
	b.Reset()
	if err := p.WriteText(&b); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"shared by 1 job\n", "more than the cache", "take turns or assemble batches in parts", "the job alone with the whole cache"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("report lacks %q:\n%s", want, &b)
		}
	}
	if strings.Contains(b.String(), "reads per epoch") {
		t.Errorf("a single job's report has a per-job table:\n%s", &b)
	}
	if err := p.WriteText(failingWriter{}); !errors.Is(err, errWrite) {
		t.Errorf("WriteText error %v, want the writer's", err)
	}
}

// ForGateway.SharedPlan is MakeSharedPlan over the index's dataset, the
// API's jobs taken field by field.
func TestForGatewaySharedPlan(t *testing.T) {
	ix := gatewayIndex(t, 24, 10)
	jobs := []api.SharedPlanJob{
		{Name: "a", Seed: 3, Window: 4, BatchSize: 8, World: 2, Epochs: 3, Speed: 1},
		{Name: "b", Seed: 4, Window: 6, BatchSize: 4, World: 1, Epochs: 2, FirstEpoch: 1, DropLast: true, Speed: 0.5, Start: 0.25},
	}
	got, err := ForGateway{}.SharedPlan(context.Background(), planDataOf(ix), jobs, 40<<10)
	if err != nil {
		t.Fatal(err)
	}
	want := mustSharedPlan(t, SharedInput{Dataset: DatasetOf(ix), CacheBytes: 40 << 10, Jobs: []SharedJob{
		{Job: Job{Params: shuffle.Params{Seed: 3, Window: 4, BatchSize: 8, World: 2}, Epochs: 3}, Name: "a", Speed: 1},
		{Job: Job{Params: shuffle.Params{Seed: 4, Window: 6, BatchSize: 4, World: 1, DropLast: true}, FirstEpoch: 1, Epochs: 2}, Name: "b", Speed: 0.5, Start: 0.25},
	}})
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %+v\nwant %+v", got, want)
	}
	if _, err := (ForGateway{}).SharedPlan(context.Background(), planDataOf(ix), jobs[:1], -1); !errors.Is(err, ErrInvalid) {
		t.Errorf("negative cache: %v; want ErrInvalid", err)
	}
	if api.MaxSharedPlanJobs != MaxSharedJobs {
		t.Errorf("api.MaxSharedPlanJobs %d, planner.MaxSharedJobs %d: the gateway would accept what the planner refuses, or refuse what it plans",
			api.MaxSharedPlanJobs, MaxSharedJobs)
	}
}
