package s3test

import (
	"context"
	"io"
	"maps"
	"strings"
	"sync"

	"github.com/brandgw/brand/s3backend"
)

// Call is one call a Store passes on, as its hooks see it.
type Call struct {
	Op  string // s3backend.OpGet (ReadRange), OpStat, OpPut (Put, PutIfAbsent), OpList, OpDelete
	Key string // the object's key; List's prefix
	Off int64  // a read's offset
	Len int    // a read's length
}

// Counts is what a Store saw of one key.
type Counts struct {
	Reads int   // ReadRange calls
	Bytes int64 // the bytes they asked for
	Most  int   // the most ReadRange calls of the key in flight at once
	Stats int   // Stat calls
	Puts  int   // Put and PutIfAbsent calls
}

// Tally is the Counts of each key a Store saw.
type Tally map[string]Counts

// Under is the tally of the keys starting with prefix.
func (t Tally) Under(prefix string) Tally {
	out := Tally{}
	for k, c := range t {
		if strings.HasPrefix(k, prefix) {
			out[k] = c
		}
	}
	return out
}

// Sum adds the tally's keys' counts up; its Most is their most.
func (t Tally) Sum() Counts {
	var s Counts
	for _, c := range t {
		s.Reads += c.Reads
		s.Bytes += c.Bytes
		s.Most = max(s.Most, c.Most)
		s.Stats += c.Stats
		s.Puts += c.Puts
	}
	return s
}

// Store wraps an s3backend.Store, counting the calls it passes on,
// failing those Fail picks and holding those a Gate picks. A call is
// held first, then counted (a held read is not in flight), then failed
// or passed on. It is safe for concurrent use; its hooks may be set
// while calls run.
type Store struct {
	s3backend.Store

	mu       sync.Mutex
	fail     func(Call) error
	gates    []*Gate
	inflight map[string]int
	total    Tally
	since    Tally
}

// Wrap returns st behind a Store with no failures and no gates.
func Wrap(st s3backend.Store) *Store {
	return &Store{Store: st, inflight: map[string]int{}, total: Tally{}, since: Tally{}}
}

// Requests is the wrapped store's requests a read of n bytes makes (0
// when it does not say): a plan counts a chunk's load by it.
func (s *Store) Requests(n int64) int {
	if r, ok := s.Store.(interface{ Requests(n int64) int }); ok {
		return r.Requests(n)
	}
	return 0
}

// Total is what the store saw since it was wrapped.
func (s *Store) Total() Tally {
	s.mu.Lock()
	defer s.mu.Unlock()
	return maps.Clone(s.total)
}

// Take is what the store saw since the last Take (or the wrap), and
// starts counting again: a phase of a test counted apart from the
// phases before it. A read in flight across a take counts in Most of
// both.
func (s *Store) Take() Tally {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := s.since
	s.since = Tally{}
	for k, n := range s.inflight {
		if n > 0 {
			s.since[k] = Counts{Most: n}
		}
	}
	return out
}

// Fail makes the calls for which f returns an error fail with it, in
// place of the wrapped store's answer; f returning nil passes the call
// on. A nil f fails nothing. f must be safe for concurrent use.
func (s *Store) Fail(f func(Call) error) {
	s.mu.Lock()
	s.fail = f
	s.mu.Unlock()
}

// Gate holds the calls it picks from now on until it is opened.
type Gate struct {
	pick    func(Call) bool
	open    chan struct{}
	once    sync.Once
	waiting chan Call
}

// held is how many held calls a Gate signals before its test receives
// them; the signals of more are dropped, the calls still held.
const held = 1024

// Gate holds the calls pick picks from now on until the Gate returned
// is opened: pick is asked once per call, so it may pick the first call
// of a kind alone. pick must be safe for concurrent use.
func (s *Store) Gate(pick func(Call) bool) *Gate {
	g := &Gate{pick: pick, open: make(chan struct{}), waiting: make(chan Call, held)}
	s.mu.Lock()
	s.gates = append(s.gates, g)
	s.mu.Unlock()
	return g
}

