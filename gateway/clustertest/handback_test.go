package clustertest_test

import (
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/brandgw/brand/gateway/gatewaytest"
)

// TestHealedCutGivesBackWhatAPeerRead: node 0 cannot reach node 1 (every
// request it sends is answered 503) and reads a whole epoch, node 1's
// chunks from the store in node 1's stead; node 1 reads nothing. Once
// the cut heals and node 0's probe takes node 1 back up, node 1 reads the
// epoch with no chunk from the store: node 0 told it which of its chunks
// it holds as it took it back (a peer's hand-back), and node 1 copied
// them from node 0's cache. Before the hand-back, node 1 read each of its
// own chunks from the store a second time (a cluster cut off from the
// store and its peers read 0.04–0.07 × the dataset again in the warm
// epoch after the heal: integration's TestClusterPartitions).
func TestHealedCutGivesBackWhatAPeerRead(t *testing.T) {
	f := gatewaytest.NewFixture(t, 16, 16) // 256 samples
	var cut atomic.Bool
	wrap := func(k int, h http.Handler) http.Handler {
		if k != 1 {
			return h
		}
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if cut.Load() {
				http.Error(w, "cut", http.StatusServiceUnavailable)
				return
			}
			h.ServeHTTP(w, r)
		})
	}
	cl := gatewaytest.StartClusterWrapped(t, f.Store, 2, wrap, nil)
	waitSees := func(k, of int, up bool) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for gatewaytest.ClusterView(t, cl[k].Srv.URL).Nodes[of].Up != up {
			if time.Now().After(deadline) {
				t.Fatalf("node %d does not see node %d up=%t after 10 s", k, of, up)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	waitSees(0, 1, true)
	cut.Store(true)
	waitSees(0, 1, false)

	const q = "seed=3&window=8&batch_size=32"
	seen := map[string]int{}
	for _, body := range gatewaytest.ReadRank(t, cl[0].Srv.URL, q, 0, 8) {
		f.Verify(t, gatewaytest.ReadTar(t, body), seen)
	}
	gatewaytest.ExactlyOnce(t, seen, 256, "the epoch from node 0, node 1 cut off")
	if r := cl[0].Store.Total().Under("chunks/").Sum().Reads; r != 16 {
		t.Fatalf("node 0 read %d chunks from the store standing in for node 1, want all 16", r)
	}

	cut.Store(false)
	waitSees(0, 1, true)
	seen = map[string]int{}
	for _, body := range gatewaytest.ReadRank(t, cl[1].Srv.URL, q, 0, 8) {
		f.Verify(t, gatewaytest.ReadTar(t, body), seen)
	}
	gatewaytest.ExactlyOnce(t, seen, 256, "the epoch from node 1 after the heal")
	if r := cl[1].Store.Total().Under("chunks/").Sum().Reads; r != 0 {
		t.Errorf("node 1 read %d chunks from the store after the heal, which node 0 held: want none", r)
	}
	if r := cl[0].Store.Total().Under("chunks/").Sum().Reads; r != 16 {
		t.Errorf("node 0 read %d chunks from the store in all, want each of the 16 once", r)
	}
}
