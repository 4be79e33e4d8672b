package gateway_test

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
	"github.com/minio/minio-go/v7/pkg/signer"
	"github.com/rs/zerolog"

	"github.com/brandgw/brand/chunkindex"
	"github.com/brandgw/brand/gateway"
	"github.com/brandgw/brand/internal/s3face/s3auth"
	"github.com/brandgw/brand/s3backend"
)

const (
	s3ID     = "brandtest"
	s3Secret = "brand-test-secret-key"
)

// addMembers writes the fixture's member table, read from its chunks as
// `brand index` reads them.
func (f *fixture) addMembers(t testing.TB) {
	t.Helper()
	ctx := context.Background()
	var b chunkindex.MembersBuilder
	for c := range f.index.NumChunks() {
		ch := f.index.Chunk(c)
		buf := make([]byte, ch.Size)
		if err := f.store.ReadRange(ctx, ch.Key, "", 0, buf); err != nil {
			t.Fatal(err)
		}
		first, _ := f.index.ChunkRange(c)
		i := 0
		if _, err := chunkindex.ScanTar(bytes.NewReader(buf), func(s chunkindex.TarSample) error {
			err := b.Add(first+i, s.Files)
			i++
			return err
		}); err != nil {
			t.Fatal(err)
		}
	}
	enc, err := b.Encode(ctx, f.index)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.store.Put(ctx, chunkindex.MembersKey, bytes.NewReader(enc), int64(len(enc))); err != nil {
		t.Fatal(err)
	}
}

// startS3 runs a gateway with the S3 face over store and returns a
// minio-go client of the face.
func startS3(t *testing.T, store s3backend.Store, mutate func(*gateway.Config)) (*gateway.Gateway, *minio.Client, string) {
	t.Helper()
	creds, err := s3auth.ParseCredentials(strings.NewReader(s3ID + " " + s3Secret + "\n"))
	if err != nil {
		t.Fatal(err)
	}
	g, _ := start(t, store, func(c *gateway.Config) {
		c.S3 = gateway.S3Config{Credentials: creds}
		if mutate != nil {
			mutate(c)
		}
	})
	srv := httptest.NewServer(g.S3Handler())
	t.Cleanup(srv.Close)
	return g, s3Client(t, srv.URL, s3ID, s3Secret), srv.URL
}

func s3Client(t *testing.T, endpoint, id, secret string) *minio.Client {
	t.Helper()
	u, err := url.Parse(endpoint)
	if err != nil {
		t.Fatal(err)
	}
	mc, err := minio.New(u.Host, &minio.Options{Creds: credentials.NewStaticV4(id, secret, ""), Region: "us-east-1",
		BucketLookup: minio.BucketLookupPath, MaxRetries: 1})
	if err != nil {
		t.Fatal(err)
	}
	return mc
}

func readObject(t *testing.T, mc *minio.Client, name string, opts minio.GetObjectOptions) []byte {
	t.Helper()
	b, err := readObjectErr(mc, name, opts)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return b
}

func readObjectErr(mc *minio.Client, name string, opts minio.GetObjectOptions) ([]byte, error) {
	return readBucketObject(mc, "test", name, opts)
}

func readBucketObject(mc *minio.Client, bucket, name string, opts minio.GetObjectOptions) ([]byte, error) {
	obj, err := mc.GetObject(context.Background(), bucket, name, opts)
	if err != nil {
		return nil, err
	}
	defer obj.Close()
	return io.ReadAll(obj)
}

