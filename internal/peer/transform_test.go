package peer

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"github.com/brandgw/brand/internal/order"
	"github.com/brandgw/brand/internal/tensors"
)

// TestTransformedReply: a request for transformed samples names the
// pipeline and its fingerprint, and its reply gives each sample's length
// and CRC32C, which the asker checks instead of the index's; a tensor that
// fails its CRC holds the node down, and one over the asker's bound is
// refused before it is read.
func TestTransformedReply(t *testing.T) {
	ds, _ := testDataset(t)
	tensors := [][]byte{bytes.Repeat([]byte{7}, 1500), bytes.Repeat([]byte{9}, 1024)}
	origin := &Origin{Stream: order.Stream{DS: ds, Seed: 3, Window: 1}, Epoch: 2, Transform: Transform{Name: "tiny", Fingerprint: "0123456789abcdef"}}
	var asked url.Values
	reply := func(head []byte, samples ...[]byte) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			asked = r.URL.Query()
			out := head
			for _, s := range samples {
				out = append(out, s...)
			}
			w.Header().Set("Content-Length", fmt.Sprint(len(out)))
			w.Write(out)
		}
	}
	corrupt := bytes.Clone(tensors[1])
	corrupt[5]++
	tests := []struct {
		name     string
		handler  http.HandlerFunc
		maxReply int64
		want     error
	}{
		{"served", reply(TransformedReplyHead(nil, tensors), tensors...), 0, nil},
		{"a tensor that fails its CRC", reply(TransformedReplyHead(nil, tensors), tensors[0], corrupt), 0, ErrDown},
		{"more than the asker takes", reply(TransformedReplyHead(nil, tensors), tensors...), 2000, ErrDown},
		{"no table", reply(ReplyHead(nil), tensors...), 0, ErrDown},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			srv := httptest.NewServer(tc.handler)
			defer srv.Close()
			s := NewSet(Config{Self: "http://self.invalid", Members: list{"http://self.invalid", srv.URL}, Timeout: time.Second, Probe: time.Second,
				Registry: prometheus.NewRegistry(), Log: zerolog.Nop(), Held: func(string) []string { return []string{ds.ID()} }, Skew: func() {},
				AheadBytes: 1 << 20, MaxReplyBytes: tc.maxReply})
			defer s.Close()
			rep, err := s.Fetch(context.Background(), s.Slot(srv.URL), Request{DS: ds, IDs: []int{0, 1}, Origin: origin})
			if !errors.Is(err, tc.want) || err != nil && tc.want == nil {
				t.Fatalf("fetch: %v, want %v", err, tc.want)
			}
			if asked.Get("transform") != "tiny" || asked.Get("transform_fp") != "0123456789abcdef" {
				t.Errorf("asked with %v", asked)
			}
			if err == nil && (!bytes.Equal(rep.Data[0], tensors[0]) || !bytes.Equal(rep.Data[1], tensors[1])) {
				t.Error("the tensors fetched differ from those sent")
			}
		})
	}
}

// TestTransformAt: a node asks an owner for tensors only if the owner's
// last state names the pipeline with the same fingerprint and its
// transform queue is not longer than this node's by more than
// BalanceSlack; otherwise it asks for the samples as stored.
func TestTransformAt(t *testing.T) {
	t0 := Transform{Name: "tiny", Fingerprint: "0123456789abcdef"}
	own := tensors.Load{Queued: 10, Workers: 2, PerImage: 2 * time.Millisecond} // a 10 ms wait
	tests := []struct {
		name  string
		state *State
		want  bool
	}{
		{"not probed yet", nil, false},
		{"another fingerprint", &State{Transforms: map[string]string{"tiny": "fedcba9876543210"}}, false},
		{"no such pipeline (an older node)", &State{}, false},
		{"the same, no load said", &State{Transforms: map[string]string{"tiny": t0.Fingerprint}}, true},
		{"idle", &State{Transforms: map[string]string{"tiny": t0.Fingerprint}, Load: &tensors.Load{Workers: 2}}, true},
		{"busier within the slack", &State{Transforms: map[string]string{"tiny": t0.Fingerprint},
			Load: &tensors.Load{Queued: 20, Workers: 2, PerImage: 2 * time.Millisecond}}, true}, // 20 ms ≤ 10 + 10
		{"busier past the slack", &State{Transforms: map[string]string{"tiny": t0.Fingerprint},
			Load: &tensors.Load{Queued: 22, Workers: 2, PerImage: 2 * time.Millisecond}}, false}, // 22 ms > 20
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := NewSet(Config{Self: "http://a.invalid", Members: list{"http://a.invalid", "http://b.invalid"}, Registry: prometheus.NewRegistry(),
				Log: zerolog.Nop(), Held: func(string) []string { return nil }, Skew: func() {}, Load: func() tensors.Load { return own }})
			defer s.Close()
			b := s.Slot("http://b.invalid")
			if tc.state != nil {
				s.at(b).state.Store(tc.state)
			}
			if got := s.transformAt(b, t0); got != tc.want {
				t.Errorf("transformAt %t, want %t", got, tc.want)
			}
			o := s.originFor(b, &Origin{Transform: t0}, 4)
			if o.Transform.On() != tc.want {
				t.Errorf("asked with %+v", o.Transform)
			}
		})
	}
}
