package gateway_test

import (
	"archive/tar"
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"testing"

	"github.com/brandgw/brand/gateway"
)

// fuzzMethods are the methods FuzzRequest picks from by its first argument.
var fuzzMethods = []string{http.MethodGet, http.MethodHead, http.MethodPost, http.MethodDelete}

// FuzzRequest sends random paths and query strings to a gateway over a
// small fixture. Whatever the request, the gateway must not panic and must
// answer either a JSON error repeating its status, or a 200 (or 304) whose
// Content-Length matches its body: a valid tar for a batch or sample, JSON
// for the info endpoints. The seed corpus is in testdata/fuzz/FuzzRequest.
func FuzzRequest(f *testing.F) {
	fx := newFixture(f, 3, 5)
	g, _ := start(f, fx.store, func(c *gateway.Config) {
		c.Planner = nil // /plan answers 501: the fuzzer is not to spend its time planning
		c.PrefetchConcurrency = -1
	})
	f.Add(uint8(0), "/epoch/0/batch/1", "world=2&rank=1&batch_size=3")
	f.Add(uint8(1), "/samples/class1/sample00004", "dataset=test")
	f.Add(uint8(0), "/epoch/1/batch/0/manifest", "offset=7&drop_last=true")
	f.Add(uint8(0), "/epoch/0", "format=json&seed=18446744073709551615")
	f.Add(uint8(2), "/metrics", "")
	f.Add(uint8(0), "/plan", "cache_size=1GiB")
	f.Fuzz(func(t *testing.T, m uint8, path, rawQuery string) {
		method := fuzzMethods[int(m)%len(fuzzMethods)]
		req := httptest.NewRequest(method, "/", nil)
		if !strings.HasPrefix(path, "/") {
			path = "/" + path
		}
		req.URL = &url.URL{Path: path, RawQuery: rawQuery}
		req.RequestURI = req.URL.RequestURI()
		w := httptest.NewRecorder()
		g.ServeHTTP(w, req)
		checkAnswer(t, method, req.URL, w)
	})
}

// checkAnswer checks one answer of FuzzRequest.
func checkAnswer(t *testing.T, method string, u *url.URL, w *httptest.ResponseRecorder) {
	t.Helper()
	body, h := w.Body.Bytes(), w.Header()
	ctype := h.Get("Content-Type")
	switch {
	case w.Code >= 400:
		var e struct {
			Error  string
			Status int
		}
		if ctype != "application/json" || json.Unmarshal(body, &e) != nil || e.Status != w.Code || e.Error == "" {
			t.Fatalf("%s %s: %d with %q body %.300q, want a JSON error repeating the status", method, u, w.Code, ctype, body)
		}
		if w.Code == http.StatusMethodNotAllowed && h.Get("Allow") != "GET, HEAD" && !(u.Path == "/plan" && h.Get("Allow") == "GET, HEAD, POST") {
			t.Fatalf("%s %s: 405 with Allow %q", method, u, h.Get("Allow"))
		}
	case w.Code == http.StatusNotModified:
		if len(body) != 0 {
			t.Fatalf("%s %s: 304 with a %d-byte body", method, u, len(body))
		}
	case w.Code == http.StatusOK:
		if method == http.MethodHead {
			return
		}
		if cl := h.Get("Content-Length"); cl != "" && cl != strconv.Itoa(len(body)) {
			t.Fatalf("%s %s: Content-Length %s, body %d bytes", method, u, cl, len(body))
		}
		switch ctype {
		case "application/x-tar":
			if h.Get("Content-Length") == "" {
				t.Fatalf("%s %s: tar without Content-Length", method, u)
			}
			tr := tar.NewReader(bytes.NewReader(body))
			for {
				_, err := tr.Next()
				if err == io.EOF {
					break
				}
				if err != nil {
					t.Fatalf("%s %s: not a valid tar: %v", method, u, err)
				}
			}
		case "application/json":
			if !json.Valid(body) {
				t.Fatalf("%s %s: invalid JSON %.300q", method, u, body)
			}
		default:
			if u.Path != "/metrics" {
				t.Fatalf("%s %s: 200 with Content-Type %q", method, u, ctype)
			}
		}
	default:
		t.Fatalf("%s %s: unexpected status %d", method, u, w.Code)
	}
}
