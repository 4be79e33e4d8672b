package peerreq

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"github.com/brandgw/brand/api"
	"github.com/brandgw/brand/cluster"
	"github.com/brandgw/brand/internal/batch/layout"
	"github.com/brandgw/brand/internal/cluster/nodestate"
	"github.com/brandgw/brand/internal/cluster/transport"
	"github.com/brandgw/brand/internal/job/catalog"
	"github.com/brandgw/brand/internal/job/query"
	"github.com/brandgw/brand/internal/testsupport/catalogtest"
)

var limits = query.Limits{MaxBatchSize: 16, MaxBatchBytes: 1 << 20, MaxWindow: 64, MaxWorld: 64, MaxEpoch: 1 << 40}

// oneVersion holds one version of one dataset.
type oneVersion struct{ ds *catalog.Dataset }

func (v oneVersion) Version(name, id string) (*catalog.Dataset, error) {
	if name != v.ds.Name || id != v.ds.ID() {
		return nil, catalog.ErrVersion
	}
	return v.ds, nil
}

// asker is this node's transport to one node, the httptest server srv
// whose handler is serve: each request the asker sends goes through the
// client's half of the protocol and is read by serve through this
// package, as the gateway's handlers read it.
func asker(t *testing.T, serve http.HandlerFunc) (*transport.Nodes, string) {
	t.Helper()
	srv := httptest.NewServer(serve)
	t.Cleanup(srv.Close)
	n := transport.New(transport.Config{Self: "http://self.invalid", Timeout: 5 * time.Second, Registry: prometheus.NewRegistry(), Log: zerolog.Nop()})
	t.Cleanup(n.Close)
	return n, srv.URL
}

// TestSamplesRoundTrip: a sample request carries the job stream it is for
// — its order, its name and its weight, an importance job's snapshot, a
// clip job's clips, an edit of its chain, the pipeline it wants — so that
// the owner's use table follows the same job its asker does: what the
// asker sends (transport.Origin, made of its stream by Stream) is what the
// owner reads, and the stream the owner follows is the one its own layout
// lays the job out as. A request for no batch carries none.
func TestSamplesRoundTrip(t *testing.T) {
	ds := catalogtest.Dataset(t, "d", 2, 4)
	clips := api.Clip{Frames: 16, Stride: 2}.Key()
	streams := []struct {
		js        layout.Stream
		epoch     uint64
		pos       int
		weight    float64
		transform transport.Transform
	}{
		{layout.Stream{DS: ds, Seed: 7, Window: 4}, 3, 1, 0, transport.Transform{}},
		{layout.Stream{DS: ds, Seed: 7, Window: 4, Name: "lr-0.1"}, 0, 0, 2.5, transport.Transform{}},
		{layout.Stream{DS: ds, Seed: 1, Window: 2, Name: "imp", Imp: layout.Importance{Job: "imp", Version: "0123456789abcdef", Hot: 3}}, 2, 1, 0, transport.Transform{}},
		{layout.Stream{DS: ds, Seed: 1, Window: 2, Name: "imp", Imp: layout.Importance{Job: "imp"}}, 0, 0, 0, transport.Transform{}},
		{layout.Stream{DS: ds, Seed: 3, Window: 2, Name: "run", Edit: "fedcba9876543210"}, 1, 2, 0, transport.Transform{}},
		{layout.Stream{DS: ds, Seed: 3, Window: 2, Space: clips}, 0, 90, 0, transport.Transform{}}, // a clip job's position is past the samples
		{layout.Stream{DS: ds, Seed: 5, Window: 1}, 2, 0, 0, transport.Transform{Name: "tiny", Fingerprint: "0123456789abcdef"}},
	}
	var (
		mu  sync.Mutex
		got SampleRequest
		err error
	)
	n, url := asker(t, func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		got, err = DecodeSamples(r, oneVersion{ds}, limits)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		// Every sample left out: a whole reply that carries no bytes.
		all := []int{0, 1}
		head := transport.ReplyHead(all)
		if got.SizedInReply() {
			head = transport.TransformedReplyHead(all, nil)
		}
		w.Write(head)
	})
	ask := func(o *transport.Origin) {
		t.Helper()
		if _, ferr := n.Fetch(context.Background(), n.Slot(url), transport.Request{DS: Dataset(ds), IDs: []int{5, 0}, Origin: o}); ferr != nil {
			t.Fatalf("fetch for %+v: %v (the owner read: %v)", o, ferr, err)
		}
	}
	for _, s := range streams {
		sent := &transport.Origin{Stream: Stream(s.js), Epoch: s.epoch, Pos: s.pos, Weight: s.weight, Transform: s.transform}
		ask(sent)
		if got.DS != ds || !slices.Equal(got.IDs, []int{5, 0}) || len(got.Info) != 2 || got.Info[0] != ds.Index.Sample(5) {
			t.Errorf("%+v: read %v of %v with %v", s.js, got.IDs, got.DS, got.Info)
		}
		if got.Origin == nil || *got.Origin != *sent {
			t.Errorf("origin %+v came back as %+v", sent, got.Origin)
		}
		if got.Stream != s.js {
			t.Errorf("the owner follows %+v, the asker %+v", got.Stream, s.js)
		}
	}
	ask(nil)
	if got.Origin != nil || got.Stream != (layout.Stream{}) {
		t.Errorf("a request for no batch read with origin %+v, stream %+v", got.Origin, got.Stream)
	}
}

