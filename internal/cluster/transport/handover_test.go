package transport

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/rs/zerolog"

	"github.com/brandgw/brand/chunkindex"
	"github.com/brandgw/brand/cluster"
	"github.com/brandgw/brand/internal/cluster/peercred"
	"github.com/brandgw/brand/internal/job/catalog"
	"github.com/brandgw/brand/internal/job/query"
)

// handingNode is a node in a membership change, as the asker sees it
// over the wire: both halves of the questions a gaining node asks
// (NeededPath, ChunkPath, MembersPath), its answers decoded and encoded
// by this package as the gateway's handlers do. extra, if set, is named
// in every answer about chunks, asked or not (a node that lies).
type handingNode struct {
	ds          *catalog.Dataset
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
	lim := query.Limits{MaxBatchSize: 64, MaxBatchBytes: 1 << 20, MaxWindow: 64, MaxWorld: 64, MaxEpoch: 1 << 40}
	switch r.URL.Path {
	case StatePath:
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"self": 1, "ready": true, "url": %q}`, "http://"+r.Host)
	case NeededPath:
		q, err := DecodeNeeded(r, oneVersion{h.ds}, lim)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		h.ahead = q.PrefetchWindows
		if q.Keep {
			h.kept, h.keeper = q.Chunks, r.Header.Get(peercred.HeaderPeer)
			return
		}
		of := h.needs
		if q.Given {
			h.given, h.giver = q.Chunks, r.Header.Get(peercred.HeaderPeer)
			of = h.takes
		}
		if q.Held {
			of = h.held
		}
		answer := slices.DeleteFunc(slices.Clone(of), func(c int) bool { return !slices.Contains(q.Chunks, c) })
		if h.extra >= 0 {
			answer = append(answer, h.extra)
		}
		w.Write(EncodeChunks(answer))
	case ChunkPath:
		_, c, _, err := DecodeChunk(r, oneVersion{h.ds}, lim)
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
		v, err := DecodeMembers(r, lim)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		list, ok := h.members[v]
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
// the asker; held and keep at once are refused), and what a node taking
// it back up tells it (Give: which of its chunks the asker holds; it
// answers those it takes) —
// round trips through both halves of the protocol; an answer naming a
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
	ds := catalog.NewDataset("d", "", nil, ix)
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
	for _, two := range []string{"held=true&keep=true", "held=true&given=true", "keep=true&given=true"} {
		both, _ := http.NewRequest(http.MethodPost, srv.URL+NeededPath+"?dataset=d&index="+ds.ID()+"&"+two, bytes.NewReader(EncodeChunks([]int{1})))
		if _, err := DecodeNeeded(both, oneVersion{ds}, query.Limits{MaxBatchSize: 64, MaxBatchBytes: 1 << 20, MaxWindow: 64, MaxWorld: 64, MaxEpoch: 1 << 40}); err == nil {
			t.Errorf("a question with %s: no error", two)
		}
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
