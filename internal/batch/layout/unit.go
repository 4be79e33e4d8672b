package layout

import (
	"context"
	"fmt"

	"github.com/brandgw/brand/api"
	"github.com/brandgw/brand/internal/job/catalog"
	"github.com/brandgw/brand/internal/job/features"
)

// A Unit is a kind of batch: what a job's batches serve — samples as
// stored, token sequences packed from documents, image-text sequences,
// clips decoded from GOPs — and how an epoch of them is counted and a
// batch of them laid out over the job's base order (its stream's epoch,
// with its edits). Each kind is one Unit; the job's unit is chosen once,
// from its table features (UnitOf), and the Orders, the ETag and
// /epoch/N ask it rather than which kind it is. What a unit may be
// combined with — mixed, balanced by which cost, transformed — is the
// table's row for its Feature (internal/job/features), which every entry
// point checks before a batch is laid out.
//
// A Unit belongs to the Orders that made it: it keeps that Orders' memos
// of its epochs (packings, vision epochs, clip spaces). Safe for
// concurrent use.
type Unit interface {
	// Feature is the unit's feature in the table (features.Samples,
	// features.Tokens, features.Vision, features.Clips).
	Feature() features.Feature
	// View is the view of ds a job of the unit reads — the fields it
	// names, a token dataset's token field, image-text samples whole —
	// with what its layout reads from memory loaded (a vision job's
	// image-text facts, which its order is made from). In a mixture,
	// each component is viewed so.
	View(ctx context.Context, ds *catalog.Dataset, job api.Job) (*catalog.Dataset, error)
	// Extent is the number of items an epoch of job over ds serves — its
	// samples, sequences or clips — given the epoch's base order e.
	Extent(ds *catalog.Dataset, job api.Job, epoch uint64, e *EpochOrder) (int, error)
	// Lay lays out batch b, whose extent and slice (Start, End) are set,
	// over the base order e of its epoch: its parts, its reads (Take),
	// what it serves (Content) and, under balance=, its ranks' costs.
	Lay(ctx context.Context, b *Batch, e *EpochOrder) error
	// AppendKey names, in a batch's ETag, the parameters of the unit
	// that select the batch's bytes (nothing for samples as stored).
	AppendKey(s []byte, job api.Job) []byte
	// Describe adds the unit's figures of an epoch to /epoch/N's answer
	// (a token job's packing, a clip job's space).
	Describe(info *api.EpochInfo, ds *catalog.Dataset, job api.Job, epoch uint64) error
}

// units are an Orders' units, one of each kind, over its base orders.
type units struct {
	base    *epochs
	samples *sampleUnit
	tokens  *tokenUnit
	vision  *visionUnit
	clips   *clipUnit
	// extra are units made outside this package (Orders.Add), asked
	// first.
	extra []Unit
}

// of is the unit of a job of features f: the one place a job's kind of
// batch is chosen. A vision job is a token job (features.Vision with
// features.Tokens) whose samples are image-text pairs.
func (u *units) of(f features.Set) Unit {
	for _, x := range u.extra {
		if f.Has(x.Feature()) {
			return x
		}
	}
	switch {
	case f.Has(features.Vision):
		return u.vision
	case f.Has(features.Tokens):
		return u.tokens
	case f.Has(features.Clips):
		return u.clips
	}
	return u.samples
}

// unit is the unit a batch of job from src is laid out by: the one the
// resolver chose (Source.Unit), or, for a source laid out without a
// resolution, the one its features name.
func (u *units) unit(src Source, job api.Job) Unit {
	if src.Unit != nil {
		return src.Unit
	}
	return u.of(src.features(job))
}

// batches returns the number of batches of an epoch of job over ds, read
// by unit un, the epoch's extent in un's items and its base order.
func (u *units) batches(un Unit, ds *catalog.Dataset, job api.Job, epoch uint64) (batches, n int, e *EpochOrder, err error) {
	e, err = u.base.epoch(StreamOf(ds, job), epoch)
	if err != nil {
		return 0, 0, nil, err
	}
	if n, err = un.Extent(ds, job, epoch, e); err != nil {
		return 0, 0, nil, err
	}
	if job.Offset > n {
		return 0, n, e, fmt.Errorf("%w: offset %d is past the end of epoch %d, which has %d samples", ErrOutOfRange, job.Offset, epoch, n)
	}
	return job.NumBatches(n), n, e, nil
}

// extent is the extent of an epoch of job over src's dataset, in its
// unit's items: what an edit's step is counted in (Edits).
func (u *units) extent(src Source, job api.Job, epoch uint64) (int, error) {
	_, n, _, err := u.batches(u.unit(src, job), src.DS, job, epoch)
	return n, err
}
