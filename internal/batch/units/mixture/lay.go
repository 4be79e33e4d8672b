package mixture

import (
	"context"
	"fmt"

	"github.com/brandgw/brand/api"
	"github.com/brandgw/brand/importance"
	"github.com/brandgw/brand/internal/batch/layout"
	"github.com/brandgw/brand/shuffle"
)

// Lay lays out a mixture's batch b: the rank's draws of items — its
// slice of the mixture's epoch positions, or its share of the global
// batch by locality or cost (docs/shuffle.md §11) — each component
// pass's items read from the pass, and per part (a component pass) the
// documents they name, each once, in the order the draws first name
// them. It is the one way every mixture's batch is laid out.
func (m *Mixed) Lay(ctx context.Context, b *layout.Batch) error {
	job := b.Job
	draws, pos, bal, err := m.draws(ctx, b)
	if err != nil {
		return err
	}
	b.Balanced = bal
	var content layout.Content
	if m.content != nil {
		if content, err = m.content(); err != nil {
			return err
		}
	}
	type passKey struct {
		comp int
		pass uint64
	}
	passes := map[passKey]Pass{}
	global := job.BatchSize * job.World
	docAt := map[[2]int]int{} // (part, document) → its read position
	var partDocs [][]int
	var reads [][2]int // per read position: (part, place in the part's documents)
	var docs, at []int
	for k, d := range draws {
		if d.Pass > maxPass {
			return fmt.Errorf("%w: epoch %d of the mixture reads pass %d of %s, past the last epoch number (%d)",
				layout.ErrOutOfRange, b.Epoch, d.Pass, m.DS[d.Component].Name, maxPass)
		}
		pk := passKey{d.Component, d.Pass}
		p, ok := passes[pk]
		if !ok {
			if p, err = m.pass(d.Component, job, d.Pass); err != nil {
				return err
			}
			passes[pk] = p
		}
		if d.Index >= p.Len() {
			return fmt.Errorf("%w: item %d of pass %d of %s, which has %d", layout.ErrOutOfRange, d.Index, d.Pass, m.DS[d.Component].Name, p.Len())
		}
		// A batch has a part or two per component: a scan finds it.
		part := 0
		for part < len(b.Parts) && (b.Parts[part].Comp != d.Component || b.Parts[part].Epoch != d.Pass) {
			part++
		}
		first, end := p.DocPosition(d.Index), p.DocPosition(d.Index+1)
		if x, ok := p.(Extents); ok {
			first, end = x.Extent(d.Index)
		}
		if part == len(b.Parts) {
			if b.Parts == nil {
				b.Parts = make([]layout.Part, 0, min(len(draws), 2*len(m.DS)))
			}
			b.Parts = append(b.Parts, layout.Part{Comp: d.Component, Epoch: d.Pass, Stream: m.Stream(d.Component, job), First: first,
				End: end, Share: max(1, m.share(d.Component, global)*p.Docs()/max(p.Len(), 1)), EpochLen: p.Docs()})
			partDocs = append(partDocs, nil)
		}
		pt := &b.Parts[part]
		pt.First, pt.End = min(pt.First, first), max(pt.End, end)
		docs = p.AppendDocs(docs[:0], d.Index)
		at = make([]int, len(docs))
		for j, doc := range docs {
			r, ok := docAt[[2]int{part, doc}]
			if !ok {
				r = len(reads)
				docAt[[2]int{part, doc}] = r
				reads = append(reads, [2]int{part, len(partDocs[part])})
				partDocs[part] = append(partDocs[part], doc)
			}
			at[j] = r
		}
		q := -1
		if pos != nil {
			q = pos[k]
		}
		if err := p.AddTo(content, d.Index, d.Component, q, at); err != nil {
			return err
		}
	}
	for i := range b.Parts {
		if b.Parts[i].Samples, err = layout.NewSamples(ctx, b.Parts[i].Stream.DS, partDocs[i]); err != nil {
			return err
		}
	}
	b.Take = make([]layout.Take, len(reads))
	for r, rd := range reads {
		b.Take[r] = layout.Take{Part: rd[0], At: rd[1]}
	}
	if f, ok := content.(Finisher); ok {
		return f.Finish(b)
	}
	b.Content = content
	return nil
}

// pass is pass p of component i of the mixture, for job.
func (m *Mixed) pass(i int, job api.Job, p uint64) (Pass, error) {
	return m.comps[i].Pass(m.Stream(i, job), p)
}

