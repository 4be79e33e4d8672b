package layout

import (
	"context"
	"fmt"

	lru "github.com/hashicorp/golang-lru/v2"

	"github.com/brandgw/brand/api"
	"github.com/brandgw/brand/internal/job/catalog"
	"github.com/brandgw/brand/internal/job/features"
	"github.com/brandgw/brand/internal/job/query"
	"github.com/brandgw/brand/seqpack"
	"github.com/brandgw/brand/transform"
	"github.com/brandgw/brand/vision"
)

// A vision job (api.Job.Vision, with Seq) is a token job whose samples
// are image-text pairs: its epoch is package vision's (whole samples
// packed best fit per window, vision.NewEpoch) from each sample's item
// under the job's rule, made from the dataset's image-text facts
// (catalog.Vision, written beside the index by `brand index
// --tokenizer`) as a text token job's packing is made from its index's
// document token counts. Its batch reads the samples its sequences hold,
// each once, as ordinary samples; the pack stage (visit) writes the
// sequences from them with vision.Writer.

// ErrVision marks a vision job its dataset cannot serve: no facts loaded
// for its version (catalog.ErrNoVisionFacts says why where it loads), a
// rule that does not parse. It is a bad request (400).
var ErrVision = fmt.Errorf("%w: vision job", query.ErrBadRequest)

// VisionBatch is what a vision job's batch adds to its layout: how its
// samples are read and written, the rank's sequences in order, each
// sequence's samples' read positions (in Batch.Take), and the epoch's
// items, which each sample read is checked against.
type VisionBatch struct {
	Reader *vision.Reader
	Writer *vision.Writer
	Seqs   []vision.Sequence
	// Pos is each sequence's position in the epoch, which keys it
	// (sequences.Key).
	Pos   []int
	At    [][]int // per sequence, per sample (per piece for Text's): its position in Take
	Items []vision.Item
	// Text is, in a mixture with text token datasets (a vision
	// mixture), each sequence's pieces where it is a text component's
	// (its Seqs entry then holds no sample), and none for an image-text
	// one: the pack stage writes a text sequence as samples of text
	// alone, its loss on every token and no image. Nil outside a
	// mixture.
	Text []seqpack.Sequence
	// Comps is, in a vision mixture, each sequence's component, and
	// DTypes each component's token dtype ("" for the image-text one).
	Comps  []int
	DTypes []string
}

// addText appends a text component's sequence q to a vision mixture's
// batch, as component comp's at epoch position pos, its documents read
// at positions at.
func (vb *VisionBatch) addText(q seqpack.Sequence, comp, pos int, at []int) {
	vb.Seqs, vb.Text = append(vb.Seqs, vision.Sequence{Pad: q.Pad}), append(vb.Text, q)
	vb.Pos, vb.At, vb.Comps = append(vb.Pos, pos), append(vb.At, at), append(vb.Comps, comp)
}

// IsText reports whether sequence i is a text component's (Text).
func (vb *VisionBatch) IsText(i int) bool { return i < len(vb.Text) && len(vb.Text[i].Pieces) > 0 }

// Served is the batch's sequences.
func (vb *VisionBatch) Served() int { return len(vb.Seqs) }

// Size is not known before the samples are read: a sequence's images are
// members of their own.
func (vb *VisionBatch) Size() (int64, bool) { return 0, false }

// Components is a vision mixture's sequences' components (nil for a
// vision job of one dataset).
func (vb *VisionBatch) Components() []int { return vb.Comps }

// visionItemsKey names a dataset version's items under a rule and seq;
// visionEpochKey an epoch of a stream packed under them.
type visionItemsKey struct {
	id, rule string
	seq      int
}

type visionEpochKey struct {
	epochKey
	rule string
	seq  int
}

// Bounds of the memoised vision layouts: items cost 24 bytes a sample,
// an epoch its sequences.
const (
	maxMemoVisionItems  = 8
	maxMemoVisionEpochs = 16
)

