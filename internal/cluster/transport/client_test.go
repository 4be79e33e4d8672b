package transport

import (
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/brandgw/brand/internal/cluster/nodestate"
	"github.com/brandgw/brand/internal/cluster/peercred"
)

// knows is a membership that lists everyone.
type knows struct{}

func (knows) Knows(string) bool { return true }

// TestCallSignsForTheNodesBoot: a node's first request to a peer, and its
// first after the peer restarted, are refused as signed for another boot
// of the peer; the refusal names the peer's boot, the request is signed
// for it and sent once more, and taken. A refusal that names no boot, or
// the same boot again, is not retried.
func TestCallSignsForTheNodesBoot(t *testing.T) {
	cred := peercred.NewCredentials([]byte("a secret of the test"))
	var life atomic.Pointer[peercred.Verifier]
	var requests atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requests.Add(1)
		v := life.Load()
		if _, err := v.Verify(r); err != nil {
			if errors.Is(err, peercred.ErrOtherBoot) {
				w.Header().Set(peercred.HeaderPeerBoot, v.Boot())
			}
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		_ = json.NewEncoder(w).Encode(nodestate.State{URL: "http://" + r.Host})
	}))
	t.Cleanup(srv.Close)
	c := newTransport(Config{Self: "http://127.0.0.1:1", Credentials: cred, Timeout: 5 * time.Second}).to(srv.URL)
	for _, step := range []struct {
		name     string
		restart  bool
		requests int64
	}{
		{"the first request", true, 2},
		{"the next", false, 1},
		{"the first after a restart", true, 2},
		{"the next after it", false, 1},
	} {
		if step.restart {
			life.Store(peercred.NewVerifier(cred, srv.URL, 0, knows{}))
		}
		requests.Store(0)
		if _, _, err := c.State(t.Context()); err != nil {
			t.Fatalf("%s: %v", step.name, err)
		}
		if n := requests.Load(); n != step.requests {
			t.Errorf("%s took %d requests, want %d", step.name, n, step.requests)
		}
	}
	// A peer that refuses the boot it named (another secret, say) is
	// refused, not asked forever.
	life.Store(peercred.NewVerifier(peercred.NewCredentials([]byte("another secret")), srv.URL, 0, knows{}))
	requests.Store(0)
	if _, _, err := c.State(t.Context()); !errors.Is(err, ErrDown) || requests.Load() != 1 {
		t.Fatalf("a peer of another secret: %v after %d requests; want ErrDown after 1", err, requests.Load())
	}
}
