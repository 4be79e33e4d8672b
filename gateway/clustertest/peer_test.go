package clustertest_test

import (
	"encoding/binary"
	"fmt"
	"net/http"
	"testing"

	"github.com/brandgw/brand/gateway"
	"github.com/brandgw/brand/gateway/gatewaytest"
	"github.com/brandgw/brand/internal/cluster/peercred"
	"github.com/brandgw/brand/internal/cluster/transport"
)

// TestPeerRequestBounds: a peer's sample request is bounded as a batch is,
// and answered with the status of each refusal: a request within its
// bounds is the reply's head and the samples' bytes; a request over a
// bound 400 (an ID twice the parameters', over the batch the list's), one
// for another index version 409, an unknown dataset 404. Which requests
// are refused, and why (the IDs 0–1999 repeated up to a million, which
// made the gateway allocate the summed length of every repeat and die of
// it; a list above --max-batch-size and a snapshot version that is not
// one, which reached the store and answered 200 and 404): peerreq's
// TestDecodeSamplesRefuses.
func TestPeerRequestBounds(t *testing.T) {
	f := gatewaytest.NewFixture(t, 8, 16)
	var bound int64 // the bytes of samples 0–31: 16 fit, 64 do not
	for id := range 32 {
		_, _, n, _ := f.Index.SampleRange(id)
		bound += n
	}
	cl := gatewaytest.StartCluster(t, f.Store, 2, nil, func(c *gateway.Config) {
		c.Limits.MaxBatchSize = 64
		c.Limits.MaxBatchBytes = bound
	})
	base := cl[0].Srv.URL
	q := "dataset=test&index=" + f.Index.ID()
	stream := q + "&seed=0&window=8&epoch=0&pos=0"
	seq := func(lo, hi int) []int {
		var ids []int
		for id := lo; id < hi; id++ {
			ids = append(ids, id)
		}
		return ids
	}
	repeated := append(seq(0, 16), seq(0, 16)...)
	tests := []struct {
		name  string
		query string
		ids   []int
		want  int
	}{
		{"distinct, within bounds", stream, seq(0, 16), http.StatusOK},
		{"no stream: a single sample's", q, []int{3}, http.StatusOK},
		{"an ID twice", stream, repeated, http.StatusBadRequest},
		{"above the batch bound", stream, seq(0, 65), http.StatusBadRequest},
		{"above the byte bound", stream, seq(0, 64), http.StatusBadRequest},
		{"another index version", "dataset=test&index=0123456789abcdef", []int{1}, http.StatusConflict},
		{"an unknown dataset", "dataset=nope&index=" + f.Index.ID(), []int{1}, http.StatusNotFound},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			resp, body := gatewaytest.PeerRequest(t, base, tc.query, tc.ids)
			if resp.StatusCode != tc.want {
				t.Fatalf("%s: %s", resp.Status, body)
			}
			if tc.want != http.StatusOK {
				return
			}
			var want int64 = 4 // the reply's head: no sample missing
			for _, id := range tc.ids {
				_, _, n, _ := f.Index.SampleRange(id)
				want += n
			}
			if int64(len(body)) != want || binary.LittleEndian.Uint32(body) != 0 {
				t.Fatalf("reply of %d bytes (head %x), want %d", len(body), body[:4], want)
			}
		})
	}
}

// TestKeptForTheirNewOwners: a node told by another that it will ask it
// for chunks (a gain a membership change left to the batches) keeps them
// (brand_handover_kept_chunks) until that node asks for each, given or
// not, or tells it a list without them; what one node says changes
// nothing of what another awaits.
func TestKeptForTheirNewOwners(t *testing.T) {
	f := gatewaytest.NewFixture(t, 8, 10)
	cl := gatewaytest.StartCluster(t, f.Store, 2, nil, nil)
	base, node1 := cl[0].Srv.URL, cl[1].Srv.URL
	ix := "dataset=test&index=" + f.Index.ID()
	keep := func(from string, chunks ...int) {
		t.Helper()
		if resp, body := gatewaytest.Do(t, http.MethodPost, base+transport.NeededPath+"?"+ix+"&keep=true", gatewaytest.SampleList(chunks), peercred.HeaderPeer, from); resp.StatusCode != http.StatusOK {
			t.Fatalf("keep %v: %s: %s", chunks, resp.Status, body)
		}
	}
	kept := func(want float64, when string) {
		t.Helper()
		if got := gatewaytest.MetricSum(t, base, "brand_handover_kept_chunks"); got != want {
			t.Errorf("%s: brand_handover_kept_chunks %v, want %v", when, got, want)
		}
	}
	kept(0, "at start")
	keep(node1, 2, 5, 6)
	keep("http://127.0.0.1:1", 6, 7) // another node's list, one chunk in common
	kept(4, "two nodes' lists")
	if resp, _ := gatewaytest.Get(t, fmt.Sprintf("%s%s?%s&chunk=5", base, transport.ChunkPath, ix), peercred.HeaderPeer, node1); resp.StatusCode != http.StatusNotFound {
		t.Errorf("chunk 5, not held: %s", resp.Status)
	}
	kept(3, "node 1 asked for chunk 5 (not held)")
	keep(node1)
	kept(2, "node 1's list withdrawn; the other's stays")
}
