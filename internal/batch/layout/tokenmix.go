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

// A mixture with vision= (an image-text dataset and text token datasets:
// a VLM mixing pure text in) is the same seam: a component is one kind of
// packed pass behind tokenComponent — a text token dataset's epochs
// packed by seqpack, an image-text dataset's vision epochs — the
// mixture's order asks each only its passes' lengths, and each kind
// writes its own sequences into the batch. Its batch is a VisionBatch
// whose text sequences are written as samples of text alone (loss on
// every token, no image), so that a client reads every sequence of the
// batch alike.

// packed returns the mixture of datasets ds (in mix's order) a job of
// unit un (which packs sequences: p) reads, memoised as a mixture of
// samples. Components of different dtypes or named vocabularies are
// refused, naming both; with vision=, the text components' vocabulary
// must be the image-text dataset's tokenizer (visionUnit.components).
func (x *mixtures) packed(mix api.Mix, ds []*catalog.Dataset, job api.Job, un Unit, p Packer) (*Mixed, error) {
	comps, unit, err := p.components(ds, job)
	if err != nil {
		return nil, err
	}
	block := job.Block()
	var kb strings.Builder
	for i, d := range ds {
		fmt.Fprintf(&kb, "%s@%s:%s,", d.Name, d.ID(), mix[i].Weight)
	}
	fmt.Fprintf(&kb, "|block=%d|samples=%d|seed=%d|window=%d%s", block, job.MixSamples, job.Seed, job.Window, un.AppendKey(nil, job))
	if len(job.Schedule) > 0 {
		kb.WriteString("|schedule=" + job.Schedule.String())
	}
	memo := kb.String()
	sum := sha256.Sum256([]byte(memo))
	if m, ok := x.memo.Get(sum); ok {
		return m, nil
	}
	v, err, _ := x.flight.Do(memo, func() (any, error) {
		if m, ok := x.memo.Get(sum); ok {
			return m, nil
		}
		m, err := x.newTokenMixed(mix, ds, comps, job, block, memo)
		if err != nil {
			return nil, err
		}
		m.unit = unit
		x.memo.Add(sum, m)
		return m, nil
	})
	if err != nil {
		return nil, err
	}
	return v.(*Mixed), nil
}

