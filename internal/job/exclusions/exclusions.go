// Package exclusions keeps the exclusion lists of named jobs (POST
// /jobs/NAME/exclude, docs/http-api.md "Exclusions"): the samples a job
// leaves out of its future from a step on, stored where every node and a
// restarted one find them, and applied by the layout (layout.Exclusion).
//
// Why in the store: every rank and replica of a job must leave out the
// same samples from the same position, and a job outlives any node. The
// objects, under _brand/jobs/NAME/exclude/ in the store of the dataset
// the job reads:
//
//	VERSION   the list: its keys, dataset version, epoch and first
//	          position (JSON); VERSION is a digest of them
//	root      the list's version, created once (PutIfAbsent): of two
//	          lists made at once, on one node or two, one wins, and the
//	          other is refused naming it (a retry of the same list is
//	          told the version it made)
//
// A list is fixed once made: a job has one. Its first position must be
// after every position this node has served of the job (Served), so that
// nothing a loader has read changes; a list made on one node is found by
// another within Refresh, so on a cluster a list's step is chosen that
// far ahead of the steps being read.
//
// # Costs
//
// Making a list resolves each key in the dataset's index (a hash lookup)
// and stores the keys; a request of a named job reads a list kept in
// memory, and asks the store whether a job without one has one since at
// most once per Refresh.
package exclusions

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"github.com/brandgw/brand/internal/batch/layout"
	"github.com/brandgw/brand/internal/errkind"
	"github.com/brandgw/brand/internal/job/catalog"
	"github.com/brandgw/brand/s3backend"
)

// Errors, mapped to HTTP statuses by internal/server/httperr.
var (
	// ErrConflict: a list for a job that has another, or from a position
	// the job has read on this node (409).
	ErrConflict = errkind.New(errkind.Conflict, "exclusion conflict")
	// ErrUnknown: the job has no exclusion list (404).
	ErrUnknown = errkind.New(errkind.NotFound, "no exclusion list")
	// ErrUnknownKeys: a list naming keys the dataset does not hold (422):
	// a list is made whole or not at all.
	ErrUnknownKeys = errkind.New(errkind.Unprocessable, "unknown keys")
)

// Refresh is how long a node takes a job to have no list before it asks
// the store again.
const Refresh = time.Second

// MaxKeys bounds a list.
const MaxKeys = 1 << 22

// Store is what the book needs of a dataset's store (s3backend.Store).
type Store interface {
	Stat(ctx context.Context, key string) (s3backend.ObjectInfo, error)
	ReadRange(ctx context.Context, key, etag string, off int64, p []byte) error
	Put(ctx context.Context, key string, r io.Reader, size int64) (s3backend.ObjectInfo, error)
	PutIfAbsent(ctx context.Context, key string, r io.Reader, size int64) (s3backend.ObjectInfo, error)
}

// A List is a job's stored exclusion list.
type List struct {
	Job     string `json:"job"`
	Version string `json:"version"`
	Dataset string `json:"dataset"`
	IndexID string `json:"index_id"`
	// Epoch and FromPosition are where the list starts to apply: the
	// position in the epoch's order of the first sample of the step it
	// was made from (FromStep, under StepSamples samples a step).
	Epoch        uint64   `json:"epoch"`
	FromPosition int      `json:"from_position"`
	FromStep     uint64   `json:"from_step"`
	StepSamples  int      `json:"step_samples"`
	Keys         []string `json:"keys"`
}

// A ServedError is the ErrConflict of a list from a position this node
// has served of the job: Next is the first step a list could start at.
type ServedError struct {
	Next uint64
	err  error
}

func (e *ServedError) Error() string { return e.err.Error() }
func (e *ServedError) Unwrap() error { return e.err }

type jobKey struct{ dataset, job string }

type entry struct {
	list *List
	x    *layout.Exclusion // resolved in index x.IndexID
	read time.Time         // when "no list" was read
}

// position is an epoch position: served ones are compared in order.
type position struct {
	epoch uint64
	end   int
}

// Book holds the lists of the jobs a node serves and the positions it
// has served of them. Safe for concurrent use.
type Book struct {
	now func() time.Time
	// serve is held for reading by a request from reading its job's list
	// to recording what it served, and for writing by a list being made:
	// no request lays a batch out under "no list" that a list made at
	// the same time would change.
	serve  sync.RWMutex
	mu     sync.Mutex
	lists  map[jobKey]entry
	served map[jobKey]position
}

// New returns an empty book.
func New() *Book {
	return &Book{now: time.Now, lists: map[jobKey]entry{}, served: map[jobKey]position{}}
}

// Hold holds off the making of lists until the returned func is called:
// a request holds it from Of to Served.
func (b *Book) Hold() func() {
	b.serve.RLock()
	return b.serve.RUnlock
}

func prefix(job string) string { return "_brand/jobs/" + job + "/exclude/" }

