package visit

import (
	"context"

	"github.com/brandgw/brand/api"
	"sync"
	"time"

	"github.com/brandgw/brand/internal/batch/layout"
	"github.com/brandgw/brand/internal/batch/premade"
)

// A job that names a pipeline has its next batch premade: made before
// its request. The order is known, so once a rank's batch m is served, batch
// m+1 is laid out, read and transformed in the background, and waits in
// a premade.Store under its ETag (which names its exact samples, the
// pipeline and its fingerprint) for its request. The entry is claimed
// before batch m's request ends, so that batch m+1's request, however
// soon it comes, waits for the work under way rather than doing it
// again. What is held is bounded in bytes and in batches, and dropped
// oldest first when nobody comes for it; its memory is the copy budget's.
//
// A batch whose request came first is not premade: a client that
// reads ahead itself (the Python client keeps two batches requested
// beyond the one consumed) asks for batch m+1 before batch m is served,
// and making m+1 again once m is served would transform every batch
// twice. The batches asked for are remembered, the most recent
// maxAsked of them.
//
// A premade batch is counted (the live figures) when its request takes
// it, never when it is made: a batch dropped unused was not served.

// made is a premade batch: served, nil if its making
// failed (the request then reads the batch itself); the time its read
// waited; and the batch after it, to be laid out once.
type made struct {
	served *Served
	wait   time.Duration
	next   *nextBatch
}

// maxPremade bounds the premade batches held whatever their size;
// maxAsked, the batches asked for that are remembered: far more than the
// requests of all ranks in flight at once.
const (
	maxPremade = 256
	maxAsked   = 4096
)

// newPremade returns the store of premade batches, of at most limit
// bytes (0: none is premade).
func newPremade(limit int64) *premade.Store[made] {
	c := premade.Config[made]{Entries: maxPremade, Remember: maxAsked, Release: func(m made) {
		if m.served != nil {
			m.served.Release()
		}
	}}
	if limit > 0 {
		c.Budget = premade.NewBytes(limit)
	}
	return premade.New(c)
}

// nextBatch is a rank's next batch, laid out once for every piece of
// work done before its request: the fetch of its samples from peers
// (route's FetchNext) and its making (makeNext), both in the background.
type nextBatch struct {
	key    string // its ETag, known without laying it out
	orders Layouts
	src    layout.Source // the job's source and job as asked (layout.Batch.Asked)
	job    api.Job
	b      *layout.Batch // of the batch before it

	mu  sync.Mutex
	out *layout.Batch // laid out, once it has been
}

// next returns b's rank's next batch, nil after the last.
func (v *Batches) next(b *layout.Batch) *nextBatch {
	m := b.Batch + 1
	if m >= uint64(b.Batches) {
		return nil
	}
	// Under the source and job the batch was asked under, not those it
	// was laid out under: for a batch before an edit's step these are an
	// older edit's, whose epoch has other counts and, from the step on,
	// other samples.
	src, job := b.Asked()
	return &nextBatch{key: v.orders.ETag(src, job, b.Epoch, m), orders: v.orders, src: src, job: job, b: b}
}

// of returns n if it is the next batch of b's rank as b was asked, nil
// if not: n was named when the batch before b was made ahead, and an
// edit stored since, from a step after b's, may have changed the batch
// after it (its ETag says).
func (n *nextBatch) of(v *Batches, b *layout.Batch) *nextBatch {
	if n == nil {
		return nil
	}
	src, job := b.Asked()
	if n.key != v.orders.ETag(src, job, b.Epoch, b.Batch+1) {
		return nil
	}
	return n
}

// layout lays the batch out, the first time it is asked; a failure is not
// kept (the next asker tries again, and the batch's read says why).
func (n *nextBatch) layout(ctx context.Context) (*layout.Batch, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.out == nil {
		nb, err := n.orders.Layout(ctx, n.src, n.job, n.b.Epoch, n.b.Batch+1)
		if err != nil {
			return nil, err
		}
		n.out = nb
	}
	return n.out, nil
}

// makeNext starts making, in the background, the rank's next batch
// after b, transformed, unless there is none or it is under way. nx is
// that batch if b's read named it (nil: it is named here). The entry is
// claimed before this returns, within b's request.
func (v *Batches) makeNext(b *layout.Batch, nx *nextBatch) {
	if nx == nil {
		if nx = v.next(b); nx == nil {
			return
		}
	}
	c, ok := v.premade.Claim(nx.key)
	if !ok {
		return
	}
	started := v.part.TryGo(v.limit, func(ctx context.Context) {
		var m made
		if nb, err := nx.layout(ctx); err == nil && nb.ETag == nx.key {
			m.served, m.wait, m.next, _ = v.read(ctx, nb, true)
		}
		if m.served == nil {
			v.premade.Abandon(c)
			return
		}
		v.premade.Finish(c, m, m.served.Bytes)
	})
	if !started {
		v.premade.Abandon(c)
	}
}
