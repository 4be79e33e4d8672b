package route

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"github.com/brandgw/brand/chunkindex"
	"github.com/brandgw/brand/cluster"
	"github.com/brandgw/brand/internal/batch/layout"
	"github.com/brandgw/brand/internal/cluster/hedge"
	"github.com/brandgw/brand/internal/cluster/nodestate"
	"github.com/brandgw/brand/internal/cluster/transport"
	"github.com/brandgw/brand/internal/job/catalog"
	"github.com/brandgw/brand/internal/testsupport/catalogtest"
)

// peerFunc is a fake peer's answer to a fetch: its samples, or an error
// (ctx's, for one that never answers).
type peerFunc func(ctx context.Context, req transport.Request) (transport.Reply, error)

// scripted are the other nodes as the router sees them, each up and
// fresh and holding the dataset, answering fetches by their peerFunc
// (slot 0 is this node). It records who answered which sample and what
// each Hedged call said.
type scripted struct {
	ds      *catalog.Dataset
	answer  []peerFunc
	mu      sync.Mutex
	asked   map[int]int      // fetches asked of each node
	answers map[int]int      // sample ID → the node whose answer came back
	hedged  map[int][]bool   // node → the Hedged calls' lost, in order
	during  map[int]struct{} // nodes being asked now
	// answeredAt is when each node last answered this one, by slot;
	// now for those it does not name.
	answeredAt map[int]time.Time
	// silent: the nodes that answer no probe (Answers), by slot.
	silent map[int]bool
}

func newScripted(ds *catalog.Dataset, answer ...peerFunc) *scripted {
	return &scripted{ds: ds, answer: answer, asked: map[int]int{}, answers: map[int]int{}, hedged: map[int][]bool{}, during: map[int]struct{}{}}
}

func (s *scripted) Up(int) bool { return true }
func (s *scripted) Answered(k int) time.Time {
	if t, ok := s.answeredAt[k]; ok {
		return t
	}
	return time.Now()
}
func (s *scripted) State(int) *nodestate.State {
	id := s.ds.ID()
	return &nodestate.State{Ready: true, Datasets: []nodestate.DatasetState{{Name: s.ds.Name, Current: id, Held: []string{id}}}}
}

// Answers: a node answers its probe unless it is silent (silent, by
// slot).
func (s *scripted) Answers(ctx context.Context, k int) bool {
	if s.silent[k] {
		<-ctx.Done()
		return false
	}
	return true
}

func (s *scripted) Hedged(k int, _ time.Time, lost bool) {
	s.mu.Lock()
	s.hedged[k] = append(s.hedged[k], lost)
	s.mu.Unlock()
}

func (s *scripted) Fetch(ctx context.Context, k int, req transport.Request) (transport.Reply, error) {
	s.mu.Lock()
	s.asked[k]++
	s.mu.Unlock()
	rep, err := s.answer[k](ctx, req)
	if err == nil {
		s.mu.Lock()
		for _, id := range req.IDs {
			s.answers[id] = k
		}
		s.mu.Unlock()
	}
	return rep, err
}

// serve answers every sample with its ID.
func serve(_ context.Context, req transport.Request) (transport.Reply, error) {
	rep := transport.Reply{Data: make([][]byte, len(req.IDs))}
	for j, id := range req.IDs {
		rep.Data[j] = []byte(fmt.Sprint(id))
	}
	return rep, nil
}

// blackHole never answers: its fetch ends with the asker's context.
func blackHole(ctx context.Context, _ transport.Request) (transport.Reply, error) {
	<-ctx.Done()
	return transport.Reply{}, fmt.Errorf("%w: %w", transport.ErrDown, ctx.Err())
}

// after answers once ready is closed (or fails with ctx).
func after(ready <-chan struct{}) peerFunc {
	return func(ctx context.Context, req transport.Request) (transport.Reply, error) {
		select {
		case <-ready:
			return serve(ctx, req)
		case <-ctx.Done():
			return blackHole(ctx, req)
		}
	}
}

