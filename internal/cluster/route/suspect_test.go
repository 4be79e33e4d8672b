package route

import (
	"cmp"
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"github.com/brandgw/brand/internal/cluster/hedge"
)

// TestSuspicion: a late fetch makes its peer suspect for suspectFirst,
// while it answers nothing sent after it; another sent after it was
// known, while suspect, doubles the time up to suspectMost; one sent
// before it (the same outage) extends nothing; a suspect time passed
// with nothing late is forgotten.
func TestSuspicion(t *testing.T) {
	t0 := time.Unix(1e9, 0)
	type event struct {
		at, sent time.Duration // after t0: when the fetch was known late, when it was sent
	}
	tests := []struct {
		name  string
		late  []event
		check time.Duration // after t0
		want  bool
		until time.Duration // the suspect time's end, after t0 (0: none)
	}{
		{"never late", nil, 0, false, 0},
		{"late once", []event{{0, -time.Second}}, time.Second, true, suspectFirst},
		{"late once, its time passed", []event{{0, -time.Second}}, suspectFirst, false, suspectFirst},
		{"late again while suspect: doubled", []event{{0, -time.Second}, {time.Second, time.Second / 2}}, 4 * time.Second, true, time.Second + 2*suspectFirst},
		{"late together (sent before the first was known): not doubled", []event{{0, -time.Second}, {time.Second, -time.Second / 2}}, 3 * time.Second, false, suspectFirst},
		{"a flapping peer, late every 0.6 s: held at suspectMost", []event{{0, -1}, {600 * time.Millisecond, 1}, {1200 * time.Millisecond, 601 * time.Millisecond},
			{1800 * time.Millisecond, 1201 * time.Millisecond}, {2400 * time.Millisecond, 1801 * time.Millisecond}}, 10 * time.Second, true, 2400*time.Millisecond + suspectMost},
		{"forgotten after a quiet suspect time: back to the first", []event{{0, -1}, {time.Second, 1}, {10 * time.Second, 9 * time.Second}}, 12*time.Second + time.Millisecond, false, 10*time.Second + suspectFirst},
	}
	never := t0.Add(-time.Hour)
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			now := t0
			s := newSuspicion(func() time.Time { return now })
			for _, e := range tc.late {
				now = t0.Add(e.at)
				s.late(1, t0.Add(e.sent))
			}
			now = t0.Add(tc.check)
			if got := s.suspect(1, never); got != tc.want {
				t.Errorf("suspect at %s: %t, want %t", tc.check, got, tc.want)
			}
			if tc.want && s.suspect(1, now) {
				t.Errorf("suspect though it answered after the late fetch was sent")
			}
			if s.suspect(2, never) {
				t.Errorf("another peer suspect")
			}
			var until time.Duration
			if l := s.by[1]; l != nil {
				until = l.until.Sub(t0)
			}
			if until != tc.until {
				t.Errorf("suspect until %s, want %s", until, tc.until)
			}
		})
	}
}

// TestSuspectPeerHedgedSooner: a peer gone silent costs its first read
// the hedge deadline and the grace a store read gives it (1.5 × the
// deadline), and the reads after it, while it answers nothing, at most
// half the deadline: it is suspect (suspect.go). Before, every read
// waited 1.5 × the deadline until three losses held the peer down
// (issue 98, item 12: a rank whose home was healthy waited 1.16 s on one
// read with the deadline at its 1-s ceiling). A peer that answers
// between (only slow: a cold epoch's peers read the store themselves) is
// not suspect, and its reads wait the deadline and the grace as ever.
func TestSuspectPeerHedgedSooner(t *testing.T) {
	const deadline = 400 * time.Millisecond
	tests := []struct {
		name    string
		answers bool          // the peer answers (a probe) between reads
		most    time.Duration // a later read's time at most
		least   time.Duration // and at least
	}{
		{"silent throughout: suspect", false, deadline * 3 / 4, 0},
		{"answering between: not suspect", true, time.Hour, deadline * 3 / 2},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ds, agreed, smp := hedgeCluster(t, 0) // node 1's chunks: the next node this one, a store read
			peers := newScripted(ds, serve, blackHole, serve)
			peers.answeredAt = map[int]time.Time{1: time.Now().Add(-time.Minute)}
			r := New(Config{Self: agreed.Members()[0], SelfSlot: 0, Peers: peers, Timeout: time.Hour,
				Hedge: hedge.Config{Ceiling: deadline, Floor: deadline}, Registry: prometheus.NewRegistry(), Log: zerolog.Nop()})
			defer r.Close()
			r.Follow(agreed, []int{0, 1, 2}, "")
			read := func() time.Duration {
				t.Helper()
				ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
				defer cancel()
				start := time.Now()
				local, _, err := r.ReadRemote(ctx, smp, nil, nil, make([][]byte, len(smp.IDs)))
				took := time.Since(start)
				if err != nil {
					t.Fatal(err)
				}
				if len(local) != len(smp.IDs) {
					t.Fatalf("%d of %d samples left to this node", len(local), len(smp.IDs))
				}
				return took
			}
			if took := read(); took < deadline*3/2 {
				t.Errorf("the first read took %s, under the deadline and grace (%s): no peer is suspect yet", took, deadline*3/2)
			}
			for n := range 3 {
				if tc.answers {
					peers.mu.Lock()
					peers.answeredAt = map[int]time.Time{1: time.Now()}
					peers.mu.Unlock()
				}
				if took := read(); took > tc.most || took < tc.least {
					t.Errorf("read %d took %s, want it within [%s, %s]", n+2, took, tc.least, tc.most)
				}
			}
		})
	}
}