// TestDecodeSamplesRefuses: a sample request that does not say what it
// reads, or reads more than a batch may, is a bad request; one for a
// version this node does not hold is the catalog's refusal, which the
// asker reads elsewhere. (The statuses the gateway answers them with:
// gateway/clustertest's TestPeerRequestBounds.)
func TestDecodeSamplesRefuses(t *testing.T) {
	ds := catalogtest.Dataset(t, "d", 2, 4) // 8 samples
	ix := "&index=" + ds.ID()
	tests := []struct {
		name, query string
		ids         []int
		body        []byte
		want        error
	}{
		{"no index", "dataset=d", []int{0}, nil, query.ErrBadRequest},
		{"another version", "dataset=d&index=0123456789abcdef", []int{0}, nil, catalog.ErrVersion},
		{"an unknown parameter", "dataset=d" + ix + "&rank=0", []int{0}, nil, query.ErrBadRequest},
		{"a window without a position", "dataset=d" + ix + "&seed=1&window=2&epoch=0", []int{0}, nil, query.ErrBadRequest},
		{"an epoch without a window", "dataset=d" + ix + "&epoch=0", []int{0}, nil, query.ErrBadRequest},
		{"a job's name without a window", "dataset=d" + ix + "&job=j", []int{0}, nil, query.ErrBadRequest},
		{"a position past the epoch", "dataset=d" + ix + "&seed=1&window=2&epoch=0&pos=9", []int{0}, nil, query.ErrBadRequest},
		{"a pipeline without its fingerprint", "dataset=d" + ix + "&seed=1&window=2&epoch=0&pos=0&transform=tiny", []int{0}, nil, query.ErrBadRequest},
		{"a sample twice", "dataset=d" + ix, []int{1, 1}, nil, query.ErrBadRequest},
		{"a sample past the index", "dataset=d" + ix, []int{8}, nil, transport.ErrBadRequest},
		{"more than a batch", "dataset=d" + ix, make([]int, 17), nil, transport.ErrBadRequest},
		{"not a list", "dataset=d" + ix, nil, []byte{1, 2, 3}, transport.ErrBadRequest},
		{"an importance version that is not one", "dataset=d" + ix + "&seed=0&window=2&epoch=0&pos=0&job=a&importance=zzz&hot=1", []int{1}, nil, query.ErrBadRequest},
		{"a parameter twice", "dataset=d" + ix + "&seed=0&window=2&epoch=0&pos=0&seed=1", []int{1}, nil, query.ErrBadRequest},
		// The reproduction: IDs repeated up to a million (a 4.4 MB body)
		// made the gateway allocate the summed length of every repeat
		// and die of it; refused before any allocation.
		{"a million IDs, repeated", "dataset=d" + ix, slices.Repeat([]int{0, 1, 2, 3, 4, 5, 6, 7}, 125_000), nil, transport.ErrBadRequest},
	}
	for _, tt := range tests {
		body := tt.body
		if body == nil {
			body = transport.EncodeChunks(tt.ids)
		}
		_, err := DecodeSamples(httptest.NewRequest(http.MethodPost, transport.SamplesPath+"?"+tt.query, bytes.NewReader(body)), oneVersion{ds}, limits)
		if !errors.Is(err, tt.want) {
			t.Errorf("%s: %v, want %v", tt.name, err, tt.want)
		}
	}
	small := limits
	small.MaxBatchBytes = 2*catalogtest.SampleSize - 1
	if _, err := DecodeSamples(httptest.NewRequest(http.MethodPost, transport.SamplesPath+"?dataset=d"+ix, bytes.NewReader(transport.EncodeChunks([]int{0, 1}))), oneVersion{ds}, small); !errors.Is(err, query.ErrBadRequest) {
		t.Errorf("samples over --max-batch-bytes: %v", err)
	}
}

