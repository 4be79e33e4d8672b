package transport

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"github.com/brandgw/brand/chunkindex"
	"github.com/brandgw/brand/internal/cluster/nodestate"
	"github.com/brandgw/brand/internal/cluster/peercred"
)

// testDataset is a dataset of one chunk of two real samples.
func testDataset(t *testing.T) (Dataset, [][]byte) {
	t.Helper()
	var buf bytes.Buffer
	w := chunkindex.NewChunkWriter(&buf)
	var samples []chunkindex.Sample
	for i := range 2 {
		key := fmt.Sprintf("s%d", i)
		body := bytes.Repeat([]byte{byte(i + 1)}, 700)
		off, n, crc, err := w.WriteSample(key, []chunkindex.Member{{Name: key + ".bin", Size: int64(len(body)), Body: bytes.NewReader(body)}})
		if err != nil {
			t.Fatal(err)
		}
		samples = append(samples, chunkindex.Sample{Key: key, Chunk: 0, Offset: off, Length: n, CRC: crc})
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	ix, err := chunkindex.New([]chunkindex.Chunk{{Key: "c.tar", Size: int64(buf.Len()), ETag: "e", Samples: 2}}, samples)
	if err != nil {
		t.Fatal(err)
	}
	raw := buf.Bytes()
	var bodies [][]byte
	for _, s := range samples {
		bodies = append(bodies, raw[s.Offset:s.Offset+s.Length])
	}
	return Dataset{Name: "d", Index: ix}, bodies
}

// TestFetchClassifiesFailures: what went wrong with a peer decides what it
// costs: no answer, a 503 or wrong bytes hold it down; a 409 (another
// index version), a store error or another 4xx it reports are read
// elsewhere, and it stays up. The reproduction: any failed fetch held the
// node down, a 502 for a damaged chunk and a 409 for another index version
// among them, doubling up to a minute.
func TestFetchClassifiesFailures(t *testing.T) {
	ds, bodies := testDataset(t)
	reply := func(w http.ResponseWriter, samples ...[]byte) {
		out := ReplyHead(nil)
		for _, s := range samples {
			out = append(out, s...)
		}
		w.Header().Set("Content-Length", fmt.Sprint(len(out)))
		w.Write(out)
	}
	tests := []struct {
		name    string
		handler http.HandlerFunc
		want    error // nil: success
		down    bool
	}{
		{"served", func(w http.ResponseWriter, r *http.Request) { reply(w, bodies...) }, nil, false},
		{"another index version", func(w http.ResponseWriter, r *http.Request) { http.Error(w, "{}", http.StatusConflict) }, ErrVersion, false},
		{"a store error on its side", func(w http.ResponseWriter, r *http.Request) { http.Error(w, "{}", http.StatusBadGateway) }, ErrRefused, false},
		{"a bad request", func(w http.ResponseWriter, r *http.Request) { http.Error(w, "{}", http.StatusBadRequest) }, ErrRefused, false},
		{"busy or not ready", func(w http.ResponseWriter, r *http.Request) { http.Error(w, "{}", http.StatusServiceUnavailable) }, ErrDown, true},
		{"refusing our credential", func(w http.ResponseWriter, r *http.Request) { http.Error(w, "{}", http.StatusUnauthorized) }, ErrDown, true},
		{"not listing this node yet", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set(peercred.HeaderNotMember, "true")
			http.Error(w, "{}", http.StatusUnauthorized)
		}, peercred.ErrNotMember, false},
		{"an older release", func(w http.ResponseWriter, r *http.Request) {
			http.Error(w, `{"error": "no such endpoint: /internal/v2/samples"}`, http.StatusNotFound)
		}, ErrDown, true},
		{"the right length, wrong bytes", func(w http.ResponseWriter, r *http.Request) {
			reply(w, bodies[1], bodies[0])
		}, ErrDown, true},
		{"a short body", func(w http.ResponseWriter, r *http.Request) { reply(w, bodies[0]) }, ErrDown, true},
		{"no answer in time", func(w http.ResponseWriter, r *http.Request) {
			// Read the request whole: only then does the server watch the
			// connection, and end the request when the asker gives up.
			_, _ = io.Copy(io.Discard, r.Body)
			select {
			case <-r.Context().Done():
			case <-time.After(10 * time.Second):
			}
		}, ErrDown, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			srv := httptest.NewServer(tc.handler)
			defer srv.Close()
			s := New(Config{Self: "http://self.invalid", Timeout: 200 * time.Millisecond, Probe: time.Second,
				Registry: prometheus.NewRegistry(), Log: zerolog.Nop()})
			defer s.Close()
			k := s.Slot(srv.URL)
			rep, err := s.Fetch(context.Background(), k, Request{DS: ds, IDs: []int{0, 1}})
			switch {
			case tc.want == nil && err != nil:
				t.Fatalf("fetch: %v", err)
			case tc.want == nil:
				if !bytes.Equal(rep.Data[0], bodies[0]) || !bytes.Equal(rep.Data[1], bodies[1]) {
					t.Fatal("the samples fetched differ from those sent")
				}
			case !errors.Is(err, tc.want):
				t.Fatalf("fetch: %v, want %v", err, tc.want)
			}
			if down := !s.Up(k); down != tc.down {
				t.Errorf("after %q the peer is down: %t, want %t", tc.name, down, tc.down)
			}
		})
	}
}