// Of returns job's list over ds resolved in ds's index, or nil if the job
// has none.
func (b *Book) Of(ctx context.Context, st Store, ds *catalog.Dataset, job string) (*layout.Exclusion, *List, error) {
	k := jobKey{ds.Name, job}
	b.mu.Lock()
	e, ok := b.lists[k]
	b.mu.Unlock()
	if ok && e.list == nil && b.now().Sub(e.read) < Refresh {
		return nil, nil, nil
	}
	if ok && e.list != nil && e.x.IndexID == ds.ID() {
		return e.x, e.list, nil
	}
	l := e.list
	if l == nil {
		var err error
		if l, err = read(ctx, st, job); errors.Is(err, ErrUnknown) {
			b.mu.Lock()
			b.lists[k] = entry{read: b.now()}
			b.mu.Unlock()
			return nil, nil, nil
		} else if err != nil && ok {
			// The store did not answer; the job had no list when it last
			// did. Serving on under that answer keeps cached chunks served
			// through a store outage; a list another node makes meanwhile
			// is found when the store answers again.
			return nil, nil, nil
		} else if err != nil {
			return nil, nil, err
		}
	}
	x, err := resolve(ctx, ds, l)
	if err != nil {
		return nil, nil, err
	}
	b.mu.Lock()
	b.lists[k] = entry{list: l, x: x}
	b.mu.Unlock()
	return x, l, nil
}

// Served records that this node served job's epoch up to position end.
func (b *Book) Served(dataset, job string, epoch uint64, end int) {
	k := jobKey{dataset, job}
	b.mu.Lock()
	defer b.mu.Unlock()
	p, ok := b.served[k]
	if !ok || epoch > p.epoch || (epoch == p.epoch && end > p.end) {
		b.served[k] = position{epoch, end}
	}
}

// Make stores l (its Job, Dataset, Epoch, FromPosition, FromStep,
// StepSamples and Keys) as job's list over ds, and returns it with its
// version. It refuses keys ds does not hold (ErrUnknownKeys, naming some),
// a position this node has served (a *ServedError; stepOf names the first
// step after it), and a second, different list of the job (ErrConflict
// naming the list there is). A list made again, whole, is the same list.
func (b *Book) Make(ctx context.Context, st Store, ds *catalog.Dataset, l List, stepOf func(epoch uint64, end int) uint64) (*List, *layout.Exclusion, error) {
	if len(l.Keys) > MaxKeys {
		return nil, nil, fmt.Errorf("%w: %d keys; a list holds at most %d", ErrUnknownKeys, len(l.Keys), MaxKeys)
	}
	l.IndexID = ds.ID()
	ids, err := lookup(ctx, ds, l.Keys)
	if err != nil {
		return nil, nil, err
	}
	x, err := layout.NewExclusion("", ds, l.Epoch, l.FromPosition, ids)
	if err != nil {
		return nil, nil, err
	}
	l.Version = versionOf(l, x)
	x.Version = l.Version
	if done, err := existing(ctx, st, l); done || err != nil {
		return &l, x, err
	}
	if err := b.servedBefore(ds.Name, l, stepOf); err != nil {
		return nil, nil, err
	}
	// The list itself, named by its content, is stored before requests
	// are held off: of what the list's making holds them for, only small
	// objects are left.
	body, err := json.Marshal(l)
	if err != nil {
		return nil, nil, err
	}
	pre := prefix(l.Job)
	if _, err := st.Put(ctx, pre+l.Version, bytes.NewReader(body), int64(len(body))); err != nil {
		return nil, nil, fmt.Errorf("storing job %s's exclusion list: %w", l.Job, err)
	}
	b.serve.Lock()
	defer b.serve.Unlock()
	if done, err := existing(ctx, st, l); done || err != nil {
		return &l, x, err
	}
	if err := b.servedBefore(ds.Name, l, stepOf); err != nil {
		return nil, nil, err
	}
	if _, err := st.PutIfAbsent(ctx, pre+"root", strings.NewReader(l.Version), int64(len(l.Version))); err != nil {
		if errors.Is(err, s3backend.ErrExists) {
			cur, cerr := read(ctx, st, l.Job)
			if cerr == nil && cur.Version == l.Version {
				return cur, x, nil
			}
			if cerr == nil {
				return nil, nil, fmt.Errorf("%w: another exclusion list of job %s was made at the same time: version %s", ErrConflict, l.Job, cur.Version)
			}
			return nil, nil, fmt.Errorf("%w: another exclusion list of job %s was made at the same time", ErrConflict, l.Job)
		}
		return nil, nil, fmt.Errorf("storing job %s's exclusion list: %w", l.Job, err)
	}
	b.mu.Lock()
	b.lists[jobKey{ds.Name, l.Job}] = entry{list: &l, x: x}
	b.mu.Unlock()
	return &l, x, nil
}

