package route

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"github.com/brandgw/brand/chunkindex"
	"github.com/brandgw/brand/cluster"
	"github.com/brandgw/brand/internal/batch/layout"
	"github.com/brandgw/brand/internal/cluster/nodestate"
	"github.com/brandgw/brand/internal/cluster/transport"
	"github.com/brandgw/brand/internal/job/catalog"
	"github.com/brandgw/brand/internal/testsupport/catalogtest"
)

// node is how a fake peer behaves.
type node int

const (
	serves    node = iota
	fails          // its fetches fail: a stalled, stopped or lying node (transport.Nodes.Fetch classifies)
	down           // taken for down: not asked
	warming        // warming up for the agreed membership: not asked
	otherIx        // holds another index version: not asked
	leavesOut      // serves, leaving every sample out (its chunk damaged at rest)
	quiet          // serves, but has not answered lately: asked as an owner, never in an owner's stead
)

// fakeNodes are the other nodes as the router sees them, by slot (0 is
// this node), answering each sample with its ID; asked records which
// node was asked for which IDs.
type fakeNodes struct {
	ds      *catalog.Dataset
	agreed  string
	how     []node
	mu      sync.Mutex
	asked   map[int][]int
	answers map[int]int // sample ID → the node that answered it
}

func (f *fakeNodes) Up(k int) bool { return f.how[k] != down }

func (f *fakeNodes) Answers(context.Context, int) bool { return true }
func (f *fakeNodes) Hedged(int, time.Time, bool)       {}

func (f *fakeNodes) Answered(k int) time.Time {
	if f.how[k] == quiet {
		return time.Now().Add(-time.Minute)
	}
	return time.Now()
}

func (f *fakeNodes) State(k int) *nodestate.State {
	id := f.ds.ID()
	if f.how[k] == otherIx {
		id = "0123456789abcdef"
	}
	st := &nodestate.State{Ready: true, Datasets: []nodestate.DatasetState{{Name: f.ds.Name, Current: id, Held: []string{id}}}}
	if f.how[k] == warming {
		st.Warming = f.agreed
	}
	return st
}

func (f *fakeNodes) Fetch(_ context.Context, k int, req transport.Request) (transport.Reply, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.asked[k] = append(f.asked[k], req.IDs...)
	if f.how[k] == fails {
		return transport.Reply{}, fmt.Errorf("node %d: %w", k, transport.ErrDown)
	}
	rep := transport.Reply{Data: make([][]byte, len(req.IDs))}
	for j, id := range req.IDs {
		if f.how[k] != leavesOut {
			rep.Data[j] = []byte(fmt.Sprint(id))
			f.answers[id] = k
		}
	}
	return rep, nil
}

