package task

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/go-json-experiment/json"

	"github.com/brandgw/brand/internal/errkind"
	"github.com/brandgw/brand/s3backend"
)

// MaxJobs is how many task jobs a node holds at once by default; a job
// not asked for longest is let go (and read again from the store when
// asked) to make room.
const MaxJobs = 256

// Book is a node's task jobs, each read from its dataset's store when
// first asked for, their plans within a bound of memory (PlanBytes each,
// counted from the spec before the log is read): a job not asked for
// longest is let go to make room, and a job that finds none — every
// other plan being read — is refused (ErrTooManyJobs, 503), as is one
// whose plan alone is larger than the bound (ErrBadSpec, before its spec
// is stored). It is safe for concurrent use.
type Book struct {
	now      func() time.Time
	max      int
	maxBytes int64
	metrics  *Metrics
	// snapEvery is SnapshotEvery, or a test's.
	snapEvery uint64

	mu   sync.Mutex
	jobs map[bookKey]*entry
	held int64 // the plans' bytes, of jobs read and being read
}

type bookKey struct{ dataset, job string }

type entry struct {
	ready chan struct{}
	s     *Stream
	err   error
	used  time.Time
	bytes int64 // its plan's (PlanBytes)
}

// NewBook is a book of at most max jobs (MaxJobs if 0), telling time by
// now (time.Now if nil).
func NewBook(max int, now func() time.Time) *Book { return NewBookCounted(max, now, nil) }

// NewBookCounted is NewBook counting in m.
func NewBookCounted(max int, now func() time.Time, m *Metrics) *Book {
	return NewBookBounded(max, 0, now, m)
}

// NewBookBounded is NewBookCounted whose plans hold at most maxBytes
// (DefaultPlanBytes if 0).
func NewBookBounded(max int, maxBytes int64, now func() time.Time, m *Metrics) *Book {
	if max == 0 {
		max = MaxJobs
	}
	if maxBytes == 0 {
		maxBytes = DefaultPlanBytes
	}
	if now == nil {
		now = time.Now
	}
	return &Book{now: now, max: max, maxBytes: maxBytes, metrics: m, jobs: map[bookKey]*entry{}}
}

// PlanBytes is the memory the plans of the jobs held and being read take
// (PlanBytes each), and the most they may.
func (b *Book) PlanBytes() (held, most int64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.held, b.maxBytes
}

// Make makes task job job over the dataset of st whose index is index
// and holds prompts prompts, with spec's parameters; made is false when
// the job was made before with the same ones (and is answered as it is),
// and a job made with others is refused (ErrExists).
func (b *Book) Make(ctx context.Context, st Store, dataset, job, index string, prompts int, spec Spec) (s *Stream, made bool, err error) {
	asked := spec
	spec = spec.WithDefaults()
	spec.Dataset, spec.Index, spec.Prompts, spec.Made = dataset, index, prompts, b.now().UnixMilli()
	spec.Tag = TagOf(job, index, spec.Made)
	if err := spec.Check(); err != nil {
		return nil, false, err
	}
	if need := PlanBytes(spec); need > b.maxBytes {
		return nil, false, tooLarge(job, spec, need, b.maxBytes)
	}
	body, err := json.Marshal(spec)
	if err != nil {
		return nil, false, err
	}
	_, err = st.PutIfAbsent(ctx, specKey(job), bytes.NewReader(body), int64(len(body)))
	switch {
	case errors.Is(err, s3backend.ErrExists):
		s, err := b.Open(ctx, st, dataset, job)
		if err != nil {
			return nil, false, err
		}
		if old := s.Spec(); !old.SameAsked(asked) || old.Dataset != dataset {
			return nil, false, fmt.Errorf("%w: task job %s exists over dataset %s with another spec (PUT the same spec, or name a new job)", ErrExists, job, old.Dataset)
		}
		return s, false, nil
	case err != nil:
		return nil, false, fmt.Errorf("%w: storing task job %s's spec: %w", ErrStore, job, err)
	}
	s, err = b.Open(ctx, st, dataset, job)
	return s, err == nil, err
}

// Open is task job job of dataset, read from st when this node does not
// hold it.
//
// A job not held has its spec read first, so that its plan's memory is
// made room for (PlanBytes) before its log is read into it.
func (b *Book) Open(ctx context.Context, st Store, dataset, job string) (*Stream, error) {
	k := bookKey{dataset, job}
	b.mu.Lock()
	e := b.jobs[k]
	if e == nil {
		b.mu.Unlock()
		spec, err := readSpec(ctx, st, job)
		if err != nil {
			return nil, err
		}
		need := PlanBytes(spec)
		if need > b.maxBytes {
			return nil, tooLarge(job, spec, need, b.maxBytes)
		}
		b.mu.Lock()
		if e = b.jobs[k]; e == nil { // not read by another meanwhile
			if err := b.room(need); err != nil {
				b.mu.Unlock()
				return nil, err
			}
			e = &entry{ready: make(chan struct{}), bytes: need}
			b.jobs[k] = e
			b.held += need
			b.mu.Unlock()
			e.s, e.err = openStream(ctx, st, job, b.now, b.metrics, b.snapEvery)
			if e.err != nil {
				b.mu.Lock()
				if b.jobs[k] == e {
					delete(b.jobs, k)
					b.held -= e.bytes
				}
				b.mu.Unlock()
			}
			close(e.ready)
			b.mu.Lock()
		}
	}
	e.used = b.now()
	b.mu.Unlock()
	select {
	case <-e.ready:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	return e.s, e.err
}

// room lets go of the jobs not asked for longest, of those read, until
// one more job of need bytes fits in the book's count and bytes; with
// none left to let go, ErrTooManyJobs. Called with b.mu held.
func (b *Book) room(need int64) error {
	for len(b.jobs) >= b.max || b.held+need > b.maxBytes {
		if !b.evict() {
			return fmt.Errorf("%w: %d are held and being read, their plans taking %d MiB of the %d MiB this node holds task plans in: no room for a plan of %d MiB more until one is read (brand serve --task-plan-bytes)",
				ErrTooManyJobs, len(b.jobs), b.held>>20, b.maxBytes>>20, need>>20)
		}
	}
	return nil
}

// evict lets go of the job not asked for longest, of those read: its
// plan is read again from the store when next asked for.
func (b *Book) evict() bool {
	var oldest bookKey
	var at time.Time
	found := false
	for k, e := range b.jobs {
		select {
		case <-e.ready:
		default:
			continue
		}
		if !found || e.used.Before(at) {
			oldest, at, found = k, e.used, true
		}
	}
	if found {
		b.held -= b.jobs[oldest].bytes
		delete(b.jobs, oldest)
	}
	return found
}

// ErrTaskJob: an edit of a named job's chain (POST /jobs/{job}/exclude,
// /append) where a task job has the name (409): a task job's edits are
// entries of its own log, and a chain stored beside it would be ignored.
var ErrTaskJob = errkind.New(errkind.Conflict, "a task job's name")

// Made reports whether st holds a task job named job.
func Made(ctx context.Context, st Store, job string) (bool, error) {
	_, err := st.Stat(ctx, specKey(job))
	switch {
	case errors.Is(err, s3backend.ErrNotFound):
		return false, nil
	case err != nil:
		return false, fmt.Errorf("%w: reading task job %s's spec: %w", ErrStore, job, err)
	}
	return true, nil
}