// existing reports whether job l.Job has l as its list already (done, a
// retry of a list made), or refuses l for the job's other list.
func existing(ctx context.Context, st Store, l List) (done bool, err error) {
	v, err := readObject(ctx, st, prefix(l.Job)+"root", 64)
	switch {
	case errors.Is(err, s3backend.ErrNotFound):
		return false, nil
	case err != nil:
		return false, fmt.Errorf("reading job %s's exclusion list: %w", l.Job, err)
	case string(v) == l.Version:
		return true, nil
	}
	return false, fmt.Errorf("%w: job %s has an exclusion list, version %s; a job has one list", ErrConflict, l.Job, v)
}

// servedBefore refuses l if this node has served job l.Job over dataset
// at or past l's first position.
func (b *Book) servedBefore(dataset string, l List, stepOf func(epoch uint64, end int) uint64) error {
	b.mu.Lock()
	p, ok := b.served[jobKey{dataset, l.Job}]
	b.mu.Unlock()
	if ok && (l.Epoch < p.epoch || (l.Epoch == p.epoch && l.FromPosition < p.end)) {
		next := stepOf(p.epoch, p.end)
		return &ServedError{Next: next, err: fmt.Errorf("%w: this node has served job %s up to position %d of epoch %d; an exclusion starts after it (from step %d or later), not at step %d", ErrConflict, l.Job, p.end, p.epoch, next, l.FromStep)}
	}
	return nil
}

// lookup resolves keys in ds's index; unknown keys fail the whole list,
// naming the first few.
func lookup(ctx context.Context, ds *catalog.Dataset, keys []string) ([]int, error) {
	all, found, err := ds.Index.LookupMany(ctx, keys)
	if err != nil {
		return nil, err
	}
	ids := all[:0]
	var unknown []string
	missing := 0
	for i, k := range keys {
		if !found[i] {
			missing++
			if len(unknown) < 5 {
				unknown = append(unknown, fmt.Sprintf("%q", k))
			}
			continue
		}
		ids = append(ids, all[i])
	}
	if missing > 0 {
		return nil, fmt.Errorf("%w: %d of the %d keys are not samples of dataset %s (index %s), among them %s; nothing is excluded",
			ErrUnknownKeys, missing, len(keys), ds.Name, ds.ID(), strings.Join(unknown, ", "))
	}
	return ids, nil
}

// resolve makes l's exclusion in ds's index (its own, or another version
// of the dataset holding its keys).
func resolve(ctx context.Context, ds *catalog.Dataset, l *List) (*layout.Exclusion, error) {
	ids, err := lookup(ctx, ds, l.Keys)
	if err != nil {
		return nil, fmt.Errorf("job %s's exclusion list %s in index %s: %w", l.Job, l.Version, ds.ID(), err)
	}
	x, err := layout.NewExclusion(l.Version, ds, l.Epoch, l.FromPosition, ids)
	if err == nil && ds.ID() != l.IndexID {
		x.Version = versionOf(List{Job: l.Job, Dataset: l.Dataset, IndexID: ds.ID(), Epoch: l.Epoch, FromPosition: l.FromPosition}, x)
	}
	return x, err
}

// versionOf names a list: a digest of its job, dataset version, first
// position and samples (x's, in increasing order).
func versionOf(l List, x *layout.Exclusion) string {
	h := sha256.New()
	fmt.Fprintf(h, "brand-exclude-v1|%s|%s|%s|%d|%d|", l.Job, l.Dataset, l.IndexID, l.Epoch, l.FromPosition)
	buf := make([]byte, 0, 8<<10)
	for id := range x.IDs() {
		if buf = binary.LittleEndian.AppendUint64(buf, uint64(id)); len(buf) == cap(buf) {
			h.Write(buf)
			buf = buf[:0]
		}
	}
	h.Write(buf)
	return hex.EncodeToString(h.Sum(nil)[:8])
}

// read reads job's list from st.
func read(ctx context.Context, st Store, job string) (*List, error) {
	v, err := readObject(ctx, st, prefix(job)+"root", 64)
	if errors.Is(err, s3backend.ErrNotFound) {
		return nil, fmt.Errorf("%w: job %s has no exclusion list (POST /jobs/%s/exclude makes one)", ErrUnknown, job, job)
	}
	if err != nil {
		return nil, fmt.Errorf("reading job %s's exclusion list: %w", job, err)
	}
	body, err := readObject(ctx, st, prefix(job)+string(v), 1<<31)
	if err != nil {
		return nil, fmt.Errorf("reading job %s's exclusion list %s: %w", job, v, err)
	}
	l := &List{}
	if err := json.Unmarshal(body, l); err != nil || l.Version != string(v) || l.Job != job {
		return nil, fmt.Errorf("job %s's exclusion list %s is damaged in the store (%v)", job, v, err)
	}
	return l, nil
}

func readObject(ctx context.Context, st Store, key string, limit int64) ([]byte, error) {
	info, err := st.Stat(ctx, key)
	if err != nil {
		return nil, err
	}
	if info.Size > limit {
		return nil, fmt.Errorf("%s holds %d bytes; at most %d", key, info.Size, limit)
	}
	p := make([]byte, info.Size)
	if err := st.ReadRange(ctx, key, info.ETag, 0, p); err != nil {
		return nil, err
	}
	return p, nil
}
