package layout

import (
	"github.com/brandgw/brand/api"
	"github.com/brandgw/brand/internal/job/catalog"
)

// Base is what a unit lays its batches out over, from the Orders it
// belongs to: the base orders of streams' epochs with their edits, their
// windows, and the one assigner of global batches to ranks. A unit of a
// package of its own (Orders.Add) is given it; the units of this package
// hold its parts directly. A value: it points to the Orders' memos, never
// to the Orders.
type Base struct {
	e *epochs
	a *assigner
}

// Base is the orders' base, for a unit made outside this package.
func (o *Orders) Base() Base { return Base{o.base, o.asg} }

// Epoch is the base order of one epoch of a stream (Orders.Epoch).
func (b Base) Epoch(s Stream, epoch uint64) (*EpochOrder, error) { return b.e.epoch(s, epoch) }

// ClipSpace is the clip space of the clip parameters whose key is key
// (api.Clip.Key) over ds (Orders.ClipSpaceOf).
func (b Base) ClipSpace(ds *catalog.Dataset, key string) (*ClipSpace, error) {
	return b.e.clips.space(ds, key)
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

// GlobalBatch returns what each rank of a job takes from global batch m
// of an epoch of n items (the plain cut's shares) and the global batch's
// positions [start, end).
func GlobalBatch(job api.Job, n, m int) (shares []int, start, end int, err error) {
	return globalBatch(job, n, m)
}

// Add makes u the unit of the jobs whose features have u's feature, in
// place of any unit of this package (a unit of a package of its own,
// made with the orders' Base). Called before the orders are used.
func (o *Orders) Add(u Unit) { o.units.extra = append(o.units.extra, u) }
