package edits

import (
	"sync"
	"time"
)

// Hold is how long a node that told another, taking an edit of a job,
// the furthest it has served of the job (Positions.Answer) lays out
// nothing of the job from the edit's first position on: the edit is made
// within half of it or not at all, and the node then reads the job's
// edits again before it lays those positions out, so a position is never
// laid out under the edits an edit being made replaces.
const Hold = 5 * time.Second

// Positions holds the positions a node has served of the named jobs it
// serves, and the lock between laying a batch out and making an edit.
// Every kind of edit a node keeps shares one, so a batch served is
// recorded once. Safe for concurrent use.
type Positions struct {
	// serve is held for reading by a request from reading its job's
	// edits to recording what it served (Hold), and for writing by an
	// edit being made (Chain.Make): no request lays a batch out under "no
	// edit" that an edit made at the same time would change.
	serve sync.RWMutex
	mu    sync.Mutex
	at    map[jobKey]position
	held  map[jobKey]hold
	now   func() time.Time
}

// hold is a promise to another node taking an edit: nothing of the job
// from position from on is laid out before until.
type hold struct {
	from  position
	until time.Time
}

type jobKey struct{ dataset, job string }

// position is an epoch position: served ones are compared in order.
type position struct {
	epoch uint64
	end   int
}

// NewPositions returns an empty book of positions.
func NewPositions() *Positions {
	return &Positions{at: map[jobKey]position{}, held: map[jobKey]hold{}, now: time.Now}
}

// Hold holds off the making of edits until the returned func is called:
// a request holds it from reading its job's edits to Served.
func (p *Positions) Hold() func() {
	p.serve.RLock()
	return p.serve.RUnlock
}

// making holds off requests while an edit is made.
func (p *Positions) making() func() {
	p.serve.Lock()
	return p.serve.Unlock
}

// Served records that this node served job's epoch over dataset up to
// position end.
func (p *Positions) Served(dataset, job string, epoch uint64, end int) {
	k := jobKey{dataset, job}
	p.mu.Lock()
	defer p.mu.Unlock()
	q, ok := p.at[k]
	if !ok || epoch > q.epoch || (epoch == q.epoch && end > q.end) {
		p.at[k] = position{epoch, end}
	}
}

// Last is the furthest position this node has served of job over
// dataset, if it has served any.
func (p *Positions) Last(dataset, job string) (epoch uint64, end int, ok bool) {
	p.mu.Lock()
	q, ok := p.at[jobKey{dataset, job}]
	p.mu.Unlock()
	return q.epoch, q.end, ok
}

// Answer is this node's answer to another taking an edit of job over
// dataset from position from of epoch: the furthest position it has
// served (ok false: none), with a promise that nothing of the job from
// the later of the two on is laid out for Hold (Held).
func (p *Positions) Answer(dataset, job string, epoch uint64, from int) (lastEpoch uint64, lastEnd int, ok bool) {
	k := jobKey{dataset, job}
	// The requests laying a batch out now have recorded what they serve
	// once this is held.
	p.serve.Lock()
	defer p.serve.Unlock()
	p.mu.Lock()
	defer p.mu.Unlock()
	q, ok := p.at[k]
	h := position{epoch, from}
	if ok && after(q, h) {
		h = q
	}
	p.held[k] = hold{from: h, until: p.now().Add(Hold)}
	return q.epoch, q.end, ok
}

// Held is how long a batch of job over dataset ending at position end of
// epoch waits for an edit another node is making (Answer): 0 if no hold
// covers it.
func (p *Positions) Held(dataset, job string, epoch uint64, end int) time.Duration {
	k := jobKey{dataset, job}
	p.mu.Lock()
	defer p.mu.Unlock()
	h, ok := p.held[k]
	if !ok {
		return 0
	}
	d := h.until.Sub(p.now())
	if d <= 0 {
		delete(p.held, k)
		return 0
	}
	if !after(position{epoch, end}, h.from) {
		return 0
	}
	return d
}

// after reports whether a batch ending at a reaches past b.
func after(a, b position) bool { return a.epoch > b.epoch || a.epoch == b.epoch && a.end > b.end }
