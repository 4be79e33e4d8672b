package gateway_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/brandgw/brand/api"
	"github.com/brandgw/brand/gateway"
)

// TestBearerTokens: every endpoint but the probes' asks for a token, a
// request without one answered 401 with a Bearer challenge and a JSON
// error. (The Go client with a token over TLS: client's
// TestClientTokenAndTLS.)
func TestBearerTokens(t *testing.T) {
	f := newFixture(t, 2, 4)
	_, srv := start(t, f.store, func(c *gateway.Config) {
		c.AuthTokens = []string{"first-token", "second-token"}
	})
	tests := []struct {
		name, path, auth string
		want             int
	}{
		{"no token", "/epoch/0/batch/0", "", 401},
		{"wrong token", "/epoch/0/batch/0", "Bearer nope", 401},
		{"a prefix of a token", "/epoch/0/batch/0", "Bearer first", 401},
		{"another scheme", "/epoch/0/batch/0", "Basic Zmlyc3QtdG9rZW4=", 401},
		{"right token", "/epoch/0/batch/0", "Bearer first-token", 200},
		{"the other token", "/epoch/0", "Bearer second-token", 200},
		{"scheme in lower case", "/datasets", "bearer second-token", 200},
		{"metrics need one", "/metrics", "", 401},
		{"stats need one", "/stats", "", 401},
		{"liveness is open to probes", "/healthz", "", 200},
		{"readiness is open to probes", "/readyz", "", 200},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var hdr []string
			if tt.auth != "" {
				hdr = []string{"Authorization", tt.auth}
			}
			resp, body := get(t, srv.URL+tt.path, hdr...)
			if resp.StatusCode != tt.want {
				t.Fatalf("%s: %d %s, want %d", tt.path, resp.StatusCode, body, tt.want)
			}
			if tt.want == 401 {
				if got := resp.Header.Get("WWW-Authenticate"); !strings.HasPrefix(got, "Bearer") {
					t.Errorf("WWW-Authenticate %q, want a Bearer challenge", got)
				}
				var e api.Error
				if err := json.Unmarshal(body, &e); err != nil || e.Status != 401 {
					t.Errorf("401 body %s is not a JSON error", body)
				}
			}
		})
	}
}

func TestSeparateAdmin(t *testing.T) {
	f := newFixture(t, 2, 4)
	g, srv := start(t, f.store, func(c *gateway.Config) { c.SeparateAdmin = true })
	admin := httptest.NewServer(g.AdminHandler())
	t.Cleanup(admin.Close)
	for _, path := range []string{"/metrics", "/stats", "/plan"} {
		if resp, _ := get(t, srv.URL+path); resp.StatusCode != 404 {
			t.Errorf("data port %s: %d, want 404", path, resp.StatusCode)
		}
		if resp, body := get(t, admin.URL+path); resp.StatusCode != 200 {
			t.Errorf("admin port %s: %d %s, want 200", path, resp.StatusCode, body)
		}
	}
	if resp, _ := get(t, admin.URL+"/debug/pprof/goroutine?debug=1"); resp.StatusCode != 200 {
		t.Errorf("admin pprof: %d", resp.StatusCode)
	}
	_, body := get(t, srv.URL+"/datasets")
	if strings.Contains(string(body), `"url"`) || strings.Contains(string(body), f.dir) {
		t.Errorf("the data port's /datasets shows where data is stored: %s", body)
	}
	if _, body := get(t, admin.URL+"/datasets"); !strings.Contains(string(body), `"url"`) {
		t.Errorf("the admin port's /datasets lacks the URL: %s", body)
	}
	if resp, _ := get(t, srv.URL+"/epoch/0/batch/0"); resp.StatusCode != http.StatusOK {
		t.Errorf("batch on the data port: %d", resp.StatusCode)
	}
}
