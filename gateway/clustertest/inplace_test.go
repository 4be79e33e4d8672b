package clustertest_test

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/brandgw/brand/cluster"
	"github.com/brandgw/brand/dataset/stored"
	"github.com/brandgw/brand/format"
	"github.com/brandgw/brand/format/formattest"
	"github.com/brandgw/brand/gateway"
	"github.com/brandgw/brand/gateway/gatewaytest"
)

// A cluster of 3 serves a dataset in place exactly once per epoch, each
// chunk decoded from one read of the store by its owner alone — with some
// fields read (columns=), and with chunks that learn their size — and any
// node answers any rank's batch with the same bytes.
func TestInPlaceCluster(t *testing.T) {
	for _, tc := range []struct {
		name    string
		f       formattest.Lines
		columns string
	}{{"all fields", formattest.Lines{}, ""}, {"columns, growing", formattest.Lines{Short: true}, "&columns=txt"}} {
		t.Run(tc.name, func(t *testing.T) {
			st, want := gatewaytest.InPlaceStore(t, tc.f)
			const nodes, world, batch = 3, 6, 4
			cl := gatewaytest.StartCluster(t, st, nodes, nil, func(c *gateway.Config) {
				c.Datasets[0].Formats = []format.Format{tc.f}
			})
			ix, err := stored.ReadIndex(context.Background(), st)
			if err != nil {
				t.Fatal(err)
			}
			batches := (len(want) + world*batch - 1) / (world * batch)
			for epoch := range 2 {
				seen := map[string]int{}
				bodies := map[string][]byte{}
				for r := range world {
					q := fmt.Sprintf("seed=7&window=4&batch_size=%d&world=%d&rank=%d%s", batch, world, r, tc.columns)
					home := cl[cluster.Home(r, world, nodes)]
					for m, body := range gatewaytest.ReadRank(t, home.Srv.URL, q, epoch, batches) {
						for _, s := range gatewaytest.ReadTar(t, body) {
							seen[s.Key]++
							if string(s.Files["txt"]) != want[s.Key] {
								t.Fatalf("%s: %q, want %q", s.Key, s.Files["txt"], want[s.Key])
							}
						}
						bodies[fmt.Sprintf("%d/%d", r, m)] = body
					}
				}
				gatewaytest.ExactlyOnce(t, seen, len(want), fmt.Sprintf("epoch %d over all ranks", epoch))
				for k, n := range cl {
					q := fmt.Sprintf("seed=7&window=4&batch_size=%d&world=%d&rank=%d%s", batch, world, 5, tc.columns)
					resp, body := gatewaytest.Get(t, fmt.Sprintf("%s/epoch/%d/batch/0?%s", n.Srv.URL, epoch, q))
					if resp.StatusCode != http.StatusOK || !bytes.Equal(body, bodies["5/0"]) {
						t.Fatalf("node %d answered rank 5's batch 0 otherwise (%d)", k, resp.StatusCode)
					}
				}
			}
			var reads int
			for _, n := range cl {
				for k, c := range n.Store.Total() {
					if strings.HasSuffix(k, ".lines") {
						reads += c.Reads
					}
				}
			}
			if reads != ix.NumChunks() {
				t.Errorf("the cluster read the store %d times for %d chunks over two epochs; want each once", reads, ix.NumChunks())
			}
		})
	}
}
