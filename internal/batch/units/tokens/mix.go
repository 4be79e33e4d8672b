package tokens

import (
	"context"
	"fmt"

	"github.com/brandgw/brand/api"
	"github.com/brandgw/brand/internal/batch/layout"
	"github.com/brandgw/brand/internal/batch/units/mixture"
	"github.com/brandgw/brand/internal/batch/visit"
	"github.com/brandgw/brand/internal/job/catalog"
	"github.com/brandgw/brand/seqpack"
)

// A mixture of token datasets (mix= with seq=) mixes sequences: each
// component is its own stream of packed passes (its dataset's epochs
// packed as a token job over it packs them), and the mixture interleaves
// their sequences by weight (shuffle.NewMixtureOf, each pass as long as
// its packing's sequences), so that every mixing block holds each
// component within one sequence of its share: shares in tokens within
// ±1 sequence. A bestfit pass's length depends on the order it packs, so
// the mixture is one per (components, weights, block, length, seed,
// window, packing).
//
// A schedule over token datasets (mix_schedule= or a stored schedule with
// seq=) is the same: shuffle.NewSchedule over the same passes, a step
// one mixing block of sequences, so that its shares are exact in
// sequences in every phase, counted from the phase's first step across
// epochs, as a mixture's are from the job's first block. Sequences, not
// tokens, because a sequence is what a batch holds and what a step
// counts: every sequence is seq tokens long, pad included, so a share of
// sequences is that share of the batch's tokens; the non-pad tokens
// follow within each component's fill. The components' windows split the
// job's window by the first phase's weights, so a schedule of one
// constant phase is that mixture, sequence for sequence.

// Components is each of ds as a token mixture's component, and the
// content its batches start from: every component a text token dataset,
// of one dtype and vocabulary.
func (u *Unit) Components(ds []*catalog.Dataset, job api.Job) ([]mixture.Component, func() (layout.Content, error), error) {
	comps := make([]mixture.Component, len(ds))
	specs := make([]TokenSpec, len(ds))
	for i, d := range ds {
		var err error
		if specs[i], err = TokensOf(d, job); err != nil {
			return nil, nil, err
		}
		comps[i] = u.Text(specs[i])
		if i == 0 {
			continue
		}
		a, b := specs[0], specs[i]
		switch {
		case a.DType != b.DType:
			return nil, nil, fmt.Errorf("%w: a mixture's token datasets must share a dtype: %s holds %s, %s holds %s", ErrTokens, ds[0].Name, a.DType, d.Name, b.DType)
		case a.Vocabulary != b.Vocabulary:
			return nil, nil, fmt.Errorf("%w: a mixture's token datasets must share a vocabulary: %s's is %q, %s's %q", ErrTokens, ds[0].Name, a.Vocabulary, d.Name, b.Vocabulary)
		}
	}
	return comps, func() (layout.Content, error) { return &TokenBatch{Spec: specs[0]}, nil }, nil
}

// Text is a text token dataset of spec in a mixture: its passes are its
// epochs packed by seqpack. A vision mixture's text components are
// these too.
func (u *Unit) Text(spec TokenSpec) mixture.Component { return textComponent{u: u, spec: spec} }

// textComponent is a text token dataset in a mixture.
type textComponent struct {
	u    *Unit
	spec TokenSpec
}

// Len is -1: each pass packs to sequences of its own.
func (textComponent) Len() int { return -1 }

func (c textComponent) Pass(s layout.Stream, p uint64) (mixture.Pass, error) {
	pk, err := c.u.PackedEpoch(s, p, c.spec.Pack)
	if err != nil {
		return nil, err
	}
	counts, err := c.u.DocTokens(s.DS)
	if err != nil {
		return nil, err
	}
	return &TextPass{u: c.u, p: pk, counts: counts}, nil
}

// TextPass is a text component's packed pass.
type TextPass struct {
	u      *Unit
	p      *Packed
	counts []uint32 // every document's tokens
}

func (t *TextPass) Len() int              { return t.p.NumSequences() }
func (t *TextPass) Docs() int             { return t.p.Order.NumSamples() }
func (t *TextPass) DocPosition(i int) int { return docPosition(t.p, i) }

// Sequence is the pass's sequence i.
func (t *TextPass) Sequence(i int) seqpack.Sequence { return t.u.Sequences(nil, t.p, i, i+1)[0] }

// AppendDocs appends the documents sequence i's pieces are cut from.
func (t *TextPass) AppendDocs(dst []int, i int) []int {
	for _, pc := range t.Sequence(i).Pieces {
		dst = append(dst, pc.Doc)
	}
	return dst
}

// AddTo appends sequence i to a token mixture's batch c.
func (t *TextPass) AddTo(c layout.Content, i, comp, pos int, at []int) error {
	u, ok := c.(*TokenBatch)
	if !ok {
		return fmt.Errorf("tokens: a text sequence in a batch of %T", c)
	}
	q := t.Sequence(i)
	split := 0
	for _, pc := range q.Pieces {
		u.NonPad += pc.Len
		if pc.Offset > 0 || pc.Len < int(t.counts[pc.Doc])+boolInt(pc.EOS) {
			split++
		}
	}
	u.Seqs, u.At, u.Pos, u.Comps = append(u.Seqs, q), append(u.At, at), append(u.Pos, pos), append(u.Comps, comp)
	u.split = append(u.split, split)
	u.Split += split
	return nil
}

// Costs weighs sequences by their attention or tokens (Cost).
func (t *TextPass) Costs(_ context.Context, kind string, items []int) ([]uint64, error) {
	out := make([]uint64, len(items))
	for j, i := range items {
		out[j] = Cost(kind, t.Sequence(i))
	}
	return out, nil
}

var (
	_ mixture.Mixable = (*Unit)(nil)
	_ visit.Maker     = (*Unit)(nil)
)
