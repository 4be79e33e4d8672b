package gateway_test

import (
	"context"
	"math"
	"testing"
	"time"

	"github.com/brandgw/brand/gateway"
	"github.com/brandgw/brand/s3backend"
)

// TestStoreBudgetSplitByMembers: each node of a cluster paces its store
// reads under its share of the budget, 1 over the members agreed (three
// of them: a third each), and a node leaving re-splits it among the
// others within their membership poll.
func TestStoreBudgetSplitByMembers(t *testing.T) {
	f := newFixture(t, 12, 4)
	cl := startCluster(t, f, 3, nil, func(c *gateway.Config) {
		c.StoreBudget = s3backend.Budget{GETs: 3000}
		c.Cluster.MembersPoll = 50 * time.Millisecond
	})
	waitFor := func(k int, share float64) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for {
			got := metric(t, cl[k].srv.URL, "brand_store_budget_share")
			rate := metric(t, cl[k].srv.URL, "brand_store_rate_gets")
			if math.Abs(got-share) < 1e-9 && math.Abs(rate-3000*share) < 1e-6 {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("node %d's share %v (rate %v), want %v after 10 s", k, got, rate, share)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	for k := range cl {
		waitFor(k, 1.0/3)
	}
	if err := cl[2].g.Leave(context.Background()); err != nil {
		t.Fatal(err)
	}
	waitFor(0, 0.5)
	waitFor(1, 0.5)
}
