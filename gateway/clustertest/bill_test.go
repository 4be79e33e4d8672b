package clustertest_test

import (
	"encoding/json"
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/brandgw/brand/cluster"
	"github.com/brandgw/brand/gateway"
	"github.com/brandgw/brand/gateway/gatewaytest"
	"github.com/brandgw/brand/internal/cluster/hedge"
	"github.com/brandgw/brand/planner"
)

// TestClusterBill: a cluster's /plan bills its own members — their
// chunks owned as the live cluster owns them — and the chunk loads its
// nodes then make reading three epochs (every rank from its home, step
// by step, no prefetch) are the bill's, within 1 %, with each node's
// cache a third of the dataset and with the whole dataset cached across
// the nodes. (Read rank by rank instead, a whole epoch each, the nodes
// loaded up to 25 % more than the bill: not the order the plan is of.)
func TestClusterBill(t *testing.T) {
	f := gatewaytest.NewFixture(t, 160, 4) // 160 chunks: one load is under 1 % of an epoch's
	const nodes, world, batch = 3, 6, 8
	for _, cache := range []int64{f.Index.TotalBytes()/nodes + 8*f.Index.TotalBytes()/160, f.Index.TotalBytes() / 3} {
		t.Run(fmt.Sprint("node cache=", cache), func(t *testing.T) {
			cl := gatewaytest.StartCluster(t, f.Store, nodes, nil, func(c *gateway.Config) {
				c.CacheSize = cache
				// The bill is a cluster's without faults: on a starved
				// machine (a CI run at a load of 12–15) a fetch late past
				// its hedge deadline or the test clusters' 2 s timeout
				// had the chunk read again by the asker (167 loads for a
				// bill of 160). What a hedge and a timeout cost is
				// route's and transport's tests'.
				c.Cluster.Hedge = hedge.Config{Rate: -1}
				c.Cluster.PeerTimeout = time.Minute
			})
			gatewaytest.WaitMembers(t, gatewaytest.URLs(cl), gatewaytest.MembershipOf(t, gatewaytest.URLs(cl)).Version())
			q := fmt.Sprintf("seed=7&window=4&batch_size=%d&world=%d", batch, world)
			resp, body := gatewaytest.Get(t, cl[0].Srv.URL+"/plan?epochs=3&"+q)
			var plan planner.ClusterPlan
			if resp.StatusCode != 200 || json.Unmarshal(body, &plan) != nil || plan.Bill == nil || plan.Nodes != nodes {
				t.Fatalf("/plan: %d %s", resp.StatusCode, body)
			}
			before := gatewaytest.ClusterReads(cl)
			batches := plan.Epochs[0].Batches
			// Step by step, every rank's batch of a step before the next
			// step's, as a job's ranks read (and as the plan orders them).
			for e := range 3 {
				for m := range batches {
					for r := range world {
						url := fmt.Sprintf("%s/epoch/%d/batch/%d?%s&rank=%d", cl[cluster.Home(r, world, nodes)].Srv.URL, e, m, q, r)
						if resp, body := gatewaytest.Get(t, url); resp.StatusCode != 200 {
							t.Fatalf("%s: %d %s", url, resp.StatusCode, body)
						}
					}
				}
			}
			got, want := gatewaytest.ClusterReads(cl)-before, plan.Bill.Total.StoreReads
			t.Logf("3 epochs on %d nodes: %d chunk loads, the bill %d (%d GETs, %d bytes, %d across nodes)",
				nodes, got, want, plan.Bill.Total.GETs, plan.Bill.Total.Bytes, plan.Bill.Total.CrossNodeBytes)
			if off := math.Abs(float64(got-want)) / float64(want); off > 0.01 {
				t.Errorf("the nodes loaded %d chunks, the bill says %d: %.1f %% off", got, want, 100*off)
			}
			if plan.Bill.Total.GETs != int64(want) {
				t.Errorf("local files are one read a load: %d GETs for %d loads", plan.Bill.Total.GETs, want)
			}
		})
	}
}