// visionUnit is the unit of a vision job: it makes vision jobs' items and
// packed epochs, and holds them: pure functions of their keys (and of
// the node's --on-bad-image rule, one per Orders). It reads its streams'
// epochs and windows from the base orders.
type visionUnit struct {
	base   *epochs
	asg    *assigner
	tokens *tokenUnit // a vision mixture's text components
	policy vision.Policy
	items  *lru.Cache[visionItemsKey, []vision.Item]
	epochs *lru.Cache[visionEpochKey, *vision.Epoch]
}

func newVisionUnit(base *epochs, asg *assigner, tokens *tokenUnit, policy vision.Policy) *visionUnit {
	i, _ := lru.New[visionItemsKey, []vision.Item](maxMemoVisionItems)
	e, _ := lru.New[visionEpochKey, *vision.Epoch](maxMemoVisionEpochs)
	return &visionUnit{base: base, asg: asg, tokens: tokens, policy: policy, items: i, epochs: e}
}

// SkipBadImages makes the orders' vision jobs leave a bad sample out of
// their epochs, counted, rather than fail them naming it (the server's
// --on-bad-image=skip). Called once, before the orders are used.
func (o *Orders) SkipBadImages() {
	o.units.vision = newVisionUnit(o.base, o.asg, o.units.tokens, vision.Skip)
}

func (*visionUnit) Feature() features.Feature { return features.Vision }

// View is ds's image-text samples whole, its facts loaded; in a vision
// mixture, a token dataset is a text component, read as a token job's.
func (vs *visionUnit) View(ctx context.Context, ds *catalog.Dataset, job api.Job) (*catalog.Dataset, error) {
	if len(job.Mix) > 0 && HoldsTokens(ds) {
		return vs.tokens.View(ctx, ds, job)
	}
	if _, err := ds.LoadVision(ctx); err != nil {
		return nil, err
	}
	return ds, nil
}

// Extent is the epoch's sequences.
func (vs *visionUnit) Extent(ds *catalog.Dataset, job api.Job, epoch uint64, _ *EpochOrder) (int, error) {
	ve, _, err := vs.epoch(ds, job, epoch)
	if err != nil {
		return 0, err
	}
	return ve.NumSequences(), nil
}

// AppendKey names a token job's parameters (tokenUnit.AppendKey) and the
// job's rule.
func (*visionUnit) AppendKey(s []byte, job api.Job) []byte {
	return fmt.Appendf((*tokenUnit)(nil).AppendKey(s, job), "|vision=%s", job.Vision)
}

// Describe adds the epoch's sequences to /epoch/N, as a token job's.
func (vs *visionUnit) Describe(info *api.EpochInfo, ds *catalog.Dataset, job api.Job, epoch uint64) error {
	ve, items, err := vs.epoch(ds, job, epoch)
	if err != nil {
		return err
	}
	info.Tokens = visionInfo(ve, items, job)
	return nil
}

// visionOf is a vision job's rule and its dataset's facts.
func visionOf(ds *catalog.Dataset, job api.Job) (vision.Rule, *catalog.Vision, error) {
	r, err := vision.ParseRule(job.Vision)
	if err != nil {
		return vision.Rule{}, nil, fmt.Errorf("%w: %w", ErrVision, err)
	}
	if job.PackMode() != api.PackBestFit || job.EOSSet {
		return vision.Rule{}, nil, fmt.Errorf("%w: a vision job packs whole samples best fit, never cut: pack=concat and eos= do not apply", ErrVision)
	}
	v := ds.Vision()
	if v == nil {
		return vision.Rule{}, nil, fmt.Errorf("%w: dataset %s's image-text facts are not loaded (catalog.Dataset.LoadVision)", ErrVision, ds.Name)
	}
	return r, v, nil
}

// itemsOf is every sample's item of ds under rule and seq, under the
// node's policy: a bad sample fails it naming the sample, or is an item
// of no tokens (in no sequence).
func (vs *visionUnit) itemsOf(ds *catalog.Dataset, v *catalog.Vision, job api.Job, r vision.Rule) ([]vision.Item, error) {
	k := visionItemsKey{ds.ID(), job.Vision, job.Seq}
	if items, ok := vs.items.Get(k); ok {
		return items, nil
	}
	facts := v.Facts.Samples
	items, _, err := r.Items(func(id int) vision.Facts { return facts[id] }, ds.Index.SampleKey, len(facts), job.Seq, vs.policy)
	if err != nil {
		return nil, err
	}
	vs.items.Add(k, items)
	return items, nil
}

