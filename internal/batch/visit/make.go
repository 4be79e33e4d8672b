package visit

import (
	"context"

	"github.com/brandgw/brand/internal/batch/layout"
	"github.com/brandgw/brand/internal/batch/reader"
)

// A maker is the stage that makes the bytes of a batch whose content is
// not the samples it reads (layout.Content): the pack stage of a token
// job's sequences, the vision pack stage, the clip stage. One maker per
// kind of content, found by makerOf; the rest of the visit works on any
// batch alike.
type maker interface {
	// make makes batch b's bytes from its read res (released when it
	// returns). premade: the batch is made ahead of its request, and
	// takes no memory it would wait for.
	make(ctx context.Context, v *Batches, b *layout.Batch, res *reader.Result, premade bool) (*Served, error)
	// premade reports whether the content's next batch is made before
	// it is asked for (its stage's work is worth starting early).
	premade() bool
}

// makerOf is the maker of b's content, nil for samples as stored (served
// as read, or through the job's pipeline): the one place the visit takes
// a batch's kind.
func makerOf(b *layout.Batch) maker {
	switch c := b.Content.(type) {
	case *layout.TokenBatch:
		return tokenMaker{c}
	case *layout.VisionBatch:
		return visionMaker{c}
	case *layout.ClipBatch:
		return clipMaker{c}
	}
	return nil
}

type tokenMaker struct{ c *layout.TokenBatch }

func (m tokenMaker) make(ctx context.Context, v *Batches, b *layout.Batch, res *reader.Result, premade bool) (*Served, error) {
	return v.pack(ctx, b, m.c, res, premade)
}

// premade is as for a job of samples: a token job's pipeline is none.
func (tokenMaker) premade() bool { return false }

type visionMaker struct{ c *layout.VisionBatch }

func (m visionMaker) make(ctx context.Context, v *Batches, b *layout.Batch, res *reader.Result, premade bool) (*Served, error) {
	return v.packVision(ctx, b, m.c, res, premade)
}

func (visionMaker) premade() bool { return false }

type clipMaker struct{ c *layout.ClipBatch }

func (m clipMaker) make(ctx context.Context, v *Batches, b *layout.Batch, res *reader.Result, premade bool) (*Served, error) {
	return v.clip(ctx, b, m.c, res, premade)
}

// premade: a clip's frames are decoded, worth starting before the
// request.
func (clipMaker) premade() bool { return true }
