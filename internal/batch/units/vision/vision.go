// Package vision is the unit of a vision job (vision=, with seq=): a
// token job whose samples are image-text pairs. Its epoch is package
// vision's (whole samples packed best fit per window, vision.NewEpoch)
// from each sample's item under the job's rule, made from the dataset's
// image-text facts (catalog.Vision, written beside the index by `brand
// index --tokenizer`) as a text token job's packing is made from its
// index's document token counts. Its batch reads the samples its
// sequences hold, each once, as ordinary samples; the pack stage writes
// the sequences from them with vision.Writer (Make). It mixes with text
// token datasets (a VLM mixing pure text in): a vision mixture's text
// components are the token unit's.
package vision

import (
	"context"
	"fmt"

	lru "github.com/hashicorp/golang-lru/v2"
	"github.com/rs/zerolog"

	"github.com/brandgw/brand/api"
	"github.com/brandgw/brand/internal/batch/layout"
	"github.com/brandgw/brand/internal/batch/units/tokens"
	"github.com/brandgw/brand/internal/job/catalog"
	"github.com/brandgw/brand/internal/job/features"
	"github.com/brandgw/brand/internal/job/query"
	"github.com/brandgw/brand/seqpack"
	"github.com/brandgw/brand/transform"
	"github.com/brandgw/brand/vision"
)

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
	s     layout.Stream // its Order
	epoch uint64
	rule  string
	seq   int
}

// Bounds of the memoised vision layouts: items cost 24 bytes a sample,
// an epoch its sequences.
const (
	maxMemoVisionItems  = 8
	maxMemoVisionEpochs = 16
)

// Unit is the unit of a vision job: it makes vision jobs' items and
// packed epochs, and holds them: pure functions of their keys (and of
// the node's --on-bad-image rule). It reads its streams' epochs and
// windows from the base orders. Safe for concurrent use.
type Unit struct {
	base   layout.Base
	tokens *tokens.Unit // a vision mixture's text components
	cfg    Config
	items  *lru.Cache[visionItemsKey, []vision.Item]
	epochs *lru.Cache[visionEpochKey, *vision.Epoch]
}

// Config is what the node gives the unit.
type Config struct {
	// Stage writes vision batches' sequences (sequences.Stage; nil: a
	// vision batch fails, naming the missing stage).
	Stage Stage
	// SkipBadImages leaves a bad sample out of a vision job's epochs,
	// counted, rather than fail them naming it, and out of its sequence
	// when its pixels do not decode (the server's --on-bad-image=skip).
	SkipBadImages bool
	Log           zerolog.Logger
}

// New returns the unit over the orders' base b, whose vision mixtures'
// text components are tok's.
func New(b layout.Base, tok *tokens.Unit, cfg Config) *Unit {
	i, _ := lru.New[visionItemsKey, []vision.Item](maxMemoVisionItems)
	e, _ := lru.New[visionEpochKey, *vision.Epoch](maxMemoVisionEpochs)
	if cfg.Stage == nil {
		cfg.Stage = noStage{}
	}
	return &Unit{base: b, tokens: tok, cfg: cfg, items: i, epochs: e}
}

// policy is the unit's rule for a sample whose image is bad.
func (vs *Unit) policy() vision.Policy {
	if vs.cfg.SkipBadImages {
		return vision.Skip
	}
	return vision.Fail
}

func (*Unit) Feature() features.Feature { return features.Vision }

// View is ds's image-text samples whole, its facts loaded; in a vision
// mixture, a token dataset is a text component, read as a token job's.
func (vs *Unit) View(ctx context.Context, ds *catalog.Dataset, job api.Job) (*catalog.Dataset, error) {
	if len(job.Mix) > 0 && tokens.Holds(ds) {
		return vs.tokens.View(ctx, ds, job)
	}
	if _, err := ds.LoadVision(ctx); err != nil {
		return nil, err
	}
	return ds, nil
}

// Extent is the epoch's sequences.
func (vs *Unit) Extent(src layout.Source, job api.Job, epoch uint64) (int, error) {
	ve, _, err := vs.Epoch(src.DS, job, epoch)
	if err != nil {
		return 0, err
	}
	return ve.NumSequences(), nil
}

// AppendKey names a token job's parameters (tokenUnit.AppendKey) and the
// job's rule.
func (*Unit) AppendKey(s []byte, job api.Job) []byte {
	return fmt.Appendf((*tokens.Unit)(nil).AppendKey(s, job), "|vision=%s", job.Vision)
}