// TestReplyHeadNamesMissingSamples: an owner that leaves samples out (their
// chunk is damaged at rest) says which; the asker gets the others.
func TestReplyHeadNamesMissingSamples(t *testing.T) {
	ds, bodies := testDataset(t)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		out := append(ReplyHead([]int{0}), bodies[1]...)
		w.Header().Set("Content-Length", fmt.Sprint(len(out)))
		w.Write(out)
	}))
	defer srv.Close()
	s := New(Config{Self: "http://self.invalid", Timeout: time.Second, Probe: time.Second,
		Registry: prometheus.NewRegistry(), Log: zerolog.Nop()})
	defer s.Close()
	rep, err := s.Fetch(context.Background(), s.Slot(srv.URL), Request{DS: ds, IDs: []int{0, 1}})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Data[0] != nil || !bytes.Equal(rep.Data[1], bodies[1]) || len(rep.Missing) != 1 || rep.Missing[0] != 0 {
		t.Fatalf("reply %v missing %v", rep.Data, rep.Missing)
	}
}

// watched counts what a Watcher is told.
type watched struct{ states, changes atomic.Int64 }

func (w *watched) Changed(_ int, _, st *nodestate.State) {
	w.changes.Add(1)
	if st != nil {
		w.states.Add(1)
	}
}

