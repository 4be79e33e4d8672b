// Package stopper owns every goroutine of the server that outlives the
// request that started it — a chunk's load, a prefetch, a probe of a
// peer, a poll of an index, a batch premade before its request — and ends
// them all with one call.
//
// # Why
//
// Background work was started by each component in its own way (a wait
// group here, a context there, a bare go statement for a disk write), and
// closed by a hand-kept list of Close calls whose order a comment
// justified: the premade batches had to end before the transform pool
// they submit to, the pool before the memory it gives back, the
// prefetcher before the cache it reads into. A component added later had
// to find its place in that list by reading the comment, and a goroutine
// started after its owner closed ran untracked.
//
// Here the order is data. Each component that owns background work
// registers a Group with the one Stopper when it is built, in the order
// the components are built; a component is built from those before it,
// so it may use them, never the ones after it. Stop drains the groups in
// the reverse of that order — the last built first — and a group's drain
// is always the same three steps: its context ends (its tasks are told to
// stop, and it starts no more), its tasks are waited for, then its OnStop
// functions run (it gives back what it holds). When Stop returns, no task
// of any group runs. This is CockroachDB's stop.Stopper, with the order
// of its closers made the order of construction.
//
// # Bounds
//
// Go runs a task whatever the load: the component bounds its own tasks
// (a fixed set of workers, one poll loop). TryGo runs one only if a Limit
// has a free slot, and drops it otherwise: work done before it is needed
// is a bet, never worth queueing for. Groups may share a Limit.
//
// # Concurrency
//
// A Stopper and its Groups are safe for concurrent use. Go and TryGo after
// (or during) a group's stop run nothing and report false; the caller
// does the work's failure path itself. Stop is idempotent; a Group
// registered after Stop is stopped at once.
package stopper

import (
	"context"
	"slices"
	"sync"
)

// Stopper owns the groups of one server and stops them together.
type Stopper struct {
	mu      sync.Mutex
	groups  []*Group // in order of registration
	stopped bool
}

// New returns a Stopper with no group.
func New() *Stopper { return &Stopper{} }

// Group registers a group of background work, named for logs and
// tests, after those registered before it: Stop drains it before them.
func (s *Stopper) Group(name string) *Group {
	p := newGroup(name)
	s.mu.Lock()
	stopped := s.stopped
	if !stopped {
		s.groups = append(s.groups, p)
	}
	s.mu.Unlock()
	if stopped {
		p.Stop()
	}
	return p
}

// Order returns the groups' names in the order Stop drains them.
func (s *Stopper) Order() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	names := make([]string, len(s.groups))
	for i, p := range s.groups {
		names[len(s.groups)-1-i] = p.name
	}
	return names
}

// Stop drains every group, the last registered first, and returns once
// each has: its context ended, its tasks returned, its OnStop functions
// run. Idempotent; a second call waits for nothing the first did not.
func (s *Stopper) Stop() {
	s.mu.Lock()
	s.stopped = true
	groups := slices.Clone(s.groups)
	s.mu.Unlock()
	for i := len(groups) - 1; i >= 0; i-- {
		groups[i].Stop()
	}
}

// Own returns p, or if p is nil a group of a stopper of its own: for a
// component built outside a server (a test, a tool), which then stops it
// itself.
func Own(p *Group, name string) *Group {
	if p != nil {
		return p
	}
	return New().Group(name)
}

// Group is one component's background work: the tasks it runs and what it
// gives back once they have ended.
type Group struct {
	name   string
	ctx    context.Context
	cancel context.CancelFunc

	mu       sync.Mutex // guards stopping against wg.Add after Wait began
	stopping bool
	wg       sync.WaitGroup
	onStop   []func()
	stopOnce sync.Once
}

func newGroup(name string) *Group {
	ctx, cancel := context.WithCancel(context.Background())
	return &Group{name: name, ctx: ctx, cancel: cancel}
}

// Name is the name the group was registered under.
func (p *Group) Name() string { return p.name }

// Context ends when the group starts to stop: the context of its tasks,
// and of the work they start.
func (p *Group) Context() context.Context { return p.ctx }

// Go runs f on a goroutine of its own, tracked, and reports whether it
// does: not once the group is stopping. f's context is Context.
func (p *Group) Go(f func(ctx context.Context)) bool {
	if !p.add() {
		return false
	}
	go p.run(f)
	return true
}

// TryGo is Go if l has a free slot, which f holds until it returns;
// without one it runs nothing and reports false.
func (p *Group) TryGo(l *Limit, f func(ctx context.Context)) bool {
	select {
	case l.slots <- struct{}{}:
	default:
		return false
	}
	if !p.add() {
		<-l.slots
		return false
	}
	go func() {
		defer func() { <-l.slots }()
		p.run(f)
	}()
	return true
}

func (p *Group) add() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.stopping {
		return false
	}
	p.wg.Add(1)
	return true
}

func (p *Group) run(f func(ctx context.Context)) {
	defer p.wg.Done()
	f(p.ctx)
}

// OnStop adds f to what the group does once its tasks have returned, in
// the order added: give back what it holds, close what only it uses.
// f may not start tasks of this group.
func (p *Group) OnStop(f func()) {
	p.mu.Lock()
	p.onStop = append(p.onStop, f)
	p.mu.Unlock()
}

// Stop drains this group alone: its context ends, its tasks are waited
// for, its OnStop functions run. Idempotent: a later call returns once
// the first has drained it.
func (p *Group) Stop() {
	p.stopOnce.Do(func() {
		p.mu.Lock()
		p.stopping = true
		p.mu.Unlock()
		p.cancel()
		p.wg.Wait()
		p.mu.Lock()
		fs := p.onStop
		p.mu.Unlock()
		for _, f := range fs {
			f()
		}
	})
}

// Limit bounds the tasks run by TryGo at once, over every group that
// shares it.
type Limit struct{ slots chan struct{} }

// NewLimit returns a Limit of n slots (at least 1).
func NewLimit(n int) *Limit { return &Limit{slots: make(chan struct{}, max(n, 1))} }
