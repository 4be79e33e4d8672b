package gateway_test

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/brandgw/brand/format"
	"github.com/brandgw/brand/format/formattest"
	"github.com/brandgw/brand/gateway"
	"github.com/brandgw/brand/gateway/gatewaytest"
	"github.com/brandgw/brand/s3backend"
)

// inPlaceStore is gatewaytest.InPlaceStore.
func inPlaceStore(t *testing.T, f formattest.Lines) (s3backend.Store, map[string]string) {
	t.Helper()
	return gatewaytest.InPlaceStore(t, f)
}

func startInPlace(t *testing.T, st s3backend.Store, f formattest.Lines) *httptest.Server {
	t.Helper()
	_, srv := start(t, st, func(c *gateway.Config) {
		c.Datasets[0].Formats = []format.Format{f}
	})
	return srv
}

// A dataset served in place, over HTTP (what its batches hold, every
// sample once with the members of the fields named, is internal/batch/reader's
// TestReadInPlace): a batch's ETag differs with the fields read, a HEAD
// claims no Content-Length (not known before decoding), and columns= a
// dataset cannot give is 400.
func TestInPlaceHTTP(t *testing.T) {
	st, _ := inPlaceStore(t, formattest.Lines{})
	srv := startInPlace(t, st, formattest.Lines{})
	all, _ := get(t, srv.URL+"/epoch/1/batch/0?batch_size=16&seed=5")
	some, _ := get(t, srv.URL+"/epoch/1/batch/0?batch_size=16&seed=5&columns=txt")
	if all.StatusCode != http.StatusOK || some.StatusCode != http.StatusOK || all.Header.Get("ETag") == some.Header.Get("ETag") {
		t.Errorf("all fields: %d %s; columns=txt: %d %s: want 200s, two ETags", all.StatusCode, all.Header.Get("ETag"), some.StatusCode, some.Header.Get("ETag"))
	}
	head, _ := do(t, http.MethodHead, srv.URL+"/epoch/1/batch/0?batch_size=16&seed=5", nil)
	if head.StatusCode != http.StatusOK || head.Header.Get("Content-Length") != "" {
		t.Errorf("HEAD: %d, Content-Length %q: not known before decoding", head.StatusCode, head.Header.Get("Content-Length"))
	}
	for _, q := range []string{"columns=nope", "columns=txt,txt", "columns=txt,,len"} {
		if resp, body := get(t, srv.URL+"/epoch/1/batch/0?"+q); resp.StatusCode != http.StatusBadRequest {
			t.Errorf("%s: %d %s", q, resp.StatusCode, body)
		}
	}
}
