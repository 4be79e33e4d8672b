package samples

import (
	"context"
	"fmt"
	"sync/atomic"

	"github.com/brandgw/brand/api"
	"github.com/brandgw/brand/internal/batch/layout"
	"github.com/brandgw/brand/internal/batch/units/mixture"
	"github.com/brandgw/brand/internal/job/catalog"
)

// A mixture of samples (mix= over datasets of samples as stored) is a
// mixture of items of one sample each: each component's passes are its
// dataset's epochs, as long as its samples whatever the seed, and a
// batch of it serves the samples it reads.

// Components is each of ds as a mixture's component of samples; a batch
// of the mixture serves the samples it reads (no content).
func (u *Unit) Components(ds []*catalog.Dataset, _ api.Job) ([]mixture.Component, func() (layout.Content, error), error) {
	comps := make([]mixture.Component, len(ds))
	for i, d := range ds {
		comps[i] = &component{base: u.base, n: d.Index.NumSamples()}
	}
	return comps, nil, nil
}

// component is a dataset of samples in a mixture: its passes are its
// stream's epochs. It keeps the epoch order and window its last part
// read: a mixture of more sources than the Orders' memo tables hold
// would otherwise build every part's epoch and window anew.
type component struct {
	base layout.Base
	n    int
	held atomic.Pointer[heldOrder]
}

// heldOrder is a component stream's epoch order, and a window of it.
type heldOrder struct {
	s     layout.Stream // its Order
	epoch uint64
	e     *layout.EpochOrder
	w     int
	ids   []int // window w's samples; nil: none yet
}

func (c *component) Len() int { return c.n }

// Pass is epoch p of stream s, from the held order when it is that
// epoch's.
func (c *component) Pass(s layout.Stream, p uint64) (mixture.Pass, error) {
	k := s.Order()
	if h := c.held.Load(); h != nil && h.s == k && h.epoch == p {
		return pass{c: c, h: h}, nil
	}
	e, err := c.base.Epoch(s, p)
	if err != nil {
		return nil, err
	}
	h := &heldOrder{s: k, epoch: p, e: e, w: -1}
	c.held.Store(h)
	return pass{c: c, h: h}, nil
}

// pass is one epoch of a component: its items are its samples.
type pass struct {
	c *component
	h *heldOrder
}

func (p pass) Len() int              { return p.h.e.NumSamples() }
func (p pass) Docs() int             { return p.h.e.NumSamples() }
func (p pass) DocPosition(i int) int { return i }

// AppendDocs appends the sample at position i, from the held window.
func (p pass) AppendDocs(dst []int, i int) []int {
	h := p.h
	e := h.e
	w := e.WindowOf(i)
	var win []int
	if cur := p.c.held.Load(); cur != nil && cur.s == h.s && cur.epoch == h.epoch && cur.w == w && cur.ids != nil {
		win = cur.ids
	} else {
		win = p.c.base.Window(h.s, h.epoch, e, w)
		p.c.held.Store(&heldOrder{s: h.s, epoch: h.epoch, e: e, w: w, ids: win})
	}
	return append(dst, win[i-e.WindowStart(w)])
}

// AddTo adds nothing: a batch of samples as read has no content.
func (pass) AddTo(layout.Content, int, int, int, []int) error { return nil }

// Costs weighs samples by their stored bytes (balance=bytes).
func (p pass) Costs(ctx context.Context, _ string, items []int) ([]uint64, error) {
	ids := make([]int, 0, len(items))
	for _, i := range items {
		ids = p.AppendDocs(ids, i)
	}
	ds := p.h.s.DS
	info, err := ds.Index.Samples(ctx, ids)
	if err != nil {
		return nil, fmt.Errorf("reading the index entries of %d samples of dataset %s: %w", len(ids), ds.Name, err)
	}
	costs := make([]uint64, len(info))
	for i, in := range info {
		costs[i] = uint64(in.Length)
	}
	return costs, nil
}

var _ mixture.Mixable = (*Unit)(nil)