// draws is the draws b's job's rank takes of batch m of a mixture's epoch
// (n positions) and, for a mixture whose batches make content of their
// own, each one's position in it: its plain cut's, or its share of the
// global batch by locality or cost (each draw's item weighed by its
// component pass).
func (m *Mixed) draws(ctx context.Context, b *layout.Batch) ([]shuffle.Draw, []int, *layout.Balanced, error) {
	src, job, epoch, n, start, end := b.Source, b.Job, b.Epoch, b.EpochSamples, b.Start, b.End
	// A resumed stepped mixture's positions are after those of the steps
	// it resumed from.
	off, err := m.resumedIn(job, epoch)
	if err != nil {
		return nil, nil, nil, err
	}
	start, end, n = start+off, end+off, n+off
	if src.Assignment(job) == api.AssignPlain {
		draws, err := m.Order.Draws(ctx, make([]shuffle.Draw, 0, end-start), job.Seed, epoch, start, end)
		return draws, layout.Span(start, len(draws)), nil, err
	}
	shares, gstart, gend, err := layout.GlobalBatch(job, n, int(b.Batch))
	if err != nil {
		return nil, nil, nil, err
	}
	draws, err := m.Order.Draws(ctx, make([]shuffle.Draw, 0, gend-gstart), job.Seed, epoch, gstart, gend)
	if err != nil {
		return nil, nil, nil, err
	}
	places, info, err := m.base.Assign(b, layout.Global{Shares: shares,
		Owners: func() ([]int, error) {
			ids, err := m.drawDocs(job, draws)
			if err != nil {
				return nil, err
			}
			out := make([]int, len(draws))
			for i, d := range draws {
				ds := m.DS[d.Component]
				out[i] = ds.Owners(src.Members)[ds.Index.ChunkOf(ids[i])]
			}
			return out, nil
		},
		Costs: func() ([]uint64, error) { return m.costs(ctx, job, draws) }})
	if err != nil {
		return nil, nil, nil, err
	}
	mine, pos := make([]shuffle.Draw, len(places)), make([]int, len(places))
	for k, at := range places {
		mine[k], pos[k] = draws[at], gstart+at
	}
	if m.content == nil {
		// A batch of samples as read keys them by their own keys: a
		// rank's share can put two passes' draws of one sample of a
		// small component next to each other, which a tar reader would
		// group as one sample.
		if err := m.separate(job, mine); err != nil {
			return nil, nil, nil, err
		}
		pos = nil
	}
	return mine, pos, info, nil
}

// drawDocs is the first document each draw's item reads.
func (m *Mixed) drawDocs(job api.Job, draws []shuffle.Draw) ([]int, error) {
	ids := make([]int, len(draws))
	var one []int
	for i, d := range draws {
		if d.Pass > maxPass {
			return nil, fmt.Errorf("%w: the mixture reads pass %d of %s, past the last epoch number (%d)", layout.ErrOutOfRange, d.Pass, m.DS[d.Component].Name, maxPass)
		}
		p, err := m.pass(d.Component, job, d.Pass)
		if err != nil {
			return nil, err
		}
		if d.Index >= p.Len() {
			return nil, fmt.Errorf("%w: item %d of pass %d of %s, which has %d", layout.ErrOutOfRange, d.Index, d.Pass, m.DS[d.Component].Name, p.Len())
		}
		if one = p.AppendDocs(one[:0], d.Index); len(one) > 0 {
			ids[i] = one[0]
		}
	}
	return ids, nil
}

// costs weighs a mixture's draws under the job's balance=, each pass's
// items by the pass (Pass.Costs).
func (m *Mixed) costs(ctx context.Context, job api.Job, draws []shuffle.Draw) ([]uint64, error) {
	type passKey struct {
		comp int
		pass uint64
	}
	by := map[passKey][]int{} // the draws' places, per pass
	var order []passKey
	for i, d := range draws {
		if d.Pass > maxPass {
			return nil, fmt.Errorf("%w: the mixture reads pass %d of %s, past the last epoch number (%d)", layout.ErrOutOfRange, d.Pass, m.DS[d.Component].Name, maxPass)
		}
		k := passKey{d.Component, d.Pass}
		if _, ok := by[k]; !ok {
			order = append(order, k)
		}
		by[k] = append(by[k], i)
	}
	costs := make([]uint64, len(draws))
	for _, k := range order {
		p, err := m.pass(k.comp, job, k.pass)
		if err != nil {
			return nil, err
		}
		items := make([]int, len(by[k]))
		for j, i := range by[k] {
			if items[j] = draws[i].Index; items[j] >= p.Len() {
				return nil, fmt.Errorf("%w: item %d of pass %d of %s, which has %d", layout.ErrOutOfRange, items[j], k.pass, m.DS[k.comp].Name, p.Len())
			}
		}
		c, err := p.Costs(ctx, job.Balance, items)
		if err != nil {
			return nil, err
		}
		for j, i := range by[k] {
			costs[i] = c[j]
		}
	}
	return costs, nil
}

// separate parts two draws of one sample that a rank's share of a
// mixture's global batch put next to each other (a small component's
// passes meeting): a tar reader would group them as one sample.
func (m *Mixed) separate(job api.Job, draws []shuffle.Draw) error {
	ids, err := m.drawDocs(job, draws)
	if err != nil {
		return err
	}
	type drawn struct {
		d      shuffle.Draw
		sample int
	}
	mine := make([]drawn, len(draws))
	for i := range draws {
		mine[i] = drawn{draws[i], ids[i]}
	}
	importance.SeparateRepeatsFunc(mine, func(x, y drawn) bool { return x.d.Component == y.d.Component && x.sample == y.sample })
	for i := range mine {
		draws[i] = mine[i].d
	}
	return nil
}
