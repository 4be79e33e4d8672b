package layout

import (
	"slices"

	"github.com/brandgw/brand/api"
)

// Base is what a unit lays its batches out over, from the Orders it
// belongs to: the base orders of streams' epochs with their edits, their
// windows, and the one assigner of global batches to ranks. Every unit
// is given it (Kinds) and reads the common layer through it alone. A
// value: it points to the Orders' memos, never to the Orders.
type Base struct {
	e *epochs
	a *assigner
}

// Epoch is the base order of one epoch of a stream (Orders.Epoch).
func (b Base) Epoch(s Stream, epoch uint64) (*EpochOrder, error) { return b.e.epoch(s, epoch) }

// Edit is the registered edit of version v (Edits.Get): a unit that
// cuts its epochs at its job's edits (StepCutter) reads their chain.
func (b Base) Edit(v string) (*Edit, bool) { return b.e.edits.Get(v) }

// Window is the sample order of window w of epoch epoch of stream s,
// whose base order is e, from the memoised windows: shared, not to be
// modified.
func (b Base) Window(s Stream, epoch uint64, e *EpochOrder, w int) []int {
	return b.e.window(s, epoch, e, w)
}

// AppendRange appends the sample IDs at positions [start, end) of the
// base order e of epoch epoch of stream s to dst, from its memoised
// windows.
func (b Base) AppendRange(dst []int, s Stream, e *EpochOrder, epoch uint64, start, end int) []int {
	return b.e.appendRange(dst, s, e, epoch, start, end)
}

// A Global is a global batch as an assignment weighs it: each rank's
// count (the plain cut's, GlobalBatch), and, asked only by the assignment
// that needs them, each item's owner on the cluster and its cost.
type Global struct {
	Shares []int
	Owners func() ([]int, error)
	Costs  func() ([]uint64, error)
}

// Assign is the places in its global batch g of the items batch b's rank
// takes, by the job's assignment (Source.Assignment, never the plain
// cut: a unit cuts that itself), and for a balanced batch its ranks'
// costs: memoised once for every rank of the global batch.
func (b Base) Assign(bt *Batch, g Global) ([]int, *Balanced, error) {
	return b.a.places(bt.Source, bt.Job, bt.Epoch, bt.Batch, bt.global, global{shares: g.Shares, owners: g.Owners, costs: g.Costs})
}

// Assignment is how job's global batches from s are given to its ranks:
// api.AssignPlain (each rank its slice, cut by Job.BatchRange),
// api.AssignLocality or api.AssignBalance (the global batch whole,
// through Base.Assign).
func (s Source) Assignment(job api.Job) string { return s.assignment(job) }

// AssignedUnder is the membership version a job's batches from s are
// assigned under, "" when they are plainly cut: only then does the
// cluster change a batch, and its ETag names it.
func (s Source) AssignedUnder(job api.Job) string { return s.assignedUnder(job) }

// GlobalBatch returns what each rank of a job takes from global batch m
// of an epoch of n items (the plain cut's shares) and the global batch's
// positions [start, end).
func GlobalBatch(job api.Job, n, m int) (shares []int, start, end int, err error) {
	return globalBatch(job, n, m)
}

// Span is start, start+1, …, n of them: the positions of a plain cut.
func Span(start, n int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = start + i
	}
	return out
}

// TakeAll is the reads of one part of n samples, each once, in order.
func TakeAll(n int) []Take {
	t := make([]Take, n)
	for i := range t {
		t[i].At = i
	}
	return t
}

// Partial is batch b served without the items at batch positions missing
// (ascending: their samples' chunk is damaged at rest, or their content
// could not be made), named by keys, with content c (what b serves
// without them): its ETag differs from every full batch's, and from the
// same batch missing other items. A unit whose content is not the
// samples it reads makes its partial batches with it.
func (b *Batch) Partial(c Content, missing []int, keys []string) *Batch {
	nb := *b
	nb.Content = c
	nb.Missing, nb.MissingKeys = slices.Clip(missing), slices.Clip(keys)
	nb.full = b.full
	if nb.full == "" {
		nb.full = b.ETag
	}
	nb.ETag = partialETag(nb.full, nb.Missing)
	return &nb
}

// SetGlobal names b's global batch (its rank 0's ETag) for an
// assignment that takes it whole: what Base.Assign memoises every rank's
// assignment under. Orders.Layout sets it; a unit that assigns a global
// batch it does not lay out (for a plan's figures) sets it so.
func (b *Batch) SetGlobal(key string) { b.global = key }
