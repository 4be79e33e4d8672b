package client_test

import (
	"context"
	"encoding/pem"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/brandgw/brand/api"
	"github.com/brandgw/brand/client"
	"github.com/brandgw/brand/shuffle"
)

// TestClientTokenAndTLS: the client reaches a gateway that requires a
// token over TLS with a certificate of a private CA, given the token and
// the CA file; without either it fails clearly: a 401 as an APIError, a
// certificate error. (What the gateway answers a request without its
// token, and its challenge: gateway's TestBearerTokens.)
func TestClientTokenAndTLS(t *testing.T) {
	g := newFakeGateway(t)
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer s3cret" {
			w.Header().Set("WWW-Authenticate", `Bearer realm="brand"`)
			fakeError(w, http.StatusUnauthorized, "this gateway requires a bearer token")
			return
		}
		g.serve(w, r)
	}))
	t.Cleanup(srv.Close)
	ca := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(ca, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}), 0o600); err != nil {
		t.Fatal(err)
	}
	read := func(opts client.Options) (int, error) {
		c, err := client.New(srv.URL, opts)
		if err != nil {
			return 0, err
		}
		n := 0
		for b, err := range c.Epoch(context.Background(), 0) {
			if err != nil {
				return n, err
			}
			n += len(b.Samples)
		}
		return n, nil
	}
	job := api.Job{Params: shuffle.Params{BatchSize: 4}}
	if n, err := read(client.Options{Job: job, Token: "s3cret", CAFile: ca}); err != nil || n != 20 {
		t.Fatalf("with the token and the CA: %d samples, %v; want the toy dataset's 20", n, err)
	}
	var apiErr *client.APIError
	if _, err := read(client.Options{Job: job, CAFile: ca, MaxRetries: -1}); !errors.As(err, &apiErr) || apiErr.StatusCode != 401 {
		t.Errorf("without the token: %v, want a 401", err)
	}
	if _, err := read(client.Options{Job: job, Token: "s3cret", MaxRetries: -1}); err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Errorf("without the CA: %v, want a certificate error", err)
	}
}
