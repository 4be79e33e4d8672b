// Package chain keeps each named job's chain of edits (POST
// /jobs/NAME/exclude and /jobs/NAME/append, docs/http-api.md "Edits: one
// chain"): the exclusions and appends a job made during its run, of
// either kind, in the order made, stored where every node and a
// restarted one find them, and resolved into the layout's chain
// (layout.Edit), which the job's batches are laid out under.
//
// # Why one chain
//
// A run that grows its data also finds bad samples in it: a job takes
// appends and exclusions in turn, each from its step, each applied to the
// order the edits before it made (shuffle.EditedEpoch). So the edits are
// one sequence, whatever their kind: each names the job's edit before it
// (Previous), and two edits made at once, of either kind, on one node or
// two, race for one place in it, where one wins and the other is refused
// naming the winner.
//
// # Where
//
// In the store of the dataset the job reads, as every stored edit is
// kept (editproto.Versions): under _brand/jobs/NAME/edits/, each edit (JSON, its
// kind and fields) under a digest of it, root and EDIT.next naming the
// chain, each created once. A job whose first edit was made before the
// chain held both kinds keeps its edits where that one is
// (_brand/jobs/NAME/exclude/ or .../append/), its edits of the other kind
// too: it is read and grown there.
//
// # Rules
//
// An edit is fixed once made. It applies from a step at or after the
// job's previous edit's (layout.ErrBeforePrevious), and after every
// position this node has served of the job (editproto.Positions; a cluster
// asks every member, see package resolve). A chain holds at most
// shuffle.MaxEdits edits, shuffle.MaxAppends of them appends. Each edit
// made on one node is found by another within Refresh, and by every
// member asked before it was made (a cluster's edits ask them all) as
// soon as it is answered.
//
// # Costs
//
// Making an exclusion resolves each key in the dataset's index (a hash
// lookup) and stores the keys; a request of a named job reads the chain
// kept in memory, and asks the store whether it has a newer edit at most
// once per Refresh — and on each request while another node takes an
// edit of the job, from its question to its release (at most
// editproto.Hold), as rare as edits are. A chain is resolved in an index version once (its
// keys looked up) and kept.
package chain

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/go-json-experiment/json"

	"github.com/brandgw/brand/chunkindex"
	"github.com/brandgw/brand/internal/batch/layout"
	"github.com/brandgw/brand/internal/errkind"
	"github.com/brandgw/brand/internal/job/catalog"
	"github.com/brandgw/brand/internal/job/editproto"
	"github.com/brandgw/brand/internal/quote"
	"github.com/brandgw/brand/shuffle"
)

// Errors, mapped to HTTP statuses by internal/server/httperr.
var (
	// ErrConflict: an edit based on an edit that is not the job's
	// current one (a *ConflictError naming the current one), or from a
	// position the job has read (a *ServedError) (409).
	ErrConflict = errkind.New(errkind.Conflict, "edit conflict")
	// ErrUnknown: the job has no edit of the kind asked for (404).
	ErrUnknown = errkind.New(errkind.NotFound, "no such edit")
	// ErrUnknownKeys: an exclusion naming keys the dataset does not hold
	// (422): an exclusion is made whole or not at all.
	ErrUnknownKeys = errkind.New(errkind.Unprocessable, "unknown keys")
	// ErrTooMany: an edit of a chain of shuffle.MaxEdits edits, or an
	// append of one of shuffle.MaxAppends appends (422).
	ErrTooMany = errkind.New(errkind.Unprocessable, "too many edits")
	// ErrNotExtending: an append naming a version that does not extend
	// the one the job reads (422).
	ErrNotExtending = errkind.New(errkind.Unprocessable, "index does not extend the job's")
	// ErrNotOfVersion: a request reading an index version the job's
	// appends did not grow it to, nor one extending it (409).
	ErrNotOfVersion = errkind.New(errkind.Conflict, "the job's edits are of other index versions")
)

// Refresh is how long a node takes a job to have no newer edit before it
// asks the store again.
const Refresh = time.Second

// MaxKeys bounds an exclusion's keys.
const MaxKeys = 1 << 22

// The kinds of edit, as stored and as their ETags name them.
const (
	Exclude = "exclude"
	Append  = "append"
)

// dirs are the folders a job's chain may be kept in, under
// _brand/jobs/NAME/: the chain of either kind, then those of a job whose
// first edit was made when each kind had a chain of its own.
var dirs = [...]string{"edits", Exclude, Append}