// TestReadRemote: a batch's samples are asked of their chunks' owners
// under the agreed membership, one request per node; a node that is down,
// warms up for the membership or holds another index version is not
// asked, and one whose fetch fails is asked once and its samples asked of
// the next node of their chunks' rankings, this node last: the read is
// whole whatever the peers do. Samples an owner leaves out are named
// missing. The cases of gateway's whole-cluster tests of a node lost in
// an epoch, a stalled peer and a lying one, and a partial index's owner
// down, on the router alone.
func TestReadRemote(t *testing.T) {
	const chunks, per = 12, 4
	ds := catalogtest.Dataset(t, "d", chunks, per)
	urls := []string{"http://a.invalid", "http://b.invalid", "http://c.invalid"}
	agreed, _ := cluster.NewMembership(urls)
	owner := ds.Owners(agreed) // member positions; slot k is member k here
	ids := make([]int, 0, chunks*per)
	for id := range chunks * per {
		ids = append(ids, (id*7)%(chunks*per)) // every sample once, chunks interleaved
	}
	info := make([]chunkindex.Sample, len(ids))
	for i, id := range ids {
		info[i] = ds.Index.Sample(id)
	}
	smp := layout.SamplesOf(ds, ids, info)
	for k := 1; k < len(urls); k++ {
		if !slices.Contains(owner, k) {
			t.Fatalf("node %d owns no chunk: the test needs each to own some (owners %v)", k, owner)
		}
	}

	tests := []struct {
		name string
		how  []node // nodes 1 and 2
		// asked: the nodes asked (once each); local: the nodes whose
		// chunks this node reads itself, beside its own.
		asked, local []int
		missing      bool
	}{
		{"every owner serves", []node{serves, serves}, []int{1, 2}, nil, false},
		{"an owner's fetch fails: asked once, its samples elsewhere", []node{fails, serves}, []int{1, 2}, nil, false},
		{"both fail: this node reads them", []node{fails, fails}, []int{1, 2}, []int{1, 2}, false},
		{"an owner down: not asked", []node{down, serves}, []int{2}, nil, false},
		{"an owner warming up: not asked", []node{serves, warming}, []int{1}, nil, false},
		{"an owner of another index version: not asked", []node{otherIx, serves}, []int{2}, nil, false},
		{"every other node down", []node{down, down}, nil, []int{1, 2}, false},
		{"an owner leaves samples out", []node{leavesOut, serves}, []int{1, 2}, nil, true},
		// A node cut off from its peers finds each out by a timeout of
		// its own: one not heard from lately is not asked in a failed
		// owner's stead, and waited on as well.
		{"an owner's fetch fails, the next node quiet: this node reads them", []node{fails, quiet}, []int{1, 2}, []int{1}, false},
		{"an owner quiet: still asked first", []node{quiet, serves}, []int{1, 2}, nil, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := &fakeNodes{ds: ds, agreed: agreed.Version(), how: append([]node{serves}, tc.how...), asked: map[int][]int{}, answers: map[int]int{}}
			r := New(Config{Self: urls[0], SelfSlot: 0, Peers: f, Registry: prometheus.NewRegistry(), Log: zerolog.Nop()})
			defer r.Close()
			r.Follow(agreed, []int{0, 1, 2}, "")
			data := make([][]byte, len(ids))
			local, missing, err := r.ReadRemote(context.Background(), smp, nil, nil, data)
			if err != nil {
				t.Fatal(err)
			}
			var asked []int
			for k, got := range f.asked {
				asked = append(asked, k)
				if u := slices.Compact(slices.Sorted(slices.Values(got))); len(u) != len(got) {
					t.Errorf("node %d asked for a sample twice", k)
				}
			}
			slices.Sort(asked)
			if !slices.Equal(asked, tc.asked) {
				t.Errorf("asked nodes %v, want %v", asked, tc.asked)
			}
			isLocal, isMissing := map[int]bool{}, map[int]bool{}
			for _, i := range local {
				isLocal[i] = true
			}
			for _, i := range missing {
				isMissing[i] = true
			}
			if tc.missing != (len(missing) > 0) {
				t.Errorf("%d samples named missing", len(missing))
			}
			for i, id := range ids {
				own := owner[ds.Index.ChunkOf(id)]
				readHere := own == 0 || slices.Contains(tc.local, own)
				switch {
				case isMissing[i]:
					if f.how[own] != leavesOut {
						t.Errorf("sample %d named missing; its owner %d did not leave it out", id, own)
					}
				case isLocal[i] != readHere && (f.how[own] == serves || f.how[own] == leavesOut):
					t.Errorf("sample %d (owner %d): read here %t, want %t", id, own, isLocal[i], readHere)
				case isLocal[i]:
					if data[i] != nil {
						t.Errorf("sample %d read here, and filled", id)
					}
				case f.how[f.answers[id]] == quiet && f.answers[id] != own:
					t.Errorf("sample %d (owner %d) asked of node %d, not heard from lately, once a fetch had failed", id, own, f.answers[id])
				case string(data[i]) != fmt.Sprint(id):
					t.Errorf("sample %d: %q, neither read here nor fetched", id, data[i])
				case f.how[f.answers[id]] != serves && f.how[f.answers[id]] != quiet:
					t.Errorf("sample %d answered by node %d, which %v", id, f.answers[id], f.how[f.answers[id]])
				}
			}
		})
	}
}