// epoch is epoch epoch of a vision job over ds, packed once per
// (dataset version, seed, window, epoch, rule, seq) and kept, with the
// epoch's items.
func (vs *visionUnit) epoch(ds *catalog.Dataset, job api.Job, epoch uint64) (*vision.Epoch, []vision.Item, error) {
	return vs.epochOf(StreamOf(ds, job), job, epoch)
}

// epochOf is epoch of stream s: a vision job's, or a vision
// mixture's image-text component's.
func (vs *visionUnit) epochOf(s Stream, job api.Job, epoch uint64) (*vision.Epoch, []vision.Item, error) {
	r, v, err := visionOf(s.DS, job)
	if err != nil {
		return nil, nil, err
	}
	return vs.packed(s, job, epoch, r, v)
}

// packed is epochOf of a job whose rule r and facts v are read already
// (visionOf).
func (vs *visionUnit) packed(s Stream, job api.Job, epoch uint64, r vision.Rule, v *catalog.Vision) (*vision.Epoch, []vision.Item, error) {
	items, err := vs.itemsOf(s.DS, v, job, r)
	if err != nil {
		return nil, nil, err
	}
	e, err := vs.base.epoch(s, epoch)
	if err != nil {
		return nil, nil, err
	}
	k := visionEpochKey{epochKey{s.Order(), epoch}, job.Vision, job.Seq}
	if ve, ok := vs.epochs.Get(k); ok {
		return ve, items, nil
	}
	ve, err := vision.NewEpoch(windows{vs.base, s.Order(), epoch, e}, func(id int) vision.Item { return items[id] }, job.Seq, r.MaxImages, s.Seed, epoch)
	if err != nil {
		return nil, nil, fmt.Errorf("%w: %w", ErrVision, err)
	}
	vs.epochs.Add(k, ve)
	return ve, items, nil
}

// Lay lays out batch b of a vision job: the rank's sequences of the
// epoch (the plain cut, or under balance= its share of the global batch:
// Balanced), and one part reading the samples they hold, each once.
func (vs *visionUnit) Lay(ctx context.Context, b *Batch, _ *EpochOrder) error {
	s := StreamOf(b.DS, b.Job)
	r, v, err := visionOf(b.DS, b.Job)
	if err != nil {
		return err
	}
	ve, items, err := vs.packed(s, b.Job, b.Epoch, r, v)
	if err != nil {
		return err
	}
	pos, bal, err := vs.sequencesOf(b.Source, ve, items, b.Epoch, b.Job, b.EpochSamples, b.Batch, b.Start, b.End, b.global)
	if err != nil {
		return err
	}
	b.Balanced = bal
	start, end := b.Start, b.End // what the stream is followed at: a balanced rank's, its global batch
	if bal != nil {
		if _, start, end, err = globalBatch(b.Job, b.EpochSamples, int(b.Batch)); err != nil {
			return err
		}
	}
	vb := newVisionBatch(r, v, b.Job, items)
	vb.Pos = pos
	var ids []int
	for _, p := range pos {
		q := ve.Sequence(p)
		at := make([]int, len(q.Samples))
		for i, id := range q.Samples {
			at[i] = len(ids) // a sample is in one sequence of its epoch
			ids = append(ids, id)
		}
		vb.Seqs, vb.At = append(vb.Seqs, q), append(vb.At, at)
	}
	smp, err := NewSamples(ctx, b.DS, ids)
	if err != nil {
		return err
	}
	// The use table follows the stream at the samples' positions, which
	// the sequences' positions scale to (sequences are permuted within
	// their window, so this is the window's extent, not the samples').
	n, m := s.DS.Index.NumSamples(), max(1, ve.NumSequences())
	first, last := int(int64(start)*int64(n)/int64(m)), int(int64(end)*int64(n)/int64(m))
	global := b.Job.BatchSize * b.Job.World
	share := max(1, int(int64(global)*int64(n)/int64(m)))
	b.Parts = []Part{{Stream: s, Epoch: b.Epoch, Samples: smp, First: first, End: max(last, first), Share: share, EpochLen: n}}
	b.Take = make([]Take, len(ids))
	for i := range b.Take {
		b.Take[i].At = i
	}
	b.Content = vb
	return nil
}