// store is where a job's chain kept in folder dir is.
func store(dir string) editproto.Versions {
	kind, what := editproto.Edit, "edit chain"
	switch dir {
	case Exclude:
		kind, what = editproto.Exclusion, "exclusion list"
	case Append:
		kind, what = editproto.Append, "append records"
	}
	return editproto.Versions{Subject: kind, Dir: dir, What: what, Max: shuffle.MaxEdits, Limit: 1 << 31, Conflict: ErrConflict, Unknown: ErrUnknown}
}

// Store is what the book needs of a dataset's store (s3backend.Store).
type Store = editproto.Store

// A Link is one edit of a job's chain as stored: an exclusion (Keys) or
// an append (Index), made over index version IndexID, applying from
// position FromPosition of epoch Epoch of the order of the edits before
// it (Previous), the first position of step FromStep under StepSamples
// samples a step.
type Link struct {
	// Kind is Exclude or Append; an edit of a chain kept in a folder of
	// one kind (before the chain held both) has none stored.
	Kind         string `json:"kind,omitempty"`
	Job          string `json:"job"`
	Version      string `json:"version"`
	Dataset      string `json:"dataset"`
	IndexID      string `json:"index_id"`
	Epoch        uint64 `json:"epoch"`
	FromPosition int    `json:"from_position"`
	FromStep     uint64 `json:"from_step"`
	StepSamples  int    `json:"step_samples"`
	// PassStep is, for an edit of a job whose unit cuts its epochs at
	// steps (a bucket job: layout.StepCutter), the step of Epoch's pass
	// it applies from (layout.Edit.Step); FromPosition is then where that
	// step's batches start in the items of the job the edit was made at,
	// which its served check compares with. Absent for an edit from a
	// position.
	PassStep *int `json:"pass_step,omitempty"`
	// Keys are an exclusion's keys: the samples it adds to every earlier
	// exclusion's.
	Keys []string `json:"keys,omitempty"`
	// ParentChunks is, for an append, IndexID's chunks, and Index the
	// version extending it whose new samples the job takes.
	ParentChunks int    `json:"parent_chunks,omitempty"`
	Index        string `json:"index,omitempty"`
	// Previous is the job's edit this one follows ("" for its first).
	Previous string `json:"previous,omitempty"`

	prev *Link
}

// IsAppend reports whether e is an append; otherwise an exclusion.
func (e *Link) IsAppend() bool { return e.Kind == Append }

// from is where e applies in its epoch's order (layout.Edit.From) and the
// step of the epoch's pass it applies from (layout.Edit.Step): an edit
// at a step (PassStep) applies to the whole order, from its step.
func (e *Link) from() (pos, step int) {
	if e.PassStep != nil {
		return 0, *e.PassStep
	}
	return e.FromPosition, -1
}

// Prev is the job's edit before e, nil for its first.
func (e *Link) Prev() *Link { return e.prev }

// Chain is the job's edits up to e, first first.
func (e *Link) Chain() []*Link {
	var out []*Link
	for x := e; x != nil; x = x.prev {
		out = append(out, x)
	}
	slices.Reverse(out)
	return out
}

// Newest is the newest edit of kind up to e, nil if none.
func (e *Link) Newest(kind string) *Link {
	for x := e; x != nil; x = x.prev {
		if x.Kind == kind {
			return x
		}
	}
	return nil
}

// AllKeys are the keys of every exclusion up to e, first first: the
// samples it leaves out.
func (e *Link) AllKeys() []string {
	var keys []string
	for _, x := range e.Chain() {
		keys = append(keys, x.Keys...)
	}
	return keys
}

// Version is the index version the job reads under the chain up to e:
// the version its newest append grew it to, or the one it read first.
func (e *Link) IndexVersion() string {
	if a := e.Newest(Append); a != nil {
		return a.Index
	}
	return e.Chain()[0].IndexID
}

// A ConflictError is the ErrConflict of an edit based on an edit that is
// not the job's current one: Current is the one to base it on.
type ConflictError = editproto.ConflictError

// A ServedError is the ErrConflict of an edit from a position the job
// has been served: Next is the first step an edit could start at.
type ServedError = editproto.ServedError

func conflict(kind editproto.Subject, current, format string, args ...any) error {
	return editproto.NewConflictError(kind, current, fmt.Errorf("%w: "+format, append([]any{ErrConflict}, args...)...))
}

