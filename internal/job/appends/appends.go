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
// A record is fixed once made: a job has one. Its first position must be
// after every position this node has served of the job (Served); a
// record made on one node is found by another within Refresh.
package appends

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/brandgw/brand/chunkindex"
	"github.com/brandgw/brand/internal/batch/layout"
	"github.com/brandgw/brand/internal/errkind"
	"github.com/brandgw/brand/internal/job/catalog"
	"github.com/brandgw/brand/internal/job/edits"
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
type Store = edits.Store

// records is where the records are kept.
func records() edits.Chain {
	return edits.Chain{Kind: edits.Append, Dir: "append", What: "append record", Max: 1, Limit: 1 << 20,
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
}

// Layout is the record as the layout applies it.
func (r *Record) Layout() *layout.Append {
	return &layout.Append{Version: r.Version, Parent: r.IndexID, Chunks: r.ParentChunks, Epoch: r.Epoch, From: r.FromPosition}
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
	case rec != nil:
		return rec, nil
	case ok && b.now().Sub(last) < Refresh:
		return nil, nil
	}
	r, err := read(ctx, st, job)
	switch {
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

// Served records that this node served job's epoch up to position end.
func (b *Book) Served(dataset, job string, epoch uint64, end int) {
	b.pos.Served(dataset, job, epoch, end)
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
	body, err := json.Marshal(r)
	if err != nil {
		return nil, err
	}
	v := edits.Version{Job: r.Job, Dataset: r.Dataset, Version: r.Version, Epoch: r.Epoch, From: r.FromPosition, FromStep: r.FromStep, Body: body}
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
	return hex.EncodeToString(h.Sum(nil)[:8])
}

// read reads job's record from st.
func read(ctx context.Context, st Store, job string) (*Record, error) {
	var r *Record
	err := records().Read(ctx, st, job, func(version, _ string, body []byte) error {
		r = &Record{}
		if err := json.Unmarshal(body, r); err != nil {
			return err
		}
		if r.Version != version || r.Job != job {
			return errors.New("its fields do not match its name")
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return r, nil
}
