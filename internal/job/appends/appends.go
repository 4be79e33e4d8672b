// Package appends keeps the append records of named jobs (POST
// /jobs/NAME/append, docs/http-api.md "Appends: data added during a
// run"): that a job's dataset grew — a version extending the one the job
// reads, made by `brand index --append` — and from which step the job
// takes the new samples, stored where every node and a restarted one
// find it, and applied by the layout (layout.Append).
//
// Why in the store, and how: as package exclusions keeps lists. The
// objects, under _brand/jobs/NAME/append/ in the store of the dataset
// the job reads:
//
//	VERSION   the record (JSON); VERSION is a digest of it
//	root      the record's version, created once (PutIfAbsent): of two
//	          records made at once, on one node or two, one wins, and
//	          the other is refused naming it (the same record sent again
//	          is told the version it made)
//
// A record is fixed once made: a job has one. Its first position must be
// after every position this node has served of the job (Served); a
// record made on one node is found by another within Refresh.
package appends

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"github.com/brandgw/brand/chunkindex"
	"github.com/brandgw/brand/internal/batch/layout"
	"github.com/brandgw/brand/internal/errkind"
	"github.com/brandgw/brand/internal/job/catalog"
	"github.com/brandgw/brand/s3backend"
)

// Errors, mapped to HTTP statuses by internal/server/httperr.
var (
	// ErrConflict: a record for a job that has another, or from a
	// position the job has read on this node (409).
	ErrConflict = errkind.New(errkind.Conflict, "append conflict")
	// ErrUnknown: the job has no append record (404).
	ErrUnknown = errkind.New(errkind.NotFound, "no append record")
	// ErrNotExtending: the version named does not extend the one the job
	// reads (422).
	ErrNotExtending = errkind.New(errkind.Unprocessable, "index does not extend the job's")
)

// Refresh is how long a node takes a job to have no record before it
// asks the store again.
const Refresh = time.Second

// Store is what the book needs of a dataset's store (s3backend.Store).
type Store interface {
	Stat(ctx context.Context, key string) (s3backend.ObjectInfo, error)
	ReadRange(ctx context.Context, key, etag string, off int64, p []byte) error
	Put(ctx context.Context, key string, r io.Reader, size int64) (s3backend.ObjectInfo, error)
	PutIfAbsent(ctx context.Context, key string, r io.Reader, size int64) (s3backend.ObjectInfo, error)
}

// A Record is a job's stored append record.
type Record struct {
	Job     string `json:"job"`
	Version string `json:"version"`
	Dataset string `json:"dataset"`
	// IndexID is the version the job read, of ParentChunks chunks;
	// Index the version extending it whose new samples the job takes.
	IndexID      string `json:"index_id"`
	ParentChunks int    `json:"parent_chunks"`
	Index        string `json:"index"`
	// Epoch and FromPosition are where the record starts to apply: the
	// position in the epoch's order of the first sample of step FromStep
	// (under StepSamples samples a step).
	Epoch        uint64 `json:"epoch"`
	FromPosition int    `json:"from_position"`
	FromStep     uint64 `json:"from_step"`
	StepSamples  int    `json:"step_samples"`
}

// Layout is the record as the layout applies it.
func (r *Record) Layout() *layout.Append {
	return &layout.Append{Version: r.Version, Parent: r.IndexID, Chunks: r.ParentChunks, Epoch: r.Epoch, From: r.FromPosition}
}

// A ServedError is the ErrConflict of a record from a position this node
// has served of the job: Next is the first step a record could start at.
type ServedError struct {
	Next uint64
	err  error
}

func (e *ServedError) Error() string { return e.err.Error() }
func (e *ServedError) Unwrap() error { return e.err }

type jobKey struct{ dataset, job string }

type entry struct {
	rec  *Record
	read time.Time // when "no record" was read
}

type position struct {
	epoch uint64
	end   int
}

// Book holds the records of the jobs a node serves and the positions it
// has served of them. Safe for concurrent use.
type Book struct {
	now func() time.Time
	// serve is held for reading by a request from reading its job's
	// record to recording what it served, and for writing by a record
	// being made (as exclusions.Book's).
	serve  sync.RWMutex
	mu     sync.Mutex
	recs   map[jobKey]entry
	served map[jobKey]position
}

// New returns an empty book.
func New() *Book {
	return &Book{now: time.Now, recs: map[jobKey]entry{}, served: map[jobKey]position{}}
}

// Hold holds off the making of records until the returned func is
// called: a request holds it from Of to Served.
func (b *Book) Hold() func() {
	b.serve.RLock()
	return b.serve.RUnlock
}

func prefix(job string) string { return "_brand/jobs/" + job + "/append/" }

