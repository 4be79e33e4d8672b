package editproto

import (
	"sync"
	"time"
)

// Hold is how long at most a node that told another, taking an edit of
// a job, the furthest it has served of the job (Positions.Answer) lays
// out nothing of the job from the edit's first position on, if the
// edit's node does not release it sooner (Holds): the edit is made
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
	// edit being made (Versions.Make): no request lays a batch out under "no
	// edit" that an edit made at the same time would change.
	serve sync.RWMutex
	mu    sync.Mutex
	at    map[jobKey]position
	holds *Holds[jobKey, position] // promises to nodes taking edits (Answer)
	// stale: a node taking an edit was answered (Answer); a batch of the
	// job reaching past the position is laid out under the job's edits
	// read from the store again (Stale, Confirm), the edit's node having
	// made its edit, or not, by the time the hold ends.
	stale map[jobKey]position
	now   func() time.Time
}

type jobKey struct{ dataset, job string }

// position is an epoch position: served ones are compared in order.
type position struct {
	epoch uint64
	end   int
}

// NewPositions returns an empty book of positions.
func NewPositions() *Positions {
	return &Positions{at: map[jobKey]position{}, holds: NewHolds[jobKey](beforePos), stale: map[jobKey]position{}, now: time.Now}
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
// the later of the two on is laid out until the edit's node releases it
// (Release) or Hold passes (Held).
func (p *Positions) Answer(dataset, job string, epoch uint64, from int, edit string) (lastEpoch uint64, lastEnd int, ok bool) {
	k := jobKey{dataset, job}
	// The requests laying a batch out now have recorded what they serve
	// once this is held.
	p.serve.Lock()
	defer p.serve.Unlock()
	p.mu.Lock()
	q, ok := p.at[k]
	h := position{epoch, from}
	if ok && after(q, h) {
		h = q
	}
	if s, ok := p.stale[k]; !ok || after(s, h) {
		p.stale[k] = h
	}
	p.mu.Unlock()
	p.holds.Add(k, h, p.now(), edit)
	return q.epoch, q.end, ok
}

// Stale reports whether a batch of job over dataset ending at position
// end of epoch reaches past a position this node answered a node taking
// an edit for (Answer), since a batch read the job's edits from the
// store again (Confirm): it is laid out under the edits read again.
func (p *Positions) Stale(dataset, job string, epoch uint64, end int) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	s, ok := p.stale[jobKey{dataset, job}]
	return ok && after(position{epoch, end}, s)
}

// Confirm records that a batch of job over dataset was laid out under
// its edits read from the store after every answer (Answer) so far: a
// request holds Hold meanwhile, so that no answer comes between its read
// and this.
func (p *Positions) Confirm(dataset, job string) {
	p.mu.Lock()
	delete(p.stale, jobKey{dataset, job})
	p.mu.Unlock()
}

// Release ends the hold an Answer promised edit (its ID): the edit of job
// over dataset is made or refused.
func (p *Positions) Release(dataset, job, edit string) {
	p.holds.Release(jobKey{dataset, job}, p.now(), edit)
}

// Settled reports whether what this node read of job's edits over
// dataset, in a read begun at read, still stands (Holds.Settled): not
// while a node taking an edit of the job holds its word (Answer), nor
// once it has released it, for a read begun before. So a node that
// reads the job's edits again when they are not settled tells of the
// edit its node answered 201 for, even if that node is lost the moment
// after, and a node that never hears the release reads them again until
// Hold has passed, by when the edit is made or not at all.
func (p *Positions) Settled(dataset, job string, read time.Time) bool {
	return p.holds.Settled(jobKey{dataset, job}, read)
}

// Held is how long a batch of job over dataset ending at position end of
// epoch waits for an edit another node is making (Answer), and a channel
// closed if the edit's node releases the hold first: 0 if no hold covers
// it.
func (p *Positions) Held(dataset, job string, epoch uint64, end int) (time.Duration, <-chan struct{}) {
	return p.holds.Wait(jobKey{dataset, job}, position{epoch, end}, p.now())
}

// after reports whether a batch ending at a reaches past b.
func after(a, b position) bool { return a.epoch > b.epoch || a.epoch == b.epoch && a.end > b.end }

// beforePos orders positions for Holds: a before b.
func beforePos(a, b position) bool { return after(b, a) }
