package clustertest_test

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/brandgw/brand/gateway/gatewaytest"
	"github.com/brandgw/brand/importance/snapshots"
	"github.com/brandgw/brand/internal/cluster/transport"
)

// TestFeedbackDuringASealAcrossNodes: two nodes; node 0 seals an epoch,
// and node 1's first feedback for it arrives just after node 0 collected
// node 1's part — nothing then — and before the pointer is written (node
// 1's listener posts it to node 1 between answering the collection and
// sending the answer back); more arrives after the seal answered. Every
// post node 1 answers 200 is in the snapshot, and every other is 409
// saying the epoch is sealed or being sealed.
//
// The reproduction: node 1 opened the epoch afresh, found no pointer in
// the store and answered 200 to every post for up to 5 s, those after
// the seal answered included; none reached the snapshot (3 of 20 trials
// of 56 posts, tried from outside).
func TestFeedbackDuringASealAcrossNodes(t *testing.T) {
	f := gatewaytest.NewFixture(t, 8, 10)
	type posted struct {
		id     int
		loss   float32
		status int
		body   string
	}
	var (
		mu    sync.Mutex
		posts []posted
	)
	postTo := func(h http.Handler, id int) {
		p := posted{id: id, loss: 100 + float32(id)}
		req := httptest.NewRequest(http.MethodPost, "/importance/j/feedback?epoch=0&dataset=test", bytes.NewReader(gatewaytest.BinaryFeedback([]int{id}, []float32{p.loss})))
		req.Header.Set("Content-Type", "application/octet-stream")
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		p.status, p.body = rec.Code, rec.Body.String()
		mu.Lock()
		posts = append(posts, p)
		mu.Unlock()
	}
	// Node 1's listener posts its first feedback between answering the
	// collection of its part and sending the answer back.
	window := func(k int, h http.Handler) http.Handler {
		if k != 1 {
			return h
		}
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, r)
			if r.Method == http.MethodGet && strings.HasPrefix(r.URL.Path, transport.FeedbackPath) {
				for id := 10; id < 20; id++ {
					postTo(h, id)
				}
			}
			for k, v := range rec.Header() {
				w.Header()[k] = v
			}
			w.WriteHeader(rec.Code)
			_, _ = w.Write(rec.Body.Bytes())
		})
	}
	cl := gatewaytest.StartClusterWrapped(t, f.Store, 2, window, nil)
	urls, g1 := []string{cl[0].Srv.URL, cl[1].Srv.URL}, cl[1].G
	if resp, body := gatewaytest.Post(t, urls[0]+"/importance/j/feedback?epoch=0", "application/octet-stream", gatewaytest.BinaryFeedback([]int{0, 1, 2}, []float32{1, 1, 1})); resp.StatusCode != http.StatusOK {
		t.Fatalf("node 0's feedback: %s %s", resp.Status, body)
	}
	s := gatewaytest.Seal(t, urls[0], "j", 0, "")
	if s.Parts != 2 {
		t.Fatalf("the seal merged %d parts, want both nodes'", s.Parts)
	}
	for id := 20; id < 30; id++ { // after the seal answered
		postTo(g1, id)
	}
	snap, err := snapshots.Read(context.Background(), f.Store, f.Index, "j", s.Version)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range posts {
		switch got := snap.Score(p.id); {
		case p.status == http.StatusOK && got != p.loss:
			t.Errorf("sample %d: node 1 answered its feedback 200 (%s), sealed as %v: lost", p.id, strings.TrimSpace(p.body), got)
		case p.status != http.StatusOK && (p.status != http.StatusConflict || !strings.Contains(p.body, "sealed")):
			t.Errorf("sample %d: %d %s; want 200, or 409 saying the epoch is sealed", p.id, p.status, p.body)
		}
	}
}
