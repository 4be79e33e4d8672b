package plans_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"reflect"
	"strings"
	"testing"

	"github.com/brandgw/brand/api"
	"github.com/brandgw/brand/internal/job/catalog"
	"github.com/brandgw/brand/internal/job/plans"
	"github.com/brandgw/brand/internal/job/query"
	"github.com/brandgw/brand/internal/server/httperr"
	"github.com/brandgw/brand/planner"
	"github.com/brandgw/brand/shuffle"
)

// shared is what Shared answers for body, bounded as the gateway bounds
// POST /plan's body (http.MaxBytesReader).
func shared(m *plans.Maker, body string) (any, error) {
	return m.Shared(context.Background(), http.MaxBytesReader(nil, io.NopCloser(strings.NewReader(body)), api.MaxSharedPlanBodyBytes))
}

// Shared simulates the jobs of the body together, with the gateway's
// defaults for the fields they leave out (its cache, 3 epochs, speed 1):
// the plan MakeSharedPlan makes of the same jobs.
func TestShared(t *testing.T) {
	ix := indexOf(t, "", 24, 10)
	m := newMaker(t, []*catalog.Dataset{tarDataset("test", ix)}, func(c *plans.Config) { c.Defaults.Job.DropLast = true })
	cache := ix.TotalBytes() / 3
	p, err := shared(m, `{"cache_size": `+itoa(cache)+`, "jobs": [{"name": "train"}, {"name": "eval", "seed": 7, "speed": 0.5, "start": 0.25, "epochs": 2, "drop_last": false}]}`)
	if err != nil {
		t.Fatal(err)
	}
	got := decode[planner.SharedPlan](t, p)
	want, err := planner.MakeSharedPlan(context.Background(), planner.SharedInput{
		Dataset:    planner.DatasetOf(ix),
		CacheBytes: cache,
		Jobs: []planner.SharedJob{
			{Job: planner.Job{Params: shuffle.Params{Seed: 42, Window: 2, BatchSize: 8, World: 1, DropLast: true}, Epochs: 3}, Name: "train", Speed: 1},
			{Job: planner.Job{Params: shuffle.Params{Seed: 7, Window: 2, BatchSize: 8, World: 1}, Epochs: 2}, Name: "eval", Speed: 0.5, Start: 0.25},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Shared answered\n%+v\nwant\n%+v", *got, *want)
	}
	if got.OptimalReads > got.LRUReads {
		t.Errorf("optimal reads %.3f per job-epoch, LRU %.3f", got.OptimalReads, got.LRUReads)
	}

	// Without cache_size, the gateway's own.
	if p, err = shared(m, `{"jobs": [{}]}`); err != nil {
		t.Fatal(err)
	}
	if got := decode[planner.SharedPlan](t, p); got.CacheBytes != 64<<20 || len(got.Jobs) != 1 || got.Jobs[0].Seed != 42 || got.Jobs[0].Epochs != 3 || got.Jobs[0].Speed != 1 {
		t.Errorf("defaults: cache %d, jobs %+v", got.CacheBytes, got.Jobs)
	}
}

// decode is p as a client reads it: its JSON decoded into a T.
func decode[T any](t *testing.T, p any) *T {
	t.Helper()
	b, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	v := new(T)
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatal(err)
	}
	return v
}

func itoa(n int64) string { b, _ := json.Marshal(n); return string(b) }

// A body Shared cannot plan is the client's error (400: query.ErrBadRequest),
// with a message that says why; up to the limits, the same requests plan.
// A dataset not served is 404 and an index not held 409, the version's
// errors (catalog's) as they are.
func TestSharedRefused(t *testing.T) {
	m := newMaker(t, []*catalog.Dataset{tarDataset("test", indexOf(t, "", 12, 10))}, func(c *plans.Config) { c.Limits.MaxBatchSize = 64 })
	// jobs is a body of n copies of job.
	jobs := func(n int, job string) string {
		return `{"jobs": [` + strings.TrimSuffix(strings.Repeat(job+",", n), ",") + `]}`
	}
	for _, tt := range []struct {
		name   string
		body   string
		status int
		want   string
	}{
		{"empty body", ``, 400, "empty body"},
		{"not JSON", `jobs`, 400, "body"},
		{"not an object", `[{}]`, 400, "body: a JSON array; want an object"},
		{"jobs not a list", `{"jobs": {}}`, 400, "body: jobs: a JSON object; want a list"},
		{"a job not an object", `{"jobs": [3]}`, 400, "job 0: bad request: a JSON number; want an object"},
		{"a window of words", `{"jobs": [{"window": "four"}]}`, 400, "job 0: bad request: window: a JSON string; want an integer"},
		{"no jobs", `{"jobs": []}`, 400, "no jobs"},
		{"jobs left out", `{"cache_size": 1000}`, 400, "no jobs"},
		{"unknown field", `{"jobs": [{}], "colour": "red"}`, 400, `unknown field "colour"`},
		{"unknown job field", `{"jobs": [{"rank": 1}]}`, 400, `job 0: bad request: json: unknown field "rank"`},
		{"trailing garbage", `{"jobs": [{}]} x`, 400, "data after the JSON object"},
		{"a second object", `{"jobs": [{}]} {"jobs": [{}]}`, 400, "data after the JSON object"},
		{"a stray brace", `{"jobs": [{}]}}`, 400, "data after the JSON object"},
		{"65 jobs", jobs(65, `{"name": "j"}`), 400, "65 jobs; at most 64"},
		{"window 0", `{"jobs": [{}, {"window": 0}]}`, 400, "job 1: bad request: window must be between 1 and"},
		{"batch size over the limit", `{"jobs": [{"batch_size": 65}]}`, 400, "batch_size must be between 1 and 64"},
		{"world 0", `{"jobs": [{"world": 0}]}`, 400, "world must be between 1"},
		{"one epoch", `{"jobs": [{"epochs": 1}]}`, 400, "epochs must be between 2 and 20"},
		{"21 epochs", `{"jobs": [{"epochs": 21}]}`, 400, "epochs must be between 2 and 20"},
		{"too many epochs in all", jobs(10, `{"epochs": 20}`), 400, "epochs sum to 200; at most 192"},
		{"negative first epoch", `{"jobs": [{"first_epoch": -1}]}`, 400, "first_epoch must be between 0"},
		{"negative seed", `{"jobs": [{"seed": -1}]}`, 400, "job 0: bad request: seed: a JSON number -1; want an integer >= 0"},
		{"bad name", `{"jobs": [{"name": "a b"}]}`, 400, "job 0"},
		{"speed -1", `{"jobs": [{"speed": -1}]}`, 400, "speed -1; must be > 0"},
		{"negative start", `{"jobs": [{"start": -0.5}]}`, 400, "start -0.5; must be >= 0"},
		{"negative cache", `{"cache_size": -1, "jobs": [{}]}`, 400, "cache_size -1"},
		{"bad index", `{"index": "v1", "jobs": [{}]}`, 400, "index must be an index ID"},
		{"too large", `{"jobs": [{}], "dataset": "` + strings.Repeat("d", api.MaxSharedPlanBodyBytes) + `"}`, 400, "over 65536 bytes"},
		{"too large after the object", `{"jobs": [{}]}` + strings.Repeat(" ", api.MaxSharedPlanBodyBytes), 400, "over 65536 bytes"},
		// encoding/json would take the last of two values: refused.
		{"a field twice", `{"cache_size": 1000, "jobs": [{}], "cache_size": 2000}`, 400, `duplicate object member name "cache_size"`},
		{"a job's field twice", `{"jobs": [{"seed": 1, "seed": 2}]}`, 400, `duplicate object member name "seed"`},
		{"jobs twice", `{"jobs": [{}], "jobs": [{}, {}]}`, 400, `duplicate object member name "jobs"`},
		{"unknown dataset", `{"dataset": "nope", "jobs": [{}]}`, 404, "nope"},
		{"index not held", `{"index": "0123456789abcdef", "jobs": [{}]}`, 409, "0123456789abcdef"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := shared(m, tt.body)
			if err == nil || httperr.Status(err) != tt.status || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("%v (status %d); want %d saying %q", err, httperr.Status(err), tt.status, tt.want)
			}
			if tt.status == 400 && !errors.Is(err, query.ErrBadRequest) {
				t.Errorf("%v: not a query.ErrBadRequest", err)
			}
		})
	}

	// Up to the limits, the same requests plan.
	for _, body := range []string{jobs(64, `{"name": "j"}`), `{"jobs": [{"batch_size": 64, "epochs": 20, "first_epoch": 3, "speed": 0, "start": 0}]}`} {
		if _, err := shared(m, body); err != nil {
			t.Errorf("%.60s…: %v", body, err)
		}
	}
}
