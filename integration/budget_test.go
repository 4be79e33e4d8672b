package integration

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/brandgw/brand/api"
	"github.com/brandgw/brand/client"
	"github.com/brandgw/brand/gateway"
	"github.com/brandgw/brand/internal/gen/synth"
	"github.com/brandgw/brand/internal/testsupport/throttlefront"
	"github.com/brandgw/brand/s3backend"
	"github.com/brandgw/brand/shuffle"
)

// budgetRun is what one run of a job over the throttling front saw.
type budgetRun struct {
	gets, throttled int64
	seconds         float64
	errs            int
	perSecond       map[int64]int
}

func (r budgetRun) rate() float64 { return float64(r.gets-r.throttled) / r.seconds }

// readThrough reads epochs of a 4-rank job through a gateway over front,
// every rank at once, counting the errors any rank met; plain ranks send
// each request once, as a plain HTTP client does (the Go client with its
// retries off).
func readThrough(t *testing.T, p *packed, front *throttlefront.Front, budget s3backend.Budget, epochs int, plain bool) budgetRun {
	t.Helper()
	backend := p.server.Config()
	backend.Endpoint = front.URL
	backend.MaxRetries = 3
	backend.RetryBase = 20 * time.Millisecond
	_, url := startGateway(t, gateway.Config{
		Datasets:    []gateway.DatasetSpec{{Name: "synthetic", URL: p.url}},
		Backend:     backend,
		StoreBudget: budget,
		CacheSize:   p.bytes / 4, // each epoch reads most chunks again
		NoPrefault:  true,
		Defaults:    gateway.Defaults{BatchSize: 16, Window: 2, Seed: 5},
	})
	before := front.Counts()
	start := time.Now()
	var mu sync.Mutex
	errs := 0
	var wg sync.WaitGroup
	for rank := range 4 {
		wg.Go(func() {
			opts := client.Options{Job: api.Job{Params: shuffle.Params{Seed: 5, World: 4, Rank: rank}}, Ahead: 2}
			if plain {
				opts.MaxRetries = -1
			}
			c, err := client.New(url, opts)
			if err != nil {
				t.Error(err)
				return
			}
			for e := range epochs {
				for _, err := range c.Epoch(context.Background(), e) {
					if err != nil {
						mu.Lock()
						errs++
						mu.Unlock()
						var ae *client.APIError
						if !errors.As(err, &ae) {
							t.Logf("rank %d epoch %d: %v", rank, e, err)
						}
						break
					}
				}
			}
		})
	}
	wg.Wait()
	after := front.Counts()
	return budgetRun{gets: after.Gets - before.Gets, throttled: after.Throttled - before.Throttled,
		seconds: time.Since(start).Seconds(), errs: errs, perSecond: front.PerSecond()}
}

// TestStoreBudget is the store's budget against a store that throttles
// (internal/testsupport/throttlefront over MinIO): a job reads at an
// unpaced GET rate first, then against a front that refuses GETs past
// half that rate, once paced under that budget and once with no budget
// (the pacer learns the store's limit from its 503s), read by ranks that
// send each request once. In both, no rank meets an error over three
// epochs; paced, the store throttles at most 1 % of the GETs and no second sees
// more than 5 % over the budget; the share of the budget the job reads,
// and the unpaced run's figures, are logged beside.
func TestStoreBudget(t *testing.T) {
	p := packToMinIO(t, synth.Spec{Samples: 4000, MeanBytes: 1000, Seed: 9}, 4<<10)
	open, err := throttlefront.Start(p.server.URL(), throttlefront.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(open.Close)
	free := readThrough(t, p, open, s3backend.Budget{}, 1, false)
	if free.errs != 0 {
		t.Fatalf("unthrottled: %d errors", free.errs)
	}
	limit := int(free.rate() / 2)
	t.Logf("unpaced, unthrottled: %d GETs in %.2f s, %.0f a second; the store's limit and the budget: %d a second", free.gets, free.seconds, free.rate(), limit)
	if limit < 20 {
		t.Fatalf("the job reads %.0f GETs a second unpaced: too few to halve", free.rate())
	}

	run := func(budget s3backend.Budget, plain bool) budgetRun {
		front, err := throttlefront.Start(p.server.URL(), throttlefront.Config{Rate: limit})
		if err != nil {
			t.Fatal(err)
		}
		defer front.Close()
		return readThrough(t, p, front, budget, 3, plain)
	}
	// No budget: the gateway learns the store's limit from its throttling
	// (s3backend.Pacer); ranks that send each request once see none of it.
	learned := run(s3backend.Budget{}, true)
	paced := run(s3backend.Budget{GETs: float64(limit)}, false)
	for _, r := range []struct {
		name string
		r    budgetRun
	}{{"no budget, plain ranks", learned}, {"paced", paced}} {
		t.Logf("%s: %d GETs, %d throttled (%.2f %%), %.0f answered a second (%.2f of the budget), %d errors reached ranks",
			r.name, r.r.gets, r.r.throttled, 100*float64(r.r.throttled)/float64(r.r.gets), r.r.rate(), r.r.rate()/float64(limit), r.r.errs)
	}
	if paced.errs != 0 {
		t.Errorf("paced: %d errors reached ranks", paced.errs)
	}
	if learned.errs != 0 {
		t.Errorf("no budget: %d errors reached plain ranks (the store's throttling passed on)", learned.errs)
	}
	if share := float64(paced.throttled) / float64(paced.gets); share > 0.01 {
		t.Errorf("paced: the store throttled %.2f %% of the GETs, want at most 1 %%", 100*share)
	}
	// How close the paced job comes to the budget is a figure
	// (docs/benchmarks.md "The store's budget"), not a timed assertion;
	// half of it would be a pacer gone wrong.
	if paced.rate() < 0.5*float64(limit) {
		t.Errorf("paced: %.0f GETs answered a second, under half the budget's %d", paced.rate(), limit)
	}
	secs := make([]int64, 0, len(paced.perSecond))
	for s := range paced.perSecond {
		secs = append(secs, s)
	}
	slices.Sort(secs)
	for _, s := range secs {
		if n := paced.perSecond[s]; float64(n) > 1.05*float64(limit) {
			t.Errorf("paced: second %d saw %d GETs, over the budget's %d by more than 5 %%", s, n, limit)
		}
	}
}
