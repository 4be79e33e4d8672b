// Package exclusions keeps the exclusion lists of named jobs (POST
// /jobs/NAME/exclude, docs/http-api.md "Exclusions"): the samples a job
// leaves out of its future from a step on, stored where every node and a
// restarted one find them, and applied by the layout (layout.Exclusion).
//
// Why in the store: every rank and replica of a job must leave out the
// same samples from the same position, and a job outlives any node. The
// versions are kept as every stored edit is (edits.Chain), under
// _brand/jobs/NAME/exclude/ in the store of the dataset the job reads:
// each version (its keys, the version it extends, dataset version, epoch
// and first position, JSON) under a digest of them, root and
// VERSION.next naming the chain, each created once, so that of two lists
// or two extensions of one version made at once one wins.
//
// A version is fixed once made. A job's list grows by versions: an
// extension names the current version (Previous) and adds keys from a
// position at or after that version's own; its order is the previous
// version's up to that position and leaves out both's samples from there
// (layout.Exclusion.Extend). Every version's first position must be
// after every position this node has served of the job (Served), so that
// nothing a loader has read changes; a version made on one node is found
// by another within Refresh, so on a cluster a version's step is chosen
// that far ahead of the steps being read.
//
// # Costs
//
// Making a list resolves each key in the dataset's index (a hash lookup)
// and stores the keys; a request of a named job reads a list kept in
// memory, and asks the store whether a job without one has one, or
// whether its list has a newer version, at most once per Refresh.
package exclusions

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

	"github.com/brandgw/brand/internal/batch/layout"
	"github.com/brandgw/brand/internal/errkind"
	"github.com/brandgw/brand/internal/job/catalog"
	"github.com/brandgw/brand/internal/job/edits"
)

// Errors, mapped to HTTP statuses by internal/server/httperr.
var (
	// ErrConflict: a list for a job that has another (a *ConflictError
	// naming the current version), or from a position the job has read
	// on this node (a *ServedError) (409).
	ErrConflict = errkind.New(errkind.Conflict, "exclusion conflict")
	// ErrUnknown: the job has no exclusion list (404).
	ErrUnknown = errkind.New(errkind.NotFound, "no exclusion list")
	// ErrUnknownKeys: a list naming keys the dataset does not hold (422):
	// a list is made whole or not at all.
	ErrUnknownKeys = errkind.New(errkind.Unprocessable, "unknown keys")
	// ErrTooManyVersions: an extension of a list of MaxVersions versions
	// (422).
	ErrTooManyVersions = errkind.New(errkind.Unprocessable, "too many versions")
)

// Refresh is how long a node takes a job to have no list before it asks
// the store again.
const Refresh = time.Second

// MaxKeys bounds a list's version.
const MaxKeys = 1 << 22

// MaxVersions bounds a list's versions: each is an order built on the
// one before, and a node reads them all.
const MaxVersions = 64

// Store is what the book needs of a dataset's store (s3backend.Store).
type Store = edits.Store

// lists is where the lists are kept.
func lists() edits.Chain {
	return edits.Chain{Kind: edits.Exclusion, Dir: "exclude", What: "exclusion list", Max: MaxVersions, Limit: 1 << 31,
		Conflict: ErrConflict, Unknown: ErrUnknown}
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
	// Previous is the version this one extends ("" for a first list):
	// Keys are the keys it adds, and FromPosition a position in
	// Previous's order.
	Previous string `json:"previous,omitempty"`

	chain []*List // the versions, first first, up to this one (read, Make)
}

// AllKeys are the keys of the list's every version up to l, first
// first: the samples it leaves out.
func (l *List) AllKeys() []string {
	if len(l.chain) == 0 {
		return l.Keys
	}
	var keys []string
	for _, v := range l.chain {
		keys = append(keys, v.Keys...)
	}
	return keys
}

// A ConflictError is the ErrConflict of a list for a job that has a list
// of another version: Current is its current version, the one to extend.
type ConflictError = edits.ConflictError

func conflict(current, format string, args ...any) error {
	return edits.NewConflictError(edits.Exclusion, current, fmt.Errorf("%w: "+format, append([]any{ErrConflict}, args...)...))
}

// A ServedError is the ErrConflict of a list from a position this node
// has served of the job: Next is the first step a list could start at.
type ServedError = edits.ServedError

// An entry is a job's list as a node knows it: none, or its current
// version with its chain, resolved in index x.IndexID.
type entry struct {
	list *List
	x    *layout.Exclusion
}

// Book holds the lists of the jobs a node serves. Safe for concurrent
// use.
type Book struct {
	now   func() time.Time
	pos   *edits.Positions
	lists edits.Known[entry]
}