// Waiting receives each call the gate holds as it begins to wait.
func (g *Gate) Waiting() <-chan Call { return g.waiting }

// Open lets the calls held go, and every later one the gate picks. It
// may be called more than once.
func (g *Gate) Open() { g.once.Do(func() { close(g.open) }) }

// wait holds c at each gate that picks it, until the gate opens or ctx
// ends.
func (g *Gate) wait(ctx context.Context, c Call) error {
	select {
	case <-g.open:
		return nil
	default:
	}
	if !g.pick(c) {
		return nil
	}
	select {
	case g.waiting <- c:
	default:
	}
	select {
	case <-g.open:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// enter holds, counts and fails c: a non-nil error is the call's answer.
func (s *Store) enter(ctx context.Context, c Call) error {
	s.mu.Lock()
	gates := s.gates
	s.mu.Unlock()
	for _, g := range gates {
		if err := g.wait(ctx, c); err != nil {
			return err
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, t := range []Tally{s.total, s.since} {
		n := t[c.Key]
		switch c.Op {
		case s3backend.OpGet:
			n.Reads++
			n.Bytes += int64(c.Len)
			n.Most = max(n.Most, s.inflight[c.Key]+1)
		case s3backend.OpStat:
			n.Stats++
		case s3backend.OpPut:
			n.Puts++
		default:
			continue
		}
		t[c.Key] = n
	}
	if s.fail != nil {
		if err := s.fail(c); err != nil {
			return err
		}
	}
	if c.Op == s3backend.OpGet {
		s.inflight[c.Key]++
	}
	return nil
}

// ReadRange passes the read on unless held or failed.
func (s *Store) ReadRange(ctx context.Context, key, etag string, off int64, p []byte) error {
	if err := s.enter(ctx, Call{Op: s3backend.OpGet, Key: key, Off: off, Len: len(p)}); err != nil {
		return err
	}
	defer func() {
		s.mu.Lock()
		s.inflight[key]--
		s.mu.Unlock()
	}()
	return s.Store.ReadRange(ctx, key, etag, off, p)
}

// Stat passes the call on unless held or failed.
func (s *Store) Stat(ctx context.Context, key string) (s3backend.ObjectInfo, error) {
	if err := s.enter(ctx, Call{Op: s3backend.OpStat, Key: key}); err != nil {
		return s3backend.ObjectInfo{}, err
	}
	return s.Store.Stat(ctx, key)
}

// Put passes the call on unless held or failed.
func (s *Store) Put(ctx context.Context, key string, r io.Reader, size int64) (s3backend.ObjectInfo, error) {
	if err := s.enter(ctx, Call{Op: s3backend.OpPut, Key: key}); err != nil {
		return s3backend.ObjectInfo{}, err
	}
	return s.Store.Put(ctx, key, r, size)
}

// PutIfAbsent passes the call on unless held or failed.
func (s *Store) PutIfAbsent(ctx context.Context, key string, r io.Reader, size int64) (s3backend.ObjectInfo, error) {
	if err := s.enter(ctx, Call{Op: s3backend.OpPut, Key: key}); err != nil {
		return s3backend.ObjectInfo{}, err
	}
	return s.Store.PutIfAbsent(ctx, key, r, size)
}

// List passes the call on unless held or failed.
func (s *Store) List(ctx context.Context, prefix string) ([]s3backend.ObjectInfo, error) {
	if err := s.enter(ctx, Call{Op: s3backend.OpList, Key: prefix}); err != nil {
		return nil, err
	}
	return s.Store.List(ctx, prefix)
}

// Delete passes the call on unless held or failed.
func (s *Store) Delete(ctx context.Context, key string) error {
	if err := s.enter(ctx, Call{Op: s3backend.OpDelete, Key: key}); err != nil {
		return err
	}
	return s.Store.Delete(ctx, key)
}
