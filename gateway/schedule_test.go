package gateway_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/brandgw/brand/api"
	"github.com/brandgw/brand/gateway"
)

// readEpochs reads epochs [0, n) in order, one batch at a time, as one
// training job would, and waits for each epoch's optimum to be computed.
func readEpochs(t *testing.T, url string, n, batches int) {
	t.Helper()
	for e := range n {
		for m := range batches {
			if resp, body := get(t, fmt.Sprintf("%s/epoch/%d/batch/%d", url, e, m)); resp.StatusCode != 200 {
				t.Fatalf("epoch %d batch %d: %d %s", e, m, resp.StatusCode, body)
			}
		}
	}
}

func epochStats(t *testing.T, g *gateway.Gateway, wantOptimal int) map[uint64]api.EpochStat {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		out := map[uint64]api.EpochStat{}
		n := 0
		for _, s := range g.EpochStats() {
			out[s.Epoch] = s
			if s.Optimal != nil {
				n++
			}
		}
		if n >= wantOptimal {
			return out
		}
		if time.Now().After(deadline) {
			t.Fatalf("optimal hit ratio computed for %d epochs, want %d: %+v", n, wantOptimal, out)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