// New returns an empty book with positions of its own.
func New() *Book { return With(edits.NewPositions()) }

// With returns an empty book that refuses a list from a position pos
// says this node has served (pos is shared with the node's other books
// of edits: the requests of a job hold it, and record what they served
// in it, once).
func With(pos *edits.Positions) *Book {
	return &Book{now: time.Now, pos: pos}
}

func prefix(job string) string { return lists().Prefix(job) }

// Of returns job's list over ds, its current version resolved in ds's
// index, or nil if the job has none.
func (b *Book) Of(ctx context.Context, st Store, ds *catalog.Dataset, job string) (*layout.Exclusion, *List, error) {
	e, last, ok := b.lists.Get(ds.Name, job)
	now := b.now()
	if ok && now.Sub(last) < Refresh {
		if e.list == nil {
			return nil, nil, nil
		}
		return b.resolved(ctx, ds, job, e, e.list, last)
	}
	if ok && e.list != nil {
		// Has the list had a version since, made here or on another node?
		if !lists().Extended(ctx, st, job, e.list.Version) {
			// None, or the store did not answer: the version known is
			// served on until it does.
			return b.resolved(ctx, ds, job, e, e.list, now)
		}
	}
	l, err := read(ctx, st, job)
	switch {
	case errors.Is(err, ErrUnknown):
		b.lists.Set(ds.Name, job, entry{}, now)
		return nil, nil, nil
	case err != nil && ok && e.list == nil:
		// The store did not answer; the job had no list when it last did.
		// Serving on under that answer keeps cached chunks served through
		// a store outage; a list another node makes meanwhile is found
		// when the store answers again.
		return nil, nil, nil
	case err != nil && ok:
		return b.resolved(ctx, ds, job, e, e.list, last)
	case err != nil:
		return nil, nil, err
	}
	return b.resolved(ctx, ds, job, e, l, now)
}

// resolved is list l (its current version) of job resolved in ds's
// index, kept as read at read: e's resolution if it is of l in that
// index.
func (b *Book) resolved(ctx context.Context, ds *catalog.Dataset, job string, e entry, l *List, read time.Time) (*layout.Exclusion, *List, error) {
	x := e.x
	if e.list != l || x == nil || x.IndexID != ds.ID() {
		var err error
		if x, err = resolve(ctx, ds, l); err != nil {
			return nil, nil, err
		}
	}
	b.lists.Set(ds.Name, job, entry{l, x}, read)
	return x, l, nil
}

// Served records that this node served job's epoch up to position end.
func (b *Book) Served(dataset, job string, epoch uint64, end int) {
	b.pos.Served(dataset, job, epoch, end)
}

// Make stores l (its Job, Dataset, Epoch, FromPosition, FromStep,
// StepSamples, Keys and Previous) as job's list over ds — its first
// version, or with Previous the version extending that one — and returns
// it with its version. It refuses keys ds does not hold (ErrUnknownKeys,
// naming some), a position this node has served (a *ServedError; stepOf
// names the first step after it), a first list of a job that has one,
// or an extension of a version that is not the current one (a
// *ConflictError naming the current version), and an extension from a
// position before its previous version's (layout.ErrBeforePrevious). A
// version made again, whole, is the same version.
func (b *Book) Make(ctx context.Context, st Store, ds *catalog.Dataset, l List, stepOf func(epoch uint64, end int) uint64) (*List, *layout.Exclusion, error) {
	if len(l.Keys) > MaxKeys {
		return nil, nil, fmt.Errorf("%w: %d keys; a list holds at most %d", ErrUnknownKeys, len(l.Keys), MaxKeys)
	}
	l.IndexID = ds.ID()
	ids, err := lookup(ctx, ds, l.Keys)
	if err != nil {
		return nil, nil, err
	}
	var prev *layout.Exclusion
	var chain []*List
	if l.Previous != "" {
		if prev, chain, err = b.previous(ctx, st, ds, l); err != nil {
			return nil, nil, err
		}
		if len(chain) >= MaxVersions {
			return nil, nil, fmt.Errorf("%w: job %s's exclusion list has %d versions, the most it may have", ErrTooManyVersions, l.Job, len(chain))
		}
	}
	var x *layout.Exclusion
	if prev != nil {
		x, err = prev.Extend("", ds, l.Epoch, l.FromPosition, ids)
	} else {
		x, err = layout.NewExclusion("", ds, l.Epoch, l.FromPosition, ids)
	}
	if err != nil {
		return nil, nil, err
	}
	l.Version = versionOf(l, x)
	x.Version = l.Version
	l.chain = append(slices.Clip(chain), &l)
	body, err := json.Marshal(&l)
	if err != nil {
		return nil, nil, err
	}
	v := edits.Version{Job: l.Job, Dataset: ds.Name, Version: l.Version, Previous: l.Previous,
		Epoch: l.Epoch, From: l.FromPosition, FromStep: l.FromStep, Body: body}
	done, err := lists().Make(ctx, st, b.pos, v, stepOf)
	if err != nil {
		return nil, nil, err
	}
	if !done {
		b.lists.Set(ds.Name, l.Job, entry{&l, x}, b.now())
	}
	return &l, x, nil
}

