package client

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"net/url"
	"strconv"
	"strings"
	"sync"

	"github.com/brandgw/brand/api"
	"github.com/brandgw/brand/shuffle"
)

// EpochInfo is the gateway's plan for one epoch under the client's job,
// from a given offset, with every default resolved.
type EpochInfo = api.EpochInfo

// EpochInfo fetches the plan of epoch for the client's job, from the
// epoch's start.
func (c *Client) EpochInfo(ctx context.Context, epoch int) (*EpochInfo, error) {
	return c.EpochInfoFrom(ctx, epoch, 0)
}

// EpochInfoFrom fetches the plan of the rest of epoch from offset, the
// number of the epoch's samples already consumed over all ranks (see
// EpochFrom): its Batches and RankSamples count from there.
func (c *Client) EpochInfoFrom(ctx context.Context, epoch, offset int) (*EpochInfo, error) {
	if err := checkPosition(epoch, 0); err != nil {
		return nil, err
	}
	if offset < 0 {
		return nil, fmt.Errorf("%w: offset %d; must be >= 0", ErrInvalid, offset)
	}
	job := c.pins.current()
	job.Offset = offset
	// The embedded Seed is shadowed by the pointer, which tells a missing
	// seed from seed 0; Epoch pins the seed and must not pin a wrong one.
	type answer struct {
		EpochInfo
		Seed *uint64 `json:"seed"`
	}
	w, err := getJSON[answer](ctx, c.t, "/epoch/"+strconv.Itoa(epoch), c.pins.query(job))
	var apiErr *APIError
	if err != nil && job.ScheduleVersion != "" && errors.As(err, &apiErr) && apiErr.ScheduleVersion != "" {
		// An edit of the stored schedule since the version pinned, from a
		// step this epoch reads: the current version reads the same before
		// it (see fetchBatch).
		job.ScheduleVersion = apiErr.ScheduleVersion
		w, err = getJSON[answer](ctx, c.t, "/epoch/"+strconv.Itoa(epoch), c.pins.query(job))
	}
	if err == nil {
		err = checkPlan(&w.EpochInfo, w.Seed, epoch, job)
	}
	if err == nil {
		c.pins.learnSchedule(&w.EpochInfo)
	}
	if err == nil {
		err = c.pins.learnIndex(planIndex(&w.EpochInfo))
	}
	if err == nil && w.Mix != nil {
		err = c.pins.learnMixBlock(w.Mix.Block)
	}
	if err != nil {
		return nil, fmt.Errorf("client: %s: %w", epochName(epoch, offset), err)
	}
	info := w.EpochInfo
	info.Seed = *w.Seed
	return &info, nil
}

// checkPlan verifies that an epoch plan is complete, consistent and
// answers the question asked (job, whose zero fields were left to the
// gateway): a gateway that ignored a parameter would otherwise hand out a
// shuffle, or a cut of it, the caller did not ask for.
func checkPlan(p *EpochInfo, seed *uint64, epoch int, job api.Job) error {
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
	if err := checkPlanMix(p, job); err != nil {
		return bad("%w", err)
	}
	// A mixture's plan names the mixture as its dataset (a stored
	// schedule's, its first phase: another version's may differ).
	dsParam, dsWant, dsSet := api.ParamDataset, job.Dataset, job.Dataset != ""
	if len(job.Mix) > 0 {
		dsParam, dsWant, dsSet = api.ParamMix, job.Mix.String(), job.ScheduleVersion == ""
	}
	if job.ScheduleVersion != "" && job.ScheduleVersion != "latest" && p.ScheduleVersion == "" {
		return bad("asked for schedule version %s, gateway named none", job.ScheduleVersion)
	}
	for _, f := range []struct {
		name      string
		set       bool
		want, got string
	}{
		{dsParam, dsSet, dsWant, p.Dataset},
		{api.ParamBatchSize, job.BatchSize > 0, strconv.Itoa(job.BatchSize), strconv.Itoa(p.BatchSize)},
		{api.ParamWindow, job.Window > 0, strconv.Itoa(job.Window), strconv.Itoa(p.Window)},
		{api.ParamWorld, job.World > 0, strconv.Itoa(job.World), strconv.Itoa(p.World)},
		{api.ParamRank, job.World > 0, strconv.Itoa(job.Rank), strconv.Itoa(p.Rank)},
		{api.ParamSeed, true, strconv.FormatUint(job.Seed, 10), strconv.FormatUint(*seed, 10)},
		{api.ParamDropLast, true, strconv.FormatBool(job.DropLast), strconv.FormatBool(p.DropLast)},
		{api.ParamOffset, true, strconv.Itoa(job.Offset), strconv.Itoa(p.Offset)},
	} {
		if f.set && f.want != f.got {
			return bad("asked for %s=%s, gateway planned %s=%s", f.name, f.want, f.name, f.got)
		}
	}
	// With every parameter resolved, the extent of the cut is arithmetic;
	// a plan that disagrees would make Epoch stop early or ask for
	// batches that do not exist.
	sp := planParams(p)
	switch {
	case p.Offset > p.Samples:
		return bad("offset %d past the epoch's %d samples", p.Offset, p.Samples)
	case p.Batches != sp.NumBatches(p.Samples):
		return bad("%d batches from offset %d of %d samples; the job's parameters give %d", p.Batches, p.Offset, p.Samples, sp.NumBatches(p.Samples))
	case p.RankSamples != sp.RankSamples(p.Samples):
		return bad("rank_samples %d; the job's parameters give %d", p.RankSamples, sp.RankSamples(p.Samples))
	}
	return nil
}

