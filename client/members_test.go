package client_test

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"sync"
	"testing"

	"github.com/brandgw/brand/api"
	"github.com/brandgw/brand/client"
	"github.com/brandgw/brand/shuffle"
)

// TestClientPinsMembersPerEpoch: the client names, on every request of an
// epoch, the membership version of that epoch's first answer, and pins
// afresh at the next epoch; a 409 for a version no node knows any more is
// ErrMembersUnknown, and no request of the epoch names another version
// (each rank moving on its own split a step between two layouts: 45
// samples twice, 45 never, in an independent check). The reproduction: the
// client sent no members=, so ranks of one step whose requests straddled
// a membership change were assigned under two versions.
func TestClientPinsMembersPerEpoch(t *testing.T) {
	g := newFakeGateway(t)
	var mu sync.Mutex
	current := "00000000000000a1"
	forgotten := map[string]bool{}
	var sent []string // members= of each batch request, in order
	g.setHook(func(w http.ResponseWriter, r *http.Request) bool {
		mu.Lock()
		defer mu.Unlock()
		v := r.URL.Query().Get(api.ParamMembers)
		sent = append(sent, v)
		if forgotten[v] {
			w.Header().Set(api.HeaderMembers, current)
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusConflict)
			w.Write([]byte(`{"error": "unknown membership version", "status": 409}`))
			return true
		}
		if v == "" {
			v = current
		}
		w.Header().Set(api.HeaderMembers, v)
		return false
	})
	c, err := client.New(g.URL, client.Options{Ahead: -1, Job: api.Job{Params: shuffle.Params{Seed: 1, BatchSize: 2, World: 2, Rank: 1}}})
	if err != nil {
		t.Fatal(err)
	}
	read := func(epoch int, during func(m int)) {
		t.Helper()
		m := 0
		for _, err := range c.Epoch(context.Background(), epoch) {
			if err != nil {
				t.Fatalf("epoch %d: %v", epoch, err)
			}
			if during != nil {
				during(m)
			}
			m++
		}
	}
	// Epoch 0: the cluster changes after the second batch; the epoch
	// stays on the version its first answer named.
	read(0, func(m int) {
		if m == 1 {
			mu.Lock()
			current = "00000000000000b2"
			mu.Unlock()
		}
	})
	mu.Lock()
	epoch0 := slices.Clone(sent)
	sent = nil
	mu.Unlock()
	if epoch0[0] != "" || slices.Contains(epoch0[1:], "") || slices.ContainsFunc(epoch0[1:], func(v string) bool { return v != "00000000000000a1" }) {
		t.Errorf("epoch 0 sent members= %q; want none first, then the first answer's on every request", epoch0)
	}
	if c.Members() != "00000000000000a1" {
		t.Errorf("Members() = %q after epoch 0", c.Members())
	}
	// Epoch 1 pins the version the cluster uses then; midway, no node
	// knows it any more: the client says so, and never moves the epoch
	// to the current version on its own — its sibling ranks read the
	// step under the pinned one.
	var failed error
	m := 0
	for _, err := range c.Epoch(context.Background(), 1) {
		if err != nil {
			failed = err
			break
		}
		if m == 1 {
			mu.Lock()
			forgotten["00000000000000b2"] = true
			current = "00000000000000c3"
			mu.Unlock()
		}
		m++
	}
	mu.Lock()
	epoch1 := slices.Clone(sent)
	mu.Unlock()
	if !errors.Is(failed, client.ErrMembersUnknown) {
		t.Errorf("epoch 1 ended with %v, want ErrMembersUnknown once its version is forgotten", failed)
	}
	// The epoch's extent, batches 0 and 1, batch 2 refused, and nothing
	// under another version.
	if want := []string{"", "00000000000000b2", "00000000000000b2", "00000000000000b2"}; !slices.Equal(epoch1, want) {
		t.Errorf("epoch 1 sent members= %q; want %q", epoch1, want)
	}
	if c.Members() != "00000000000000b2" {
		t.Errorf("Members() = %q after the refusal, want the epoch's pin", c.Members())
	}
}