// hedgeCluster is three members, this node slot 0, and the samples of
// the chunks node 1 owns whose next node in their ranking is next (1 or
// 2 for another peer, 0 for this node).
func hedgeCluster(t *testing.T, next int) (*catalog.Dataset, *cluster.Membership, layout.Samples) {
	t.Helper()
	ds := catalogtest.Dataset(t, "d", 48, 4)
	agreed, _ := cluster.NewMembership([]string{"http://a.invalid", "http://b.invalid", "http://c.invalid"})
	owners := ds.Owners(agreed)
	var ids []int
	for c := range ds.Index.NumChunks() {
		rank := cluster.Ranking(nil, ds.ClusterKey(), c, agreed.IDs())
		if owners[c] != 1 || rank[0] != 1 || rank[1] != next {
			continue
		}
		first, n := ds.Index.ChunkRange(c)
		for id := first; id < first+n; id++ {
			ids = append(ids, id)
		}
	}
	if len(ids) == 0 {
		t.Fatalf("node 1 owns no chunk whose next node is %d", next)
	}
	info := make([]chunkindex.Sample, len(ids))
	for i, id := range ids {
		info[i] = ds.Index.Sample(id)
	}
	return ds, agreed, layout.SamplesOf(ds, ids, info)
}

// hedgeCounts reads brand_peer_hedges_total by outcome from reg.
func hedgeCounts(t *testing.T, reg *prometheus.Registry) hedge.Counts {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var c hedge.Counts
	for _, mf := range mfs {
		if mf.GetName() != "brand_peer_hedges_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			v := int64(m.GetCounter().GetValue())
			switch m.GetLabel()[0].GetValue() {
			case "started":
				c.Started = v
			case "won":
				c.Won = v
			case "refused":
				c.Refused = v
			}
		}
	}
	return c
}

