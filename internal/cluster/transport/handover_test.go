package transport

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/rs/zerolog"

	"github.com/brandgw/brand/api"
	"github.com/brandgw/brand/chunkindex"
	"github.com/brandgw/brand/cluster"
	"github.com/brandgw/brand/internal/cluster/peercred"
)

// handingNode is a node in a membership change, as the asker sees it
// over the wire: the questions a gaining node asks (NeededPath,
// ChunkPath, MembersPath) read off the wire by their parameters and
// lists (the node's own table reads them in internal/cluster/peerreq,
// whose round trips hold the two halves together), its answers encoded by
// this package as the gateway's handlers do. extra, if set, is named in
// every answer about chunks, asked or not (a node that lies).
type handingNode struct {
	ds          Dataset
	needs, held []int
	chunk       func(c int) []byte // a held chunk's bytes
	members     map[string][]string
	extra       int
	ahead       int // the last question's ahead
	kept        []int
	keeper      string // the node that said it would ask for kept
	given       []int  // what the last Give named; taken: what it takes of those
	giver       string
	takes       []int
}

func (h *handingNode) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	if r.URL.Path != StatePath && r.URL.Path != MembersPath && (q.Get(api.ParamDataset) != h.ds.Name || q.Get(api.ParamIndex) != h.ds.ID()) {
		http.Error(w, "another version", http.StatusConflict)
		return
	}
	switch r.URL.Path {
	case StatePath:
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"self": 1, "ready": true, "url": %q}`, "http://"+r.Host)
	case NeededPath:
		n := h.ds.Index.NumChunks()
		chunks, err := DecodeList(r.Body, n, n, "chunk")
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		h.ahead, _ = strconv.Atoi(q.Get(paramAhead))
		if q.Get(paramKeep) == "true" {
			h.kept, h.keeper = chunks, r.Header.Get(peercred.HeaderPeer)
			return
		}
		of := h.needs
		if q.Get(paramGiven) == "true" {
			h.given, h.giver = chunks, r.Header.Get(peercred.HeaderPeer)
			of = h.takes
		}
		if q.Get(paramHeld) == "true" {
			of = h.held
		}
		answer := slices.DeleteFunc(slices.Clone(of), func(c int) bool { return !slices.Contains(chunks, c) })
		if h.extra >= 0 {
			answer = append(answer, h.extra)
		}
		w.Write(EncodeChunks(answer))
	case ChunkPath:
		c, err := strconv.Atoi(q.Get(paramChunk))
		switch {
		case err != nil:
			http.Error(w, err.Error(), http.StatusBadRequest)
		case !slices.Contains(h.held, c):
			w.Header().Set(HeaderHeld, "false")
			http.Error(w, "{}", http.StatusNotFound)
		default:
			b := h.chunk(c)
			w.Header().Set("Content-Length", fmt.Sprint(len(b)))
			w.Write(b)
		}
	case MembersPath:
		list, ok := h.members[q.Get(api.ParamMembers)]
		if !ok {
			http.Error(w, "{}", http.StatusNotFound)
			return
		}
		_ = json.NewEncoder(w).Encode(MembersReply{Members: list})
	default:
		http.NotFound(w, r)
	}
}

// TestHandOverQuestions: what a node gaining chunks asks an old owner —
// which of them its streams need soon (and how many windows ahead), which
// its cache holds, a held chunk's bytes, a membership version's members —
// and what it tells it (which it will ask for later: Keep, which names
// the asker), and what a node taking it back up tells it (Give: which of
// its chunks the asker holds; it answers those it takes) — goes over the
// wire as the old owner reads it (peerreq's TestChunkQuestionsRoundTrip
// reads them through the node's table, and refuses held and keep at
// once); an answer naming a
// chunk not asked about, a chunk not held (404), bytes of another length
// and a member list that does not hash to its version are errors. The
// old owner is up and reached while it answers, unreached once it is
// gone, and neither probed nor shown once no membership lists it.
func TestHandOverQuestions(t *testing.T) {
	var cs []chunkindex.Chunk
	var ss []chunkindex.Sample
	for c := range 4 {
		cs = append(cs, chunkindex.Chunk{Key: fmt.Sprintf("c%d.tar", c), Size: 1024, ETag: "e", Samples: 1})
		ss = append(ss, chunkindex.Sample{Key: fmt.Sprintf("s%d", c), Chunk: c, Length: 512})
	}
	ix, err := chunkindex.New(cs, ss)
	if err != nil {
		t.Fatal(err)
	}
	ds := Dataset{Name: "d", Index: ix}
	bytesOf := func(c int) []byte { return bytes.Repeat([]byte{byte('a' + c)}, 1024) }
	two, _ := cluster.NewMembership([]string{"http://a.invalid", "http://b.invalid"})
	node := &handingNode{ds: ds, needs: []int{1, 3}, held: []int{0, 2}, chunk: bytesOf, extra: -1,
		members: map[string][]string{two.Version(): two.Members(), "00000000deadbeef": two.Members()}}
	srv := httptest.NewServer(node)
	defer srv.Close()
	reg := prometheus.NewRegistry()
	n := New(Config{Self: "http://self.invalid", Timeout: time.Second, Probe: 10 * time.Millisecond, Registry: reg, Log: zerolog.Nop()})
	defer n.Close()
	k := n.Probe([]string{srv.URL}, &watched{})[0]
	n.Start()
	waitFor(t, func() bool { return n.IsUp(srv.URL) && n.State(k) != nil }, "the old owner's state")
	ctx := context.Background()
	all := []int{0, 1, 2, 3}

	if got, err := n.Asks().Needed(ctx, srv.URL, ds, all, 2); err != nil || !slices.Equal(got, []int{1, 3}) || node.ahead != 2 {
		t.Errorf("Needed: %v, %v (ahead %d); want [1 3] two windows ahead", got, err, node.ahead)
	}
	if got, err := n.Asks().Needed(ctx, srv.URL, ds, []int{0, 2}, 1); err != nil || len(got) != 0 {
		t.Errorf("Needed of chunks it does not need: %v, %v", got, err)
	}
	if got, err := n.Asks().Held(ctx, srv.URL, ds, all); err != nil || !slices.Equal(got, []int{0, 2}) {
		t.Errorf("Held: %v, %v; want [0 2]", got, err)
	}
	if err := n.Asks().Keep(ctx, srv.URL, ds, []int{1, 3}); err != nil || !slices.Equal(node.kept, []int{1, 3}) || node.keeper != "http://self.invalid" {
		t.Errorf("Keep: %v; the old owner was told %v by %q, want [1 3] by http://self.invalid", err, node.kept, node.keeper)
	}
	if err := n.Asks().Keep(ctx, srv.URL, ds, nil); err != nil || len(node.kept) != 0 {
		t.Errorf("Keep of none: %v; the old owner was told %v, want none", err, node.kept)
	}
	node.takes = []int{1, 3}
	if got, err := n.Asks().Give(ctx, srv.URL, ds, []int{0, 1, 3}); err != nil || !slices.Equal(got, []int{1, 3}) || !slices.Equal(node.given, []int{0, 1, 3}) || node.giver != "http://self.invalid" {
		t.Errorf("Give: %v, %v; the owner was told %v by %q, want [0 1 3] by http://self.invalid, taking [1 3]", got, err, node.given, node.giver)
	}
	buf := make([]byte, 1024)
	if err := n.Asks().FetchChunk(ctx, srv.URL, ds, 2, buf); err != nil || !bytes.Equal(buf, bytesOf(2)) {
		t.Errorf("FetchChunk of a held chunk: %v", err)
	}
	if err := n.Asks().FetchChunk(ctx, srv.URL, ds, 1, buf); err == nil {
		t.Error("FetchChunk of a chunk not held: no error")
	}
	if err := n.Asks().FetchChunk(ctx, srv.URL, ds, 0, make([]byte, 1000)); err == nil {
		t.Error("FetchChunk of another length than the index's: no error")
	}
	if ms, err := n.Asks().AskMembers(ctx, k, two.Version()); err != nil || ms.Version() != two.Version() {
		t.Errorf("AskMembers of a version it keeps: %v, %v", ms, err)
	}
	if _, err := n.Asks().AskMembers(ctx, k, "0123456789abcdef"); err == nil {
		t.Error("AskMembers of a version it does not keep: no error")
	}
	if _, err := n.Asks().AskMembers(ctx, k, "00000000deadbeef"); err == nil {
		t.Error("AskMembers answered by a list of another version: no error")
	}
	node.extra = 1
	if got, err := n.Asks().Held(ctx, srv.URL, ds, []int{0, 2, 3}); err == nil { // as long an answer as the question
		t.Errorf("an answer naming a chunk not asked about: %v, no error", got)
	}

	srv.Close()
	waitFor(t, func() bool { return n.Unreached(k) && !n.IsUp(srv.URL) }, "the old owner taken for unreached once gone")
	// Listed no more (it left every membership): no longer probed, nor
	// shown.
	if probed := n.Probe(nil, &watched{}); len(probed) != 0 {
		t.Errorf("probing %v after the old owner was dropped", probed)
	}
	if c, err := testutil.GatherAndCount(reg, "brand_peer_up"); err != nil || c != 1 {
		t.Errorf("brand_peer_up has %d series (%v) once the old owner is probed no more; want this node's alone", c, err)
	}
}
