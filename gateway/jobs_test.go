package gateway_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/brandgw/brand/gateway"
)

// sharedFixture is the dataset of the shared-cache reproductions: 3,952
// samples of about 10 KiB in 76 chunks of about 530 KiB, read with batch
// 64 and a window of 8 chunks.
func sharedFixture(t *testing.T) (*fixture, int64) {
	t.Helper()
	f := newFixtureSized(t, 76, 52, 10000)
	var total int64
	for c := range f.index.NumChunks() {
		total += f.index.Chunk(c).Size
	}
	return f, total
}

// jobRun is what one job of a shared run received and waited.
type jobRun struct {
	seen map[string]int
	wait time.Duration // in requests, in all
	err  error
}

// runJobsTrailing has each query read epochs [0, epochs) of batch 64, from
// its own goroutine, as fast as it is served, checking every sample
// against its source, every job but the first starting once the first has
// been served trail batches, and returns what each received.
func runJobsTrailing(t *testing.T, f *fixture, url string, queries []string, epochs, trail int) []jobRun {
	t.Helper()
	batches := (f.index.NumSamples() + 63) / 64
	out := make([]jobRun, len(queries))
	lead := make(chan struct{})
	var once sync.Once
	var wg sync.WaitGroup
	for j, q := range queries {
		wg.Go(func() {
			r := &out[j]
			r.seen = map[string]int{}
			defer once.Do(func() {
				if j == 0 {
					close(lead) // the first failed or ended early: let the others go
				}
			})
			if j > 0 && trail > 0 {
				<-lead
			}
			for e := range epochs {
				for m := range batches {
					if j == 0 && e*batches+m == trail {
						once.Do(func() { close(lead) })
					}
					began := time.Now()
					resp, err := http.Get(fmt.Sprintf("%s/epoch/%d/batch/%d?%s", url, e, m, q))
					if err != nil {
						r.err = err
						return
					}
					body, err := io.ReadAll(resp.Body)
					resp.Body.Close()
					r.wait += time.Since(began)
					if err != nil || resp.StatusCode != 200 {
						r.err = fmt.Errorf("epoch %d batch %d: %d %v %s", e, m, resp.StatusCode, err, body)
						return
					}
					if e == 0 {
						for _, s := range readTarSafe(body) {
							r.seen[s.key]++
							for ext, want := range f.content[s.key] {
								if string(s.files[ext]) != string(want) {
									r.err = fmt.Errorf("sample %s.%s differs from its source", s.key, ext)
									return
								}
							}
						}
					}
				}
			}
		})
	}
	wg.Wait()
	for j, r := range out {
		if r.err != nil {
			t.Fatalf("job %d (%s): %v", j, queries[j], r.err)
		}
		exactlyOnce(t, r.seen, f.index.NumSamples(), fmt.Sprintf("job %d epoch 0", j))
	}
	return out
}

// readTarSafe is readTar for a goroutine: a body that is not a tar yields
// no samples, which exactlyOnce then reports.
func readTarSafe(body []byte) []sample {
	var out []sample
	rec := &recorder{}
	func() {
		defer func() { _ = recover() }()
		out = readTar(rec, body)
	}()
	if rec.failed {
		return nil
	}
	return out
}

// recorder is a testing.TB whose Fatalf only records, for readTar in a
// goroutine.
type recorder struct {
	testing.TB
	failed bool
}

func (r *recorder) Helper()               {}
func (r *recorder) Fatalf(string, ...any) { r.failed = true; panic("recorder") }
func (r *recorder) Fatal(...any)          { r.failed = true; panic("recorder") }

// TestNamedJobsOfOneOrderShareItsChunks: two jobs that chose the same seed
// but name themselves apart are two streams to the gateway, each followed
// at its own position; the trailing one, a few batches behind,
// reads from the cache what the leading one loaded, so both together read
// about what one reads alone.
func TestNamedJobsOfOneOrderShareItsChunks(t *testing.T) {
	f, total := sharedFixture(t)
	run := func(queries []string) float64 {
		cs := newCountingStore(f.store)
		g, srv := start(t, cs, func(c *gateway.Config) {
			c.CacheSize = total / 4
			c.Defaults = gateway.Defaults{BatchSize: 64, Window: 8, Seed: 5}
		})
		runJobsTrailing(t, f, srv.URL, queries, 2, 4)
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
		_, bytes, _ := cs.chunkReads()
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
// is internal/schedule's TestJobsShareTheCache).
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