// Describe adds the epoch's sequences to /epoch/N, as a token job's.
func (vs *Unit) Describe(info *api.EpochInfo, src layout.Source, job api.Job, epoch uint64) error {
	ve, items, err := vs.Epoch(src.DS, job, epoch)
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
func (vs *Unit) itemsOf(ds *catalog.Dataset, v *catalog.Vision, job api.Job, r vision.Rule) ([]vision.Item, error) {
	k := visionItemsKey{ds.ID(), job.Vision, job.Seq}
	if items, ok := vs.items.Get(k); ok {
		return items, nil
	}
	facts := v.Facts.Samples
	items, _, err := r.Items(func(id int) vision.Facts { return facts[id] }, ds.Index.SampleKey, len(facts), job.Seq, vs.policy())
	if err != nil {
		return nil, err
	}
	vs.items.Add(k, items)
	return items, nil
}

// Epoch is epoch epoch of a vision job over ds, packed once per
// (dataset version, seed, window, epoch, rule, seq) and kept, with the
// epoch's items.
func (vs *Unit) Epoch(ds *catalog.Dataset, job api.Job, epoch uint64) (*vision.Epoch, []vision.Item, error) {
	return vs.epochOf(layout.StreamOf(ds, job), job, epoch)
}

// epochOf is epoch of stream s: a vision job's, or a vision
// mixture's image-text component's.
func (vs *Unit) epochOf(s layout.Stream, job api.Job, epoch uint64) (*vision.Epoch, []vision.Item, error) {
	r, v, err := visionOf(s.DS, job)
	if err != nil {
		return nil, nil, err
	}
	return vs.packed(s, job, epoch, r, v)
}

// packed is epochOf of a job whose rule r and facts v are read already
// (visionOf).
func (vs *Unit) packed(s layout.Stream, job api.Job, epoch uint64, r vision.Rule, v *catalog.Vision) (*vision.Epoch, []vision.Item, error) {
	items, err := vs.itemsOf(s.DS, v, job, r)
	if err != nil {
		return nil, nil, err
	}
	e, err := vs.base.Epoch(s, epoch)
	if err != nil {
		return nil, nil, err
	}
	k := visionEpochKey{s.Order(), epoch, job.Vision, job.Seq}
	if ve, ok := vs.epochs.Get(k); ok {
		return ve, items, nil
	}
	ve, err := vision.NewEpoch(tokens.Windows{Base: vs.base, S: s.Order(), Epoch: epoch, E: e}, func(id int) vision.Item { return items[id] }, job.Seq, r.MaxImages, s.Seed, epoch)
	if err != nil {
		return nil, nil, fmt.Errorf("%w: %w", ErrVision, err)
	}
	vs.epochs.Add(k, ve)
	return ve, items, nil
}

// Lay lays out batch b of a vision job: the rank's sequences of the
// epoch (the plain cut, or under balance= its share of the global batch:
// Balanced), and one part reading the samples they hold, each once.
func (vs *Unit) Lay(ctx context.Context, b *layout.Batch) error {
	s := layout.StreamOf(b.DS, b.Job)
	r, v, err := visionOf(b.DS, b.Job)
	if err != nil {
		return err
	}
	ve, items, err := vs.packed(s, b.Job, b.Epoch, r, v)
	if err != nil {
		return err
	}
	pos, bal, err := vs.sequencesOf(b, ve, items)
	if err != nil {
		return err
	}
	b.Balanced = bal
	start, end := b.Start, b.End // what the stream is followed at: a balanced rank's, its global batch
	if bal != nil {
		if _, start, end, err = layout.GlobalBatch(b.Job, b.EpochSamples, int(b.Batch)); err != nil {
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
	smp, err := layout.NewSamples(ctx, b.DS, ids)
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
	b.Parts = []layout.Part{{Stream: s, Epoch: b.Epoch, Samples: smp, First: first, End: max(last, first), Share: share, EpochLen: n}}
	b.Take = layout.TakeAll(len(ids))
	b.Content = vb
	return nil
}

// sequencesOf is the positions in vision epoch ve of the sequences
// batch b's rank takes: its plain cut's, or its balanced share of the
// global batch (each sequence weighed by Cost).
func (vs *Unit) sequencesOf(b *layout.Batch, ve *vision.Epoch, items []vision.Item) ([]int, *layout.Balanced, error) {
	job := b.Job
	if b.Assignment(job) == api.AssignPlain {
		return layout.Span(b.Start, b.End-b.Start), nil, nil
	}
	shares, gstart, gend, err := layout.GlobalBatch(job, b.EpochSamples, int(b.Batch))
	if err != nil {
		return nil, nil, err
	}
	places, info, err := vs.base.Assign(b, layout.Global{Shares: shares,
		Costs: func() ([]uint64, error) {
			costs := make([]uint64, gend-gstart)
			for i := range costs {
				costs[i] = Cost(job.Balance, ve.Sequence(gstart+i), items)
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

// Cost is a vision sequence's cost under kind: its attention and its
// encoder's (vision.Cost), its tokens (text and vision, the pad
// excluded), or its vision tokens alone (the encoder's inputs).
func Cost(kind string, q vision.Sequence, items []vision.Item) uint64 {
	if kind == api.BalanceAttention {
		return vision.Cost(q, items)
	}
	var c uint64
	for _, id := range q.Samples {
		if kind == api.BalanceVision {
			c += uint64(items[id].Vision)
		} else {
			c += uint64(items[id].Tokens)
		}
	}
	return c
}
