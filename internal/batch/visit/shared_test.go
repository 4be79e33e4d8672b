package visit_test

import (
	"context"
	"slices"
	"testing"

	"github.com/brandgw/brand/internal/job/query"
	"github.com/brandgw/brand/internal/testsupport/s3test"
	"github.com/brandgw/brand/internal/testsupport/stagetest"
)

// TestNamedJobsOfOneOrderShareItsChunks: two jobs that chose the same
// seed but name themselves apart are two streams to the stages, each
// followed at its own position; the trailing one, four batches behind,
// reads from the cache what the leading one loaded, so both together
// read about what one reads alone: the eviction policy's doing, with no
// turns (jobs as goroutines taking turns are internal/cache/usetable's
// TestJobsShareTheCache).
//
// The dataset: 3,952 samples of about 2 KiB in 76 chunks of about 105
// KiB, read with batch 64 and a window of 8 chunks, a cache of a quarter
// of it. What is measured is chunks, not bytes: through a gateway (its
// prefetch on), samples of 10 KiB had the jobs read 1.885 and 1.845
// datasets, of 2 KiB 1.893 and 1.853, in a fifth of the time; over the
// stages, which read on demand alone, 1.827 and 1.853.
func TestNamedJobsOfOneOrderShareItsChunks(t *testing.T) {
	set := packTar(t, "test", "", 76, 52, 2000)
	total := set.index.TotalBytes()
	run := func(jobs []string) float64 {
		cs := s3test.Wrap(set.store)
		spec := set.spec
		spec.Store = cs
		s := stagetest.New(t, stagetest.Config{Datasets: []stagetest.Spec{spec}, CacheSize: total / 4,
			Defaults: query.Defaults{BatchSize: 64, Window: 8, Seed: 5}})
		readLockstep(t, s, set, jobs, 2, 4)
		if len(jobs) > 1 {
			var names []string
			for _, j := range s.Stats.Jobs() {
				names = append(names, j.Job)
			}
			slices.Sort(names)
			if !slices.Equal(names, []string{"lead", "trail"}) {
				t.Errorf("jobs in /stats %q, want lead and trail", names)
			}
		}
		return float64(cs.Total().Sum().Bytes) / float64(total)
	}
	alone := run([]string{"job=lead"})
	together := run([]string{"job=lead", "job=trail"})
	t.Logf("store reads: one job %.3f datasets, two of one order %.3f", alone, together)
	if together > 1.3*alone {
		t.Errorf("two jobs of one order read %.3f datasets, one alone %.3f: they should share its chunks", together, alone)
	}
}

// readLockstep reads epochs [0, epochs) of batch 64 as the jobs named
// (lead, and trail if given), trail lag batches behind lead, in one
// goroutine: a batch of lead's, then one of trail's. Every sample of
// each job's epoch 0 is checked against its source and must come once.
// A lag held by the test, not by two goroutines' race, makes what the
// two jobs share the policy's, not the machine's: with each job in its
// own goroutine, a loaded machine let the trailing one fall a cache
// behind now and then, and it read everything again.
func readLockstep(t *testing.T, s *stagetest.Stages, set *tarSet, jobs []string, epochs, lag int) {
	t.Helper()
	batches := (set.index.NumSamples() + 63) / 64
	seen := map[string]map[string]int{}
	read := func(raw string, step int) {
		e, m := step/batches, step%batches
		_, body, err := s.Batch(context.Background(), raw, uint64(e), uint64(m))
		if err != nil {
			t.Fatalf("%s: epoch %d batch %d: %v", raw, e, m, err)
		}
		if e == 0 {
			if seen[raw] == nil {
				seen[raw] = map[string]int{}
			}
			set.verify(t, body, seen[raw])
		}
	}
	for step := range epochs*batches + lag {
		if step < epochs*batches {
			read(jobs[0], step)
		}
		if len(jobs) > 1 && step >= lag {
			read(jobs[1], step-lag)
		}
	}
	for raw, keys := range seen {
		if len(keys) != set.index.NumSamples() {
			t.Fatalf("%s epoch 0: %d distinct samples, want %d", raw, len(keys), set.index.NumSamples())
		}
		for k, n := range keys {
			if n != 1 {
				t.Fatalf("%s epoch 0: sample %s served %d times", raw, k, n)
			}
		}
	}
}
