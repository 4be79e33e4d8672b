package layout

import (
	"context"
	"fmt"

	"github.com/brandgw/brand/api"
	"github.com/brandgw/brand/internal/errkind"
	"github.com/brandgw/brand/internal/job/catalog"
	"github.com/brandgw/brand/internal/job/features"
)

// A Unit is a kind of batch: what a job's batches serve — samples as
// stored, token sequences packed from documents, image-text sequences,
// clips decoded from GOPs, images by shape — and how an epoch of them is
// counted and a batch of them laid out over the job's base orders (its
// streams' epochs, with their edits). Each kind is one Unit, in a package
// of its own (internal/batch/units/...), made over an Orders' Base; the
// job's unit is chosen once, from its table features (Orders.UnitOf), and
// the Orders, the ETag and /epoch/N ask it rather than which kind it is.
// What a unit may be combined with — mixed, balanced by which cost,
// transformed — is the table's row for its Feature
// (internal/job/features), which every entry point checks before a batch
// is laid out.
//
// A unit may have more to say than these methods, each through an
// optional interface asked where it is used, as database/sql asks a
// driver's: Composite, Tagger and Spaced here; a maker of its batches'
// bytes (internal/batch/visit), its /plan (internal/job/plans), its
// mixtures' components (internal/batch/units/mixture), its headers
// (gateway). A unit that wraps another (a mixture of it) says so with
// Wrapper, and As finds a capability through it.
//
// Safe for concurrent use.
type Unit interface {
	// Feature is the unit's feature in the table: a job whose features'
	// unit (features.Set.Unit) it is is laid out by it.
	Feature() features.Feature
	// View is the view of ds a job of the unit reads — the fields it
	// names, a token dataset's token field, image-text samples whole —
	// with what its layout reads from memory loaded (a vision job's
	// image-text facts, which its order is made from). In a mixture,
	// each component is viewed so.
	View(ctx context.Context, ds *catalog.Dataset, job api.Job) (*catalog.Dataset, error)
	// Extent is the number of items an epoch of job over src serves —
	// its samples, sequences, clips or ranks' batches.
	Extent(src Source, job api.Job, epoch uint64) (int, error)
	// Lay lays out batch b, whose extent and slice (Start, End) are set:
	// its parts, its reads (Take), what it serves (Content) and, under
	// balance=, its ranks' costs.
	Lay(ctx context.Context, b *Batch) error
	// AppendKey names, in a batch's ETag, the parameters of the unit
	// that select the batch's bytes (nothing for samples as stored).
	AppendKey(s []byte, job api.Job) []byte
	// Describe adds the unit's figures of an epoch to /epoch/N's answer
	// (a token job's packing, a clip job's space, a mixture's
	// components).
	Describe(info *api.EpochInfo, src Source, job api.Job, epoch uint64) error
}

// A Composite is a unit that reads several datasets as one job (a
// mixture): a source of it has no DS of its own, its batches' parts are
// its components' passes, and what counts and follows jobs (statistics,
// turns, the transform stage's queue) counts its batches as its own.
type Composite interface {
	Unit
	// Datasets are the dataset versions it reads, in its order.
	Datasets() []*catalog.Dataset
	// Name is the source as requests name it (mix= as written).
	Name() string
	// Key names its order: its components' versions, weights, block and
	// length (jobstream.Stream.Mix of its components' streams).
	Key() string
}

// A Tagger names its batches' bytes itself, in place of the ETag of a
// batch over one dataset (batchETag): a mixture's names its components'
// versions and weights.
type Tagger interface {
	ETag(src Source, job api.Job, epoch, m uint64) string
}

// A Spaced unit's epochs are orders of items of its own, not of its
// dataset's samples (a clip job's clips): the base order of a stream
// whose Space is set (api.Job.Space) is asked of it. One unit of an
// Orders orders spaces.
type Spaced interface {
	SpaceOrder(s Stream, epoch uint64) (*EpochOrder, error)
}

// A Composer makes the unit of a job over several datasets from the unit
// of its items (a mixture of a kind's items, by the job's weights or
// schedule): an Orders has one, made with its units (Kinds).
type Composer interface {
	Compose(un Unit, ds []*catalog.Dataset, job api.Job) (Composite, error)
}

// A Wrapper is a unit made of another (a mixture of a kind's items): As
// looks through it for a capability the wrapper itself lacks.
type Wrapper interface {
	Unwrap() Unit
}

// As finds the first unit in u's chain of wrappers (u, then what it
// Unwraps) that has capability T, as errors.As finds an error: the one
// way a capability of a unit is discovered.
func As[T any](u Unit) (T, bool) {
	for u != nil {
		if t, ok := u.(T); ok {
			return t, true
		}
		w, ok := u.(Wrapper)
		if !ok {
			break
		}
		u = w.Unwrap()
	}
	var zero T
	return zero, false
}

// A Kinds makes an Orders' units over its base, and the Composer of
// their mixtures (nil: none): the node's one list of kinds of batch
// (internal/batch/units.New), which the gateway and the test harness
// pass alike.
type Kinds func(Base) ([]Unit, Composer)

// units are an Orders' units, by their features, made once.
type units struct {
	by      map[features.Feature]Unit
	spaced  Spaced
	compose Composer
}

// newUnits indexes us by their features: a feature claimed twice, or
// spaces ordered by two units, is a programmer's error.
func newUnits(us []Unit, c Composer) *units {
	u := &units{by: make(map[features.Feature]Unit, len(us)), compose: c}
	for _, x := range us {
		f := x.Feature()
		if _, dup := u.by[f]; dup {
			panic(fmt.Sprintf("layout: two units of feature %s", f))
		}
		u.by[f] = x
		if s, ok := x.(Spaced); ok {
			if u.spaced != nil {
				panic("layout: two units order item spaces")
			}
			u.spaced = s
		}
	}
	return u
}

// of is the unit of a job of features f: the one place a job's kind of
// batch is chosen, by the table (features.Set.Unit). A job whose unit no
// kind serves is laid out by none (nil).
func (u *units) of(f features.Set) Unit { return u.by[f.Unit()] }

// unit is the unit a batch of job from src is laid out by: the one the
// resolver chose (Source.Unit), or, for a source laid out without a
// resolution, the one its features name.
func (u *units) unit(src Source, job api.Job) (Unit, error) {
	if src.Unit != nil {
		return src.Unit, nil
	}
	f := src.features(job)
	if un := u.of(f); un != nil {
		return un, nil
	}
	return nil, fmt.Errorf("%w: no kind of batch here serves a job of %s", ErrNoUnit, f.Unit())
}

// ErrNoUnit means no unit of the Orders serves a job's kind: orders made
// without it (501).
var ErrNoUnit = errkind.New(errkind.NotImplemented, "no unit serves the job's kind of batch")
