package visit

import (
	"context"

	"github.com/brandgw/brand/internal/batch/layout"
	"github.com/brandgw/brand/internal/batch/reader"
)

// A Maker is a unit whose batches' bytes are made from what they read by
// a stage of its own, when its content is not the samples it reads
// (layout.Content): a token job's sequences by the pack stage, a clip
// job's clips by the clip stage. It is asked of the batch's unit
// (layout.As, through a mixture to the unit of its items) in one place,
// makerOf; the rest of the visit works on any batch alike.
type Maker interface {
	// Make makes batch b's bytes from its read res (released when it
	// returns). noWait: the batch is made ahead of its request, and
	// takes no memory it would wait for.
	Make(ctx context.Context, b *layout.Batch, res *reader.Result, noWait bool) (*Served, error)
	// Premakes reports whether a job's next batch is made before it is
	// asked for (its stage's work is worth starting early).
	Premakes() bool
}

// A Chooser is a unit whose batches are made by one maker or another by
// the kind of sample they hold (a bucket job's images served through
// their bucket's pipeline, its clips decoded by the clip stage): it names
// each batch's maker, nil for one that serves the samples it reads.
type Chooser interface {
	MakerOf(b *layout.Batch) Maker
}

// makerOf is the maker of b's bytes, nil for samples as stored (served
// as read, or through the job's pipeline): the one place the visit takes
// a batch's kind, from its unit.
func makerOf(b *layout.Batch) Maker {
	if c, ok := layout.As[Chooser](b.Unit); ok {
		return c.MakerOf(b)
	}
	mk, _ := layout.As[Maker](b.Unit)
	return mk
}

// premakes reports whether b's job has its next batch made before its
// request: a job whose samples are transformed (transform=), or whose
// unit's stage is worth starting early (a clip job's decoding).
func premakes(b *layout.Batch) bool {
	if mk := makerOf(b); mk != nil {
		return mk.Premakes()
	}
	return b.Job.Transform != ""
}