// components is each of ds as a token mixture's component, and the
// content its batches start from: every component a text token dataset,
// of one dtype and vocabulary.
func (u *tokenUnit) components(ds []*catalog.Dataset, job api.Job) ([]tokenComponent, func() (Content, error), error) {
	comps := make([]tokenComponent, len(ds))
	specs := make([]TokenSpec, len(ds))
	for i, d := range ds {
		var err error
		if specs[i], err = TokensOf(d, job); err != nil {
			return nil, nil, err
		}
		comps[i] = textComponent{u: u, spec: specs[i]}
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
	return comps, func() (Content, error) { return &TokenBatch{Spec: specs[0]}, nil }, nil
}

// components is each of ds as a vision mixture's component, and the
// content its batches start from: a dataset of image-text facts is the
// vision component (one a mixture), every token dataset a text component
// whose vocabulary is the vision component's tokenizer (its fingerprint:
// a text dataset tokenized with that model, or token IDs indexed with
// --vocabulary naming it).
func (vs *visionUnit) components(ds []*catalog.Dataset, job api.Job) ([]tokenComponent, func() (Content, error), error) {
	comps := make([]tokenComponent, len(ds))
	if job.Balance != "" {
		return nil, nil, fmt.Errorf("%w: balance= does not weigh a mixture of image-text and text sequences: its sequences take the plain cut", ErrVision)
	}
	vis := -1
	for i, d := range ds {
		if tokensOf(d) != nil {
			continue
		}
		if vis >= 0 {
			return nil, nil, fmt.Errorf("%w: a vision mixture mixes one image-text dataset with text token datasets; %s and %s are both image-text", ErrVision, ds[vis].Name, d.Name)
		}
		vis = i
	}
	if vis < 0 {
		return nil, nil, fmt.Errorf("%w: a mixture with vision= mixes an image-text dataset with text token datasets, and every one of its datasets is a token dataset", ErrVision)
	}
	vc, err := vs.component(ds[vis], job)
	if err != nil {
		return nil, nil, err
	}
	comps[vis] = vc
	tokenizer := vc.v.Model.Fingerprint()
	dtypes := make([]string, len(ds))
	for i, d := range ds {
		if i == vis {
			continue
		}
		spec, err := TokensOf(d, job)
		if err != nil {
			return nil, nil, err
		}
		if spec.Vocabulary != tokenizer {
			return nil, nil, fmt.Errorf("%w: a vision mixture's text datasets must share the image-text dataset's tokenizer: %s's facts were tokenized by %s, %s's vocabulary is %q (a text dataset tokenized with that model, or tokens indexed with --vocabulary %s)",
				ErrVision, ds[vis].Name, tokenizer, d.Name, spec.Vocabulary, tokenizer)
		}
		comps[i], dtypes[i] = textComponent{u: vs.tokens, spec: spec}, spec.DType
	}
	return comps, func() (Content, error) { return vc.unit(dtypes) }, nil
}

// newTokenMixed builds a token mixture whose key is key.
func (x *mixtures) newTokenMixed(mix api.Mix, ds []*catalog.Dataset, comps []tokenComponent, job api.Job, block int, key string) (*Mixed, error) {
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
		passes[i] = &passLens{s: s, c: comps[i]}
		if _, err := comps[i].pass(s, 0); err != nil {
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
	return &Mixed{Mix: mix, Schedule: job.Schedule, DS: ds, Order: newMixOrder(mo, sc, key, x.spans), key: key,
		text: mix.String(), schedule: job.Schedule.String(), ids: strings.Join(ids, ","), tokens: true, comps: comps}, nil
}

// A tokenComponent is one component of a token mixture: how its stream's
// passes pack into sequences. Its kinds are a text token dataset's
// (textComponent) and an image-text dataset's (visionComponent).
type tokenComponent interface {
	// pass is pass p of the component's stream s, packed: computed once
	// per stream, pass and packing, and kept (the Orders' memo).
	pass(s Stream, p uint64) (packedPass, error)
}

// A packedPass is one pass of a component packed into sequences.
type packedPass interface {
	// NumSequences is the pass's sequences: its length in the mixture.
	NumSequences() int
	// numDocs is the documents (samples) of the pass's order, and
	// docPosition where sequence i is among them: what the use table
	// follows the stream by. docPosition(NumSequences()) is numDocs.
	numDocs() int
	docPosition(i int) int
	// sequence is sequence i of the pass.
	sequence(i int) packedSequence
}

// A packedSequence is one sequence of a pass: the documents it reads,
// and how it goes into a batch.
type packedSequence interface {
	// docs are the documents the sequence reads (its pieces', its
	// samples'), in its order.
	docs() []int
	// addTo appends the sequence to the batch's unit u as component
	// comp's at epoch position pos, its documents read at positions at
	// (in Batch.Take, one per docs entry). It is an error for a unit the
	// kind does not write into.
	addTo(u Content, comp, pos int, at []int) error
}

// passLens is a component's pass lengths: pass p is its stream's epoch p
// packed, NumSequences long. Each is computed once.
type passLens struct {
	s    Stream
	c    tokenComponent
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
		if pe, err := p.c.pass(p.s, uint64(len(p.lens))); err == nil {
			n = max(pe.NumSequences(), 1)
		}
		p.lens = append(p.lens, n)
	}
	return p.lens[pass]
}

// textComponent is a text token dataset in a mixture: its passes are its
// epochs packed by seqpack.
type textComponent struct {
	u    *tokenUnit
	spec TokenSpec
}

func (c textComponent) pass(s Stream, p uint64) (packedPass, error) {
	pk, err := c.u.packed(s, p, c.spec.Pack)
	if err != nil {
		return nil, err
	}
	counts, err := c.u.docTokens(s.DS)
	if err != nil {
		return nil, err
	}
	return textPass{u: c.u, p: pk, counts: counts}, nil
}

// textPass is a text component's packed pass.
type textPass struct {
	u      *tokenUnit
	p      *Packed
	counts []uint32 // every document's tokens
}

func (t textPass) NumSequences() int     { return t.p.NumSequences() }
func (t textPass) numDocs() int          { return t.p.Order.NumSamples() }
func (t textPass) docPosition(i int) int { return docPosition(t.p, i) }

func (t textPass) sequence(i int) packedSequence {
	return textSequence{q: t.u.sequences(nil, t.p, i, i+1)[0], counts: t.counts}
}

// textSequence is a text component's sequence of pieces.
type textSequence struct {
	q      seqpack.Sequence
	counts []uint32
}

func (s textSequence) docs() []int {
	out := make([]int, len(s.q.Pieces))
	for j, pc := range s.q.Pieces {
		out[j] = pc.Doc
	}
	return out
}

func (s textSequence) addTo(u Content, comp, pos int, at []int) error {
	switch u := u.(type) {
	case *TokenBatch:
		split := 0
		for _, pc := range s.q.Pieces {
			u.NonPad += pc.Len
			if pc.Offset > 0 || pc.Len < int(s.counts[pc.Doc])+boolInt(pc.EOS) {
				split++
			}
		}
		u.Seqs, u.At, u.Pos, u.Comps = append(u.Seqs, s.q), append(u.At, at), append(u.Pos, pos), append(u.Comps, comp)
		u.split = append(u.split, split)
		u.Split += split
		return nil
	case *VisionBatch:
		u.addText(s.q, comp, pos, at)
		return nil
	}
	return fmt.Errorf("layout: a text sequence in a batch of %T", u)
}

// layPacked lays out a token mixture's batch: the rank's draws of
// sequences (a plain cut of the mixture's positions), each component
// pass's sequences read from its packing, and per part the documents
// they name, each once.
func (x *mixtures) layPacked(ctx context.Context, b *Batch) error {
	m, job := b.Mix, b.Job
	draws, pos, bal, err := x.draws(ctx, b)
	if err != nil {
		return err
	}
	b.Balanced = bal
	type passKey struct {
		comp int
		pass uint64
	}
	packs := map[passKey]packedPass{}
	u, err := m.unit()
	if err != nil {
		return err
	}
	global := job.BatchSize * job.World
	docAt := map[[2]int]int{} // (part, document) → its read position
	var partDocs [][]int
	var reads [][2]int // per read position: (part, place in the part's documents)
	for k, d := range draws {
		if d.Pass > maxPass {
			return fmt.Errorf("%w: epoch %d of the mixture reads pass %d of %s, past the last epoch number (%d)",
				ErrOutOfRange, b.Epoch, d.Pass, m.DS[d.Component].Name, maxPass)
		}
		s := m.Stream(d.Component, job)
		pk := passKey{d.Component, d.Pass}
		p, ok := packs[pk]
		if !ok {
			if p, err = m.comps[d.Component].pass(s, d.Pass); err != nil {
				return err
			}
			packs[pk] = p
		}
		if d.Index >= p.NumSequences() {
			return fmt.Errorf("%w: sequence %d of pass %d of %s, which has %d", ErrOutOfRange, d.Index, d.Pass, m.DS[d.Component].Name, p.NumSequences())
		}
		part := 0
		for part < len(b.Parts) && (b.Parts[part].Comp != d.Component || b.Parts[part].Epoch != d.Pass) {
			part++
		}
		if part == len(b.Parts) {
			b.Parts = append(b.Parts, Part{Comp: d.Component, Epoch: d.Pass, Stream: s, First: p.docPosition(d.Index),
				End: p.docPosition(d.Index + 1), Share: max(1, m.share(d.Component, global)*p.numDocs()/max(p.NumSequences(), 1)), EpochLen: p.numDocs()})
			partDocs = append(partDocs, nil)
		}
		pt := &b.Parts[part]
		pt.First, pt.End = min(pt.First, p.docPosition(d.Index)), max(pt.End, p.docPosition(d.Index+1))
		q := p.sequence(d.Index)
		docs := q.docs()
		at := make([]int, len(docs))
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
		if err := q.addTo(u, d.Component, pos[k], at); err != nil {
			return err
		}
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
	b.Content = u
	return nil
}
