package usetable

import (
	"fmt"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/brandgw/brand/api"
	"github.com/brandgw/brand/internal/job/catalog"
	"github.com/brandgw/brand/shuffle"
)

// sharedDataset is the dataset of the shared-cache reproductions: 3,952
// samples in 76 chunks, read with batch 64 and a window of 8 chunks.
func sharedDataset(t *testing.T) *catalog.Dataset {
	return catalog.NewDataset("d", "", nil, testIndex(t, 76, 52))
}

func sharedJob(seed uint64) api.Job {
	return api.Job{Params: shuffle.Params{BatchSize: 64, World: 1, Window: 8, Seed: seed}}
}

// TestJobsShareTheCache is the reproduction of jobs that shared nothing:
// with a cache of half the dataset, four jobs with seeds 1..4 started
// together and reading three epochs each read about 0.62–0.68 datasets per
// job-epoch from the store (the optimum over their merged schedule is
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