// TestS3Contract: the gateway's S3 handler is the face (package s3face
// tests what it answers) behind the gateway's request IDs, access log and
// metrics: each request answered with S3's status, error code and
// headers, logged without a huge key whole, and counted under the route
// "s3:OP"; a gateway without credentials has no handler.
func TestS3Contract(t *testing.T) {
	f := newFixture(t, 2, 4)
	f.addMembers(t)
	logs := &hookWriter{}
	g, _, endpoint := startS3(t, f.store, func(c *gateway.Config) { c.Logger = zerolog.New(logs) })
	const key = "class0/sample00000.jpg"
	huge := strings.Repeat("k", 1_000_000)
	tests := []struct {
		name, method, path string
		signed             bool
		status             int
		code               string // the S3 error code in the body
		body               []byte
	}{
		{"signed GET", "GET", "/test/" + key, true, http.StatusOK, "", f.content["class0/sample00000"]["jpg"]},
		{"signed HEAD", "HEAD", "/test/" + key, true, http.StatusOK, "", nil},
		{"anonymous GET", "GET", "/test/" + key, false, http.StatusForbidden, "AccessDenied", nil},
		{"unknown key", "GET", "/test/class0/nosuch.jpg", true, http.StatusNotFound, "NoSuchKey", nil},
		{"PUT", "PUT", "/test/new.txt", true, http.StatusForbidden, "AccessDenied", nil},
		{"1 MB key", "GET", "/test/" + huge, true, http.StatusBadRequest, "KeyTooLongError", nil},
	}
	for _, tt := range tests {
		req, err := http.NewRequest(tt.method, endpoint+tt.path, nil)
		if err != nil {
			t.Fatal(err)
		}
		if tt.signed {
			req.Header.Set("X-Amz-Content-Sha256", "UNSIGNED-PAYLOAD")
			req = signer.SignV4(*req, s3ID, s3Secret, "", "us-east-1")
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != tt.status || (tt.code != "" && !strings.Contains(string(body), "<Code>"+tt.code+"</Code>")) ||
			(tt.body != nil && !bytes.Equal(body, tt.body)) {
			t.Errorf("%s: %d %.200s, want %d %s", tt.name, resp.StatusCode, body, tt.status, tt.code)
		}
		if resp.Header.Get("X-Amz-Request-Id") == "" {
			t.Errorf("%s: no x-amz-request-id", tt.name)
		}
		if tt.status == http.StatusOK && (resp.Header.Get("ETag") == "" || resp.Header.Get("Last-Modified") == "") {
			t.Errorf("%s: ETag %q, Last-Modified %q", tt.name, resp.Header.Get("ETag"), resp.Header.Get("Last-Modified"))
		}
	}
	if strings.Contains(logs.String(), strings.Repeat("k", 4<<10)) {
		t.Errorf("a log line carries 4 KiB of a key (%d bytes logged)", len(logs.String()))
	}
	rec := httptest.NewRecorder()
	g.ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	for _, want := range []string{"brand_s3_requests_total{code=\"OK\",op=\"GetObject\"} 1\n", "brand_s3_requests_total{code=\"NoSuchKey\",op=\"GetObject\"} 1\n",
		"brand_s3_requests_total{code=\"AccessDenied\",op=\"PutObject\"} 1\n", "brand_http_requests_total{code=\"200\",route=\"s3:GetObject\"} 1\n",
		"brand_http_requests_total{code=\"403\",route=\"s3:GetObject\"} 1\n", "brand_s3_served_bytes_total "} {
		if !strings.Contains(rec.Body.String(), want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
	if g, _ := start(t, f.store, nil); g.S3Handler() != nil {
		t.Error("a gateway without S3 credentials has an S3 handler")
	}
}

// TestS3FaceOnCluster: on a cluster of partial-index nodes, any node lists
// a dataset's files and serves every one, each chunk read from the store
// once, by its owner, whichever node the files are asked of.
func TestS3FaceOnCluster(t *testing.T) {
	f := newFixture(t, 12, 8)
	f.addMembers(t)
	creds, err := s3auth.ParseCredentials(strings.NewReader(s3ID + " " + s3Secret))
	if err != nil {
		t.Fatal(err)
	}
	cl := startCluster(t, f, 3, nil, func(c *gateway.Config) {
		c.S3 = gateway.S3Config{Credentials: creds, ReadAhead: -1}
	})
	clients := make([]*minio.Client, len(cl))
	for k, n := range cl {
		srv := httptest.NewServer(n.g.S3Handler())
		t.Cleanup(srv.Close)
		clients[k] = s3Client(t, srv.URL, s3ID, s3Secret)
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
			got, err := readBucketObject(mc, "test", n, minio.GetObjectOptions{})
			key, ext := chunkindex.SplitKey(n)
			if err != nil || !bytes.Equal(got, f.content[key][ext]) {
				t.Fatalf("round %d, %s: %v (%d bytes)", round, n, err, len(got))
			}
		}
		if reads := clusterReads(cl); reads != 12 {
			t.Fatalf("after round %d the cluster read chunks %d times from the store; want each of 12 once", round, reads)
		}
	}
}