// entry is what a node knows of a job's chain: its newest edit (nil:
// none), the folder it is kept in, and its resolution in the index
// version last asked for.
type entry struct {
	head *Link
	dir  string
	res  *resolution
}

// resolution is a chain resolved in an index version: the layout's chain
// for head, in version over.
type resolution struct {
	head string
	over string
	edit *layout.Edit
}

// Book holds the chains of the jobs a node serves. Safe for concurrent
// use.
type Book struct {
	now   func() time.Time
	pos   *editproto.Positions
	known editproto.Known[entry]
	// newest is the newest version of a dataset the node holds (nil:
	// none), whose index keys are looked up in (keysIn).
	newest func(dataset string) *catalog.Dataset
}

// New returns an empty book with positions of its own.
func New() *Book { return With(editproto.NewPositions()) }

// With returns an empty book that refuses an edit from a position pos
// says this node has served (pos is shared with the node's other books
// of edits: the requests of a job hold it, and record what they served
// in it, once).
func With(pos *editproto.Positions) *Book { return &Book{now: time.Now, pos: pos} }

// LookIn has b look keys up in the newest version of a dataset newest
// gives, where it extends the version an edit is resolved in, and
// returns b. An older version's index is opened in part on a cluster
// node, and its keys can no longer be read once `brand index --append`
// has replaced the index object the version was read from; the version
// extending it holds every one of its samples under the same ID.
func (b *Book) LookIn(newest func(dataset string) *catalog.Dataset) *Book {
	b.newest = newest
	return b
}

// keysIn is the version keys of ds are looked up in: the newest the node
// holds if it extends ds, else ds.
func (b *Book) keysIn(ds *catalog.Dataset) *catalog.Dataset {
	if b.newest == nil {
		return ds
	}
	if n := b.newest(ds.Name); n != nil && n.ID() != ds.ID() && extends(n, ds.ID()) {
		return n
	}
	return ds
}

// Served records that this node served job's epoch over dataset up to
// position end.
func (b *Book) Served(dataset, job string, epoch uint64, end int) {
	b.pos.Served(dataset, job, epoch, end)
}

// Of returns job's newest edit over dataset (nil if it has none), as the
// store had it within Refresh, and as it has it now where a node taking
// an edit of the job asked this one since (editproto.Positions.Settled):
// an edit another node answered 201 for is the one this node tells of,
// at once. A store that does not answer leaves the chain known served
// on, so that cached chunks are served through an outage; an edit
// another node makes meanwhile is found when it answers.
func (b *Book) Of(ctx context.Context, st Store, dataset, job string) (*Link, error) {
	// A read is as new as its beginning: an edit stored while it ran
	// may be missing from it.
	start := b.now()
	e, last, ok := b.known.Get(dataset, job)
	switch {
	case ok && start.Sub(last) < Refresh && b.pos.Settled(dataset, job, last):
		return e.head, nil
	case e.head != nil && !store(e.dir).Extended(ctx, st, job, e.head.Version):
		b.known.Set(dataset, job, e, start)
		return e.head, nil
	}
	head, dir, err := read(ctx, st, job)
	switch {
	case err != nil && ok:
		return e.head, nil
	case err != nil:
		return nil, err
	}
	if head == nil || e.head == nil || head.Version != e.head.Version {
		e.res = nil
	}
	e.head, e.dir = head, dir
	b.known.Set(dataset, job, e, start)
	return head, nil
}

// Current returns job's newest edit over dataset as the store has it now
// (nil if it has none), for an edit: one made on another node within
// Refresh is the one a next edit follows.
func (b *Book) Current(ctx context.Context, st Store, dataset, job string) (*Link, error) {
	start := b.now()
	head, dir, err := read(ctx, st, job)
	if err != nil {
		return nil, err
	}
	e, _, _ := b.known.Get(dataset, job)
	if head == nil || e.head == nil || head.Version != e.head.Version {
		e.res = nil
	}
	e.head, e.dir = head, dir
	b.known.Set(dataset, job, e, start)
	return head, nil
}

