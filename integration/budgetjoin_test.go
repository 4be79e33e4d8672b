package integration

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/brandgw/brand/api"
	"github.com/brandgw/brand/client"
	"github.com/brandgw/brand/gateway"
	"github.com/brandgw/brand/gateway/gatewaytest"
	"github.com/brandgw/brand/internal/gen/synth"
	"github.com/brandgw/brand/internal/testsupport/throttlefront"
	"github.com/brandgw/brand/s3backend"
	"github.com/brandgw/brand/shuffle"
)

// TestStoreBudgetAcrossAJoin: a cluster of three gateways reads a job
// under a store budget of GETs a second while a fourth joins and, later,
// one of the first three is listed out. Counted by a front over MinIO,
// no whole second of the run sees more than 5 % over the budget, and
// every node's share of it follows the membership: 1/4 within a poll of
// the joiner being listed (the joiner itself after its hold), 1/3 again
// after the leave. The reproduction: each node took 1/n of the agreed
// membership at once, so a joiner read at the whole budget until it
// learned the cluster, and at 1/3 beside three members at 1/3 until the
// cluster agreed on the four.
func TestStoreBudgetAcrossAJoin(t *testing.T) {
	p := packToMinIO(t, synth.Spec{Samples: 6000, MeanBytes: 1000, Seed: 11}, 4<<10)
	front, err := throttlefront.Start(p.server.URL(), throttlefront.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(front.Close)
	const budget = 150 // GETs a second, well under what four ranks ask
	const poll = 200 * time.Millisecond
	backend := p.server.Config()
	backend.Endpoint = front.URL

	lns := make([]net.Listener, 4)
	urls := make([]string, 4)
	for k := range lns {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		lns[k], urls[k] = ln, "http://"+ln.Addr().String()
	}
	lists := make([]*gatewaytest.MemberList, 4)
	for k := range lists {
		lists[k] = &gatewaytest.MemberList{}
	}
	start := func(k int) {
		g, err := gateway.New(gateway.Config{
			Datasets:    []gateway.DatasetSpec{{Name: "synthetic", URL: p.url}},
			Backend:     backend,
			StoreBudget: s3backend.Budget{GETs: budget},
			CacheSize:   p.bytes / 8, // every epoch reads most chunks again
			NoPrefault:  true,
			Defaults:    gateway.Defaults{BatchSize: 16, Window: 2, Seed: 5},
			Cluster: gateway.ClusterConfig{Members: lists[k], Advertise: urls[k], MembersPoll: poll,
				ProbeInterval: poll, PeerTimeout: 5 * time.Second, FlipTimeout: 10 * time.Second},
		})
		if err != nil {
			t.Error(err)
			return
		}
		t.Cleanup(g.Close)
		srv := &httptest.Server{Listener: lns[k], Config: &http.Server{Handler: g}}
		srv.Start()
		t.Cleanup(srv.Close)
		if err := g.Load(context.Background()); err != nil {
			t.Error(err)
		}
	}
	share := func(k int) float64 {
		return scrape(t, urls[k], "brand_store_budget_share")["brand_store_budget_share"]
	}
	begin := time.Now()
	waitShare := func(k int, want float64, within time.Duration, what string) {
		t.Helper()
		defer func() { t.Logf("%5.1f s: %s: node %d's share %v", time.Since(begin).Seconds(), what, k, want) }()
		deadline := time.Now().Add(within)
		for share(k) != want {
			if time.Now().After(deadline) {
				t.Fatalf("%s: node %d's share of the budget is %v %v after, want %v", what, k, share(k), within, want)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	// The three start together, as a cluster's pods do.
	var starting sync.WaitGroup
	for k := range 3 {
		lists[k].Set(urls[:3]...)
		starting.Go(func() { start(k) })
	}
	starting.Wait()
	if t.Failed() {
		t.FailNow()
	}
	for k := range 3 {
		waitUp(t, urls[:3], k)
		waitShare(k, 1.0/3, 10*time.Second, "three started")
	}

	// Four ranks read through the first three nodes until told to stop.
	var stop atomic.Bool
	var errs atomic.Int64
	var wg sync.WaitGroup
	for rank := range 4 {
		wg.Go(func() {
			c, err := client.New(urls[rank%3], client.Options{Job: api.Job{Params: shuffle.Params{Seed: 5, World: 4, Rank: rank}}, Ahead: 2})
			if err != nil {
				t.Error(err)
				return
			}
			for e := 0; !stop.Load(); e++ {
				for _, err := range c.Epoch(context.Background(), e) {
					if err != nil {
						errs.Add(1)
						t.Logf("rank %d epoch %d: %v", rank, e, err)
						break
					}
					if stop.Load() {
						return
					}
				}
			}
		})
	}
	time.Sleep(3 * time.Second)
	lists[3].Set(urls...)
	start(3)
	if t.Failed() {
		t.FailNow()
	}
	for k := range 3 {
		lists[k].Set(urls...)
	}
	// A fall is taken within a poll (and the test's scrape).
	for k := range 3 {
		waitShare(k, 1.0/4, 2*poll+time.Second, "a joiner listed")
	}
	waitShare(3, 1.0/4, 10*time.Second, "the joiner after its hold")
	time.Sleep(4 * time.Second)
	left := []string{urls[0], urls[2], urls[3]}
	for _, k := range []int{0, 2, 3} {
		lists[k].Set(left...)
	}
	lists[1].Set(left...)
	for _, k := range []int{0, 2, 3} {
		waitShare(k, 1.0/3, 15*time.Second, "node 1 listed out")
	}
	time.Sleep(3 * time.Second)
	stop.Store(true)
	wg.Wait()

	perSecond := front.PerSecond()
	secs := slices.Sorted(func(yield func(int64) bool) {
		for s := range perSecond {
			if !yield(s) {
				return
			}
		}
	})
	if len(secs) < 10 {
		t.Fatalf("the run read from the store in %d seconds, want 10 or more", len(secs))
	}
	var line string
	high := 0
	for _, s := range secs {
		n := perSecond[s]
		line += fmt.Sprintf(" %d", n)
		high = max(high, n)
		if float64(n) > 1.05*budget {
			t.Errorf("second %d saw %d GETs, over the budget's %d by more than 5 %%", s-secs[0], n, budget)
		}
	}
	t.Logf("GETs a second over the run (budget %d):%s; the highest %d", budget, line, high)
	if high < budget/2 {
		t.Errorf("the highest second saw %d GETs: the job asks too little to test the budget", high)
	}
	if n := errs.Load(); n != 0 {
		t.Errorf("%d errors reached ranks", n)
	}
}
