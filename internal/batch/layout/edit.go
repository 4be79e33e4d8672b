package layout

import (
	"fmt"
	"slices"
	"sync"

	"github.com/brandgw/brand/api"
	"github.com/brandgw/brand/internal/errkind"
	"github.com/brandgw/brand/internal/job/catalog"
	"github.com/brandgw/brand/shuffle"
)

// Edits: a named job's chain of edits made during its run, of either
// kind, in the order made (docs/shuffle.md §14–§16): an exclusion leaves
// samples out from a step on (POST /jobs/NAME/exclude), an append takes
// the samples of files appended to the dataset from a step on (POST
// /jobs/NAME/append). The chain is applied to the epochs' orders
// themselves (shuffle.EditedEpoch, which the planner computes by too):
// each edit from its position in the order the edits before it make, so
// every batch before an edit's step is what it was, and every later one
// is a pure function of the job's parameters and the chain. A batch is
// laid out under the newest edit that changes it (Source.under), over
// the dataset version the appends up to that edit grew the job to, and
// its ETag names that edit: a batch keeps the bytes and ETag it had
// before any later edit was made.

// ErrNoEdit means a stream names an edit that is not in memory: the
// caller registers it (Edits.Add) before asking for the order, as it
// loads an importance snapshot.
var ErrNoEdit = errkind.New(errkind.NotFound, "edit not loaded")

// ErrBeforePrevious refuses an edit from a position before the previous
// edit's own (400).
var ErrBeforePrevious = errkind.New(errkind.Invalid, "an edit starts before the job's previous edit")

// An Edit is one edit of a job's chain, with the edits before it (Prev).
// Immutable once made.
type Edit struct {
	// Version names the edit (a digest of its content and of the edit
	// before it): streams carry it, and batches laid out under it name it
	// in their ETag.
	Version string
	// Epoch and From are where it starts to apply: From is a position in
	// the order of the edits before it.
	Epoch uint64
	From  int
	// Over is the index version the edit was made over: the one an
	// exclusion's keys were resolved in, the one an append extends.
	Over string
	// Drop is, for an exclusion, the samples it and every exclusion
	// before it leave out, resolved in the version the job reads.
	Drop *shuffle.Drop
	// Chunks is, for an append, Over's chunks, and Index the version it
	// grows the job to: the first Chunks chunks of Index are Over's.
	Chunks int
	Index  string
	// Step is, for an edit of a job whose unit cuts its epochs at steps
	// (a StepCutter: a bucket job, whose steps each take images from
	// across its epoch's order), the step of its epoch's pass it applies
	// from; -1 (NewExclusion's, NewAppend's) for an edit from position
	// From. Such an edit's From is 0: its order is the whole epoch's
	// under it, which the unit serves from the step on. Set before the
	// edit is shared.
	Step int
	Prev *Edit
}

// IsAppend reports whether e is an append; otherwise it is an exclusion.
func (e *Edit) IsAppend() bool { return e.Chunks > 0 }

// Kind names e's kind as its ETag and a peer's request name it.
func (e *Edit) Kind() string {
	if e.IsAppend() {
		return "append"
	}
	return "exclude"
}

// Chain is the edits up to e, first first.
func (e *Edit) Chain() []*Edit {
	var out []*Edit
	for x := e; x != nil; x = x.Prev {
		out = append(out, x)
	}
	slices.Reverse(out)
	return out
}

// First is the index version the job read before its first edit.
func (e *Edit) First() string {
	x := e
	for x.Prev != nil {
		x = x.Prev
	}
	return x.Over
}

// Exclusion is the newest exclusion of the chain up to e, nil if none.
func (e *Edit) Exclusion() *Edit {
	for x := e; x != nil; x = x.Prev {
		if !x.IsAppend() {
			return x
		}
	}
	return nil
}

// Appends is the number of appends of the chain up to e (0 for nil).
func (e *Edit) Appends() int {
	n := 0
	for x := e; x != nil; x = x.Prev {
		if x.IsAppend() {
			n++
		}
	}
	return n
}

// Affects reports whether a batch of epoch that ends at position end may
// differ under e from the order before it.
func (e *Edit) Affects(epoch uint64, end int) bool {
	return epoch > e.Epoch || (epoch == e.Epoch && end > e.From)
}

// shuffle is the chain up to e as the shuffle takes it.
func (e *Edit) shuffle() []shuffle.Edit {
	c := e.Chain()
	out := make([]shuffle.Edit, len(c))
	for i, x := range c {
		out[i] = shuffle.Edit{Epoch: x.Epoch, From: x.From, Chunks: x.Chunks, Drop: x.Drop}
	}
	return out
}

// after refuses an edit from position from of epoch after prev's own
// first position.
func after(prev *Edit, epoch uint64, from int) error {
	if prev != nil && (epoch < prev.Epoch || epoch == prev.Epoch && from < prev.From) {
		return fmt.Errorf("%w: an edit from position %d of epoch %d, before the job's previous edit's first position %d of epoch %d", ErrBeforePrevious, from, epoch, prev.From, prev.Epoch)
	}
	return nil
}