// Resolve is the layout's chain of head (one of job's chains, over
// dataset ds.Name) resolved in ds, the index version the job reads: each
// exclusion's keys looked up in it, each append as it grows the job. An
// exclusion resolved in an index that neither is nor extends the one it
// was made over (a dataset re-packed since) goes by another name: its
// samples there are others.
func (b *Book) Resolve(ctx context.Context, ds *catalog.Dataset, head *Link) (*layout.Edit, error) {
	if head == nil {
		return nil, nil
	}
	e, read, _ := b.known.Get(ds.Name, head.Job)
	if r := e.res; r != nil && r.head == head.Version && r.over == ds.ID() {
		return r.edit, nil
	}
	x, err := resolve(ctx, ds, b.keysIn(ds), head)
	if err != nil {
		return nil, err
	}
	if e.head != nil && e.head.Version == head.Version {
		e.res = &resolution{head: head.Version, over: ds.ID(), edit: x}
		b.known.Set(ds.Name, head.Job, e, read)
	}
	return x, nil
}

// resolve is Resolve without the book, keys looked up in keysIn (ds or a
// version extending it).
func resolve(ctx context.Context, ds, keysIn *catalog.Dataset, head *Link) (*layout.Edit, error) {
	var x *layout.Edit
	for _, v := range head.Chain() {
		var err error
		from, step := v.from()
		if v.IsAppend() {
			x, err = layout.NewAppend(v.Version, v.IndexID, v.Index, v.ParentChunks, v.Epoch, from, x)
		} else {
			var ids []int
			if ids, err = lookup(ctx, ds, keysIn, v.Keys); err != nil {
				return nil, fmt.Errorf("job %s's exclusion %s in index %s: %w", v.Job, v.Version, ds.ID(), err)
			}
			x, err = layout.NewExclusion(v.Version, ds, v.Epoch, from, ids, x)
			switch {
			case err != nil:
			case extends(ds, v.IndexID):
				x.Over = v.IndexID // the version made over, which ds grew from
			default:
				w := *v
				w.IndexID = ds.ID()
				if x.Prev != nil {
					w.Previous = x.Prev.Version
				}
				x.Version = exclusionVersion(w, x)
			}
		}
		if err != nil {
			return nil, err
		}
		x.Step = step
	}
	return x, nil
}

// extends reports whether ds is index version id or one extending it.
func extends(ds *catalog.Dataset, id string) bool {
	if ds.ID() == id {
		return true
	}
	return slices.ContainsFunc(ds.Index.Lineage().Ancestors(), func(a chunkindex.Ancestor) bool { return a.ID == id })
}

