package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"testing"

	"github.com/brandgw/brand/api"
	"github.com/brandgw/brand/client"
	"github.com/brandgw/brand/gateway"
	"github.com/brandgw/brand/internal/gen/synth"
	"github.com/brandgw/brand/internal/testsupport/throttlefront"
	"github.com/brandgw/brand/planner"
	"github.com/brandgw/brand/shuffle"
)

// TestPlanBill: /plan's bill — each epoch's store reads, GETs and bytes,
// priced — against what a counting S3 front over MinIO sees the same job
// read, on one gateway, with the whole dataset cached and with half of it.
// The GETs are the chunks' parts (16 MiB; these chunks are one part
// each), and the cost the price table applied to the counts.
func TestPlanBill(t *testing.T) {
	p := packToMinIO(t, synth.Spec{Samples: 3000, MeanBytes: 2000, Seed: 4}, 24<<10)
	prices := api.Prices{GETsPer1000: 0.0004, PerGiB: 0.09, Currency: "USD"} // S3 Standard, us-east-1
	for _, share := range []int64{1, 2} {
		t.Run(fmt.Sprint("cache=1/", share), func(t *testing.T) {
			front, err := throttlefront.Start(p.server.URL(), throttlefront.Config{})
			if err != nil {
				t.Fatal(err)
			}
			defer front.Close()
			backend := p.server.Config()
			backend.Endpoint = front.URL
			cache := p.bytes / share
			if share == 1 {
				cache += p.chunk // the working set's slack
			}
			g, url := startGateway(t, gateway.Config{
				Datasets:    []gateway.DatasetSpec{{Name: "synthetic", URL: p.url}},
				Backend:     backend,
				CacheSize:   cache,
				NoPrefault:  true,
				StorePrices: prices,
				Planner:     planner.ForGateway{},
				Defaults:    gateway.Defaults{BatchSize: 32, Window: 4, Seed: 5},
			})
			resp, err := http.Get(url + "/plan?epochs=3")
			if err != nil {
				t.Fatal(err)
			}
			var plan planner.Plan
			err = json.NewDecoder(resp.Body).Decode(&plan)
			resp.Body.Close()
			if err != nil || plan.Bill == nil {
				t.Fatalf("/plan: %v, bill %v", err, plan.Bill)
			}
			c, err := client.New(url, client.Options{Job: api.Job{Params: shuffle.Params{Seed: 5, World: 1}}, Ahead: 2})
			if err != nil {
				t.Fatal(err)
			}
			before := front.Counts()
			for e := range 3 {
				for _, err := range c.Epoch(context.Background(), e) {
					if err != nil {
						t.Fatal(err)
					}
				}
			}
			got := front.Counts()
			gets, bytes := got.Gets-before.Gets, got.Bytes-before.Bytes
			b := plan.Bill.Total
			t.Logf("planned: %d loads, %d GETs, %d bytes, %.6f %s; counted: %d GETs, %d bytes", b.StoreReads, b.GETs, b.Bytes, b.Cost, prices.Currency, gets, bytes)
			if b.GETs != int64(b.StoreReads) {
				t.Errorf("chunks of one part: %d GETs for %d loads", b.GETs, b.StoreReads)
			}
			if off := math.Abs(float64(gets-b.GETs)) / float64(b.GETs); off > 0.01 {
				t.Errorf("the store saw %d GETs, the plan %d: %.1f %% off", gets, b.GETs, 100*off)
			}
			if off := math.Abs(float64(bytes-b.Bytes)) / float64(b.Bytes); off > 0.01 {
				t.Errorf("the store sent %d bytes, the plan %d: %.1f %% off", bytes, b.Bytes, 100*off)
			}
			// The live figures a user compares the bill with: the job's
			// in /stats (and brand_job_store_gets_total).
			var liveGETs, liveBytes int64
			for _, j := range g.JobStats() {
				liveGETs += j.StoreGETs
				liveBytes += j.BackendBytes
			}
			if chunkGETs := gets - (got.Heads - before.Heads); liveGETs != chunkGETs || liveBytes != bytes {
				t.Errorf("/stats says the job sent %d GETs for %d bytes; the store saw %d GETs and sent %d bytes", liveGETs, liveBytes, chunkGETs, bytes)
			}
			want := float64(b.GETs)/1000*prices.GETsPer1000 + float64(b.Bytes)/(1<<30)*prices.PerGiB
			if math.Abs(b.Cost-want) > 1e-6 {
				t.Errorf("the bill's cost %v, the prices applied to its counts %v", b.Cost, want)
			}
		})
	}
}