// checkPlanMix checks a plan's mixture against the job's: a mixture for a
// mixture, of the same components, with the block asked for (when the
// job fixed one; the first plan fixes it otherwise, see
// Client.MixBlock).
func checkPlanMix(p *EpochInfo, job api.Job) error {
	m := p.Mix
	switch {
	case job.ScheduleVersion != "" && m == nil:
		return fmt.Errorf("asked for job %s's stored schedule, gateway planned no mixture", job.Name)
	case job.ScheduleVersion != "" && len(job.Mix) == 0:
		return nil // the first plan names the stored schedule's datasets
	case len(job.Mix) == 0 && m == nil:
		return nil
	case len(job.Mix) == 0:
		return fmt.Errorf("asked for one dataset, gateway planned the mixture %q", p.Dataset)
	case m == nil:
		return fmt.Errorf("asked for mix=%s, gateway planned no mixture", job.Mix)
	case m.Block < 0:
		return fmt.Errorf("mixing block %d; must be >= 0 (0: a bucketed mixture's, of whole steps)", m.Block)
	case job.MixBlock > 0 && m.Block != job.MixBlock:
		return fmt.Errorf("asked for %s=%d, gateway planned %s=%d", api.ParamMixBlock, job.MixBlock, api.ParamMixBlock, m.Block)
	case len(m.Components) != len(job.Mix):
		return fmt.Errorf("%d components for a mixture of %d", len(m.Components), len(job.Mix))
	}
	for i, c := range m.Components {
		if c.Dataset != job.Mix[i].Dataset {
			return fmt.Errorf("component %d is %q; the mixture's is %q", i, c.Dataset, job.Mix[i].Dataset)
		}
	}
	return nil
}

// planIndex is the index identity a plan's batches name: the dataset's
// index version, or a mixture's components' versions as Brand-Mix-Index
// lists them.
func planIndex(p *EpochInfo) string {
	if p.Mix == nil {
		return p.IndexID
	}
	ids := make([]string, len(p.Mix.Components))
	for i, c := range p.Mix.Components {
		ids[i] = c.IndexID
	}
	return strings.Join(ids, ",")
}

// planParams are the shuffle parameters a plan resolved.
func planParams(p *EpochInfo) shuffle.Params {
	return shuffle.Params{Seed: p.Seed, Window: p.Window, BatchSize: p.BatchSize, World: p.World,
		Rank: p.Rank, DropLast: p.DropLast, Offset: p.Offset}
}

// pinnedQuery spells out every parameter of a plan, so that all of an
// epoch's batches come from the same shuffle even when gateways behind a
// load balancer run with different defaults, or one restarts with new ones.
// A plan does not say whether locality-aware assignment applies, nor which
// importance snapshot the epoch is drawn from, so the job's choices are
// carried over: without them the batches would be cut or drawn otherwise;
// so are its name and weight, which the gateway's cache follows it by,
// the pipeline its images go through, the fields it reads (columns=), a
// token job's packing (seq=, pack=, pad=, eos=: the plan counts its
// sequences) and its kind's parameters (vision=, balance=, a clip job's,
// a bucket job's, run=). A mixture is pinned by its block, and its length as the job
// gave it; its components' index versions cannot be sent (see
// Client.Index).
func pinnedQuery(p *EpochInfo, job api.Job) url.Values {
	j := api.Job{Params: planParams(p), NoLocality: job.NoLocality, Name: job.Name, Weight: job.Weight, Transform: job.Transform,
		Columns: job.Columns, Seq: job.Seq, Pack: job.Pack, Pad: job.Pad, EOS: job.EOS, EOSSet: job.EOSSet,
		Vision: job.Vision, Balance: job.Balance, Clip: job.Clip, Buckets: job.Buckets, Run: job.Run}
	if p.Mix != nil {
		// A bucketed mixture's block is 0: its blocks are its steps.
		j.Mix, j.Schedule, j.MixBlock, j.MixSamples = job.Mix, job.Schedule, p.Mix.Block, job.MixSamples
		if job.ScheduleVersion != "" {
			// Every batch of the epoch under the version its plan was.
			j.ScheduleVersion = p.ScheduleVersion
		}
	} else {
		j.Dataset, j.Importance, j.Index = p.Dataset, job.Importance, p.IndexID
	}
	return j.Values()
}

