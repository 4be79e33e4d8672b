// Package appends keeps the append records of named jobs (POST
// /jobs/NAME/append, docs/http-api.md "Appends: data added during a
// run"): that a job's dataset grew — a version extending the one the job
// reads, made by `brand index --append` — and from which step the job
// takes the new samples, stored where every node and a restarted one
// find it, and applied by the layout (layout.Append).
//
// Why in the store, and how: as package exclusions keeps lists, as every
// stored edit is kept (edits.Chain), under _brand/jobs/NAME/append/ in
// the store of the dataset the job reads: the record (JSON) under a
// digest of it, and root naming it, created once: of two records made at
// once, on one node or two, one wins, and the other is refused naming it
// (the same record sent again is told the version it made).
//
// A record is fixed once made. A job takes several in turn (a writer
// appending files every hour): each later record names the current one
// (Previous) and a version extending its version, from a step at or after
// its from step; a chain holds at most shuffle.MaxAppends. A record's
// first position must be after every position this node has served of
// the job (Served); a record made on one node is found by another within
// Refresh. A job's steps are counted through the epochs its records grow
// (Steps).
package appends

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/brandgw/brand/chunkindex"
	"github.com/brandgw/brand/internal/batch/layout"
	"github.com/brandgw/brand/internal/errkind"
	"github.com/brandgw/brand/internal/job/catalog"
	"github.com/brandgw/brand/internal/job/edits"
	"github.com/brandgw/brand/shuffle"
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
	// ErrBefore: a record from a step before the previous record's (422).
	ErrBefore = errkind.New(errkind.Unprocessable, "append before the previous record's step")
)

// Refresh is how long a node takes a job to have no record before it
// asks the store again.
const Refresh = time.Second

// Store is what the book needs of a dataset's store (s3backend.Store).
type Store = edits.Store

// records is where the records are kept.
func records() edits.Chain {
	return edits.Chain{Kind: edits.Append, Dir: "append", What: "append record", Max: shuffle.MaxAppends, Limit: 1 << 20,
		Conflict: ErrConflict, Unknown: ErrUnknown}
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
	// Previous is the record this one extends ("" for a job's first):
	// IndexID is its Index.
	Previous string `json:"previous,omitempty"`

	prev *Record // the record Previous names
}

// Chain is the job's records up to r, first first.
func (r *Record) Chain() []*Record {
	var out []*Record
	for x := r; x != nil; x = x.prev {
		out = append(out, x)
	}
	slices.Reverse(out)
	return out
}

// Layout is the record as the layout applies it, with the records it
// extends.
func (r *Record) Layout() *layout.Append {
	var prev *layout.Append
	if r.prev != nil {
		prev = r.prev.Layout()
	}
	return &layout.Append{Version: r.Version, Parent: r.IndexID, Index: r.Index, Chunks: r.ParentChunks, Epoch: r.Epoch, From: r.FromPosition, Previous: prev}
}

// A ServedError is the ErrConflict of a record from a position this node
// has served of the job: Next is the first step a record could start at.
type ServedError = edits.ServedError

// Book holds the records of the jobs a node serves. Safe for concurrent
// use.
type Book struct {
	now  func() time.Time
	pos  *edits.Positions
	recs edits.Known[*Record] // nil: none when last asked
}

// New returns an empty book with positions of its own.
func New() *Book { return With(edits.NewPositions()) }

// With returns an empty book that refuses a record from a position pos
// says this node has served (as exclusions.With).
func With(pos *edits.Positions) *Book { return &Book{now: time.Now, pos: pos} }

// Of returns job's record over dataset, or nil if it has none.
func (b *Book) Of(ctx context.Context, st Store, dataset, job string) (*Record, error) {
	rec, last, ok := b.recs.Get(dataset, job)
	switch {
	case ok && b.now().Sub(last) < Refresh:
		return rec, nil
	case rec != nil && !records().Extended(ctx, st, job, rec.Version):
		// No later record, or the store did not answer: the record known
		// is served on until it does.
		b.recs.Set(dataset, job, rec, b.now())
		return rec, nil
	}
	r, err := read(ctx, st, job)
	switch {
	case err != nil && rec != nil:
		return rec, nil
	case errors.Is(err, ErrUnknown):
		b.recs.Set(dataset, job, nil, b.now())
		return nil, nil
	case err != nil && ok:
		// The store did not answer; the job had no record when it last
		// did (as exclusions.Book.Of).
		return nil, nil
	case err != nil:
		return nil, err
	}
	b.recs.Set(dataset, job, r, b.now())
	return r, nil
}

