package route

import (
	"context"
	"sync"
	"time"
)

// A peer whose fetch went unanswered past the hedge deadline is suspect
// for a while, as long as it answers nothing (Peers.Answered: a probe, a
// fetch) after that fetch was sent: its next fetches are hedged at a
// quarter of the deadline, not the whole of it, and a hedge to this
// node's store gives it a quarter of the deadline of grace, not half.
//
// # Why
//
// Every fetch from a peer that has gone silent (a blip: its link down
// for seconds, its process running) waits the learnt deadline before it
// is hedged, and half as much again when the hedge reads the store —
// until three such losses in a row hold the peer down. A node's learnt
// deadline on a loaded machine serving batches of MiBs reaches the
// ceiling (--peer-hedge-ceiling, 1 s): a rank whose home was healthy
// waited 1.16 s on one read (a batch's fetch ahead went unanswered past
// the deadline, then the read's fetch waited the deadline again and the
// grace; issue 98, item 12).
//
// A peer that answers something after the late fetch was sent is only
// slow (a cold epoch's peers, reading the store themselves): hedging
// its fetches sooner would read its chunks from the store twice (the
// partition suite's cold epoch read 1.038 × the dataset, not 1.000, when
// a late fetch alone made a peer suspect). Lateness is still remembered
// and damped: another late fetch sent after the last was known, while
// suspect, doubles the time (up to suspectMost), so that a peer whose
// link flaps is suspect again at once in its next outage if it has not
// answered since; a suspect time passed with nothing late is forgotten.
const (
	suspectFirst = 2 * time.Second
	suspectMost  = 8 * time.Second
)

// suspicion is the peers' lateness: which are suspect now, and until
// when. It is safe for concurrent use.
type suspicion struct {
	now func() time.Time

	mu sync.Mutex
	by map[int]*lateness // by slot
}

// lateness is one peer's: suspect until until, for hold since the last
// late fetch, which was sent at sent and known at at.
type lateness struct {
	until, at, sent time.Time
	hold            time.Duration
}

func newSuspicion(now func() time.Time) *suspicion {
	if now == nil {
		now = time.Now
	}
	return &suspicion{now: now, by: map[int]*lateness{}}
}

// late records that a fetch from node k, sent at sent, went unanswered
// past its hedge deadline. Fetches sent before the last late one was
// known (a step's fetches, late together) extend nothing: they are the
// same outage.
func (s *suspicion) late(k int, sent time.Time) {
	now := s.now()
	s.mu.Lock()
	defer s.mu.Unlock()
	l := s.by[k]
	switch {
	case l == nil || !now.Before(l.until):
		l = &lateness{hold: suspectFirst}
		s.by[k] = l
	case sent.Before(l.at):
		return
	default:
		l.hold = min(2*l.hold, suspectMost)
	}
	l.at, l.sent, l.until = now, sent, now.Add(l.hold)
}

// suspect reports whether node k, which last answered this node at
// answered, is suspect now: late lately, and silent since.
func (s *suspicion) suspect(k int, answered time.Time) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	l := s.by[k]
	return l != nil && s.now().Before(l.until) && answered.Before(l.sent)
}

// unansweredKey carries a client's word on a request's context
// (WithUnanswered).
type unansweredKey struct{}

// unanswered is a client's word: the node at url had not answered its
// request since since.
type unanswered struct {
	url   string
	since time.Time
}

// WithUnanswered returns ctx carrying a client's word that the node at
// url (a member's URL) did not answer the same request for waited
// (api.HeaderUnanswered): the client hedged it here, or failed it over.
// ReadRemote then probes that node if it has not answered this node
// either since, and, if the probe gets no answer within a quarter of the
// hedge deadline (250 ms at least), reads its chunks elsewhere at once
// and holds it suspect. A node only busy (a cold batch read from the store, which a
// client hedges at its cold deadline) answers its probe at once, and is
// asked for its chunks as ever: taken at its word, a cold epoch's hedges
// read 1.138 × the dataset from the store, not 1.000.
//
// The client saw the silence first: by the time its request comes here
// the node has gone unanswered for the client's learnt deadline, while
// this node, hearing from it every probe interval, knows nothing yet,
// and would wait its own deadline (up to --peer-hedge-ceiling, 1 s) and
// the grace of a store read on top (issue 98, item 12: a blip's first
// step 1.98 s at the default ceiling). A client's word moves only its
// own request's reads and the node's suspicion of a peer that answers
// neither it nor a probe: at worst a peer's chunks read from the store
// or the next node, as a hedge would have.
func WithUnanswered(ctx context.Context, url string, waited time.Duration) context.Context {
	if url == "" || waited <= 0 {
		return ctx
	}
	return context.WithValue(ctx, unansweredKey{}, unanswered{url: url, since: time.Now().Add(-waited)})
}

// unansweredSlot returns the slot of the member ctx's client found
// silent (WithUnanswered) and since when, if it is a member of the
// agreed membership other than this node and has not answered this
// node since; -1 otherwise.
func (r *Router) unansweredSlot(ctx context.Context) (int, time.Time) {
	u, ok := ctx.Value(unansweredKey{}).(unanswered)
	if !ok {
		return -1, time.Time{}
	}
	v := r.view.Load()
	for i, m := range v.agreed.Members() {
		if m != u.url {
			continue
		}
		if k := v.slots[i]; k != r.self && r.peers.Answered(k).Before(u.since) {
			return k, u.since
		}
		break
	}
	return -1, time.Time{}
}

// minWordProbe is the least a probe of a node a client found silent
// waits (Router.answers): a node answers its state from memory, but a
// loaded machine's answer takes tens of milliseconds, and a quarter of
// a 250-ms deadline judged busy nodes silent in a cold epoch.
const minWordProbe = 250 * time.Millisecond

// answers reports whether node k answers a probe within a quarter of the
// hedge deadline, at least minWordProbe (and within ctx).
func (r *Router) answers(ctx context.Context, k int) bool {
	ctx, cancel := context.WithTimeout(ctx, max(r.hedge.Deadline()/4, minWordProbe))
	defer cancel()
	return r.peers.Answers(ctx, k)
}