// lookup resolves keys in ds's index, looked up in keysIn's (ds, or a
// version extending it, whose samples of ds have ds's IDs); unknown keys
// fail the whole exclusion, naming the first few.
func lookup(ctx context.Context, ds, keysIn *catalog.Dataset, keys []string) ([]int, error) {
	all, found, err := keysIn.Index.LookupMany(ctx, keys)
	if err != nil {
		return nil, err
	}
	n := ds.Index.NumSamples()
	ids := all[:0]
	var unknown []string
	missing := 0
	for i, k := range keys {
		if !found[i] || all[i] >= n {
			missing++
			if len(unknown) < 5 {
				unknown = append(unknown, quote.Input(k))
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

// Make stores e (its Kind, Job, Dataset, Epoch, FromPosition, FromStep,
// StepSamples, Previous, and Keys or Index) as job's next edit after cur,
// its current one (nil for its first), and returns it named, with the
// layout's chain up to it. ds is the version the job reads under cur; an
// append's ext extends it. It refuses an edit whose Previous is not cur
// (a *ConflictError naming cur), one from a step before cur's
// (layout.ErrBeforePrevious), one past the chain's bounds (ErrTooMany),
// keys ds does not hold (ErrUnknownKeys), an ext not extending ds
// (ErrNotExtending) and a position this node has served (a
// *ServedError; stepOf names the first step after it). An edit made
// again, whole, is the one made.
func (b *Book) Make(ctx context.Context, st Store, ds, ext *catalog.Dataset, cur *Link, e Link, stepOf func(epoch uint64, end int) uint64) (*Link, *layout.Edit, error) {
	kind := editKind(e.Kind)
	if cur != nil {
		for _, x := range cur.Chain() {
			if x.Kind == e.Kind && x.FromStep == e.FromStep && x.StepSamples == e.StepSamples && x.Previous == e.Previous &&
				(x.IsAppend() && ext != nil && x.Index == ext.ID() || !x.IsAppend() && slices.Equal(x.Keys, e.Keys)) {
				// Made already: a retry, its answer lost, is told the edit
				// it made, even after the job was served past its step.
				prev, err := b.Resolve(ctx, ds, cur)
				for y := prev; err == nil && y != nil && y.Version != x.Version; y = y.Prev {
					prev = y.Prev
				}
				return x, prev, err
			}
		}
	}
	switch {
	case cur != nil && e.Previous == "":
		return nil, nil, conflict(kind, cur.Version, "job %s has edits, the current %s; the next names it: previous %q", e.Job, cur.Version, cur.Version)
	case cur != nil && e.Previous != cur.Version:
		return nil, nil, conflict(kind, cur.Version, "job %s's current edit is %s, not %s: follow the current one", e.Job, cur.Version, e.Previous)
	case cur == nil && e.Previous != "":
		return nil, nil, fmt.Errorf("%w: job %s has no edit to follow (previous %s): make its first without previous", ErrUnknown, e.Job, e.Previous)
	}
	if chain := cur.Chain(); len(chain) >= shuffle.MaxEdits {
		return nil, nil, fmt.Errorf("%w: job %s has %d edits, the most a job takes; start a new job (another name)", ErrTooMany, e.Job, len(chain))
	}
	if cur != nil && e.FromStep < cur.FromStep {
		return nil, nil, fmt.Errorf("%w: job %s's edit %s applies from step %d; the next applies from that step or a later one, not from step %d",
			layout.ErrBeforePrevious, e.Job, cur.Version, cur.FromStep, e.FromStep)
	}
	prev, err := b.Resolve(ctx, ds, cur)
	if err != nil {
		return nil, nil, err
	}
	e.IndexID, e.prev = ds.ID(), cur
	var x *layout.Edit
	switch e.Kind {
	case Exclude:
		if len(e.Keys) > MaxKeys {
			return nil, nil, fmt.Errorf("%w: %d keys; an exclusion holds at most %d", ErrUnknownKeys, len(e.Keys), MaxKeys)
		}
		ids, err := lookup(ctx, ds, b.keysIn(ds), e.Keys)
		if err != nil {
			return nil, nil, err
		}
		from, _ := e.from()
		if x, err = layout.NewExclusion("", ds, e.Epoch, from, ids, prev); err != nil {
			return nil, nil, err
		}
		e.Version = exclusionVersion(e, x)
	case Append:
		if n := cur.appends(); n >= shuffle.MaxAppends {
			return nil, nil, fmt.Errorf("%w: job %s has %d appends, the most a job takes; start a new job (another name) over index %s", ErrTooMany, e.Job, n, ds.ID())
		}
		e.Index, e.ParentChunks = ext.ID(), -1
		for _, a := range ext.Index.Lineage().Ancestors() {
			if a.ID == ds.ID() {
				e.ParentChunks = a.Chunks
			}
		}
		if e.ParentChunks < 0 || ds.Index.NumChunks() != e.ParentChunks {
			return nil, nil, fmt.Errorf("%w: index %s of dataset %s does not extend index %s, which job %s reads (it extends %s): append files with brand index --append, and name the index it stores",
				ErrNotExtending, ext.ID(), ext.Name, ds.ID(), e.Job, lineage(ext.Index))
		}
		e.Version = appendVersion(e)
		from, _ := e.from()
		if x, err = layout.NewAppend(e.Version, ds.ID(), ext.ID(), e.ParentChunks, e.Epoch, from, prev); err != nil {
			return nil, nil, err
		}
	default:
		return nil, nil, fmt.Errorf("an edit of kind %q", e.Kind)
	}
	x.Version = e.Version
	_, x.Step = e.from()
	body, err := json.Marshal(&e)
	if err != nil {
		return nil, nil, err
	}
	dir := dirs[0]
	if known, _, ok := b.known.Get(e.Dataset, e.Job); ok && known.head != nil {
		dir = known.dir
	}
	v := editproto.Version{Job: e.Job, Dataset: e.Dataset, Version: e.Version, Previous: e.Previous, Epoch: e.Epoch, From: e.FromPosition, FromStep: e.FromStep, Body: body}
	s := store(dir)
	s.Subject = kind
	done, err := s.Make(ctx, st, b.pos, v, stepOf)
	if errors.Is(err, ErrConflict) {
		// Another edit won, or one was made since the chain was read:
		// the next request reads the chain from the store.
		b.known.Set(e.Dataset, e.Job, entry{}, time.Time{})
	}
	if err != nil {
		return nil, nil, err
	}
	if !done {
		b.known.Set(e.Dataset, e.Job, entry{head: &e, dir: dir}, b.now())
	}
	return &e, x, nil
}

// appends is the number of appends up to e.
func (e *Link) appends() int {
	n := 0
	for x := e; x != nil; x = x.prev {
		if x.IsAppend() {
			n++
		}
	}
	return n
}

// editKind is kind as refusals name it.
func editKind(kind string) editproto.Subject {
	if kind == Append {
		return editproto.Append
	}
	return editproto.Exclusion
}

// lineage names the versions ix extends, for errors.
func lineage(ix *chunkindex.Index) string {
	var ids []string
	for _, a := range ix.Lineage().Ancestors() {
		ids = append(ids, a.ID)
	}
	if len(ids) == 0 {
		return "none"
	}
	return strings.Join(ids, ", ")
}

// exclusionVersion names an exclusion: a digest of its job, dataset
// version, first position, samples (x's, in increasing order: its own and
// every earlier exclusion's) and the edit it follows.
func exclusionVersion(e Link, x *layout.Edit) string {
	h := sha256.New()
	if e.Previous == "" {
		fmt.Fprintf(h, "brand-exclude-v1|%s|%s|%s|%d|%d|", e.Job, e.Dataset, e.IndexID, e.Epoch, e.FromPosition)
	} else {
		fmt.Fprintf(h, "brand-exclude-v2|%s|%s|%s|%s|%d|%d|", e.Previous, e.Job, e.Dataset, e.IndexID, e.Epoch, e.FromPosition)
	}
	if e.PassStep != nil {
		fmt.Fprintf(h, "pass_step=%d|", *e.PassStep)
	}
	buf := make([]byte, 0, 8<<10)
	for id := range x.Drop.IDs() {
		if buf = binary.LittleEndian.AppendUint64(buf, uint64(id)); len(buf) == cap(buf) {
			h.Write(buf)
			buf = buf[:0]
		}
	}
	h.Write(buf)
	return hex.EncodeToString(h.Sum(nil)[:8])
}

// appendVersion names an append: a digest of its content and the edit it
// follows.
func appendVersion(e Link) string {
	h := sha256.New()
	fmt.Fprintf(h, "brand-append-v1|%s|%s|%s|%d|%s|%d|%d", e.Job, e.Dataset, e.IndexID, e.ParentChunks, e.Index, e.Epoch, e.FromPosition)
	if e.Previous != "" {
		fmt.Fprintf(h, "|previous=%s", e.Previous)
	}
	if e.PassStep != nil {
		fmt.Fprintf(h, "|pass_step=%d", *e.PassStep)
	}
	return hex.EncodeToString(h.Sum(nil)[:8])
}

// read reads job's chain from st: its newest edit with those before it
// (nil if it has none), and the folder it is kept in.
func read(ctx context.Context, st Store, job string) (*Link, string, error) {
	for _, dir := range dirs {
		var head *Link
		err := store(dir).Read(ctx, st, job, func(version, previous string, body []byte) error {
			e := &Link{}
			if err := json.Unmarshal(body, e); err != nil {
				return err
			}
			if e.Kind == "" && dir != dirs[0] {
				e.Kind = dir
			}
			switch {
			case e.Version != version || e.Job != job || e.Previous != previous:
				return errors.New("its fields do not match its name and place")
			case e.Kind != Exclude && e.Kind != Append:
				return fmt.Errorf("an edit of kind %q", e.Kind)
			case head != nil && (e.FromStep < head.FromStep || e.Epoch < head.Epoch):
				return fmt.Errorf("it applies before edit %s", head.Version)
			case e.IsAppend() && e.IndexID != head.IndexVersionOrFirst(e.IndexID):
				return fmt.Errorf("it does not extend the version edit %s grew the job to", head.Version)
			}
			e.prev, head = head, e
			return nil
		})
		switch {
		case errors.Is(err, ErrUnknown):
			continue
		case err != nil:
			return nil, "", err
		}
		return head, dir, nil
	}
	return nil, dirs[0], nil
}

// IndexVersionOrFirst is IndexVersion, or first for no chain.
func (e *Link) IndexVersionOrFirst(first string) string {
	if e == nil {
		return first
	}
	return e.IndexVersion()
}
