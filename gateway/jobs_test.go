package gateway_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/brandgw/brand/gateway"
)

// TestJobFigures: /stats and /metrics give each job's store bytes, hit
// ratio and wait, under its name, and the turns' figures (what turns do
// is internal/cache/usetable's TestJobsShareTheCache; two named jobs of
// one order sharing its chunks, internal/batch/visit's
// TestNamedJobsOfOneOrderShareItsChunks).
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
	_, m := get(t, srv.URL+"/metrics")
	for _, want := range []string{
		`brand_job_backend_bytes_total{dataset="test"`,
		`brand_job_wait_seconds_total{dataset="test"`,
		`brand_job_batches_total{dataset="test",index="` + f.index.ID() + `",job="beta",seed="2",window="2"} 12`,
		"brand_turn_wait_seconds_total",
		"brand_jobs_waiting 0",
	} {
		if !strings.Contains(string(m), want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
}
