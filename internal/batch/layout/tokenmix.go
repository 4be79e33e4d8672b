package layout

import (
	"context"
	"crypto/sha256"
	"fmt"
	"strings"
	"sync"

	"github.com/brandgw/brand/api"
	"github.com/brandgw/brand/internal/job/catalog"
	"github.com/brandgw/brand/seqpack"
	"github.com/brandgw/brand/shuffle"
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
// seq=) is the same seam: shuffle.NewSchedule over the same passes, a
// step one mixing block of sequences, so that its shares are exact in
// sequences in every phase, counted from the phase's first step across
// epochs, as a mixture's are from the job's first block.
// Sequences, not tokens, because a sequence is what a batch holds and
// what a step counts: every sequence is seq tokens long, pad included,
// so a share of sequences is that share of the batch's tokens; the
// non-pad tokens follow within each component's fill. The components'
// windows split the job's window by the first phase's weights, so a
// schedule of one constant phase is that mixture, sequence for sequence.

// TokenMixture returns the mixture of token datasets ds (in mix's order)
// a token job reads, memoised as Mixture's. Components of different
// dtypes or named vocabularies are refused, naming both.
func (o *Orders) TokenMixture(mix api.Mix, ds []*catalog.Dataset, job api.Job) (*Mixed, error) {
	specs := make([]TokenSpec, len(ds))
	for i, d := range ds {
		var err error
		if specs[i], err = TokensOf(d, job); err != nil {
			return nil, err
		}
		if i == 0 {
			continue
		}
		a, b := specs[0], specs[i]
		switch {
		case a.DType != b.DType:
			return nil, fmt.Errorf("%w: a mixture's token datasets must share a dtype: %s holds %s, %s holds %s", ErrTokens, ds[0].Name, a.DType, d.Name, b.DType)
		case a.Vocabulary != b.Vocabulary:
			return nil, fmt.Errorf("%w: a mixture's token datasets must share a vocabulary: %s's is %q, %s's %q", ErrTokens, ds[0].Name, a.Vocabulary, d.Name, b.Vocabulary)
		}
	}
	block := job.Block()
	var kb strings.Builder
	for i, d := range ds {
		fmt.Fprintf(&kb, "%s@%s:%s,", d.Name, d.ID(), mix[i].Weight)
	}
	fmt.Fprintf(&kb, "|block=%d|samples=%d|seed=%d|window=%d%s", block, job.MixSamples, job.Seed, job.Window, appendTokens(nil, job))
	if len(job.Schedule) > 0 {
		kb.WriteString("|schedule=" + job.Schedule.String())
	}
	memo := kb.String()
	sum := sha256.Sum256([]byte(memo))
	if m, ok := o.mixtures.Get(sum); ok {
		return m, nil
	}
	v, err, _ := o.mixFlight.Do(memo, func() (any, error) {
		if m, ok := o.mixtures.Get(sum); ok {
			return m, nil
		}
		m, err := o.newTokenMixed(mix, ds, specs, job, block, memo)
		if err != nil {
			return nil, err
		}
		o.mixtures.Add(sum, m)
		return m, nil
	})
	if err != nil {
		return nil, err
	}
	return v.(*Mixed), nil
}

// newTokenMixed builds a token mixture whose key is key.
func (o *Orders) newTokenMixed(mix api.Mix, ds []*catalog.Dataset, specs []TokenSpec, job api.Job, block int, key string) (*Mixed, error) {
	var phases []shuffle.SchedulePhase
	var weights []uint64
	var err error
	if len(job.Schedule) > 0 {
		if phases, err = job.Schedule.Phases(); err != nil {
			return nil, err
		}
		weights = phases[0].Weights
	} else if weights, err = mix.IntWeights(); err != nil {
		return nil, err
	}
	var sum uint64
	for _, w := range weights {
		sum += w
	}
	passes := make([]shuffle.Passes, len(ds))
	for i, d := range ds {
		// The component's stream as Mixed.Stream names it: the job's
		// window split by weight (shuffle.Mixture.ComponentWindow).
		win := int(max((uint64(max(job.Window, 1))*weights[i]+sum-1)/sum, 1))
		s := Stream{DS: d, Seed: job.Seed, Window: win}
		passes[i] = &passLens{o: o, s: s, spec: specs[i].Pack}
		if _, err := o.Packed(s, 0, specs[i].Pack); err != nil {
			return nil, err
		}
	}
	var mo *shuffle.Mixture
	var sc *shuffle.Schedule
	if phases != nil {
		if sc, err = shuffle.NewSchedule(phases, passes, block, job.MixSamples); err != nil {
			return nil, err
		}
		if mo, err = sc.Epoch(0); err != nil {
			return nil, err
		}
	} else if mo, err = shuffle.NewMixtureOf(weights, passes, block, job.MixSamples); err != nil {
		return nil, err
	}
	if err := checkSpan(mo); err != nil {
		return nil, err
	}
	ids := make([]string, len(ds))
	for i, d := range ds {
		ids[i] = d.ID()
	}
	return &Mixed{Mix: mix, Schedule: job.Schedule, DS: ds, Order: newMixOrder(mo, sc, key, o.mixSpans), key: key,
		text: mix.String(), schedule: job.Schedule.String(), ids: strings.Join(ids, ","), tokens: true}, nil
}

// passLens is a token component's pass lengths: pass p is its stream's
// epoch p packed, NumSequences long. Each is computed once.
type passLens struct {
	o    *Orders
	s    Stream
	spec seqpack.Spec
	mu   sync.Mutex
	lens []int
}

// PassLen returns pass p's sequences, at least 1 (a pass that packs to
// none, or fails, counts 1: the mixture needs a positive length, and its
// layout then finds the pass out of range).
func (p *passLens) PassLen(pass uint64) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	if pass < uint64(len(p.lens)) {
		return p.lens[pass]
	}
	for uint64(len(p.lens)) <= pass {
		n := 1
		if pe, err := p.o.Packed(p.s, uint64(len(p.lens)), p.spec); err == nil {
			n = max(pe.NumSequences(), 1)
		}
		p.lens = append(p.lens, n)
	}
	return p.lens[pass]
}

