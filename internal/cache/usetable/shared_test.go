package usetable_test

import (
	"fmt"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/brandgw/brand/api"
	"github.com/brandgw/brand/internal/cache/usetable"
	"github.com/brandgw/brand/internal/job/catalog"
	"github.com/brandgw/brand/shuffle"
)

// sharedDataset is the dataset of the shared-cache reproductions: 3,952
// samples in 76 chunks, read with batch 64 and a window of 8 chunks.
func sharedDataset(t *testing.T) *catalog.Dataset {
	return catalog.NewDataset("d", "", nil, usetable.IndexOf(t, 76, 52))
}

func sharedJob(seed uint64) api.Job {
	return api.Job{Params: shuffle.Params{BatchSize: 64, World: 1, Window: 8, Seed: seed}}
}

// TestJobsShareTheCache is the reproduction of jobs that shared nothing:
// with a cache of half the dataset, four jobs with seeds 1..4 started
// together and reading three epochs each read about 0.62–0.68 datasets per
// job-epoch from the store (the optimum over their merged trace is
// 0.41), and eight jobs with a quarter of the dataset cached read 4.2–5.0,
// re-reading every chunk within each window because their windows
// together did not fit. Each job must still read every sample of its
// epoch exactly once, and under contention no job may wait far more than
// the others or hit the bound on a turn's wait (the gateway's default,
// 10 s).
func TestJobsShareTheCache(t *testing.T) {
	for _, tc := range []struct {
		jobs     int
		cache    float64
		maxReads float64 // datasets per job-epoch, loads of the whole run
	}{
		{4, 0.5, 0.50},
		// 1.25–1.35 without the race detector, 1.5 once with it (the order
		// in which jobs woken at one instant run varies); without turns 4.4.
		{8, 0.25, 2.0},
	} {
		t.Run(fmt.Sprintf("%d jobs, cache %.0f%%", tc.jobs, 100*tc.cache), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				ds := sharedDataset(t)
				total := ds.Index.TotalBytes()
				r := newPolicyRun(t, ds, int64(tc.cache*float64(total)), "schedule", 10*time.Second, 0)
				var jobs []api.Job
				for j := range tc.jobs {
					jobs = append(jobs, sharedJob(uint64(j+1)))
				}
				waits := r.jobs(jobs, 3, 0)
				reads := float64(r.loaded()) / float64(total) / float64(3*tc.jobs)
				slices.Sort(waits)
				turns := r.s.Turns()
				t.Logf("loads per job-epoch %.3f; waits per job %v; turns waited %v, %d overdue", reads, waits, turns.Waited, turns.Overdue)
				if reads > tc.maxReads {
					t.Errorf("loads per job-epoch %.3f, want at most %.2f", reads, tc.maxReads)
				}
				if lo, hi := waits[0], waits[len(waits)-1]; hi > 2*lo+time.Second/2 {
					t.Errorf("one job waited %v, another %v: not a fair share", hi, lo)
				}
				if turns.Overdue > 0 {
					t.Errorf("%d turns were given only at the maximum wait", turns.Overdue)
				}
			})
		})
	}
}

// TestNamedJobsOfOneOrderShare: two jobs that chose one seed but name
// themselves apart are two streams, each in its own goroutine here
// (internal/batch/visit's TestNamedJobsOfOneOrderShareItsChunks reads
// them in lockstep through a node's stages), the trailing one starting lag batches behind; while it stays
// within a window of the leading one (a window is 6.5 batches), the
// trailing job reads what the leading one loaded, and the two read about
// what one reads alone, with turns and without. Past a window they share
// little: the batch with which the leading job crosses into a window and
// the trailing job's last batch of the window before need the chunks of
// three windows at once (24 here) where the cache holds 19, and the
// trailing job's next window goes, in every crossing where the leading
// job's batch comes first (measured: at 7 batches behind, 2.3–3.8
// datasets over the two epochs without turns and 2.29 with them,
// against 1.82 alone; evicting the trailing job's current window instead
// costs it the same reloads a batch earlier). Two goroutines racing on a
// loaded machine let the trailing job fall that far behind now and then,
// which is why the gateway's test reads in lockstep.
//
// Six batches behind, the trailing job's batches come at the instants of
// the leading one's: which runs first at each instant is the bubble's
// choice. The cases "and a moment" behind and ahead fix it: the trailing
// job's first batch just after the leading one crossed into its second
// window, whose footprint (that window and the next) and the trailing
// job's first window did not fit together. With turns it waited, and
// fell a window further behind at each of its crossings: 3.83 datasets
// (1 run in 40 to 400 of the plain six-batch case, deterministic in the
// moment-behind case), until a stream trailing a holder's chunks by less
// than a window went ahead (line.trails).
func TestNamedJobsOfOneOrderShare(t *testing.T) {
	const moment = time.Millisecond
	for _, turns := range []time.Duration{0, 10 * time.Second} {
		for _, lag := range []struct {
			batches int
			and     time.Duration
			name    string
		}{{1, 0, "1 batches"}, {4, 0, "4 batches"}, {6, 0, "6 batches"}, {6, moment, "6 batches and a moment"}, {6, -moment, "a moment under 6 batches"}} {
			t.Run(fmt.Sprintf("turns %v, %s behind", turns, lag.name), func(t *testing.T) {
				synctest.Test(t, func(t *testing.T) {
					ds := sharedDataset(t)
					total := ds.Index.TotalBytes()
					lead, trail := sharedJob(5), sharedJob(5)
					lead.Name, trail.Name = "lead", "trail"
					alone := newPolicyRun(t, ds, total/4, "schedule", turns, 0)
					alone.jobs([]api.Job{lead}, 2, 0)
					both := newPolicyRun(t, ds, total/4, "schedule", turns, 0)
					both.jobsAfter([]api.Job{lead, trail}, 2, time.Duration(lag.batches)*switchStepTime+lag.and)
					a, b := float64(alone.loaded())/float64(total), float64(both.loaded())/float64(total)
					t.Logf("store reads: one job %.3f datasets, two of one order %.3f", a, b)
					if b > 1.1*a {
						t.Errorf("two jobs of one order %s apart read %.3f datasets, one alone %.3f: they should share its chunks", lag.name, b, a)
					}
				})
			})
		}
	}
}
