package mixture

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"

	lru "github.com/hashicorp/golang-lru/v2"
	"golang.org/x/sync/semaphore"
	"golang.org/x/sync/singleflight"

	"github.com/brandgw/brand/internal/batch/layout"
	"github.com/brandgw/brand/shuffle"
)

// A mixture's epoch order is read a span at a time (shuffle.MixSpan:
// whole mixing blocks, at least 65,536 positions, a byte a position).
// Reading a batch's positions straight from the Mixture would shuffle
// every block the batch touches — up to 2^24 slots for a batch of 32 —
// on every request; a span is built once per (mixture, seed, epoch,
// span), by one of the requests that ask for it at once, and kept.
const (
	// MaxMixSpanBytes bounds the spans being built at once, and so one
	// span: a mixture whose span would be larger is refused. A span of
	// the largest block (shuffle.MaxMixBlock) over 100 components takes
	// about 18 MiB.
	MaxMixSpanBytes = 32 << 20
	// maxMemoMixSpanBytes bounds the spans kept and the mixtures they
	// hold (a span holds its mixture, which the memo of mixtures may have
	// dropped: 4,096 spans of as many mixtures named once each would
	// otherwise hold up to 512 KiB of rounding tables apiece), the least
	// recently read dropped first.
	maxMemoMixSpanBytes = 64 << 20
	// maxMemoMixSpans bounds their count, whatever their size.
	maxMemoMixSpans = 4096
)

// MixOrder is a mixture's order as a gateway reads it: the
// shuffle.Mixture, its epochs' draws read from the Orders' memoised
// spans.
type MixOrder struct {
	// Mixture is the order of epoch 0, a mixture's or a schedule's: the
	// same length, block, windows and components in every epoch (At gives
	// each epoch's counts and stream starts).
	*shuffle.Mixture
	key   string // the Mixed's Key
	spans *mixSpans
	// sched is the schedule the order follows, nil for fixed weights;
	// epochs memoises the epochs' mixtures.
	sched  *shuffle.Schedule
	epochs *lru.Cache[uint64, *shuffle.Mixture]
	// group is the items a position of the Mixture stands for (1; a
	// Stepped unit's mixture: the world, a step's ranks' items): its
	// positions are steps, each expanded to group consecutive items of
	// the component drawn.
	group int
}

// maxMemoScheduleEpochs bounds the epochs an order keeps: each holds its
// segments' references and k stream starts.
const maxMemoScheduleEpochs = 8

func newMixOrder(m *shuffle.Mixture, s *shuffle.Schedule, key string, spans *mixSpans, group int) *MixOrder {
	o := &MixOrder{Mixture: m, key: key, spans: spans, sched: s, group: max(group, 1)}
	o.epochs, _ = lru.New[uint64, *shuffle.Mixture](maxMemoScheduleEpochs)
	return o
}

// Schedule returns the schedule the order follows, nil for a mixture of
// fixed weights.
func (o *MixOrder) Schedule() *shuffle.Schedule { return o.sched }

// At returns epoch epoch's mixture: its blocks counted on the global
// block index (by the phases they are in, for a schedule), its streams
// continued from the epochs before it, so that its EpochSamples,
// Cumulative and BlockCounts are that epoch's.
func (o *MixOrder) At(epoch uint64) (*shuffle.Mixture, error) {
	if m, ok := o.epochs.Get(epoch); ok {
		return m, nil
	}
	var m *shuffle.Mixture
	if o.sched == nil {
		m = o.Mixture.Epoch(epoch)
	} else {
		var err error
		if m, err = o.sched.Epoch(epoch); err != nil {
			return nil, err
		}
	}
	o.epochs.Add(epoch, m)
	return m, nil
}

// Draws appends the draws at positions [start, end) of epoch epoch of the
// mixture, for a job of seed seed, to dst: Mixture.AppendRange's, from
// the spans that hold them, built (or waited for) when not kept. It waits
// for room to build a span at most as long as ctx lets it.
func (o *MixOrder) Draws(ctx context.Context, dst []shuffle.Draw, seed, epoch uint64, start, end int) ([]shuffle.Draw, error) {
	if start < 0 || end < start || end > o.NumSamples() {
		return dst, fmt.Errorf("%w: positions [%d, %d) of a mixture epoch of %d", layout.ErrOutOfRange, start, end, o.NumSamples())
	}
	if g := o.group; g > 1 {
		// Steps [start/g, ⌈end/g⌉), each step's draw made its g items.
		s0 := start / g
		steps, err := o.draws(ctx, nil, seed, epoch, s0, (end+g-1)/g)
		if err != nil {
			return dst, err
		}
		for p := start; p < end; p++ {
			d := steps[p/g-s0]
			d.Index = d.Index*g + p%g
			dst = append(dst, d)
		}
		return dst, nil
	}
	return o.draws(ctx, dst, seed, epoch, start, end)
}

// NumSamples is the epoch's items: its positions, each a step's items
// for a Stepped unit's mixture.
func (o *MixOrder) NumSamples() int { return o.Mixture.NumSamples() * o.group }

// Block is the mixing block in items: a step's for a Stepped unit's
// mixture.
func (o *MixOrder) Block() int { return o.Mixture.Block() * o.group }

// Group is the items a step holds in a Stepped unit's mixture (1 for
// another's).
func (o *MixOrder) Group() int { return o.group }