// followPlan returns the plan batch b is read under: plan, or, when b
// reports an epoch of another size than plan's, the epoch's plan asked
// for again from the same offset, if b agrees with it. An epoch changes
// size under a running job when an edit of its order applies: it grows
// by an append record (POST /jobs/{job}/append) and shrinks by an
// exclusion list (POST /jobs/{job}/exclude). A batch reports the epoch
// as the job's edits make it when the batch is asked for, and the loop
// goes on to the new end. Anything else b contradicts is an error
// (planMatches). replan is Client.EpochInfoFrom.
func followPlan(ctx context.Context, replan func(ctx context.Context, epoch, offset int) (*EpochInfo, error), plan *EpochInfo, b *Batch) (*EpochInfo, error) {
	err := planMatches(plan, b)
	if !errors.Is(err, errEpochSize) {
		return plan, err
	}
	grown, perr := replan(ctx, plan.Epoch, plan.Offset)
	if perr != nil {
		return plan, fmt.Errorf("%w (asking for the epoch's plan again: %w)", err, perr)
	}
	if gerr := planMatches(grown, b); gerr != nil {
		return plan, fmt.Errorf("%w (and the epoch's plan asked for again: %w)", err, gerr)
	}
	return grown, nil
}

// errEpochSize is planMatches's error for a batch that reports an epoch
// of another size than its plan's.
var errEpochSize = errors.New("the epoch's size changed")

// planMatches reports how a batch contradicts the plan it was requested
// under, or nil. A different index or count means the dataset or the
// gateway's configuration changed mid-epoch, and the epoch would repeat or
// skip samples; a different mixture or block, another order.
func planMatches(p *EpochInfo, b *Batch) error {
	id := planIndex(p)
	switch {
	case p.Mix != nil && (b.Mix != p.Dataset || b.MixBlock != p.Mix.Block):
		return fmt.Errorf("%w: the epoch plan is of mixture %q with block %d but batch %d is of %q with block %d",
			ErrBadResponse, p.Dataset, p.Mix.Block, b.Index, b.Mix, b.MixBlock)
	case id != "" && b.IndexID != "" && b.IndexID != id:
		return fmt.Errorf("%w: the epoch plan uses index %s but batch %d came from index %s", ErrBadResponse, id, b.Index, b.IndexID)
	case b.EpochBatches != p.Batches:
		return fmt.Errorf("%w: %w: the epoch plan has %d batches but batch %d reports %d", ErrBadResponse, errEpochSize, p.Batches, b.Index, b.EpochBatches)
	case b.EpochSamples != p.Samples:
		return fmt.Errorf("%w: %w: the epoch plan has %d samples but batch %d reports %d", ErrBadResponse, errEpochSize, p.Samples, b.Index, b.EpochSamples)
	}
	return nil
}

// epochName names an epoch, or the rest of one, in errors.
func epochName(epoch, offset int) string {
	if offset == 0 {
		return "epoch " + strconv.Itoa(epoch)
	}
	return "epoch " + strconv.Itoa(epoch) + " from offset " + strconv.Itoa(offset)
}

