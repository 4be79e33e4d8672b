package visit

import (
	"context"
	"errors"

	"github.com/brandgw/brand/internal/batch/layout"
	"github.com/brandgw/brand/internal/batch/reader"
	"github.com/brandgw/brand/internal/batch/sequences"
)

// Packer writes a token batch's sequences from its documents, or a
// vision batch's from its image-text samples (sequences.Stage): the
// stage between read and respond for a job that packs sequences (seq=).
type Packer interface {
	Pack(ctx context.Context, req sequences.Request) (*sequences.Output, error)
	PackVision(ctx context.Context, req sequences.VisionRequest) (*sequences.Output, error)
}

// pack writes token batch b's sequences from its documents, read as res.
// A sequence that needs a document of a chunk damaged at rest (skip
// mode) is left out and named (layout.TokenBatch.Without). The read's
// pins go back once the sequences are written, before any is sent.
// noWait: a premade batch, which takes no memory it would wait for.
func (v *Batches) pack(ctx context.Context, b *layout.Batch, old *layout.TokenBatch, res *reader.Result, noWait bool) (*Served, error) {
	defer res.Release()
	nb, tb := old.Without(b, res.MissingPos)
	docs := make([][]byte, b.Reads())
	names := make([]string, b.Reads())
	for i, j, m := 0, 0, 0; i < b.Reads(); i++ {
		t := b.Take[i]
		names[i] = b.Parts[t.Part].Samples.Info[t.At].Key
		if m < len(res.MissingPos) && res.MissingPos[m] == i {
			m++
			continue
		}
		docs[i] = res.Parts[j]
		j++
	}
	keys := make([]string, len(tb.Seqs))
	for i, k := 0, 0; i < b.Len(); i++ {
		if k < len(nb.Missing) && nb.Missing[k] == i {
			k++
			continue
		}
		keys[i-k] = sequences.Key(b.Epoch, old.Pos[i])
	}
	spec := tb.Spec
	out, err := v.packer.Pack(ctx, sequences.Request{Spec: sequences.Spec{Seq: spec.Pack.Seq, Pad: spec.Pad, EOS: spec.EOS, DType: spec.DType},
		Keys: keys, Seqs: tb.Seqs, At: tb.At, Docs: docs, Names: names, Split: tb.Split, NoWait: noWait})
	if err != nil {
		return nil, err
	}
	r := reader.Owned(out.Parts, out.Bytes, out.Release)
	r.Figures, r.PerPart, r.MissingPos = res.Figures, res.PerPart, nb.Missing
	return &Served{Batch: nb, Result: r}, nil
}

// noPacker is the packer of Batches built without one: a token job is
// refused.
type noPacker struct{}

var errNoPacker = errors.New("visit: no pack stage")

func (noPacker) Pack(context.Context, sequences.Request) (*sequences.Output, error) {
	return nil, errNoPacker
}

func (noPacker) PackVision(context.Context, sequences.VisionRequest) (*sequences.Output, error) {
	return nil, errNoPacker
}
