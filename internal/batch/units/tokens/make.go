package tokens

import (
	"context"
	"errors"

	"github.com/brandgw/brand/internal/batch/layout"
	"github.com/brandgw/brand/internal/batch/reader"
	"github.com/brandgw/brand/internal/batch/sequences"
	"github.com/brandgw/brand/internal/batch/visit"
)

// Stage writes a token batch's sequences from its documents
// (sequences.Stage): the stage between read and respond for a token job.
type Stage interface {
	Pack(ctx context.Context, req sequences.Request) (*sequences.Output, error)
}

// noStage is the stage of a unit made without one: a token batch fails.
type noStage struct{}

var errNoStage = errors.New("tokens: no pack stage")

func (noStage) Pack(context.Context, sequences.Request) (*sequences.Output, error) {
	return nil, errNoStage
}

// Premakes is false, as for a job of samples: a token job's pipeline is
// none.
func (*Unit) Premakes() bool { return false }

// Make writes token batch b's sequences from its documents, read as res
// (visit.Maker). A sequence that needs a document of a chunk damaged at
// rest (skip mode) is left out and named (TokenBatch.Without). The
// read's pins go back once the sequences are written, before any is
// sent. noWait: a premade batch, which takes no memory it would wait
// for.
func (u *Unit) Make(ctx context.Context, b *layout.Batch, res *reader.Result, noWait bool) (*visit.Served, error) {
	return Pack(ctx, u.stage, b, res, noWait)
}

// Pack is Make of a batch whose content is a TokenBatch (a token job's,
// a token mixture's), through stage.
func Pack(ctx context.Context, stage Stage, b *layout.Batch, res *reader.Result, noWait bool) (*visit.Served, error) {
	defer res.Release()
	old := b.Content.(*TokenBatch)
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
	out, err := stage.Pack(ctx, sequences.Request{Spec: sequences.Spec{Seq: spec.Pack.Seq, Pad: spec.Pad, EOS: spec.EOS, DType: spec.DType},
		Keys: keys, Seqs: tb.Seqs, At: tb.At, Docs: docs, Names: names, Split: tb.Split, NoWait: noWait})
	if err != nil {
		return nil, err
	}
	r := reader.Owned(out.Parts, out.Bytes, out.Release)
	r.Figures, r.PerPart, r.MissingPos = res.Figures, res.PerPart, nb.Missing
	return &visit.Served{Batch: nb, Result: r}, nil
}