// Of returns job's record over dataset, or nil if it has none.
func (b *Book) Of(ctx context.Context, st Store, dataset, job string) (*Record, error) {
	k := jobKey{dataset, job}
	b.mu.Lock()
	e, ok := b.recs[k]
	b.mu.Unlock()
	switch {
	case ok && e.rec != nil:
		return e.rec, nil
	case ok && b.now().Sub(e.read) < Refresh:
		return nil, nil
	}
	r, err := read(ctx, st, job)
	switch {
	case errors.Is(err, ErrUnknown):
		b.mu.Lock()
		b.recs[k] = entry{read: b.now()}
		b.mu.Unlock()
		return nil, nil
	case err != nil && ok:
		// The store did not answer; the job had no record when it last
		// did (as exclusions.Book.Of).
		return nil, nil
	case err != nil:
		return nil, err
	}
	b.mu.Lock()
	b.recs[k] = entry{rec: r}
	b.mu.Unlock()
	return r, nil
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

// Make stores r (its Job, Dataset, Epoch, FromPosition, FromStep and
// StepSamples) as job's record: the job read parent, and takes the new
// samples of ext, which must extend it (ErrNotExtending). It refuses a
// position this node has served (a *ServedError; stepOf names the first
// step after it) and a second, different record of the job (ErrConflict
// naming the one there is). A record made again is the same record.
func (b *Book) Make(ctx context.Context, st Store, parent, ext *catalog.Dataset, r Record, stepOf func(epoch uint64, end int) uint64) (*Record, error) {
	r.IndexID, r.Index = parent.ID(), ext.ID()
	r.ParentChunks = -1
	for _, a := range chunkindex.Lineage(ext.Index) {
		if a.ID == parent.ID() {
			r.ParentChunks = a.Chunks
		}
	}
	if r.ParentChunks < 0 || parent.Index.NumChunks() != r.ParentChunks {
		return nil, fmt.Errorf("%w: index %s of dataset %s does not extend index %s, which job %s reads (it extends %s): append files with brand index --append, and name the index it stores",
			ErrNotExtending, ext.ID(), ext.Name, parent.ID(), r.Job, lineage(ext.Index))
	}
	r.Version = versionOf(r)
	if done, err := existing(ctx, st, r); done || err != nil {
		return &r, err
	}
	if err := b.servedBefore(r, stepOf); err != nil {
		return nil, err
	}
	body, err := json.Marshal(r)
	if err != nil {
		return nil, err
	}
	pre := prefix(r.Job)
	if _, err := st.Put(ctx, pre+r.Version, bytes.NewReader(body), int64(len(body))); err != nil {
		return nil, fmt.Errorf("storing job %s's append record: %w", r.Job, err)
	}
	b.serve.Lock()
	defer b.serve.Unlock()
	if done, err := existing(ctx, st, r); done || err != nil {
		return &r, err
	}
	if err := b.servedBefore(r, stepOf); err != nil {
		return nil, err
	}
	if _, err := st.PutIfAbsent(ctx, pre+"root", strings.NewReader(r.Version), int64(len(r.Version))); err != nil {
		if errors.Is(err, s3backend.ErrExists) {
			cur, cerr := read(ctx, st, r.Job)
			if cerr == nil && cur.Version == r.Version {
				return cur, nil
			}
			if cerr == nil {
				return nil, fmt.Errorf("%w: another append record of job %s was made at the same time: version %s", ErrConflict, r.Job, cur.Version)
			}
			return nil, fmt.Errorf("%w: another append record of job %s was made at the same time", ErrConflict, r.Job)
		}
		return nil, fmt.Errorf("storing job %s's append record: %w", r.Job, err)
	}
	b.mu.Lock()
	b.recs[jobKey{r.Dataset, r.Job}] = entry{rec: &r}
	b.mu.Unlock()
	return &r, nil
}

// lineage names the versions ix extends, for errors.
func lineage(ix *chunkindex.Index) string {
	var ids []string
	for _, a := range chunkindex.Lineage(ix) {
		ids = append(ids, a.ID)
	}
	if len(ids) == 0 {
		return "none"
	}
	return strings.Join(ids, ", ")
}

// existing reports whether job r.Job has r as its record already (done),
// or refuses r for the job's other record.
func existing(ctx context.Context, st Store, r Record) (done bool, err error) {
	v, err := readObject(ctx, st, prefix(r.Job)+"root", 64)
	switch {
	case errors.Is(err, s3backend.ErrNotFound):
		return false, nil
	case err != nil:
		return false, fmt.Errorf("reading job %s's append record: %w", r.Job, err)
	case string(v) == r.Version:
		return true, nil
	}
	return false, fmt.Errorf("%w: job %s has an append record, version %s; a job has one", ErrConflict, r.Job, v)
}

// servedBefore refuses r if this node has served job r.Job at or past
// r's first position.
func (b *Book) servedBefore(r Record, stepOf func(epoch uint64, end int) uint64) error {
	b.mu.Lock()
	p, ok := b.served[jobKey{r.Dataset, r.Job}]
	b.mu.Unlock()
	if ok && (r.Epoch < p.epoch || (r.Epoch == p.epoch && r.FromPosition < p.end)) {
		next := stepOf(p.epoch, p.end)
		return &ServedError{Next: next, err: fmt.Errorf("%w: this node has served job %s up to position %d of epoch %d; an append starts after it (from step %d or later), not at step %d", ErrConflict, r.Job, p.end, p.epoch, next, r.FromStep)}
	}
	return nil
}

// versionOf names a record: a digest of its content.
func versionOf(r Record) string {
	h := sha256.New()
	fmt.Fprintf(h, "brand-append-v1|%s|%s|%s|%d|%s|%d|%d", r.Job, r.Dataset, r.IndexID, r.ParentChunks, r.Index, r.Epoch, r.FromPosition)
	return hex.EncodeToString(h.Sum(nil)[:8])
}

// read reads job's record from st.
func read(ctx context.Context, st Store, job string) (*Record, error) {
	v, err := readObject(ctx, st, prefix(job)+"root", 64)
	if errors.Is(err, s3backend.ErrNotFound) {
		return nil, fmt.Errorf("%w: job %s has no append record (POST /jobs/%s/append makes one)", ErrUnknown, job, job)
	}
	if err != nil {
		return nil, fmt.Errorf("reading job %s's append record: %w", job, err)
	}
	body, err := readObject(ctx, st, prefix(job)+string(v), 1<<20)
	if err != nil {
		return nil, fmt.Errorf("reading job %s's append record %s: %w", job, v, err)
	}
	r := &Record{}
	if err := json.Unmarshal(body, r); err != nil || r.Version != string(v) || r.Job != job {
		return nil, fmt.Errorf("job %s's append record %s is damaged in the store (%v)", job, v, err)
	}
	return r, nil
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