// TestProbeOfANodeThatDoesNotListThisOneYet: a node that refuses this
// one's probes because its source does not list this one yet (this one
// has just joined) is neither down nor known: it stays up with no state,
// nothing is told the watcher, and once it lists this node its state is
// learnt. Taking it for down, as any other 401, would make a joining
// node decide it joins no running cluster, and skip its warm-up.
func TestProbeOfANodeThatDoesNotListThisOneYet(t *testing.T) {
	var listed atomic.Bool
	var probes atomic.Int64
	var srv *httptest.Server
	srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		probes.Add(1)
		if !listed.Load() {
			w.Header().Set(peercred.HeaderNotMember, "true")
			http.Error(w, "{}", http.StatusUnauthorized)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"self": 0, "ready": true, "url": %q}`, srv.URL)
	}))
	defer srv.Close()
	s := New(Config{Self: "http://self.invalid", Timeout: time.Second, Probe: 20 * time.Millisecond, Registry: prometheus.NewRegistry(), Log: zerolog.Nop()})
	defer s.Close()
	w := &watched{}
	k := s.Probe([]string{srv.URL}, w)[0]
	s.Start()
	waitFor(t, func() bool { return probes.Load() >= 4 }, "four probes")
	if !s.Up(k) || s.State(k) != nil || w.changes.Load() != 0 {
		t.Fatalf("after %d probes refused as not a member: up %t, state %+v, the watcher told %d times; want up, no state, nothing told",
			probes.Load(), s.Up(k), s.State(k), w.changes.Load())
	}
	listed.Store(true)
	waitFor(t, func() bool { return w.states.Load() > 0 }, "its state")
	if !s.Up(k) || s.State(k) == nil || s.State(k).URL != srv.URL {
		t.Fatalf("once listed: up %t, state %+v", s.Up(k), s.State(k))
	}
}

// waitFor waits up to 10 s for cond.
func waitFor(t *testing.T, cond func() bool, what string) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("no %s in 10 s", what)
		}
	}
}

// TestHeldDown: a peer whose fetch failed — it sent bytes that fail
// their check, or never answered (a stalled or stopped node) — is held
// down though its probes answer ready, and though it asks this node for
// something (Heard): it is not asked again on every batch. A peer only
// its probes took for down is taken back the moment it is heard from.
// An asker that is not authenticated has no slot, so hearing from it
// changes nothing: a request that only names a node does not make it
// live. The reproductions: a stalled peer cost every batch a peer
// timeout; with a node stopped, a forged Brand-Peer header sent every
// half second kept the others taking it for up, and each of 11 fetches
// waited the peer timeout.
func TestHeldDown(t *testing.T) {
	ds, bodies := testDataset(t)
	tests := []struct {
		name    string
		samples http.HandlerFunc // nil: probes answer 503, no fetch
		held    bool
	}{
		{"wrong bytes", func(w http.ResponseWriter, r *http.Request) {
			out := append(append(ReplyHead(nil), bodies[1]...), bodies[0]...)
			w.Header().Set("Content-Length", fmt.Sprint(len(out)))
			w.Write(out)
		}, true},
		{"no answer in time", func(w http.ResponseWriter, r *http.Request) {
			_, _ = io.Copy(io.Discard, r.Body)
			select {
			case <-r.Context().Done():
			case <-time.After(10 * time.Second):
			}
		}, true},
		{"down by its probes alone", nil, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var probes, fetches atomic.Int64
			var ready atomic.Bool
			ready.Store(tc.samples != nil)
			var srv *httptest.Server
			srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.URL.Path != StatePath {
					fetches.Add(1)
					tc.samples(w, r)
					return
				}
				probes.Add(1)
				if !ready.Load() {
					http.Error(w, `{"error": "not ready"}`, http.StatusServiceUnavailable)
					return
				}
				w.Header().Set("Content-Type", "application/json")
				fmt.Fprintf(w, `{"self": 1, "ready": true, "url": %q}`, srv.URL)
			}))
			defer srv.Close()
			s := New(Config{Self: "http://self.invalid", Timeout: 200 * time.Millisecond, Probe: 10 * time.Millisecond,
				Registry: prometheus.NewRegistry(), Log: zerolog.Nop()})
			defer s.Close()
			k := s.Probe([]string{srv.URL}, &watched{})[0]
			s.Start()
			if tc.samples != nil {
				waitFor(t, func() bool { return s.Up(k) && s.State(k) != nil }, "probe answered ready")
				if _, err := s.Fetch(context.Background(), k, Request{DS: ds, IDs: []int{0, 1}}); !errors.Is(err, ErrDown) || fetches.Load() != 1 {
					t.Fatalf("fetch: %v after %d requests, want ErrDown after one", err, fetches.Load())
				}
			} else {
				waitFor(t, func() bool { return !s.Up(k) }, "the peer taken for down by its probes")
			}
			seen := probes.Load()
			waitFor(t, func() bool { return probes.Load() >= seen+3 }, "three more probes")
			s.Heard(k)
			s.Heard(s.Slot("")) // an unauthenticated asker's
			if s.Slot("") != -1 {
				t.Errorf("an unauthenticated asker has slot %d, want -1", s.Slot(""))
			}
			if up := s.Up(k); up == tc.held {
				t.Errorf("after three probes answered and a request heard from it: up %t, want %t", up, !tc.held)
			}
		})
	}
}

// TestTimeoutIsThePeersFailureGivingUpIsNot: a fetch the peer does not
// answer within its bound is the peer's failure — counted as a timeout
// (brand_peer_fetch_failures_total{kind="timeout"}) and held down — while
// a fetch the asker ends itself (its client went away) says nothing of
// the peer: nothing counted, the peer stays up.
func TestTimeoutIsThePeersFailureGivingUpIsNot(t *testing.T) {
	ds, _ := testDataset(t)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		select {
		case <-r.Context().Done():
		case <-time.After(10 * time.Second):
		}
	}))
	defer srv.Close()
	for _, gaveUp := range []bool{true, false} {
		reg := prometheus.NewRegistry()
		s := New(Config{Self: "http://self.invalid", Timeout: 300 * time.Millisecond, Probe: time.Hour, Registry: reg, Log: zerolog.Nop()})
		k := s.Slot(srv.URL)
		ctx, cancel := context.WithCancel(context.Background())
		if gaveUp {
			time.AfterFunc(50*time.Millisecond, cancel)
		}
		_, err := s.Fetch(ctx, k, Request{DS: ds, IDs: []int{0, 1}})
		cancel()
		timeouts := counted(t, reg, "brand_peer_fetch_failures_total", "timeout")
		switch {
		case err == nil:
			t.Fatal("a fetch no one answered succeeded")
		case gaveUp && (!s.Up(k) || timeouts != 0):
			t.Errorf("the asker gave up: the peer up %t, %v timeouts counted; want up, none (%v)", s.Up(k), timeouts, err)
		case !gaveUp && (s.Up(k) || timeouts != 1 || !errors.Is(err, ErrTimeout)):
			t.Errorf("the peer did not answer in time: up %t, %v timeouts counted, err %v; want down, one, ErrTimeout", s.Up(k), timeouts, err)
		}
		s.Close()
	}
}

// TestGrayFailureCostsOneTimeout: a peer that answers its state probes
// ready while its sample requests go unanswered (a gray failure: a
// proxy, a firewall rule or a wedged handler dropping them) is held down
// after one fetch times out and stays down after its hold-down has
// passed, its probes answered, and requests heard from it — its data
// path is asked (a canary) and does not answer — so that no batch waits
// on it again; once its sample requests are answered again it is taken
// back. The reproduction: a probe answered ready took the peer back at
// the end of every hold-down, and with a peer's sample requests dropped
// for 30 s the job stood still for 29.7 s of them.
func TestGrayFailureCostsOneTimeout(t *testing.T) {
	ds, bodies := testDataset(t)
	var drop atomic.Bool
	drop.Store(true)
	var canaries atomic.Int64
	var srv *httptest.Server
	srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == StatePath {
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprintf(w, `{"self": 1, "ready": true, "url": %q, "datasets": [{"name": "d", "current": %q, "held": [%q]}]}`, srv.URL, ds.ID(), ds.ID())
			return
		}
		body, _ := io.ReadAll(r.Body)
		if len(body) == 0 {
			canaries.Add(1)
		}
		if drop.Load() {
			select {
			case <-r.Context().Done():
			case <-time.After(10 * time.Second):
			}
			return
		}
		var out []byte
		if len(body) == 0 {
			out = ReplyHead(nil)
		} else {
			out = append(append(ReplyHead(nil), bodies[0]...), bodies[1]...)
		}
		w.Header().Set("Content-Length", fmt.Sprint(len(out)))
		w.Write(out)
	}))
	defer srv.Close()
	const hold = 300 * time.Millisecond
	s := New(Config{Self: "http://self.invalid", Timeout: 200 * time.Millisecond, Probe: 20 * time.Millisecond, Hold: hold,
		Registry: prometheus.NewRegistry(), Log: zerolog.Nop()})
	defer s.Close()
	k := s.Probe([]string{srv.URL}, &watched{})[0]
	s.Start()
	waitFor(t, func() bool { return s.Up(k) && s.State(k) != nil }, "probe answered ready")
	if _, err := s.Fetch(context.Background(), k, Request{DS: ds, IDs: []int{0, 1}}); !errors.Is(err, ErrTimeout) {
		t.Fatalf("fetch: %v, want ErrTimeout", err)
	}
	// Well past the hold-down, its probes answered all along.
	time.Sleep(5 * hold)
	s.Heard(k)
	if s.Up(k) {
		t.Fatal("a peer whose sample requests are dropped was taken back once its hold-down passed, its probes answered")
	}
	if canaries.Load() == 0 {
		t.Fatal("no canary asked the peer's data path once its hold-down passed")
	}
	drop.Store(false)
	waitFor(t, func() bool { return s.Up(k) }, "the peer taken back once its sample requests are answered")
	if _, err := s.Fetch(context.Background(), k, Request{DS: ds, IDs: []int{0, 1}}); err != nil {
		t.Fatalf("fetch once taken back: %v", err)
	}
}

// counted returns the counter name{kind} from reg, summed over its other
// labels.
func counted(t *testing.T, reg *prometheus.Registry, name, kind string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var v float64
	for _, mf := range mfs {
		if mf.GetName() != name {
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

// TestHeardIsNotAnAnswer: a node that asks this one for something can
// reach it, which says nothing of whether this node reaches it (a one-way
// cut). Answered — which a failover reads to skip a node it would wait on
// after a timeout (route.Router's freshness) — moves only on what the node
// answered this one. The reproduction (integration TestClusterPartitions,
// "asymmetric: it cannot reach the peers"): the node cut off from its
// peers' port timed out on two of them, then failed over to the third,
// which it could not reach either but which kept asking it for samples,
// so it looked fresh; the step waited until the cut healed (6.7–7.0 s
// with a 4-s --peer-timeout).
func TestHeardIsNotAnAnswer(t *testing.T) {
	// A peer that never answers: its probes time out.
	block := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-block:
		case <-r.Context().Done():
		}
	}))
	defer srv.Close()
	defer close(block)
	s := New(Config{Self: "http://self.invalid", Timeout: 100 * time.Millisecond, Probe: 20 * time.Millisecond,
		Registry: prometheus.NewRegistry(), Log: zerolog.Nop()})
	defer s.Close()
	k := s.Probe([]string{srv.URL}, &watched{})[0]
	s.Heard(k)
	if a := s.Answered(k); !a.IsZero() {
		t.Fatalf("a node that never answered this one, heard asking it: Answered %s ago, want never", time.Since(a).Round(time.Millisecond))
	}
}

// TestReturningRunsBeforeTheNodeIsUp: a node taken back up after it was
// down — by its probe, or by a request heard from it — is first handed
// to Config.Returning (the gateway tells it which of its chunks this
// node read in its stead), and by the probe before this node sees it up
// again, so no read goes to it before it knows; a node that stays up is
// never handed over. The reproduction: a node cut off from its peers and
// the store read 0.04–0.07 × a dataset from the store again in the epoch
// after the heal, which its peers held.
func TestReturningRunsBeforeTheNodeIsUp(t *testing.T) {
	var ready atomic.Bool
	ready.Store(true)
	var srv *httptest.Server
	srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !ready.Load() {
			http.Error(w, `{"error": "not ready"}`, http.StatusServiceUnavailable)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"self": 1, "ready": true, "url": %q}`, srv.URL)
	}))
	defer srv.Close()
	var s *Nodes
	var calls atomic.Int64
	var upWhenCalled atomic.Bool
	s = New(Config{Self: "http://self.invalid", Timeout: 200 * time.Millisecond, Probe: 10 * time.Millisecond,
		Registry: prometheus.NewRegistry(), Log: zerolog.Nop(),
		Returning: func(_ context.Context, url string) {
			if url != srv.URL {
				t.Errorf("Returning(%q), want %q", url, srv.URL)
			}
			upWhenCalled.Store(s.IsUp(url))
			calls.Add(1)
		}})
	defer s.Close()
	k := s.Probe([]string{srv.URL}, &watched{})[0]
	s.Start()
	waitFor(t, func() bool { return s.State(k) != nil }, "probe answered ready")
	time.Sleep(50 * time.Millisecond) // a few probes of a node that stays up
	if n := calls.Load(); n != 0 {
		t.Fatalf("Returning ran %d times for a node that never went down", n)
	}
	ready.Store(false)
	waitFor(t, func() bool { return !s.Up(k) }, "the peer taken for down")
	ready.Store(true)
	waitFor(t, func() bool { return s.Up(k) }, "the peer taken back up by its probe")
	if n := calls.Load(); n != 1 || upWhenCalled.Load() {
		t.Fatalf("Returning ran %d times (the node seen up while it ran: %t), want once before it was up", n, upWhenCalled.Load())
	}
	// Down by its probes, taken back by a request heard from it.
	ready.Store(false)
	waitFor(t, func() bool { return !s.Up(k) }, "the peer taken for down again")
	s.Heard(k)
	waitFor(t, func() bool { return calls.Load() == 2 }, "Returning for a node heard from")
}