// TestFeedbackRoundTrip: a sealing node's question for another node's
// part of an epoch's feedback, and its settlement, are read as they were
// asked — the job in the path, the dataset version, the epoch, the seal
// and the version it sealed.
func TestFeedbackRoundTrip(t *testing.T) {
	ds := catalogtest.Dataset(t, "d", 1, 2)
	const seal, sealed = "0123456789abcdef", "fedcba9876543210"
	var (
		mu   sync.Mutex
		read []string
	)
	n, url := asker(t, func(w http.ResponseWriter, r *http.Request) {
		fr, err := DecodeFeedback(r, oneVersion{ds}, limits)
		if err != nil || fr.DS != ds {
			http.Error(w, "bad", http.StatusBadRequest)
			return
		}
		mu.Lock()
		read = append(read, r.Method+" "+strings.TrimPrefix(r.URL.Path, transport.FeedbackPath)+" "+fr.Seal+" "+fr.Sealed)
		mu.Unlock()
		if fr.Epoch != 3 {
			http.Error(w, "another epoch", http.StatusBadRequest)
		}
	})
	k := n.Probe([]string{url}, nopWatcher{})[0]
	ctx := context.Background()
	if _, err := n.Asks().Feedback(ctx, k, Dataset(ds), "j", 3, seal); err != nil {
		t.Fatal(err)
	}
	for _, v := range []string{sealed, ""} {
		if err := n.Asks().Settle(ctx, k, Dataset(ds), "j", 3, seal, v); err != nil {
			t.Fatal(err)
		}
	}
	want := []string{"GET j " + seal + " ", "POST j " + seal + " " + sealed, "POST j " + seal + " "}
	if !slices.Equal(read, want) {
		t.Errorf("read %q, want %q", read, want)
	}
}

type nopWatcher struct{}

func (nopWatcher) Changed(int, *nodestate.State, *nodestate.State) {}

