package gateway_test

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/signer"
	"github.com/rs/zerolog"

	"github.com/brandgw/brand/gateway"
	"github.com/brandgw/brand/gateway/gatewaytest"
	"github.com/brandgw/brand/internal/s3face/s3auth"
	"github.com/brandgw/brand/s3backend"
)

// The key pair of the S3 face (gatewaytest's).
const (
	s3ID     = gatewaytest.S3ID
	s3Secret = gatewaytest.S3Secret
)

// addMembers is gatewaytest.Fixture.AddMembers.
func (f *fixture) addMembers(t testing.TB) {
	t.Helper()
	f.shared().AddMembers(t)
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

// s3Client is gatewaytest.S3Client.
func s3Client(t *testing.T, endpoint, id, secret string) *minio.Client {
	t.Helper()
	return gatewaytest.S3Client(t, endpoint, id, secret)
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

// readBucketObject is gatewaytest.ReadBucketObject.
func readBucketObject(mc *minio.Client, bucket, name string, opts minio.GetObjectOptions) ([]byte, error) {
	return gatewaytest.ReadBucketObject(mc, bucket, name, opts)
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