// mixTokenParts lays out a token mixture's batch: the rank's draws of
// sequences (a plain cut of the mixture's positions), each component
// pass's sequences read from its packing, and per part the documents
// they name, each once.
func (o *Orders) mixTokenParts(ctx context.Context, b *Batch) error {
	m, job := b.Mix, b.Job
	draws, pos, bal, err := o.asg.draws(ctx, b.Source, job, b.Epoch, b.EpochSamples, b.Batch, b.Start, b.End)
	if err != nil {
		return err
	}
	b.Balanced = bal
	type passKey struct {
		comp int
		pass uint64
	}
	packs := map[passKey]*Packed{}
	specs := make([]TokenSpec, len(m.DS))
	for i, d := range m.DS {
		if specs[i], err = TokensOf(d, job); err != nil {
			return err
		}
	}
	tb := &TokenBatch{Spec: specs[0], Pos: pos}
	global := job.BatchSize * job.World
	docAt := map[[2]int]int{} // (part, document) → its read position
	var partDocs [][]int
	var reads [][2]int // per read position: (part, place in the part's documents)
	for _, d := range draws {
		if d.Pass > maxPass {
			return fmt.Errorf("%w: epoch %d of the mixture reads pass %d of %s, past the last epoch number (%d)",
				ErrOutOfRange, b.Epoch, d.Pass, m.DS[d.Component].Name, maxPass)
		}
		s := m.Stream(d.Component, job)
		k := passKey{d.Component, d.Pass}
		p, ok := packs[k]
		if !ok {
			if p, err = o.Packed(s, d.Pass, specs[d.Component].Pack); err != nil {
				return err
			}
			packs[k] = p
		}
		if d.Index >= p.NumSequences() {
			return fmt.Errorf("%w: sequence %d of pass %d of %s, which has %d", ErrOutOfRange, d.Index, d.Pass, m.DS[d.Component].Name, p.NumSequences())
		}
		part := 0
		for part < len(b.Parts) && (b.Parts[part].Comp != d.Component || b.Parts[part].Epoch != d.Pass) {
			part++
		}
		if part == len(b.Parts) {
			b.Parts = append(b.Parts, Part{Comp: d.Component, Epoch: d.Pass, Stream: s, First: docPosition(p, d.Index),
				End: docPosition(p, d.Index+1), Share: max(1, m.share(d.Component, global)*p.Order.NumSamples()/max(p.NumSequences(), 1))})
			partDocs = append(partDocs, nil)
		}
		pt := &b.Parts[part]
		pt.First, pt.End = min(pt.First, docPosition(p, d.Index)), max(pt.End, docPosition(p, d.Index+1))
		q := o.sequences(nil, p, d.Index, d.Index+1)[0]
		at := make([]int, len(q.Pieces))
		counts, err := o.docTokens(s.DS)
		if err != nil {
			return err
		}
		split := 0
		for j, pc := range q.Pieces {
			r, ok := docAt[[2]int{part, pc.Doc}]
			if !ok {
				r = len(reads)
				docAt[[2]int{part, pc.Doc}] = r
				reads = append(reads, [2]int{part, len(partDocs[part])})
				partDocs[part] = append(partDocs[part], pc.Doc)
			}
			at[j] = r
			tb.NonPad += pc.Len
			if pc.Offset > 0 || pc.Len < int(counts[pc.Doc])+boolInt(pc.EOS) {
				split++
			}
		}
		tb.Seqs = append(tb.Seqs, q)
		tb.At = append(tb.At, at)
		tb.split = append(tb.split, split)
		tb.Split += split
	}
	for i := range b.Parts {
		if b.Parts[i].Samples, err = NewSamples(ctx, b.Parts[i].Stream.DS, partDocs[i]); err != nil {
			return err
		}
	}
	b.Take = make([]Take, len(reads))
	for r, rd := range reads {
		b.Take[r] = Take{Part: rd[0], At: rd[1]}
	}
	tb.Comps = make([]int, len(draws))
	for i, d := range draws {
		tb.Comps[i] = d.Component
	}
	b.Unit = tb
	return nil
}