// TestChunkQuestionsRoundTrip: what a node gaining chunks in a membership
// change asks an old owner — which of them its streams need soon and how
// many windows ahead, which its cache holds, that it will ask for some
// later (keep), which of the owner's it holds (given), a chunk's bytes
// (through it, from the store, when the asker cannot reach it), a
// membership version's members — is read as it was asked. Two questions
// at once, or a chunk past the dataset's, are refused.
func TestChunkQuestionsRoundTrip(t *testing.T) {
	ds := catalogtest.Dataset(t, "d", 4, 1)
	two, _ := cluster.NewMembership([]string{"http://a.invalid", "http://b.invalid"})
	var (
		mu        sync.Mutex
		question  ChunksQuestion
		chunk     int
		through   bool
		members   string
		questions int
	)
	n, url := asker(t, func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		questions++
		switch r.URL.Path {
		case transport.NeededPath:
			q, err := DecodeNeeded(r, oneVersion{ds}, limits)
			if err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			question = q
			w.Write(transport.EncodeChunks(q.Chunks[:1]))
		case transport.ChunkPath:
			d, c, thr, err := DecodeChunk(r, oneVersion{ds}, limits)
			if err != nil || d != ds {
				http.Error(w, "bad", http.StatusBadRequest)
				return
			}
			chunk, through = c, thr
			w.Write(make([]byte, ds.Index.Chunk(c).Size))
		case transport.MembersPath:
			v, err := DecodeMembers(r, limits)
			if err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			members = v
			_ = jsonMembers(w, two.Members())
		}
	})
	ctx := context.Background()
	a := n.Asks()
	wire := Dataset(ds)
	check := func(what string, want ChunksQuestion) {
		t.Helper()
		want.DS = ds
		if !reflect.DeepEqual(question, want) {
			t.Errorf("%s: read %+v, want %+v", what, question, want)
		}
	}
	if _, err := a.Needed(ctx, url, wire, []int{1, 3}, 2); err != nil {
		t.Fatal(err)
	}
	check("needed", ChunksQuestion{Chunks: []int{1, 3}, PrefetchWindows: 2})
	if _, err := a.Held(ctx, url, wire, []int{0, 2}); err != nil {
		t.Fatal(err)
	}
	check("held", ChunksQuestion{Chunks: []int{0, 2}, Held: true})
	if err := a.Keep(ctx, url, wire, []int{3}); err != nil {
		t.Fatal(err)
	}
	check("keep", ChunksQuestion{Chunks: []int{3}, Keep: true})
	if _, err := a.Give(ctx, url, wire, []int{2, 1}); err != nil {
		t.Fatal(err)
	}
	check("given", ChunksQuestion{Chunks: []int{2, 1}, Given: true})
	buf := make([]byte, ds.Index.Chunk(2).Size)
	if err := a.FetchChunk(ctx, url, wire, 2, buf); err != nil || chunk != 2 || through {
		t.Errorf("a chunk's bytes: %v; read chunk %d, through %v", err, chunk, through)
	}
	if err := n.FetchChunkThrough(ctx, n.Slot(url), wire, 2, buf); err != nil || chunk != 2 || !through {
		t.Errorf("a chunk's bytes through the node: %v; read chunk %d, through %v", err, chunk, through)
	}
	if ms, err := a.AskMembers(ctx, n.Slot(url), two.Version()); err != nil || ms.Version() != two.Version() || members != two.Version() {
		t.Errorf("members: %v, %v; read %q", ms, err, members)
	}

	for _, q := range []string{"held=true&keep=true", "held=true&given=true", "keep=true&given=true"} {
		r := httptest.NewRequest(http.MethodPost, transport.NeededPath+"?dataset=d&index="+ds.ID()+"&"+q, bytes.NewReader(transport.EncodeChunks([]int{1})))
		if _, err := DecodeNeeded(r, oneVersion{ds}, limits); !errors.Is(err, query.ErrBadRequest) {
			t.Errorf("a question with %s: %v, want a bad request", q, err)
		}
	}
	r := httptest.NewRequest(http.MethodPost, transport.NeededPath+"?dataset=d&index="+ds.ID(), bytes.NewReader(transport.EncodeChunks([]int{4})))
	if _, err := DecodeNeeded(r, oneVersion{ds}, limits); !errors.Is(err, transport.ErrBadRequest) {
		t.Errorf("a question about a chunk past the dataset's: %v", err)
	}
	r = httptest.NewRequest(http.MethodGet, transport.ChunkPath+"?dataset=d&index="+ds.ID()+"&chunk=4", nil)
	if _, _, _, err := DecodeChunk(r, oneVersion{ds}, limits); !errors.Is(err, query.ErrBadRequest) {
		t.Errorf("a chunk past the dataset's: %v", err)
	}
}

func jsonMembers(w http.ResponseWriter, members []string) error {
	return json.NewEncoder(w).Encode(transport.MembersReply{Members: members})
}
