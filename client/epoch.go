package client

import (
	"context"
	"fmt"
	"iter"
	"net/url"
	"strconv"
	"sync"
)

// EpochInfo is the gateway's plan for one epoch under the client's
// parameters, with every default resolved.
type EpochInfo struct {
	Dataset   string `json:"dataset"`
	IndexID   string `json:"index"`
	Epoch     int    `json:"epoch"`
	Samples   int    `json:"samples"` // samples in the epoch over all ranks
	Batches   int    `json:"batches"` // batches per rank, numbered from 0
	BatchSize int    `json:"batch_size"`
	World     int    `json:"world"`
	Rank      int    `json:"rank"`
	Window    int    `json:"window"` // chunks per shuffle window
	Seed      uint64 `json:"seed"`
	DropLast  bool   `json:"drop_last"`
	Chunks    int    `json:"chunks"`  // chunks in the dataset
	Windows   int    `json:"windows"` // shuffle windows in the epoch
}

// EpochInfo fetches the plan of epoch for the client's parameters.
func (c *Client) EpochInfo(ctx context.Context, epoch int) (*EpochInfo, error) {
	if err := checkPosition(epoch, 0); err != nil {
		return nil, err
	}
	// The embedded Seed is shadowed by the pointer, which tells a missing
	// seed from seed 0; Epoch pins the seed and must not pin a wrong one.
	w, err := getJSON[struct {
		EpochInfo
		Seed *uint64 `json:"seed"`
	}](ctx, c, "/epoch/"+strconv.Itoa(epoch), c.jobQuery())
	if err == nil {
		err = c.checkPlan(&w.EpochInfo, w.Seed, epoch)
	}
	if err != nil {
		return nil, fmt.Errorf("client: epoch %d: %w", epoch, err)
	}
	info := w.EpochInfo
	info.Seed = *w.Seed
	return &info, nil
}

// checkPlan verifies that an epoch plan is complete and answers the
// question asked: a gateway that ignored a parameter would otherwise hand
// out a shuffle the caller did not ask for.
func (c *Client) checkPlan(p *EpochInfo, seed *uint64, epoch int) error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: epoch plan: "+format, append([]any{ErrBadResponse}, args...)...)
	}
	switch {
	case seed == nil:
		return bad("no seed")
	case p.Epoch != epoch:
		return bad("asked for epoch %d, got %d", epoch, p.Epoch)
	case p.BatchSize < 1 || p.Window < 1 || p.World < 1:
		return bad("batch_size %d, window %d, world %d; each must be >= 1", p.BatchSize, p.Window, p.World)
	case p.Rank < 0 || p.Rank >= p.World:
		return bad("rank %d outside world %d", p.Rank, p.World)
	case p.Batches < 0 || p.Samples < 0:
		return bad("%d batches, %d samples", p.Batches, p.Samples)
	}
	o := &c.opts
	for _, f := range []struct {
		name      string
		set       bool
		want, got string
	}{
		{"dataset", o.Dataset != "", o.Dataset, p.Dataset},
		{"batch_size", o.BatchSize > 0, strconv.Itoa(o.BatchSize), strconv.Itoa(p.BatchSize)},
		{"window", o.Window > 0, strconv.Itoa(o.Window), strconv.Itoa(p.Window)},
		{"world", o.World > 0, strconv.Itoa(o.World), strconv.Itoa(p.World)},
		{"rank", o.World > 0 || o.Rank > 0, strconv.Itoa(o.Rank), strconv.Itoa(p.Rank)},
		{"seed", o.Seed != nil, fmtSeed(o.Seed), fmtSeed(seed)},
		{"drop_last", o.DropLast != nil, fmtBool(o.DropLast), strconv.FormatBool(p.DropLast)},
	} {
		if f.set && f.want != f.got {
			return bad("asked for %s=%s, gateway planned %s=%s", f.name, f.want, f.name, f.got)
		}
	}
	return nil
}

func fmtSeed(s *uint64) string {
	if s == nil {
		return ""
	}
	return strconv.FormatUint(*s, 10)
}

func fmtBool(b *bool) string {
	if b == nil {
		return ""
	}
	return strconv.FormatBool(*b)
}

