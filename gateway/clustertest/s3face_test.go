package clustertest_test

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"

	"github.com/brandgw/brand/chunkindex"
	"github.com/brandgw/brand/gateway"
	"github.com/brandgw/brand/gateway/gatewaytest"
	"github.com/brandgw/brand/internal/cluster/hedge"
	"github.com/brandgw/brand/internal/s3face/s3auth"
)

// TestS3FaceOnCluster: on a cluster of partial-index nodes, any node lists
// a dataset's files and serves every one, each chunk read from the store
// once, by its owner, whichever node the files are asked of — an owner's
// answer that comes late (one stalled 300 ms here, as a loaded machine
// stalls one) waited for. Hedging is off: a hedge, by design, asks the
// next node of a chunk's ranking, which reads the store again (with it
// on, the stall cost a thirteenth read; hedging's own tests are
// internal/cluster/route's).
func TestS3FaceOnCluster(t *testing.T) {
	f := gatewaytest.NewFixture(t, 12, 8)
	f.AddMembers(t)
	creds, err := s3auth.ParseCredentials(strings.NewReader(gatewaytest.S3ID + " " + gatewaytest.S3Secret))
	if err != nil {
		t.Fatal(err)
	}
	var fetches atomic.Int64
	stall := func(_ int, h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/internal/v2/samples" && fetches.Add(1) == 30 {
				time.Sleep(300 * time.Millisecond)
			}
			h.ServeHTTP(w, r)
		})
	}
	cl := gatewaytest.StartClusterWrapped(t, f.Store, 3, stall, func(c *gateway.Config) {
		c.S3 = gateway.S3Config{Credentials: creds, ReadAhead: -1}
		c.Cluster.Hedge = hedge.Config{Rate: -1}
	})
	clients := make([]*minio.Client, len(cl))
	for k, n := range cl {
		srv := httptest.NewServer(n.G.S3Handler())
		t.Cleanup(srv.Close)
		clients[k] = gatewaytest.S3Client(t, srv.URL, gatewaytest.S3ID, gatewaytest.S3Secret)
	}
	ctx := context.Background()
	var names []string
	for o := range clients[0].ListObjects(ctx, "test", minio.ListObjectsOptions{Recursive: true}) {
		if o.Err != nil {
			t.Fatal(o.Err)
		}
		names = append(names, o.Key)
	}
	if len(names) != 2*96 {
		t.Fatalf("node 0 listed %d objects, want 192", len(names))
	}
	for round, mc := range clients[1:] {
		for _, n := range names {
			got, err := gatewaytest.ReadBucketObject(mc, "test", n, minio.GetObjectOptions{})
			key, ext := chunkindex.SplitKey(n)
			if err != nil || !bytes.Equal(got, f.Content[key][ext]) {
				t.Fatalf("round %d, %s: %v (%d bytes)", round, n, err, len(got))
			}
		}
		if reads := gatewaytest.ClusterReads(cl); reads != 12 {
			var hedges []string
			for _, n := range cl {
				_, body := gatewaytest.Get(t, n.Srv.URL+"/metrics")
				for _, line := range strings.Split(string(body), "\n") {
					if strings.HasPrefix(line, "brand_peer_hedges_total") {
						hedges = append(hedges, line)
					}
				}
			}
			t.Fatalf("after round %d the cluster read chunks %d times from the store; want each of 12 once (%s)", round, reads, strings.Join(hedges, "; "))
		}
	}
	if fetches.Load() < 30 {
		t.Errorf("%d fetches between the nodes: none stalled", fetches.Load())
	}
}
