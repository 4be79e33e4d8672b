package gateway_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"

	"github.com/brandgw/brand/cluster"
)

// TestVisionCluster: a vision job over Parquet served in place, on a
// cluster of three gateways (each loading the dataset's image-text
// facts on its own, and fetching the chunks another node owns from it),
// serves every rank's batches byte for byte as a single gateway does: a
// job's data does not depend on the cluster's size. Any node answers a
// rank's batch with its home's bytes; each chunk is read from the
// store once, by its owner, and crosses to the nodes that need it.
// When a node goes mid-epoch (its server stops, no hand-over), the two left serve
// the rest of the epoch, still the single gateway's bytes.
func TestVisionCluster(t *testing.T) {
	tok, enc, st := visionStore(t)
	pairParquet(t, st, visionPairs(t, 6, 8))
	parquetVision(t, st, tok)

	const nodes, world = 3, 3
	q := url.Values{"seq": {"128"}, "vision": {visionRule(enc)}, "seed": {"11"}, "window": {"2"}, "batch_size": {"2"}, "world": {strconv.Itoa(world)}}
	_, single := start(t, st, inParquet)
	resp, body := get(t, single.URL+"/epoch/0?"+q.Encode())
	var info struct{ Batches int }
	if resp.StatusCode != http.StatusOK || json.Unmarshal(body, &info) != nil || info.Batches < 4 {
		t.Fatalf("/epoch/0: %s %s; want 4 global batches or more", resp.Status, body)
	}
	batch := func(base string, rank, m int) []byte {
		t.Helper()
		r := url.Values{}
		for k, v := range q {
			r[k] = v
		}
		r.Set("rank", strconv.Itoa(rank))
		resp, body := get(t, fmt.Sprintf("%s/epoch/0/batch/%d?%s", base, m, r.Encode()))
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("rank %d batch %d from %s: %s %s", rank, m, base, resp.Status, body)
		}
		return body
	}
	want := map[[2]int][]byte{}
	for m := range info.Batches {
		for r := range world {
			want[[2]int{r, m}] = batch(single.URL, r, m)
		}
	}

	cl := startCluster(t, &fixture{store: st}, nodes, nil, inParquet)
	half := info.Batches / 2
	for m := range half {
		for r := range world {
			home := cl[cluster.Home(r, world, nodes)]
			if got := batch(home.srv.URL, r, m); !bytes.Equal(got, want[[2]int{r, m}]) {
				t.Fatalf("rank %d batch %d from its home differs from a single gateway's", r, m)
			}
			for k, n := range cl {
				if got := batch(n.srv.URL, r, m); !bytes.Equal(got, want[[2]int{r, m}]) {
					t.Fatalf("rank %d batch %d from node %d differs from a single gateway's", r, m, k)
				}
			}
		}
	}
	var fetched float64
	reads := 0
	for _, n := range cl {
		fetched += metricSum(t, n.srv.URL, "brand_peer_bytes_fetched_total")
		for k, c := range n.store.Total() {
			if strings.HasSuffix(k, ".parquet") {
				reads += c.Reads
			}
		}
	}
	if fetched == 0 {
		t.Error("no chunk crossed between the nodes")
	}
	if reads != 6 {
		t.Errorf("the cluster read the store's Parquet %d times for 6 chunks; want each once, by its owner", reads)
	}
	t.Logf("%d Parquet reads from the store, %.0f bytes fetched from peers", reads, fetched)

	// Node 2 leaves: the others serve the rest, still the same bytes.
	cl[2].srv.Close()
	for m := half; m < info.Batches; m++ {
		for r := range world {
			for k, n := range cl[:2] {
				if got := batch(n.srv.URL, r, m); !bytes.Equal(got, want[[2]int{r, m}]) {
					t.Fatalf("after node 2 left: rank %d batch %d from node %d differs from a single gateway's", r, m, k)
				}
			}
		}
	}
}