// TestHedgedRead: a fetch from a peer that has not answered within the
// hedge deadline is also asked of the next node of its chunks' ranking
// (a peer, or this node, which reads the store); the first answer fills
// the batch, the loser is cancelled and told to the peers (Hedged), and
// the hedges are counted in /metrics. A budget spent leaves the fetch to
// its peer, counted as refused. The reproduction: a peer that never
// answers held a read until --peer-timeout (10 s); here the fake peers
// have no timeout at all, and the read's own bound (20 s, a thousand
// times the deadline) only keeps a broken router from hanging the test.
func TestHedgedRead(t *testing.T) {
	// The ceiling, no answers being observed yet; half of it is the
	// grace a hedge to this node's store gives its peer.
	const deadline = time.Second
	tests := []struct {
		name string
		next int // node 1's chunks' next node
		// how nodes 1 and 2 answer; ready is closed once node 2 is asked.
		one, two func(ready chan struct{}) peerFunc
		rate     float64
		// answeredBy: who answered node 1's samples (0: read here);
		// lost: node 1's Hedged call.
		answeredBy int
		want       hedge.Counts
		lost       []bool
	}{
		{"a peer black-holed, the next node a peer: it answers", 2,
			func(chan struct{}) peerFunc { return blackHole }, func(chan struct{}) peerFunc { return serve },
			0, 2, hedge.Counts{Started: 1, Won: 1}, []bool{true}},
		{"a peer black-holed, the next node this one: read here", 0,
			func(chan struct{}) peerFunc { return blackHole }, func(chan struct{}) peerFunc { return serve },
			0, 0, hedge.Counts{Started: 1, Won: 1}, []bool{true}},
		{"the next node a peer that has answered nothing since the fetch was sent: read here", 2,
			func(chan struct{}) peerFunc { return blackHole }, func(chan struct{}) peerFunc { return serve },
			0, 0, hedge.Counts{Started: 1, Won: 1}, []bool{true}},
		{"the slow peer answers first: the hedge cancelled", 2,
			func(ready chan struct{}) peerFunc { return after(ready) },
			func(ready chan struct{}) peerFunc {
				return func(ctx context.Context, req transport.Request) (transport.Reply, error) {
					close(ready) // node 1 answers now
					return blackHole(ctx, req)
				}
			},
			0, 1, hedge.Counts{Started: 1}, []bool{false}},
		{"the next node this one: the slow peer answering within the grace wins, no store read", 0,
			func(ready chan struct{}) peerFunc { return after(ready) }, func(chan struct{}) peerFunc { return serve },
			0, 1, hedge.Counts{Started: 1}, []bool{false}},
		{"the budget spent: the slow peer waited for", 2,
			func(ready chan struct{}) peerFunc {
				// Answers once the test has seen the hedge refused.
				return after(ready)
			}, func(chan struct{}) peerFunc { return serve },
			-1, 1, hedge.Counts{Refused: 1}, []bool{false}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ds, agreed, smp := hedgeCluster(t, tc.next)
			ready := make(chan struct{})
			peers := newScripted(ds, serve, tc.one(ready), tc.two(ready))
			if strings.Contains(tc.name, "answered nothing since") {
				// Fresh (a probe half a second ago), but nothing since.
				peers.answeredAt = map[int]time.Time{2: time.Now().Add(-500 * time.Millisecond)}
			}
			reg := prometheus.NewRegistry()
			r := New(Config{Self: agreed.Members()[0], SelfSlot: 0, Peers: peers, Timeout: time.Hour,
				Hedge: hedge.Config{Ceiling: deadline, Floor: deadline, Rate: tc.rate}, Registry: reg, Log: zerolog.Nop()})
			defer r.Close()
			r.Follow(agreed, []int{0, 1, 2}, "")
			switch {
			case tc.rate < 0:
				go func() {
					for hedgeCounts(t, reg).Refused == 0 {
						time.Sleep(time.Millisecond)
					}
					close(ready)
				}()
			case tc.next == 0 && tc.answeredBy == 1:
				// Node 1 answers once hedged: within the grace (half the
				// deadline) a hedge to this node's store gives it.
				go func() {
					for hedgeCounts(t, reg).Started == 0 {
						time.Sleep(time.Millisecond)
					}
					close(ready)
				}()
			}
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			data := make([][]byte, len(smp.IDs))
			local, missing, err := r.ReadRemote(ctx, smp, nil, nil, data)
			if err != nil {
				t.Fatalf("the read: %v", err)
			}
			if len(missing) > 0 {
				t.Errorf("%d samples missing", len(missing))
			}
			for i, id := range smp.IDs {
				switch {
				case tc.answeredBy == 0 && !slices.Contains(local, i):
					t.Errorf("sample %d not read here (answered by %d)", id, peers.answers[id])
				case tc.answeredBy != 0 && (peers.answers[id] != tc.answeredBy || string(data[i]) != fmt.Sprint(id)):
					t.Errorf("sample %d: %q answered by node %d, want node %d's", id, data[i], peers.answers[id], tc.answeredBy)
				}
			}
			if got := hedgeCounts(t, reg); got != tc.want {
				t.Errorf("brand_peer_hedges_total %+v, want %+v", got, tc.want)
			}
			if !slices.Equal(peers.hedged[1], tc.lost) {
				t.Errorf("node 1 told Hedged(lost) %v, want %v", peers.hedged[1], tc.lost)
			}
		})
	}
}