// ResumeOffset is the offset to pass to EpochFrom to go on with an epoch
// after every rank has consumed its first consumed batches of plan (the
// plan of the epoch, or of its rest, being read): plan.Offset + consumed ×
// BatchSize × World, capped at plan.Samples. The result does not depend
// on the world size or batch size the job resumes with; only the
// positions already consumed matter.
//
// The cap is exact only with a plan that counts the epoch's samples as
// they are now. A named job's edits change them from a step on: an
// append record (Client.Append) grows the epoch and an exclusion list
// (Client.Exclude) shrinks it, and Epoch follows either to the new end.
// With the plan the epoch began with, the offset of a job that read past
// the old end of a grown epoch is capped at that end, and the resume
// reads again what was read past it; the offset after the whole of a
// shrunk epoch lies past its new end, which EpochFrom answers with the
// gateway's 404. So pass the plan of the last batch consumed, b.Plan
// (consumed is then b.Index+1), which Epoch and EpochFrom keep current,
// or a plan asked for again (EpochInfoFrom, with the offset the epoch
// was begun at) when the job resumes. Both give the same offset: an edit
// applies only from a step no rank has been served, so a later one
// moves no position the job reached, and the epoch's end it caps at is
// the one the job's last batch was cut from.
//
// A job checkpoints the offset (or the epoch, the offset it started from
// and its batch count, from which a plan asked for on resume gives the
// same) together with its model, after the step that used batch
// consumed-1 on every rank. A job over a mixture checkpoints its
// Client.MixBlock too: the mixture's order depends on it, and the offset
// counts positions of that order only.
func ResumeOffset(plan *EpochInfo, consumed int) int {
	consumed = max(consumed, 0)
	// Comparing counts of batches, not positions, keeps consumed × g from
	// overflowing.
	if g := plan.BatchSize * plan.World; g > 0 && consumed < (plan.Samples-plan.Offset+g-1)/g {
		return plan.Offset + consumed*g
	}
	return max(plan.Samples, plan.Offset)
}

// Epoch iterates over every batch of epoch for the client's rank, in order,
// from the epoch's start; it is EpochFrom(ctx, epoch, 0).
func (c *Client) Epoch(ctx context.Context, epoch int) iter.Seq2[*Batch, error] {
	return c.EpochFrom(ctx, epoch, 0)
}

// EpochFrom iterates over the rest of epoch for the client's rank, in
// order, from offset: the number of the epoch's samples, counted over all
// ranks, that the job has already consumed. Batch M of the rest covers the
// epoch positions from offset + M × BatchSize × World on, so the ranks of
// a job that resumes with the same offset read every remaining sample
// exactly once, whatever world size or batch size they use now (the order
// of the epoch depends only on the dataset, seed and window; a mixture's
// on its block too, which the resumed job must give as
// Options.Job.MixBlock: see Client.MixBlock). Batches are
// numbered from 0 again, and each one's Offset is offset. ResumeOffset
// computes the offset from a plan and a count of consumed batches: each
// batch's Plan, for the offset after it.
//
// EpochFrom first fetches the plan (see EpochInfoFrom) and then requests
// each batch with the plan's parameters spelled out, keeping Options.Ahead
// requests in flight so that the next batch is usually ready when the loop
// asks for it. Each batch is checked against the plan. When a batch
// reports an epoch of another size (a named job's append record or
// exclusion list applies from its step on), the loop asks for the plan
// again and goes on to the epoch's new end under it: that batch's Plan,
// and the later ones', is the new plan.
//
// An offset equal to the epoch's samples yields nothing; a larger one is an
// error (the gateway's 404), and a negative one wraps ErrInvalid. With
// drop_last, the rest's final partial global batch is dropped.
//
// The first error, from the plan or any batch (after retries), is yielded
// with a nil batch and ends the iteration. When the loop stops, for any
// reason, outstanding requests are cancelled and EpochFrom returns only
// after their goroutines have finished.
func (c *Client) EpochFrom(ctx context.Context, epoch, offset int) iter.Seq2[*Batch, error] {
	return func(yield func(*Batch, error) bool) {
		plan, err := c.EpochInfoFrom(ctx, epoch, offset)
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

	q := pinnedQuery(plan, c.pins.current())
	name := epochName(plan.Epoch, plan.Offset)
	pending := make([]chan result, 0, c.ahead+1) // in batch order
	next := 0
	issue := func() {
		m := next
		next++
		ch := make(chan result, 1) // never blocks the sender, even if abandoned
		pending = append(pending, ch)
		epoch, offset := plan.Epoch, plan.Offset
		wg.Go(func() {
			b, err := c.fetchBatch(ctx, epoch, m, offset, q)
			if err != nil {
				err = fmt.Errorf("client: %s batch %d: %w", name, m, err)
			}
			ch <- result{b, err}
		})
	}

	for next < plan.Batches && next < c.ahead {
		issue()
	}
	for served := 0; served < plan.Batches; served++ {
		// Batches already fetched are not handed out once the caller has
		// cancelled: the caller is stopping and should hear why.
		if err := ctx.Err(); err != nil {
			yield(nil, fmt.Errorf("client: %s: %w", name, err))
			return
		}
		r := <-pending[0]
		pending = pending[1:]
		if r.err != nil {
			yield(nil, r.err)
			return
		}
		var err error
		if plan, err = followPlan(ctx, c.EpochInfoFrom, plan, r.b); err != nil {
			yield(nil, fmt.Errorf("client: %s: %w", name, err))
			return
		}
		r.b.Plan = plan
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