// TestFetchNextStopsWithTheRouter: a fetch of a next batch's samples
// under way when the router closes is ended and waited for — Close
// returns after it — and one asked for after Close starts nothing: its
// claim is given up, so a read of that batch finds nothing fetched at
// once instead of waiting for a fetch that never runs. (Moved down from
// gateway's TestMixtureFetchAheadStopsWithTheGateway: a fetch ahead was
// once started after Close had waited for the cluster's goroutines.)
func TestFetchNextStopsWithTheRouter(t *testing.T) {
	r := New(Config{Self: "http://a.invalid", NextBytes: 1 << 20, Timeout: time.Minute, Registry: prometheus.NewRegistry(), Log: zerolog.Nop()})
	entered := make(chan struct{})
	var ended bool // written by the fetch, read once Close has waited for it
	r.FetchNext("under way", func(ctx context.Context) ([]Fetch, error) {
		close(entered)
		<-ctx.Done() // only Close ends it
		ended = true
		return nil, ctx.Err()
	})
	<-entered
	r.Close()
	if !ended {
		t.Fatal("Close returned before the fetch under way ended")
	}
	asked := false
	r.FetchNext("after Close", func(context.Context) ([]Fetch, error) {
		asked = true
		return nil, nil
	})
	// The bound only keeps a broken router from hanging the test: a claim
	// given up is found at once.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if data := r.TakeNext(ctx, "after Close"); data != nil || asked || ctx.Err() != nil {
		t.Fatalf("a fetch asked for after Close: %v, started %v, waited for %v", data, asked, ctx.Err())
	}
}

// TestFetchNextHoldsDownAPeerThatTimesOut: a next batch's fetch from a
// peer that never answers is that peer's failure, as on a batch's read:
// counted (brand_peer_fetch_failures_total{kind="timeout"}), logged and
// held down, so that the batch's own read, and the batches after it,
// read its chunks elsewhere at once. The reproduction: the fetch ran
// under a bound of the whole equal to the peer timeout, which ended
// first and was taken for "the asker gave up": nothing was counted,
// logged or held down, and with a peer cut off every batch of every rank
// waited a peer timeout for it, twice (the fetch ahead, then the read).
func TestFetchNextHoldsDownAPeerThatTimesOut(t *testing.T) {
	const timeout = 300 * time.Millisecond
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		select { // a node cut off: no answer
		case <-r.Context().Done():
		case <-time.After(10 * time.Second):
		}
	}))
	defer srv.Close()
	const self = "http://self.invalid"
	reg := prometheus.NewRegistry()
	peers := transport.New(transport.Config{Self: self, Timeout: timeout, Probe: time.Hour, Registry: reg, Log: zerolog.Nop()})
	defer peers.Close()
	k := peers.Slot(srv.URL)
	r := New(Config{Self: self, SelfSlot: peers.Self(), Peers: peers, Timeout: timeout, NextBytes: 1 << 20, Registry: prometheus.NewRegistry(), Log: zerolog.Nop()})
	defer r.Close()
	agreed, _ := cluster.NewMembership([]string{self, srv.URL})
	slots := make([]int, agreed.Len())
	for i, u := range agreed.Members() {
		slots[i] = peers.Slot(u)
	}
	r.Follow(agreed, slots, "")

	ds := catalogtest.Dataset(t, "d", 16, 4)
	owners := ds.Owners(agreed)
	var ids []int
	for id := range ds.Index.NumSamples() {
		if slots[owners[ds.Index.ChunkOf(id)]] == k {
			ids = append(ids, id)
		}
	}
	if len(ids) == 0 {
		t.Fatal("the peer owns no chunk")
	}
	info := make([]chunkindex.Sample, len(ids))
	for i, id := range ids {
		info[i] = ds.Index.Sample(id)
	}
	smp := layout.SamplesOf(ds, ids, info)
	r.FetchNext("next", func(context.Context) ([]Fetch, error) { return []Fetch{{Samples: smp}}, nil })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	start := time.Now()
	r.TakeNext(ctx, "next")
	if ctx.Err() != nil {
		t.Fatal("the fetch ahead never ended")
	}
	if peers.Up(k) {
		t.Errorf("after its fetch timed out (%s), the peer is taken for up", time.Since(start).Round(time.Millisecond))
	}
	if timeouts := failures(t, reg, "timeout"); timeouts != 1 {
		t.Errorf("brand_peer_fetch_failures_total{kind=\"timeout\"} = %v, want 1", timeouts)
	}
	if src := r.Source(ds, ds.Index.ChunkOf(ids[0]), func(int) bool { return false }); src == k {
		t.Error("the batch's read would ask the peer that timed out again")
	}
}

// failures returns brand_peer_fetch_failures_total{kind} from reg,
// summed over peers.
func failures(t *testing.T, reg *prometheus.Registry, kind string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var v float64
	for _, mf := range mfs {
		if mf.GetName() != "brand_peer_fetch_failures_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "kind" && l.GetValue() == kind {
					v += m.GetCounter().GetValue()
				}
			}
		}
	}
	return v
}
