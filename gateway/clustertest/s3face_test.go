package clustertest_test

import (
	"bytes"
	"context"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/minio/minio-go/v7"

	"github.com/brandgw/brand/chunkindex"
	"github.com/brandgw/brand/gateway"
	"github.com/brandgw/brand/internal/s3face/s3auth"
	"github.com/brandgw/brand/internal/testsupport/gatewaytest"
)

// TestS3FaceOnCluster: on a cluster of partial-index nodes, any node lists
// a dataset's files and serves every one, each chunk read from the store
// once, by its owner, whichever node the files are asked of.
func TestS3FaceOnCluster(t *testing.T) {
	f := gatewaytest.NewFixture(t, 12, 8)
	f.AddMembers(t)
	creds, err := s3auth.ParseCredentials(strings.NewReader(gatewaytest.S3ID + " " + gatewaytest.S3Secret))
	if err != nil {
		t.Fatal(err)
	}
	cl := gatewaytest.StartCluster(t, f.Store, 3, nil, func(c *gateway.Config) {
		c.S3 = gateway.S3Config{Credentials: creds, ReadAhead: -1}
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
			t.Fatalf("after round %d the cluster read chunks %d times from the store; want each of 12 once", round, reads)
		}
	}
}