// TestHedgeBudgetUnderAFlood: with every peer slow, reads at once start
// no more hedges than the budget holds (its burst, on a clock that does
// not move), the rest refused and counted, and every read whole.
func TestHedgeBudgetUnderAFlood(t *testing.T) {
	const burst, reads = 5, 40
	ds, agreed, smp := hedgeCluster(t, 2)
	release := make(chan struct{})
	peers := newScripted(ds, serve, after(release), after(release))
	reg := prometheus.NewRegistry()
	frozen := time.Unix(1e9, 0)
	r := New(Config{Self: agreed.Members()[0], SelfSlot: 0, Peers: peers, Timeout: time.Hour,
		Hedge:    hedge.Config{Ceiling: time.Millisecond, Floor: time.Millisecond, Rate: 1, Burst: burst, Now: func() time.Time { return frozen }},
		Registry: reg, Log: zerolog.Nop()})
	defer r.Close()
	r.Follow(agreed, []int{0, 1, 2}, "")
	var wg sync.WaitGroup
	errs := make(chan error, reads)
	for range reads {
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			data := make([][]byte, len(smp.IDs))
			local, _, err := r.ReadRemote(ctx, smp, nil, nil, data)
			if err == nil {
				for i, id := range smp.IDs {
					if !slices.Contains(local, i) && string(data[i]) != fmt.Sprint(id) {
						err = fmt.Errorf("sample %d: %q", id, data[i])
					}
				}
			}
			errs <- err
		})
	}
	// Every read has asked past its deadline (hedged or refused) before
	// the peers answer.
	for c, waited := hedgeCounts(t, reg), time.Now(); c.Started+c.Refused < reads; c = hedgeCounts(t, reg) {
		if time.Since(waited) > time.Minute {
			close(release)
			t.Fatalf("brand_peer_hedges_total %+v: %d reads never asked past their deadline", c, reads)
		}
		time.Sleep(time.Millisecond)
	}
	close(release)
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
	c := hedgeCounts(t, reg)
	if c.Started > burst || c.Started+c.Refused < reads || c.Refused == 0 {
		t.Errorf("brand_peer_hedges_total %+v: want at most %d started, the rest of at least %d refused", c, burst, reads)
	}
}

// TestHedgeHoldsDownABlackHoledPeer: over the real transport, a peer
// that never answers costs a read about the hedge deadline, not
// --peer-timeout (10 s here; the read's own bound is half of it): its
// samples are read here, the fetch counted as slow, and the third such
// fetch in a row holds the peer down as a timeout does, so the reads
// after it do not ask it at all.
func TestHedgeHoldsDownABlackHoledPeer(t *testing.T) {
	const peerTimeout = 10 * time.Second
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		<-r.Context().Done() // a node whose sample requests are dropped
	}))
	defer srv.Close()
	const self = "http://self.invalid"
	reg := prometheus.NewRegistry()
	peers := transport.New(transport.Config{Self: self, Timeout: peerTimeout, Probe: time.Hour, Registry: reg, Log: zerolog.Nop()})
	defer peers.Close()
	k := peers.Slot(srv.URL)
	r := New(Config{Self: self, SelfSlot: peers.Self(), Peers: peers, Timeout: peerTimeout, Registry: reg, Log: zerolog.Nop()})
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
	info := make([]chunkindex.Sample, len(ids))
	for i, id := range ids {
		info[i] = ds.Index.Sample(id)
	}
	smp := layout.SamplesOf(ds, ids, info)
	for read := range 4 {
		ctx, cancel := context.WithTimeout(context.Background(), peerTimeout/2)
		local, _, err := r.ReadRemote(ctx, smp, nil, nil, make([][]byte, len(ids)))
		cancel()
		if err != nil {
			t.Fatalf("read %d: %v (the peer's fetch was not hedged)", read, err)
		}
		if len(local) != len(ids) {
			t.Fatalf("read %d: %d of %d samples read here", read, len(local), len(ids))
		}
		if up := peers.Up(k); up != (read < 2) {
			t.Errorf("after read %d the peer is up: %t", read, up)
		}
	}
	if c := hedgeCounts(t, reg); c.Started != 3 || c.Won != 3 {
		t.Errorf("brand_peer_hedges_total %+v, want 3 started and won (the fourth read does not ask the peer)", c)
	}
	if slow := failures(t, reg, "slow"); slow != 3 {
		t.Errorf(`brand_peer_fetch_failures_total{kind="slow"} = %v, want 3`, slow)
	}
	if timeouts := failures(t, reg, "timeout"); timeouts != 0 {
		t.Errorf(`brand_peer_fetch_failures_total{kind="timeout"} = %v: a read waited --peer-timeout`, timeouts)
	}
}