// NewExclusion makes the exclusion of samples ids of ds (each a sample ID,
// repeats allowed) from position from of epoch on, after prev (nil for a
// job's first edit): its samples are ids and those of prev's chain's
// exclusions. ds is the version the job reads: the one the keys were
// resolved in, or one extending it. Its version is the caller's to name,
// before it is shared.
func NewExclusion(version string, ds *catalog.Dataset, epoch uint64, from int, ids []int, prev *Edit) (*Edit, error) {
	if err := after(prev, epoch, from); err != nil {
		return nil, err
	}
	n := ds.Index.NumSamples()
	bits := make([]uint64, (n+63)/64)
	if x := prev.Exclusion(); x != nil {
		for id := range x.Drop.IDs() {
			if id >= n {
				return nil, fmt.Errorf("an exclusion of sample %d, past dataset %s's %d samples", id, ds.Name, n)
			}
			bits[id/64] |= 1 << (id % 64)
		}
	}
	for _, id := range ids {
		if id < 0 || id >= n {
			return nil, fmt.Errorf("sample %d is not a sample of dataset %s (%d samples)", id, ds.Name, n)
		}
		bits[id/64] |= 1 << (id % 64)
	}
	return &Edit{Version: version, Epoch: epoch, From: from, Over: ds.ID(), Drop: shuffle.NewDrop(bits, ds.Counts), Step: -1, Prev: prev}, nil
}

// NewAppend makes the append of the chunks of version index after the
// chunks of version over (chunks of them), from position from of epoch
// on, after prev (nil for a job's first edit).
func NewAppend(version, over, index string, chunks int, epoch uint64, from int, prev *Edit) (*Edit, error) {
	if err := after(prev, epoch, from); err != nil {
		return nil, err
	}
	if chunks < 1 {
		return nil, fmt.Errorf("an append over a version of %d chunks", chunks)
	}
	return &Edit{Version: version, Epoch: epoch, From: from, Over: over, Chunks: chunks, Index: index, Step: -1, Prev: prev}, nil
}

// Edits holds the edits streams name, by version — none is dropped (a
// stream's order cannot be laid out without its chain, and the books of
// named jobs hold them all anyway) — and lays their chains out: each
// epoch's order, and the edit each batch is laid out under. Safe for
// concurrent use.
type Edits struct {
	ext extents // the epochs' extents, of the Orders it belongs to
	mu  sync.Mutex
	m   map[string]*Edit
}

// extents tells an epoch's extent in its unit's items (units.extent):
// where a batch ends; and, for a unit that cuts its epochs at steps,
// the step of its epoch's pass a batch is (StepCutter).
type extents interface {
	extent(src Source, job api.Job, epoch uint64) (int, error)
	passStep(src Source, job api.Job, epoch, m uint64) (int, bool)
}

// A StepCutter's epochs are cut at steps by its job's edits (Edit.Step),
// not at positions of an order: a bucket job's, whose every step takes
// images from across the epoch's order, so that an edit from a position
// would change the steps before it.
type StepCutter interface {
	// PassStep is the step of its epoch's pass that batch m of an
	// epoch of job over src is, counted from the pass's first (the steps
	// its resume point took before it).
	PassStep(src Source, job api.Job, epoch, m uint64) (int, error)
	// Counted is job as an edit's global steps count it — every epoch
	// whole at its world, from its first step (a resume point's legs
	// dropped) — and the global step up to which its epochs' lengths may
	// differ one from the next (0: none do).
	Counted(job api.Job) (api.Job, uint64, error)
}

// Add registers e and the edits before it, so that streams naming their
// versions find them.
func (s *Edits) Add(e *Edit) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.m == nil {
		s.m = map[string]*Edit{}
	}
	for ; e != nil; e = e.Prev {
		s.m[e.Version] = e
	}
}

// Get is the edit of version v.
func (s *Edits) Get(v string) (*Edit, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	e, ok := s.m[v]
	return e, ok
}

// Edits are the edits the orders know.
func (o *Orders) Edits() *Edits { return o.base.edits }

// epoch is Orders.Epoch for a stream with edits: the chain up to its
// edit over its dataset version (shuffle.EditedEpoch).
func (x *Edits) epoch(s Stream, epoch uint64) (*EpochOrder, error) {
	e, ok := x.Get(s.Edit)
	if !ok {
		return nil, fmt.Errorf("%w: edit %s", ErrNoEdit, s.Edit)
	}
	ord, err := EditedOrder(s.DS.Counts, e, s.Seed, epoch, s.Window)
	if err != nil {
		return nil, err
	}
	return epochOrder(ord, nil, s.DS.Counts), nil
}

// EditedOrder is the order of an epoch of a job whose chain of edits ends
// at e, over counts, the chunks of the version the chain's appends grew
// it to: shuffle.EditedEpoch, which the planner plans the job by too.
func EditedOrder(counts []int, e *Edit, seed, epoch uint64, window int) (Order, error) {
	o, err := shuffle.EditedEpoch(counts, e.shuffle(), seed, epoch, window)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrNoEdit, err)
	}
	return o, nil
}

