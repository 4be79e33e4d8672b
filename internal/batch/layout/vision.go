package layout

import (
	"context"
	"fmt"

	lru "github.com/hashicorp/golang-lru/v2"

	"github.com/brandgw/brand/api"
	"github.com/brandgw/brand/internal/job/catalog"
	"github.com/brandgw/brand/internal/job/query"
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
	At    [][]int // per sequence, per sample: its position in Take
	Items []vision.Item
}

// Served is the batch's sequences.
func (vb *VisionBatch) Served() int { return len(vb.Seqs) }

// Size is not known before the samples are read: a sequence's images are
// members of their own.
func (vb *VisionBatch) Size() (int64, bool) { return 0, false }

// Components is nil: a vision job reads one dataset.
func (vb *VisionBatch) Components() []int { return nil }

// Vision is a vision job's batch's sequences, nil for another batch.
func (b *Batch) Vision() *VisionBatch {
	v, _ := b.Unit.(*VisionBatch)
	return v
}

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

// visionMemo holds vision jobs' items and packed epochs: pure functions
// of their keys (and of the node's --on-bad-image rule, one per Orders).
type visionMemo struct {
	policy vision.Policy
	items  *lru.Cache[visionItemsKey, []vision.Item]
	epochs *lru.Cache[visionEpochKey, *vision.Epoch]
}

func newVisionMemo(policy vision.Policy) *visionMemo {
	i, _ := lru.New[visionItemsKey, []vision.Item](maxMemoVisionItems)
	e, _ := lru.New[visionEpochKey, *vision.Epoch](maxMemoVisionEpochs)
	return &visionMemo{policy: policy, items: i, epochs: e}
}

// SkipBadImages makes the orders' vision jobs leave a bad sample out of
// their epochs, counted, rather than fail them naming it (the server's
// --on-bad-image=skip). Called once, before the orders are used.
func (o *Orders) SkipBadImages() { o.vision = newVisionMemo(vision.Skip) }

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

// visionItems is every sample's item of ds under rule and seq, under the
// node's policy: a bad sample fails it naming the sample, or is an item
// of no tokens (in no sequence).
func (o *Orders) visionItems(ds *catalog.Dataset, v *catalog.Vision, job api.Job, r vision.Rule) ([]vision.Item, error) {
	k := visionItemsKey{ds.ID(), job.Vision, job.Seq}
	if items, ok := o.vision.items.Get(k); ok {
		return items, nil
	}
	facts := v.Facts.Samples
	items, _, err := r.Items(func(id int) vision.Facts { return facts[id] }, ds.Index.SampleKey, len(facts), job.Seq, o.vision.policy)
	if err != nil {
		return nil, err
	}
	o.vision.items.Add(k, items)
	return items, nil
}

// visionEpoch is epoch epoch of a vision job over ds, packed once per
// (dataset version, seed, window, epoch, rule, seq) and kept, with the
// epoch's items.
func (o *Orders) visionEpoch(ds *catalog.Dataset, job api.Job, epoch uint64) (*vision.Epoch, []vision.Item, error) {
	r, v, err := visionOf(ds, job)
	if err != nil {
		return nil, nil, err
	}
	items, err := o.visionItems(ds, v, job, r)
	if err != nil {
		return nil, nil, err
	}
	s := StreamOf(ds, job)
	e, err := o.Epoch(s, epoch)
	if err != nil {
		return nil, nil, err
	}
	k := visionEpochKey{epochKey{s.Order(), epoch}, job.Vision, job.Seq}
	if ve, ok := o.vision.epochs.Get(k); ok {
		return ve, items, nil
	}
	ve, err := vision.NewEpoch(windows{o, s.Order(), epoch, e}, func(id int) vision.Item { return items[id] }, job.Seq, r.MaxImages, s.Seed, epoch)
	if err != nil {
		return nil, nil, fmt.Errorf("%w: %w", ErrVision, err)
	}
	o.vision.epochs.Add(k, ve)
	return ve, items, nil
}

// layoutVision lays out batch b of a vision job: the rank's sequences
// of the epoch (the plain cut, or under balance= its share of the global
// batch: Balanced), and one part reading the samples they hold, each
// once.
func (o *Orders) layoutVision(ctx context.Context, b *Batch, s Stream) error {
	ve, items, err := o.visionEpoch(b.DS, b.Job, b.Epoch)
	if err != nil {
		return err
	}
	r, v, err := visionOf(b.DS, b.Job)
	if err != nil {
		return err
	}
	pos, bal, err := o.asg.visionSequences(b.Source, ve, items, b.Epoch, b.Job, b.EpochSamples, b.Batch, b.Start, b.End)
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
	vb := &VisionBatch{
		Reader: &vision.Reader{Rule: r, Encoder: v.Model, MaxPixels: v.Facts.MaxPixels},
		Writer: &vision.Writer{Seq: b.Job.Seq, Pad: int32(b.Job.Pad), Images: transform.Options{MaxPixels: v.Facts.MaxPixels}},
		Items:  items,
		Pos:    pos,
	}
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
	b.Parts = []Part{{Stream: s, Epoch: b.Epoch, Samples: smp, First: first, End: max(last, first), Share: share}}
	b.Take = make([]Take, len(ids))
	for i := range b.Take {
		b.Take[i].At = i
	}
	b.Unit = vb
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
// one of fewer sequences, whose ranks' counts differ, is left out) each rank's
// vision tokens, under the job's assignment (its balance=, or the plain
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
	ve, items, err := o.visionEpoch(src.DS, job, epoch)
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
		if start, end, err := job.GlobalBatch(n, m); err != nil || end-start < job.BatchSize*job.World {
			break // the last, partial (or an error, which BatchRange answers below)
		}
		ranks, plain := make([]uint64, job.World), make([]uint64, job.World)
		for r := range job.World {
			j := job
			j.Rank = r
			start, end, err := j.BatchRange(n, m)
			if err != nil {
				return nil, err
			}
			pos, _, err := o.asg.visionSequences(src, ve, items, epoch, j, n, uint64(m), start, end)
			if err != nil {
				return nil, err
			}
			ranks[r], plain[r] = tokens(pos), tokens(span(start, end-start))
		}
		vl.Ranks, vl.Plain = append(vl.Ranks, ranks), append(vl.Plain, plain)
	}
	return vl, nil
}
