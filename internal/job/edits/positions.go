package edits

import "sync"

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
}

type jobKey struct{ dataset, job string }

// position is an epoch position: served ones are compared in order.
type position struct {
	epoch uint64
	end   int
}

// NewPositions returns an empty book of positions.
func NewPositions() *Positions { return &Positions{at: map[jobKey]position{}} }

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