// previous is the version of job l.Job's list that l extends, resolved
// in ds's index, and the chain of versions up to it: the book's, or the
// store's if the book has not seen that version yet.
func (b *Book) previous(ctx context.Context, st Store, ds *catalog.Dataset, l List) (*layout.Exclusion, []*List, error) {
	x, cur, err := b.Of(ctx, st, ds, l.Job)
	if err != nil {
		return nil, nil, err
	}
	at := func(cur *List) int {
		if cur == nil {
			return -1
		}
		return slices.IndexFunc(cur.chain, func(v *List) bool { return v.Version == l.Previous })
	}
	if at(cur) < 0 {
		// Made since the book last read the list, on another node?
		if cur, err = read(ctx, st, l.Job); errors.Is(err, ErrUnknown) {
			return nil, nil, fmt.Errorf("%w: job %s has no exclusion list to extend (previous %s); make one without previous", ErrUnknown, l.Job, l.Previous)
		} else if err != nil {
			return nil, nil, err
		}
		if at(cur) < 0 {
			return nil, nil, conflict(cur.Version, "job %s's exclusion list has no version %s; its current version is %s", l.Job, l.Previous, cur.Version)
		}
		if x, err = resolve(ctx, ds, cur); err != nil {
			return nil, nil, err
		}
	}
	// The version named may be an older one: refused by existing, unless
	// l is a retry of a version made on it. (In another index than the
	// one it was made in, a version goes by another name.)
	for range len(cur.chain) - 1 - at(cur) {
		x = x.Prev()
	}
	return x, cur.chain[:at(cur)+1], nil
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
// of the dataset holding its keys): each version of its chain in turn,
// each extending the one before.
func resolve(ctx context.Context, ds *catalog.Dataset, l *List) (*layout.Exclusion, error) {
	var x *layout.Exclusion
	for _, v := range l.chain {
		ids, err := lookup(ctx, ds, v.Keys)
		if err != nil {
			return nil, fmt.Errorf("job %s's exclusion list %s in index %s: %w", v.Job, v.Version, ds.ID(), err)
		}
		if x == nil {
			x, err = layout.NewExclusion(v.Version, ds, v.Epoch, v.FromPosition, ids)
		} else {
			x, err = x.Extend(v.Version, ds, v.Epoch, v.FromPosition, ids)
		}
		if err != nil {
			return nil, err
		}
		if ds.ID() != v.IndexID {
			w := List{Job: v.Job, Dataset: v.Dataset, IndexID: ds.ID(), Epoch: v.Epoch, FromPosition: v.FromPosition}
			if x.Prev() != nil {
				w.Previous = x.Prev().Version
			}
			x.Version = versionOf(w, x)
		}
	}
	return x, nil
}

// versionOf names a list's version: a digest of its job, dataset
// version, first position, samples (x's, in increasing order: its own
// and its previous versions') and the version it extends.
func versionOf(l List, x *layout.Exclusion) string {
	h := sha256.New()
	if l.Previous == "" {
		fmt.Fprintf(h, "brand-exclude-v1|%s|%s|%s|%d|%d|", l.Job, l.Dataset, l.IndexID, l.Epoch, l.FromPosition)
	} else {
		fmt.Fprintf(h, "brand-exclude-v2|%s|%s|%s|%s|%d|%d|", l.Previous, l.Job, l.Dataset, l.IndexID, l.Epoch, l.FromPosition)
	}
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

// read reads job's list from st: its versions from the first to the
// current one, which it returns with the chain.
func read(ctx context.Context, st Store, job string) (*List, error) {
	var chain []*List
	err := lists().Read(ctx, st, job, func(version, previous string, body []byte) error {
		l := &List{}
		if err := json.Unmarshal(body, l); err != nil {
			return err
		}
		if l.Version != version || l.Job != job || l.Previous != previous {
			return errors.New("its fields do not match its name and place")
		}
		chain = append(chain, l)
		l.chain = slices.Clone(chain)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return chain[len(chain)-1], nil
}