// epochOrder is an order with its chunks' windows and first samples'
// positions (and, for an importance epoch, the chunks' weights), over
// chunks of counts samples: O(samples × log chunks), once per epoch
// memoised.
func epochOrder(o Order, weight []float32, counts []int) *EpochOrder {
	chunks := len(counts)
	eo := &EpochOrder{Order: o, ChunkWindow: make([]int32, chunks), Weight: weight, FirstUse: make([]int32, chunks)}
	for c := range eo.ChunkWindow {
		eo.ChunkWindow[c], eo.FirstUse[c] = -1, -1
	}
	// ends[c]: the samples up to chunk c's end; a sample's chunk is the
	// first end past it.
	ends := make([]int, chunks)
	n := 0
	for c, k := range counts {
		n += k
		ends[c] = n
	}
	for w := range o.NumWindows() {
		for _, c := range o.WindowChunks(w) {
			eo.ChunkWindow[c] = int32(w)
		}
		start := o.WindowStart(w)
		for i, id := range o.Window(w) {
			if c, _ := slices.BinarySearch(ends, id+1); c < chunks && eo.FirstUse[c] < 0 {
				eo.FirstUse[c] = int32(start + i)
			}
		}
	}
	return eo
}

// withEdit is src with its chain: the registered edit job names, where
// src does not name one (a layout of a stream's job alone).
func (x *Edits) withEdit(src Source, job api.Job) Source {
	if src.Edit == nil && job.Edit != "" {
		if e, ok := x.Get(job.Edit); ok {
			src.Edit = e
		}
	}
	return src
}

// inForce is the newest edit of src's chain that changes batch m of
// epoch — for the whole epoch (m < 0), the newest edit of it or an
// earlier epoch — nil if none does; src's newest where it cannot tell
// (the batch's extent unknown).
func (x *Edits) inForce(src Source, job api.Job, epoch uint64, m int64) *Edit {
	end, endOK, step, stepOK := 0, false, 0, false
	for e := src.Edit; e != nil; e = e.Prev {
		switch {
		case m < 0:
			if e.Epoch <= epoch {
				return e
			}
		case e.Step >= 0:
			// A unit that cuts its epochs at steps: batch m is changed
			// by an edit from its step of the pass or an earlier one.
			if !stepOK {
				if step, stepOK = x.ext.passStep(src, job, epoch, uint64(m)); !stepOK {
					return src.Edit
				}
			}
			if epoch > e.Epoch || epoch == e.Epoch && step >= e.Step {
				return e
			}
		default:
			if !endOK {
				if end, endOK = x.batchEnd(src, job, epoch, uint64(m)); !endOK {
					return src.Edit
				}
			}
			if e.Affects(epoch, end) {
				return e
			}
		}
	}
	return nil
}

// under is src and job as they were when batch m of epoch (the whole
// epoch for m < 0) was last changed, for a job with edits: laid out
// under the edit in force (inForce) over the version the appends up to it
// grew the job to, in every respect (its samples, their assignment to
// ranks, its stream, its ETag); under none, over the version the job read
// first, as the job was before its first edit.
func (x *Edits) under(src Source, job api.Job, epoch uint64, m int64) (Source, api.Job) {
	src = x.withEdit(src, job)
	if src.Edit == nil {
		return src, job
	}
	return src.upTo(x.inForce(src, job, epoch, m), job)
}

// upTo is src and job under the chain up to e, one of src's chain's edits
// (nil: none, the version the job read first). A source whose chain has
// appends but not their versions (a stream's job laid out without the
// gateway's resolution) is laid out under its whole chain: the samples of
// a batch no later edit changes are the same under it.
func (s Source) upTo(e *Edit, job api.Job) (Source, api.Job) {
	if e == s.Edit {
		return s, job
	}
	if k := s.Edit.Appends(); k > 0 {
		if n := e.Appends(); len(s.Versions) != k+1 || s.Versions[n] == nil {
			return s, job
		} else {
			s.DS, s.Versions = s.Versions[n], s.Versions[:n+1]
		}
	}
	s.Edit, job.Edit = e, ""
	if e != nil {
		job.Edit = e.Version
	}
	if s.Index == s.DS.ID() {
		s.Index = ""
	}
	return s, job
}

// grownTo is the index version a job with the chain ending at full reads
// under the edit e of it (nil: none): the version the newest append up to
// e grew it to, or the one it read first; for a chain without appends,
// ds's.
func grownTo(full, e *Edit, ds *catalog.Dataset) string {
	if full == nil || full.Appends() == 0 {
		return ds.ID()
	}
	for x := e; x != nil; x = x.Prev {
		if x.IsAppend() {
			return x.Index
		}
	}
	return full.First()
}

// batchEnd is the end of batch m of an epoch of job over src: its
// position after its last sample.
func (x *Edits) batchEnd(src Source, job api.Job, epoch, m uint64) (int, bool) {
	if src.DS == nil {
		return 0, false
	}
	n, err := x.ext.extent(src, job, epoch)
	if err != nil {
		return 0, false
	}
	_, end, err := job.GlobalBatch(n, int(m))
	return end, err == nil
}
