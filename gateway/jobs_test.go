package gateway_test

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/brandgw/brand/gateway"
	"github.com/brandgw/brand/internal/testsupport/s3test"
)

// sharedFixture is the dataset of the shared-cache reproductions: 3,952
// samples of about 2 KiB in 76 chunks of about 105 KiB, read with batch
// 64 and a window of 8 chunks. What is measured is chunks, not bytes:
// with samples of 10 KiB the jobs read 1.885 and 1.845 datasets, with 2
// KiB 1.893 and 1.853, in a fifth of the time (28 s under the race
// detector before).
func sharedFixture(t *testing.T) (*fixture, int64) {
	t.Helper()
	f := newFixtureNamed(t, t.TempDir(), "", 76, 52, 2000)
	var total int64
	for c := range f.index.NumChunks() {
		total += f.index.Chunk(c).Size
	}
	return f, total
}

// readLockstep reads epochs [0, epochs) of batch 64 as two jobs, lead
// and trail, trail lag batches behind lead, in one goroutine: a batch of
// lead's, then one of trail's. Every sample of each job's epoch 0 is
// checked against its source and must come once. A lag held by the test,
// not by two goroutines' race, makes what the two jobs share the
// policy's, not the machine's: with each job in its own goroutine, a
// loaded machine let the trailing one fall a cache behind now and then,
// and it read everything again.
func readLockstep(t *testing.T, f *fixture, url, lead, trail string, epochs, lag int) {
	t.Helper()
	batches := (f.index.NumSamples() + 63) / 64
	seen := map[string]map[string]int{lead: {}, trail: {}}
	read := func(q string, step int) {
		e, m := step/batches, step%batches
		resp, body := get(t, fmt.Sprintf("%s/epoch/%d/batch/%d?%s", url, e, m, q))
		if resp.StatusCode != 200 {
			t.Fatalf("%s: epoch %d batch %d: %d %s", q, e, m, resp.StatusCode, body)
		}
		if e > 0 {
			return
		}
		for _, s := range readTar(t, body) {
			seen[q][s.key]++
			for ext, want := range f.content[s.key] {
				if string(s.files[ext]) != string(want) {
					t.Fatalf("%s: sample %s.%s differs from its source", q, s.key, ext)
				}
			}
		}
	}
	for step := range epochs*batches + lag {
		if step < epochs*batches {
			read(lead, step)
		}
		if trail != "" && step >= lag {
			read(trail, step-lag)
		}
	}
	for q, s := range seen {
		if q != "" {
			exactlyOnce(t, s, f.index.NumSamples(), q+" epoch 0")
		}
	}
}

// TestNamedJobsOfOneOrderShareItsChunks: two jobs that chose the same seed
// but name themselves apart are two streams to the gateway, each followed
// at its own position; the trailing one, four batches behind, reads from
// the cache what the leading one loaded, so both together read about
// what one reads alone: the eviction policy's doing, with no turns (jobs
// as goroutines taking turns are internal/cache/usetable's
// TestJobsShareTheCache).
func TestNamedJobsOfOneOrderShareItsChunks(t *testing.T) {
	f, total := sharedFixture(t)
	run := func(queries []string) float64 {
		cs := s3test.Wrap(f.store)
		g, srv := start(t, cs, func(c *gateway.Config) {
			c.CacheSize = total / 4
			c.Defaults = gateway.Defaults{BatchSize: 64, Window: 8, Seed: 5}
			// One client reads both jobs in turn: a batch held back
			// for the other job's turn would wait for it to idle.
			c.MaxTurnWait = -1
		})
		trail := ""
		if len(queries) > 1 {
			trail = queries[1]
		}
		readLockstep(t, f, srv.URL, queries[0], trail, 2, 4)
		if len(queries) > 1 {
			var names []string
			for _, j := range g.JobStats() {
				names = append(names, j.Job)
			}
			slices.Sort(names)
			if !slices.Equal(names, []string{"lead", "trail"}) {
				t.Errorf("jobs in /stats %q, want lead and trail", names)
			}
		}
		bytes := cs.Total().Sum().Bytes
		return float64(bytes) / float64(total)
	}
	alone := run([]string{"job=lead"})
	together := run([]string{"job=lead", "job=trail"})
	t.Logf("store reads: one job %.3f datasets, two of one order %.3f", alone, together)
	if together > 1.3*alone {
		t.Errorf("two jobs of one order read %.3f datasets, one alone %.3f: they should share its chunks", together, alone)
	}
}

// TestJobFigures: /stats and /metrics give each job's store bytes, hit
// ratio and wait, under its name, and the turns' figures (what turns do
// is internal/cache/usetable's TestJobsShareTheCache).
func TestJobFigures(t *testing.T) {
	f := newFixture(t, 12, 8)
	_, srv := start(t, f.store, func(c *gateway.Config) {
		c.Defaults = gateway.Defaults{BatchSize: 8, Window: 2, Seed: 1}
	})
	for m := range 12 {
		for _, q := range []string{"job=alpha", "job=beta&weight=2&seed=2"} {
			if resp, body := get(t, fmt.Sprintf("%s/epoch/0/batch/%d?%s", srv.URL, m, q)); resp.StatusCode != 200 {
				t.Fatalf("%s: %d %s", q, resp.StatusCode, body)
			}
		}
	}
	_, body := get(t, srv.URL+"/stats")
	var st struct {
		Jobs []struct {
			Job          string  `json:"job"`
			Seed         uint64  `json:"seed"`
			Batches      int64   `json:"batches"`
			Samples      int64   `json:"samples"`
			BackendBytes int64   `json:"backend_bytes"`
			HitRatio     float64 `json:"hit_ratio"`
			WaitSeconds  float64 `json:"wait_seconds"`
		} `json:"jobs"`
		Turns *struct {
			WaitSeconds *float64 `json:"wait_seconds"`
			Overdue     *int64   `json:"overdue"`
		} `json:"turns"`
	}
	if err := json.Unmarshal(body, &st); err != nil {
		t.Fatal(err)
	}
	if len(st.Jobs) != 2 || st.Jobs[0].Job != "alpha" || st.Jobs[1].Job != "beta" || st.Jobs[1].Seed != 2 {
		t.Fatalf("/stats jobs: %+v", st.Jobs)
	}
	if st.Turns == nil || st.Turns.WaitSeconds == nil || st.Turns.Overdue == nil || *st.Turns.Overdue != 0 {
		t.Errorf("/stats turns: %s", body)
	}
	var bytes int64
	for _, j := range st.Jobs {
		if j.Batches != 12 || j.Samples != 96 || j.WaitSeconds <= 0 || j.HitRatio < 0 || j.HitRatio > 1 {
			t.Errorf("job %s: %+v", j.Job, j)
		}
		bytes += j.BackendBytes
	}
	var total int64
	for c := range f.index.NumChunks() {
		total += f.index.Chunk(c).Size
	}
	if bytes < total {
		t.Errorf("the jobs' backend bytes add up to %d, less than the dataset's %d read once", bytes, total)
	}
	metrics := scrape(t, srv.URL)
	for _, want := range []string{
		`brand_job_backend_bytes_total{dataset="test"`,
		`brand_job_wait_seconds_total{dataset="test"`,
		`brand_job_batches_total{dataset="test",index="` + f.index.ID() + `",job="beta",seed="2",window="2"} 12`,
		"brand_turn_wait_seconds_total",
		"brand_jobs_waiting 0",
	} {
		if !strings.Contains(metrics, want) {
			t.Errorf("/metrics lacks %s:\n%s", want, grepLines(metrics, "brand_job"))
		}
	}
}
