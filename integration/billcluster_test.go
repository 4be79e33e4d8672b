package integration

import (
	"context"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/brandgw/brand/api"
	"github.com/brandgw/brand/cluster"
	"github.com/brandgw/brand/gateway"
	"github.com/brandgw/brand/internal/gen/synth"
	"github.com/brandgw/brand/internal/testsupport/throttlefront"
	"github.com/brandgw/brand/planner"
)

// TestClusterPlanBill: a cluster of three gateways' /plan bill — each
// epoch's GETs and bytes from the store, priced — against what a counting
// S3 front over MinIO sees the cluster read for the same job, three
// epochs, every rank's batch of a step read from its home before the
// next step's (as a job's ranks read, and as the plan orders them), with
// each node's cache a third of the dataset and with the whole dataset
// cached across the nodes. Within 1 % (TestPlanBill holds one gateway).
func TestClusterPlanBill(t *testing.T) {
	p := packToMinIO(t, synth.Spec{Samples: 3000, MeanBytes: 2000, Seed: 4}, 24<<10)
	prices := api.Prices{GETsPer1000: 0.0004, PerGiB: 0.09, Currency: "USD"} // S3 Standard, us-east-1
	const nodes, world, batch = 3, 6, 8
	for _, cache := range []int64{p.bytes/nodes + 8*p.chunk, p.bytes / nodes} {
		t.Run(fmt.Sprint("node cache=", cache), func(t *testing.T) {
			front, err := throttlefront.Start(p.server.URL(), throttlefront.Config{})
			if err != nil {
				t.Fatal(err)
			}
			defer front.Close()
			backend := p.server.Config()
			backend.Endpoint = front.URL
			lns := make([]net.Listener, nodes)
			urls := make([]string, nodes)
			for k := range lns {
				if lns[k], err = net.Listen("tcp", "127.0.0.1:0"); err != nil {
					t.Fatal(err)
				}
				urls[k] = "http://" + lns[k].Addr().String()
			}
			// Node k is member k: cluster.Home indexes them directly.
			slices.SortFunc(lns, func(a, b net.Listener) int { return strings.Compare(a.Addr().String(), b.Addr().String()) })
			slices.Sort(urls)
			for k := range nodes {
				g, err := gateway.New(gateway.Config{
					Datasets:            []gateway.DatasetSpec{{Name: "synthetic", URL: p.url}},
					Backend:             backend,
					CacheSize:           cache,
					NoPrefault:          true,
					IndexPoll:           -1,
					PrefetchConcurrency: -1, // store reads on demand only, in the plan's order
					StorePrices:         prices,
					Planner:             planner.ForGateway{},
					Cluster:             gateway.ClusterConfig{Peers: urls, Self: k, ProbeInterval: 50 * time.Millisecond, PeerTimeout: 5 * time.Second},
				})
				if err != nil {
					t.Fatal(err)
				}
				defer g.Close()
				if err := g.Load(context.Background()); err != nil {
					t.Fatal(err)
				}
				srv := &httptest.Server{Listener: lns[k], Config: &http.Server{Handler: g}}
				srv.Start()
				defer srv.Close()
			}
			for k := range nodes {
				waitUp(t, urls, k)
			}
			q := fmt.Sprintf("seed=7&window=4&batch_size=%d&world=%d", batch, world)
			var plan planner.ClusterPlan
			if err := getJSONInto(urls[0]+"/plan?epochs=3&"+q, &plan); err != nil {
				t.Fatal(err)
			}
			if plan.Bill == nil || plan.Nodes != nodes {
				t.Fatalf("/plan: nodes %d, bill %v", plan.Nodes, plan.Bill)
			}
			before, beforePaths := front.Counts(), front.ByPath()
			for e := range 3 {
				for m := range plan.Epochs[0].Batches {
					for r := range world {
						url := fmt.Sprintf("%s/epoch/%d/batch/%d?%s&rank=%d", urls[cluster.Home(r, world, nodes)], e, m, q, r)
						resp, err := http.Get(url)
						if err != nil {
							t.Fatal(err)
						}
						body, _ := io.ReadAll(resp.Body)
						resp.Body.Close()
						if resp.StatusCode != http.StatusOK {
							t.Fatalf("%s: %s: %s", url, resp.Status, body)
						}
					}
				}
			}
			got := front.Counts()
			gets, heads, bytes := got.Gets-got.Heads-before.Gets+before.Heads, got.Heads-before.Heads, got.Bytes-before.Bytes
			b := plan.Bill.Total
			t.Logf("3 epochs on %d nodes: planned %d loads, %d GETs, %d bytes (%d across nodes), %.6f %s; counted %d GETs, %d bytes, and %d HEADs (the nodes' probes of the store's path)",
				nodes, b.StoreReads, b.GETs, b.Bytes, b.CrossNodeBytes, b.Cost, prices.Currency, gets, bytes, heads)
			if off := math.Abs(float64(gets-b.GETs)) / float64(b.GETs); off > 0.01 {
				t.Errorf("the store saw %d GETs, the plan %d: %.1f %% off", gets, b.GETs, 100*off)
				for path, c := range front.ByPath() {
					if c0 := beforePaths[path]; c.Gets-c0.Gets > 1 {
						t.Logf("%s: %d GETs and HEADs (%d HEADs), %d bytes", path, c.Gets-c0.Gets, c.Heads-c0.Heads, c.Bytes-c0.Bytes)
					}
				}
			}
			if off := math.Abs(float64(bytes-b.Bytes)) / float64(b.Bytes); off > 0.01 {
				t.Errorf("the store sent %d bytes, the plan %d: %.1f %% off", bytes, b.Bytes, 100*off)
			}
			want := float64(b.GETs)/1000*prices.GETsPer1000 + float64(b.Bytes)/(1<<30)*prices.PerGiB
			if math.Abs(b.Cost-want) > 1e-6 {
				t.Errorf("the bill's cost %v, the prices applied to its counts %v", b.Cost, want)
			}
		})
	}
}