// sequencesOf is the positions in vision epoch ve (n sequences) of the
// sequences job's rank takes of batch m: its plain cut's, or its
// balanced share of the global batch named key (each sequence weighed by
// visionCost).
func (vs *visionUnit) sequencesOf(src Source, ve *vision.Epoch, items []vision.Item, epoch uint64, job api.Job, n int, m uint64, start, end int, key string) ([]int, *Balanced, error) {
	if src.assignment(job) == plainCut {
		return span(start, end-start), nil, nil
	}
	shares, gstart, gend, err := globalBatch(job, n, int(m))
	if err != nil {
		return nil, nil, err
	}
	places, info, err := vs.asg.places(src, job, epoch, m, key, global{shares: shares,
		costs: func() ([]uint64, error) {
			costs := make([]uint64, gend-gstart)
			for i := range costs {
				costs[i] = visionCost(job.Balance, ve.Sequence(gstart+i), items)
			}
			return costs, nil
		}})
	if err != nil {
		return nil, nil, err
	}
	pos := make([]int, len(places))
	for k, at := range places {
		pos[k] = gstart + at
	}
	return pos, info, nil
}

// newVisionBatch is an empty vision batch of a job of rule r over a
// dataset of facts v and items.
func newVisionBatch(r vision.Rule, v *catalog.Vision, job api.Job, items []vision.Item) *VisionBatch {
	return &VisionBatch{
		Reader: &vision.Reader{Rule: r, Encoder: v.Model, MaxPixels: v.Facts.MaxPixels},
		Writer: &vision.Writer{Seq: job.Seq, Pad: int32(job.Pad), Images: transform.Options{MaxPixels: v.Facts.MaxPixels}},
		Items:  items,
	}
}

// visionComponent is the image-text dataset of a vision mixture: its
// passes are its stream's vision epochs under the job's rule and seq,
// each the vision job's own epoch of that stream.
type visionComponent struct {
	vs  *visionUnit
	job api.Job
	r   vision.Rule
	v   *catalog.Vision
	ds  *catalog.Dataset
}

// component is ds as a vision mixture's image-text component of
// job: its facts loaded (catalog.Dataset.LoadVision), its rule parsed.
func (vs *visionUnit) component(ds *catalog.Dataset, job api.Job) (*visionComponent, error) {
	r, v, err := visionOf(ds, job)
	if err != nil {
		return nil, err
	}
	return &visionComponent{vs: vs, job: job, r: r, v: v, ds: ds}, nil
}

// unit is an empty batch of the mixture: a vision batch whose text
// components' tokens are of dtypes (per component).
func (c *visionComponent) unit(dtypes []string) (Content, error) {
	items, err := c.vs.itemsOf(c.ds, c.v, c.job, c.r)
	if err != nil {
		return nil, err
	}
	vb := newVisionBatch(c.r, c.v, c.job, items)
	vb.Text, vb.Comps, vb.DTypes = []seqpack.Sequence{}, []int{}, dtypes
	return vb, nil
}

func (c *visionComponent) pass(s Stream, p uint64) (packedPass, error) {
	ve, _, err := c.vs.epochOf(s, c.job, p)
	if err != nil {
		return nil, err
	}
	return visionPass{e: ve, docs: s.DS.Index.NumSamples()}, nil
}

// visionPass is the image-text component's vision epoch.
type visionPass struct {
	e    *vision.Epoch
	docs int // the samples of its order
}

func (p visionPass) NumSequences() int { return p.e.NumSequences() }
func (p visionPass) numDocs() int      { return p.docs }

// docPosition scales a sequence's position to the order's samples, as
// a vision job's batch does: sequences are permuted within their
// window, so this is the window's extent.
func (p visionPass) docPosition(i int) int {
	return int(int64(i) * int64(p.docs) / int64(max(1, p.e.NumSequences())))
}

func (p visionPass) sequence(i int) packedSequence { return visionSequence(p.e.Sequence(i)) }