// TestHedgedHoldsDownAfterLosingInARow: a fetch that loses to its hedge
// is counted (brand_peer_fetch_failures_total{kind="slow"}); three in a
// row hold the node down as a timeout does, and an answer in between
// starts the count again — one late answer is a healthy node's tail.
// Fetches sent together that lose together (a step's ranks', or a burst
// of load on the asker) count once.
func TestHedgedHoldsDownAfterLosingInARow(t *testing.T) {
	type told struct {
		lost     bool
		together bool // sent with the one before, before its loss was known
	}
	lost, answered, alongside := told{lost: true}, told{}, told{lost: true, together: true}
	tests := []struct {
		name   string
		told   []told
		wantUp bool
	}{
		{"one lost", []told{lost}, true},
		{"two lost", []told{lost, lost}, true},
		{"three lost in a row", []told{lost, lost, lost}, false},
		{"an answer between", []told{lost, lost, answered, lost, lost}, true},
		{"answered first, lost thrice after", []told{answered, lost, lost, lost}, false},
		{"three lost, sent together", []told{lost, alongside, alongside}, true},
		{"lost together, then twice in a row", []told{lost, alongside, alongside, lost, lost}, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			reg := prometheus.NewRegistry()
			s := New(Config{Self: "http://self.invalid", Timeout: time.Second, Probe: time.Hour, Registry: reg, Log: zerolog.Nop()})
			defer s.Close()
			k := s.Slot("http://peer.invalid")
			slow := 0
			var sent time.Time
			for _, f := range tc.told {
				if !f.together {
					sent = time.Now()
					time.Sleep(time.Microsecond) // the loss is known after the fetch was sent
				}
				s.Hedged(k, sent, f.lost)
				if f.lost {
					slow++
				}
			}
			if s.Up(k) != tc.wantUp {
				t.Errorf("up %t, want %t", s.Up(k), tc.wantUp)
			}
			if !tc.wantUp && !isHeld(s.at(k)) {
				t.Error("down, but not held down: a probe would take it back at once")
			}
			if got := counted(t, reg, "brand_peer_fetch_failures_total", "slow"); got != float64(slow) {
				t.Errorf(`brand_peer_fetch_failures_total{kind="slow"} = %v, want %d`, got, slow)
			}
		})
	}
}