// Current returns job's record over dataset as the store has it now (nil
// if it has none), for an edit: a record made on another node within
// Refresh is the one a next record extends.
func (b *Book) Current(ctx context.Context, st Store, dataset, job string) (*Record, error) {
	r, err := read(ctx, st, job)
	switch {
	case errors.Is(err, ErrUnknown):
		return nil, nil
	case err != nil:
		return nil, err
	}
	b.recs.Set(dataset, job, r, b.now())
	return r, nil
}

// Served records that this node served job's epoch up to position end.
func (b *Book) Served(dataset, job string, epoch uint64, end int) {
	b.pos.Served(dataset, job, epoch, end)
}

// Make stores r (its Job, Dataset, Epoch, FromPosition, FromStep,
// StepSamples and Previous) as job's record after prev, the job's current
// record (nil for its first): the job read parent (prev's version), and
// takes the new samples of ext, which must extend it (ErrNotExtending),
// from a step at or after prev's (ErrBefore). It refuses a position this
// node has served (a *ServedError; stepOf names the first step after it),
// a record without Previous of a job that has one, and one whose Previous
// is not the current record (ErrConflict naming the current one). A
// record made again is the same record.
func (b *Book) Make(ctx context.Context, st Store, parent, ext *catalog.Dataset, prev *Record, r Record, stepOf func(epoch uint64, end int) uint64) (*Record, error) {
	if prev != nil {
		for _, x := range prev.Chain() {
			if x.Index == ext.ID() && x.FromStep == r.FromStep && x.StepSamples == r.StepSamples && x.Previous == r.Previous {
				return x, nil // made already: a retry is told the record it made
			}
		}
	}
	switch {
	case prev != nil && r.Previous == "":
		return nil, edits.NewConflictError(edits.Append, prev.Version, fmt.Errorf("%w: job %s has an append record, version %s; a later one names it: previous %q",
			ErrConflict, r.Job, prev.Version, prev.Version))
	case prev != nil && r.Previous != prev.Version:
		return nil, edits.NewConflictError(edits.Append, prev.Version, fmt.Errorf("%w: job %s's append record is at version %s, not %s: extend the current record",
			ErrConflict, r.Job, prev.Version, r.Previous))
	case prev == nil && r.Previous != "":
		return nil, fmt.Errorf("%w: job %s has no append record to extend (previous %s)", ErrUnknown, r.Job, r.Previous)
	}
	r.IndexID, r.Index = parent.ID(), ext.ID()
	if prev != nil {
		if r.FromStep < prev.FromStep {
			return nil, fmt.Errorf("%w: job %s's append record %s applies from step %d; a record extending it applies from that step or a later one, not from step %d",
				ErrBefore, r.Job, prev.Version, prev.FromStep, r.FromStep)
		}
		if len(prev.Chain()) >= shuffle.MaxAppends {
			return nil, fmt.Errorf("%w: job %s has %d append records, the most a job takes; start a new job (another name) over index %s",
				ErrConflict, r.Job, shuffle.MaxAppends, prev.Index)
		}
		r.prev = prev
	}
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
	body, err := json.Marshal(r)
	if err != nil {
		return nil, err
	}
	v := edits.Version{Job: r.Job, Dataset: r.Dataset, Version: r.Version, Previous: r.Previous, Epoch: r.Epoch, From: r.FromPosition, FromStep: r.FromStep, Body: body}
	done, err := records().Make(ctx, st, b.pos, v, stepOf)
	if err != nil {
		return nil, err
	}
	if !done {
		b.recs.Set(r.Dataset, r.Job, &r, b.now())
	}
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

// versionOf names a record: a digest of its content.
func versionOf(r Record) string {
	h := sha256.New()
	fmt.Fprintf(h, "brand-append-v1|%s|%s|%s|%d|%s|%d|%d", r.Job, r.Dataset, r.IndexID, r.ParentChunks, r.Index, r.Epoch, r.FromPosition)
	if r.Previous != "" {
		fmt.Fprintf(h, "|previous=%s", r.Previous)
	}
	return hex.EncodeToString(h.Sum(nil)[:8])
}

// read reads job's current record, with those it extends, from st.
func read(ctx context.Context, st Store, job string) (*Record, error) {
	var r *Record
	err := records().Read(ctx, st, job, func(version, previous string, body []byte) error {
		x := &Record{}
		if err := json.Unmarshal(body, x); err != nil {
			return err
		}
		if x.Version != version || x.Job != job || x.Previous != previous {
			return errors.New("its fields do not match its name")
		}
		if r != nil && (x.IndexID != r.Index || x.FromStep < r.FromStep || x.Epoch < r.Epoch) {
			return fmt.Errorf("it does not extend record %s", r.Version)
		}
		x.prev, r = r, x
		return nil
	})
	if err != nil {
		return nil, err
	}
	return r, nil
}