// pinnedQuery spells out every parameter of a plan, so that all of an
// epoch's batches come from the same shuffle even when gateways behind a
// load balancer run with different defaults, or one restarts with new ones.
func pinnedQuery(p *EpochInfo) url.Values {
	q := url.Values{}
	if p.Dataset != "" {
		q.Set("dataset", p.Dataset)
	}
	q.Set("seed", strconv.FormatUint(p.Seed, 10))
	q.Set("batch_size", strconv.Itoa(p.BatchSize))
	q.Set("window", strconv.Itoa(p.Window))
	q.Set("world", strconv.Itoa(p.World))
	q.Set("rank", strconv.Itoa(p.Rank))
	q.Set("drop_last", strconv.FormatBool(p.DropLast))
	return q
}

// matches reports how a batch contradicts the plan it was requested under,
// or nil. A different index or count means the dataset or the gateway's
// configuration changed mid-epoch, and the epoch would repeat or skip
// samples.
func (p *EpochInfo) matches(b *Batch) error {
	switch {
	case b.EpochBatches != p.Batches:
		return fmt.Errorf("%w: the epoch plan has %d batches but batch %d reports %d", ErrBadResponse, p.Batches, b.Index, b.EpochBatches)
	case b.EpochSamples != p.Samples:
		return fmt.Errorf("%w: the epoch plan has %d samples but batch %d reports %d", ErrBadResponse, p.Samples, b.Index, b.EpochSamples)
	case p.IndexID != "" && b.IndexID != "" && b.IndexID != p.IndexID:
		return fmt.Errorf("%w: the epoch plan uses index %s but batch %d came from index %s", ErrBadResponse, p.IndexID, b.Index, b.IndexID)
	}
	return nil
}

// Epoch iterates over every batch of epoch for the client's rank, in order.
// It first fetches the epoch's plan (see EpochInfo) and then requests each
// batch with the plan's parameters spelled out, keeping Options.Ahead
// requests in flight so that the next batch is usually ready when the loop
// asks for it. Each batch is checked against the plan.
//
// The first error, from the plan or any batch (after retries), is yielded
// with a nil batch and ends the iteration. When the loop stops, for any
// reason, outstanding requests are cancelled and Epoch returns only after
// their goroutines have finished.
func (c *Client) Epoch(ctx context.Context, epoch int) iter.Seq2[*Batch, error] {
	return func(yield func(*Batch, error) bool) {
		plan, err := c.EpochInfo(ctx, epoch)
		if err != nil {
			yield(nil, err)
			return
		}
		c.iterate(ctx, plan, yield)
	}
}

func (c *Client) iterate(ctx context.Context, plan *EpochInfo, yield func(*Batch, error) bool) {
	type result struct {
		b   *Batch
		err error
	}
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer wg.Wait() // runs after cancel: deferred calls run last-in first-out
	defer cancel()

	q := pinnedQuery(plan)
	pending := make([]chan result, 0, c.ahead+1) // in batch order
	next := 0
	issue := func() {
		m := next
		next++
		ch := make(chan result, 1) // never blocks the sender, even if abandoned
		pending = append(pending, ch)
		wg.Go(func() {
			b, err := c.fetchBatch(ctx, plan.Epoch, m, q)
			if err != nil {
				err = fmt.Errorf("client: epoch %d batch %d: %w", plan.Epoch, m, err)
			} else if err = plan.matches(b); err != nil {
				err = fmt.Errorf("client: epoch %d: %w", plan.Epoch, err)
			}
			ch <- result{b, err}
		})
	}

	for next < plan.Batches && next < c.ahead {
		issue()
	}
	for range plan.Batches {
		// Batches already fetched are not handed out once the caller has
		// cancelled: the caller is stopping and should hear why.
		if err := ctx.Err(); err != nil {
			yield(nil, fmt.Errorf("client: epoch %d: %w", plan.Epoch, err))
			return
		}
		r := <-pending[0]
		pending = pending[1:]
		if r.err != nil {
			yield(nil, r.err)
			return
		}
		// Keep Ahead requests in flight while the caller works on r.b.
		if c.readAhead && next < plan.Batches {
			issue()
		}
		if !yield(r.b, nil) {
			return
		}
		if !c.readAhead && next < plan.Batches {
			issue()
		}
	}
}