// TestProbeAnsweredBeforeHeardIsStale: a probe sent while the peer was
// not ready, whose answer (503) is read after the peer, ready now, asked
// this node for something, does not take the peer for down: the answer
// is older than what was heard. The next probe's answer counts. The
// reproduction: on a starved machine a node starting read a probe's
// "not ready" after its peer had settled, took the peer for down while
// a job's cold epoch began, and read 5 of 93 chunks of the peer's from
// the store in its stead while the peer read them too.
func TestProbeAnsweredBeforeHeardIsStale(t *testing.T) {
	answer := make(chan bool) // each probe's answer, ready or not, once the test says
	var probes atomic.Int64
	var srv *httptest.Server
	srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		probes.Add(1)
		var ready bool
		select {
		case ready = <-answer:
		case <-r.Context().Done():
			return
		}
		if !ready {
			http.Error(w, `{"error": "not ready: dataset indexes are still loading"}`, http.StatusServiceUnavailable)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"self": 1, "ready": true, "url": %q}`, srv.URL)
	}))
	defer srv.Close()
	s := New(Config{Self: "http://self.invalid", Timeout: time.Second, Probe: 10 * time.Millisecond,
		Registry: prometheus.NewRegistry(), Log: zerolog.Nop()})
	defer s.Close()
	w := &watched{}
	k := s.Probe([]string{srv.URL}, w)[0]
	s.Start()
	answer <- false // the first probe: not ready, read at once
	waitFor(t, func() bool { return probes.Load() == 2 }, "a second probe")
	if s.Up(k) {
		t.Fatal("a peer whose probe answered not ready is up")
	}
	s.Heard(k) // the second probe under way: the peer, ready now, asks this node for something
	if !s.Up(k) {
		t.Fatal("a peer heard from is not up")
	}
	changes := w.changes.Load()
	answer <- false // the second probe's answer, sent before the peer was ready, read after
	waitFor(t, func() bool { return probes.Load() == 3 }, "a third probe")
	if !s.Up(k) || w.changes.Load() != changes {
		t.Fatalf("a probe's answer older than a request heard since: up %t, %d changes told; want up, none", s.Up(k), w.changes.Load()-changes)
	}
	answer <- false // a probe sent after: the peer is not ready now
	waitFor(t, func() bool { return !s.Up(k) }, "the peer down on a probe sent after it was heard")
	answer <- true
	waitFor(t, func() bool { return s.Up(k) }, "the peer up again")
	close(answer)
}

// TestRequestsSayWhenNotServing: a node's requests to its peers carry
// HeaderNotServing while Config.Serving says it does not serve, and not
// once it does (the peer then takes it for up: the gateway's
// TestPeerNotServingIsNotTakenUp).
func TestRequestsSayWhenNotServing(t *testing.T) {
	var serving atomic.Bool
	said := make(chan bool, 64)
	var srv *httptest.Server
	srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case said <- AskerServes(r):
		default:
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"self": 1, "ready": true, "url": %q}`, srv.URL)
	}))
	defer srv.Close()
	s := New(Config{Self: "http://self.invalid", Timeout: time.Second, Probe: 10 * time.Millisecond, Serving: serving.Load,
		Registry: prometheus.NewRegistry(), Log: zerolog.Nop()})
	defer s.Close()
	s.Probe([]string{srv.URL}, &watched{})
	s.Start()
	if <-said {
		t.Fatal("a probe sent while the node does not serve says it serves")
	}
	serving.Store(true)
	for deadline := time.Now().Add(10 * time.Second); !<-said; {
		if time.Now().After(deadline) {
			t.Fatal("no probe says the node serves once it does")
		}
	}
}