// TestClientsWordOfASilentNode: a read whose client says the owner of
// its chunks did not answer it (WithUnanswered) probes that node if it
// has not answered this one since either; silent, its chunks are read
// elsewhere after the probe's wait (a quarter of the hedge deadline, at
// least minWordProbe), not after
// the deadline and the grace of a store read (1.5 × the deadline: a
// blip's first step 1.98 s at the 1-s ceiling, issue 98, item 12), and
// it is suspect after; answering its probe (a node only busy, a client's
// cold deadline a guess), or heard from since, it is asked as ever.
func TestClientsWordOfASilentNode(t *testing.T) {
	const deadline = time.Second
	tests := []struct {
		name           string
		silent         bool          // the owner answers neither fetches nor probes
		heardAgo       time.Duration // when the owner last answered this node
		waited         time.Duration // what the client says it waited
		url            string        // the node the client names ("": the owner)
		wantLocal      bool          // its chunks read here
		most, least    time.Duration // the read's time
		wantSuspect    bool
		wantOwnerAsked bool
	}{
		{name: "silent, not heard from since: read here after the probe", silent: true, heardAgo: time.Second, waited: 500 * time.Millisecond,
			wantLocal: true, most: minWordProbe + deadline/2, wantSuspect: true},
		{name: "silent, heard from since the client's wait began: asked, waited on", silent: true, heardAgo: 100 * time.Millisecond, waited: 500 * time.Millisecond,
			wantLocal: true, least: deadline, wantOwnerAsked: true, wantSuspect: true},
		{name: "busy, answering its probe: asked as ever", heardAgo: time.Second, waited: 500 * time.Millisecond,
			wantOwnerAsked: true},
		{name: "a node not a member named: nothing", silent: true, heardAgo: time.Second, waited: 500 * time.Millisecond, url: "http://x.invalid",
			wantLocal: true, least: deadline, wantOwnerAsked: true, wantSuspect: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ds, agreed, smp := hedgeCluster(t, 0)
			owner := serve
			if tc.silent {
				owner = blackHole
			}
			peers := newScripted(ds, serve, owner, serve)
			peers.answeredAt = map[int]time.Time{1: time.Now().Add(-tc.heardAgo)}
			peers.silent = map[int]bool{1: tc.silent}
			r := New(Config{Self: agreed.Members()[0], SelfSlot: 0, Peers: peers, Timeout: time.Hour,
				Hedge: hedge.Config{Ceiling: deadline, Floor: deadline}, Registry: prometheus.NewRegistry(), Log: zerolog.Nop()})
			defer r.Close()
			r.Follow(agreed, []int{0, 1, 2}, "")
			url := cmp.Or(tc.url, agreed.Members()[1])
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			start := time.Now()
			local, _, err := r.ReadRemote(WithUnanswered(ctx, url, tc.waited), smp, nil, nil, make([][]byte, len(smp.IDs)))
			took := time.Since(start)
			if err != nil {
				t.Fatal(err)
			}
			if got := len(local) == len(smp.IDs); got != tc.wantLocal {
				t.Errorf("read here: %t (%d of %d samples), want %t", got, len(local), len(smp.IDs), tc.wantLocal)
			}
			if tc.most > 0 && took > tc.most {
				t.Errorf("the read took %s, over %s", took, tc.most)
			}
			if took < tc.least {
				t.Errorf("the read took %s, under %s", took, tc.least)
			}
			if asked := peers.asked[1] > 0; asked != tc.wantOwnerAsked {
				t.Errorf("the owner asked: %t, want %t", asked, tc.wantOwnerAsked)
			}
			if got := r.suspects.suspect(1, peers.Answered(1)); got != tc.wantSuspect {
				t.Errorf("the owner suspect after: %t, want %t", got, tc.wantSuspect)
			}
		})
	}
}