// draws is Draws of the Mixture's own positions.
func (o *MixOrder) draws(ctx context.Context, dst []shuffle.Draw, seed, epoch uint64, start, end int) ([]shuffle.Draw, error) {
	mo, err := o.At(epoch)
	if err != nil {
		return dst, err
	}
	per := o.Mixture.Block() * o.SpanBlocks()
	for pos := start; pos < end; {
		sp, err := o.spans.get(ctx, o.key, mo, seed, epoch, pos/per)
		if err != nil {
			return dst, err
		}
		hi := min(end, sp.End())
		dst = sp.AppendRange(dst, pos, hi)
		pos = hi
	}
	return dst, nil
}

// AppendRange is Draws under shuffle.Mixture's name, which it shadows:
// every reader of a mixture's order reads the memoised spans rather than
// shuffling blocks itself, waits only as long as ctx lets it, and gets a
// position outside the epoch as an error wrapping layout.ErrOutOfRange rather
// than Mixture.AppendRange's panic.
func (o *MixOrder) AppendRange(ctx context.Context, dst []shuffle.Draw, seed, epoch uint64, start, end int) ([]shuffle.Draw, error) {
	return o.Draws(ctx, dst, seed, epoch, start, end)
}

// mixSpans is the memo of mixture spans, bounded in bytes, with one build
// per span however many ask at once and the bytes being built bounded.
// Safe for concurrent use.
type mixSpans struct {
	memo     *lru.Cache[mixSpanKey, *shuffle.MixSpan]
	bytes    atomic.Int64 // the memo's spans' bytes, and their mixtures'
	flight   singleflight.Group
	building *semaphore.Weighted // bytes of the spans being built

	mu sync.Mutex
	// held are the mixtures the memo's spans hold, each counted in bytes
	// once while any of its spans is kept.
	held map[*shuffle.Mixture]heldMixture
}

type heldMixture struct {
	spans int
	bytes int64
}

// hold counts sp's bytes, and its mixture's if no kept span holds it yet.
func (s *mixSpans) hold(sp *shuffle.MixSpan) {
	s.mu.Lock()
	defer s.mu.Unlock()
	m := sp.Mixture()
	h, ok := s.held[m]
	if !ok {
		h.bytes = m.Bytes()
		s.bytes.Add(h.bytes)
	}
	h.spans++
	s.held[m] = h
	s.bytes.Add(sp.Bytes())
}

// drop uncounts a span dropped from the memo, and its mixture's bytes if
// no kept span holds it any more.
func (s *mixSpans) drop(sp *shuffle.MixSpan) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.bytes.Add(-sp.Bytes())
	m := sp.Mixture()
	h := s.held[m]
	if h.spans--; h.spans <= 0 {
		delete(s.held, m)
		s.bytes.Add(-h.bytes)
		return
	}
	s.held[m] = h
}

type mixSpanKey struct {
	mix         string
	seed, epoch uint64
	span        int
}

func (k mixSpanKey) String() string {
	return k.mix + "|" + strconv.FormatUint(k.seed, 10) + "|" + strconv.FormatUint(k.epoch, 10) + "|" + strconv.Itoa(k.span)
}

func newMixSpans() *mixSpans {
	s := &mixSpans{building: semaphore.NewWeighted(MaxMixSpanBytes), held: map[*shuffle.Mixture]heldMixture{}}
	s.memo, _ = lru.NewWithEvict(maxMemoMixSpans, func(_ mixSpanKey, sp *shuffle.MixSpan) { s.drop(sp) })
	return s
}

// get returns span j of an epoch of o, from the memo or built.
func (s *mixSpans) get(ctx context.Context, key string, o *shuffle.Mixture, seed, epoch uint64, j int) (*shuffle.MixSpan, error) {
	k := mixSpanKey{key, seed, epoch, j}
	if sp, ok := s.memo.Get(k); ok {
		return sp, nil
	}
	// The build runs on for the others when the caller that started it
	// leaves: it is bounded, and they wait for it.
	ch := s.flight.DoChan(k.String(), func() (any, error) {
		// Another flight may have finished between the look above and
		// this one's start.
		if sp, ok := s.memo.Get(k); ok {
			return sp, nil
		}
		per := o.SpanBlocks()
		first := j * per
		blocks := min(per, o.NumSamples()/o.Block()-first)
		n := o.SpanBytes(blocks)
		if err := s.building.Acquire(context.Background(), n); err != nil {
			return nil, err
		}
		defer s.building.Release(n)
		sp := o.Span(seed, epoch, first, blocks)
		if kept, ok := s.memo.Peek(k); ok {
			return kept, nil
		}
		s.hold(sp)
		s.memo.Add(k, sp)
		for s.bytes.Load() > maxMemoMixSpanBytes && s.memo.Len() > 1 {
			s.memo.RemoveOldest()
		}
		return sp, nil
	})
	select {
	case r := <-ch:
		if r.Err != nil {
			return nil, r.Err
		}
		return r.Val.(*shuffle.MixSpan), nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// checkSpan refuses a mixture whose spans would not fit the bytes the
// memo builds at once.
func checkSpan(m *shuffle.Mixture) error {
	if n := m.SpanBytes(m.SpanBlocks()); n > MaxMixSpanBytes {
		return fmt.Errorf("%w: a span of this mixture's order (%d blocks of %d samples) would hold %d bytes; a gateway builds at most %d at once (layout.MaxMixSpanBytes): use a smaller mix_block",
			shuffle.ErrInvalid, m.SpanBlocks(), m.Block(), n, MaxMixSpanBytes)
	}
	return nil
}
