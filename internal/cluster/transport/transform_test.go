package transport

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
)

// TestTransformedReply: a request for transformed samples names the
// pipeline and its fingerprint, and its reply gives each sample's length
// and CRC32C, which the asker checks instead of the index's; a tensor that
// fails its CRC holds the node down, and one over the asker's bound is
// refused before it is read.
func TestTransformedReply(t *testing.T) {
	ds, _ := testDataset(t)
	tensors := [][]byte{bytes.Repeat([]byte{7}, 1500), bytes.Repeat([]byte{9}, 1024)}
	origin := &Origin{Stream: Stream{Seed: 3, Window: 1}, Epoch: 2, Transform: Transform{Name: "tiny", Fingerprint: "0123456789abcdef"}}
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
			s := New(Config{Self: "http://self.invalid", Timeout: time.Second, Probe: time.Second,
				Registry: prometheus.NewRegistry(), Log: zerolog.Nop(),
				MaxReplyBytes: tc.maxReply})
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