// visionSequence is an image-text component's sequence of whole samples.
type visionSequence vision.Sequence

func (q visionSequence) docs() []int { return q.Samples }

func (q visionSequence) addTo(u Content, comp, pos int, at []int) error {
	vb, ok := u.(*VisionBatch)
	if !ok {
		return fmt.Errorf("layout: an image-text sequence in a batch of %T", u)
	}
	vb.Seqs, vb.Text = append(vb.Seqs, vision.Sequence(q)), append(vb.Text, seqpack.Sequence{})
	vb.Pos, vb.At, vb.Comps = append(vb.Pos, pos), append(vb.At, at), append(vb.Comps, comp)
	return nil
}

// visionInfo describes a vision epoch in /epoch/N: as a token job's,
// with its documents the samples in its sequences.
func visionInfo(ve *vision.Epoch, items []vision.Item, job api.Job) *api.TokenInfo {
	ti := &api.TokenInfo{Seq: job.Seq, Pack: api.PackBestFit, Pad: job.Pad}
	for i := range ve.NumSequences() {
		for _, id := range ve.Sequence(i).Samples {
			ti.Documents++
			ti.Tokens += int64(items[id].Tokens)
		}
	}
	if n := ve.NumSequences(); n > 0 {
		ti.Fill = float64(ti.Tokens) / (float64(n) * float64(job.Seq))
	}
	return ti
}

// VisionLoad is what a vision epoch's ranks carry of its images: the
// whole epoch's images and vision tokens (as /epoch/N counts its
// tokens), and per full global batch (from the job's offset; a last
// one of fewer sequences, whose ranks' counts differ, is left out) each
// rank's vision tokens, under the job's assignment (its balance=, or the plain
// cut: Ranks) and under the plain cut (Plain). It is what the epoch's
// batches serve, rank by rank, computed as their layouts compute it
// (the same assignment, memoised alike); /plan reports it.
type VisionLoad struct {
	Images       int
	VisionTokens int64
	Ranks, Plain [][]uint64 // per global batch, per rank
}

// VisionLoad is epoch epoch's VisionLoad of a vision job over src. It
// reads no sample: the epoch is a pure function of the dataset's facts
// and the job.
func (o *Orders) VisionLoad(src Source, job api.Job, epoch uint64) (*VisionLoad, error) {
	vs := o.units.vision
	ve, items, err := vs.epoch(src.DS, job, epoch)
	if err != nil {
		return nil, err
	}
	n := ve.NumSequences()
	if job.Offset > n {
		return nil, fmt.Errorf("%w: offset %d is past the end of epoch %d, which has %d sequences", ErrOutOfRange, job.Offset, epoch, n)
	}
	vl := &VisionLoad{}
	for p := range n {
		for _, id := range ve.Sequence(p).Samples {
			vl.Images += items[id].Images
			vl.VisionTokens += int64(items[id].Vision)
		}
	}
	tokens := func(pos []int) uint64 {
		var c uint64
		for _, p := range pos {
			for _, id := range ve.Sequence(p).Samples {
				c += uint64(items[id].Vision)
			}
		}
		return c
	}
	for m := range job.NumBatches(n) {
		gstart, gend, err := job.GlobalBatch(n, m)
		if err != nil {
			return nil, err
		}
		if gend-gstart < job.BatchSize*job.World {
			break // the last, partial
		}
		ranks, plain := make([]uint64, job.World), make([]uint64, job.World)
		for r := range job.World {
			j := job
			j.Rank = r
			start, end, err := j.BatchRange(n, m)
			if err != nil {
				return nil, err
			}
			var key string
			if src.assignment(j) != plainCut {
				r0 := j
				r0.Rank = 0
				key = o.ETag(src, r0, epoch, uint64(m))
			}
			pos, _, err := vs.sequencesOf(src, ve, items, epoch, j, n, uint64(m), start, end, key)
			if err != nil {
				return nil, err
			}
			ranks[r], plain[r] = tokens(pos), tokens(span(start, end-start))
		}
		vl.Ranks, vl.Plain = append(vl.Ranks, ranks), append(vl.Plain, plain)
	}
	return vl, nil
}
