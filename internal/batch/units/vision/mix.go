package vision

import (
	"context"
	"fmt"

	"github.com/brandgw/brand/api"
	"github.com/brandgw/brand/internal/batch/layout"
	"github.com/brandgw/brand/internal/batch/units/mixture"
	"github.com/brandgw/brand/internal/batch/units/tokens"
	"github.com/brandgw/brand/internal/batch/visit"
	"github.com/brandgw/brand/internal/job/catalog"
	"github.com/brandgw/brand/seqpack"
	"github.com/brandgw/brand/vision"
)

// A mixture with vision= (an image-text dataset and text token datasets:
// a VLM mixing pure text in) is a mixture of packed passes: its
// image-text component's passes are its stream's vision epochs, its text
// components' the token unit's packings, and the mixture's order asks
// each only its passes' lengths. Its batch is a VisionBatch whose text
// sequences are written as samples of text alone (loss on every token, no
// image), so that a client reads every sequence of the batch alike.

// Components is each of ds as a vision mixture's component, and the
// content its batches start from: a dataset of image-text facts is the
// vision component (one a mixture), every token dataset a text component
// whose vocabulary is the vision component's tokenizer (its fingerprint:
// a text dataset tokenized with that model, or token IDs indexed with
// --vocabulary naming it).
func (vs *Unit) Components(ds []*catalog.Dataset, job api.Job) ([]mixture.Component, func() (layout.Content, error), error) {
	comps := make([]mixture.Component, len(ds))
	if job.Balance != "" {
		return nil, nil, fmt.Errorf("%w: balance= does not weigh a mixture of image-text and text sequences: its sequences take the plain cut", ErrVision)
	}
	vis := -1
	for i, d := range ds {
		if tokens.Holds(d) {
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
		spec, err := tokens.TokensOf(d, job)
		if err != nil {
			return nil, nil, err
		}
		if spec.Vocabulary != tokenizer {
			return nil, nil, fmt.Errorf("%w: a vision mixture's text datasets must share the image-text dataset's tokenizer: %s's facts were tokenized by %s, %s's vocabulary is %q (a text dataset tokenized with that model, or tokens indexed with --vocabulary %s)",
				ErrVision, ds[vis].Name, tokenizer, d.Name, spec.Vocabulary, tokenizer)
		}
		comps[i], dtypes[i] = textComponent{vs.tokens.Text(spec)}, spec.DType
	}
	return comps, func() (layout.Content, error) { return vc.content(dtypes) }, nil
}

// textComponent is a text token dataset in a vision mixture: the token
// unit's, its sequences written into the vision batch as text alone.
type textComponent struct{ mixture.Component }

func (c textComponent) Pass(s layout.Stream, p uint64) (mixture.Pass, error) {
	tp, err := c.Component.Pass(s, p)
	if err != nil {
		return nil, err
	}
	return textPass{tp.(*tokens.TextPass)}, nil
}

// textPass is a text component's packed pass in a vision mixture.
type textPass struct{ *tokens.TextPass }

// AddTo appends text sequence i to the vision mixture's batch c.
func (t textPass) AddTo(c layout.Content, i, comp, pos int, at []int) error {
	vb, ok := c.(*VisionBatch)
	if !ok {
		return fmt.Errorf("vision: a text sequence in a batch of %T", c)
	}
	vb.addText(t.Sequence(i), comp, pos, at)
	return nil
}

// visionComponent is the image-text dataset of a vision mixture: its
// passes are its stream's vision epochs under the job's rule and seq,
// each the vision job's own epoch of that stream.
type visionComponent struct {
	vs  *Unit
	job api.Job
	r   vision.Rule
	v   *catalog.Vision
	ds  *catalog.Dataset
}

// component is ds as a vision mixture's image-text component of
// job: its facts loaded (catalog.Dataset.LoadVision), its rule parsed.
func (vs *Unit) component(ds *catalog.Dataset, job api.Job) (*visionComponent, error) {
	r, v, err := visionOf(ds, job)
	if err != nil {
		return nil, err
	}
	return &visionComponent{vs: vs, job: job, r: r, v: v, ds: ds}, nil
}

// content is an empty batch of the mixture: a vision batch whose text
// components' tokens are of dtypes (per component).
func (c *visionComponent) content(dtypes []string) (layout.Content, error) {
	items, err := c.vs.itemsOf(c.ds, c.v, c.job, c.r)
	if err != nil {
		return nil, err
	}
	vb := newVisionBatch(c.r, c.v, c.job, items)
	vb.Text, vb.Comps, vb.DTypes = []seqpack.Sequence{}, []int{}, dtypes
	return vb, nil
}

// Len is -1: each pass packs to sequences of its own.
func (*visionComponent) Len() int { return -1 }

func (c *visionComponent) Pass(s layout.Stream, p uint64) (mixture.Pass, error) {
	ve, items, err := c.vs.epochOf(s, c.job, p)
	if err != nil {
		return nil, err
	}
	return visionPass{e: ve, items: items, docs: s.DS.Index.NumSamples()}, nil
}

// visionPass is the image-text component's vision epoch.
type visionPass struct {
	e     *vision.Epoch
	items []vision.Item
	docs  int // the samples of its order
}

func (p visionPass) Len() int  { return p.e.NumSequences() }
func (p visionPass) Docs() int { return p.docs }

// DocPosition scales a sequence's position to the order's samples, as
// a vision job's batch does: sequences are permuted within their
// window, so this is the window's extent.
func (p visionPass) DocPosition(i int) int {
	return int(int64(i) * int64(p.docs) / int64(max(1, p.e.NumSequences())))
}

// AppendDocs appends the samples sequence i holds.
func (p visionPass) AppendDocs(dst []int, i int) []int {
	return append(dst, p.e.Sequence(i).Samples...)
}

// AddTo appends image-text sequence i to the vision mixture's batch c.
func (p visionPass) AddTo(c layout.Content, i, comp, pos int, at []int) error {
	vb, ok := c.(*VisionBatch)
	if !ok {
		return fmt.Errorf("vision: an image-text sequence in a batch of %T", c)
	}
	vb.Seqs, vb.Text = append(vb.Seqs, p.e.Sequence(i)), append(vb.Text, seqpack.Sequence{})
	vb.Pos, vb.At, vb.Comps = append(vb.Pos, pos), append(vb.At, at), append(vb.Comps, comp)
	return nil
}

// Costs weighs sequences by Cost (the table refuses balance= for a
// vision mixture: asked only where a caller skips it).
func (p visionPass) Costs(_ context.Context, kind string, items []int) ([]uint64, error) {
	out := make([]uint64, len(items))
	for j, i := range items {
		out[j] = Cost(kind, p.e.Sequence(i), p.items)
	}
	return out, nil
}

var (
	_ mixture.Mixable = (*Unit)(nil)
	_ visit.Maker     = (*Unit)(nil)
)
