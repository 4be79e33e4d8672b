// Package units is the node's one list of kinds of batch: each a unit
// (layout.Unit) in a package of its own under this one — samples as
// stored, token sequences, image-text sequences, clips, images and clips
// by shape — and the mixture, which composes a unit over several
// datasets from any kind that mixes. The gateway and the test harness
// make their orders with New alike, so that a kind added here is served
// and tested everywhere at once; nothing else lists them, and no unit's
// place in the list matters (each says which feature it serves,
// features.Def.Unit).
//
// Adding a kind of batch: docs/architecture.md, "One seam: adding a kind
// of batch".
package units

import (
	"github.com/rs/zerolog"

	"github.com/brandgw/brand/internal/batch/layout"
	"github.com/brandgw/brand/internal/batch/units/buckets"
	"github.com/brandgw/brand/internal/batch/units/clips"
	"github.com/brandgw/brand/internal/batch/units/mixture"
	"github.com/brandgw/brand/internal/batch/units/runs"
	"github.com/brandgw/brand/internal/batch/units/samples"
	"github.com/brandgw/brand/internal/batch/units/tokens"
	"github.com/brandgw/brand/internal/batch/units/vision"
	"github.com/brandgw/brand/transform"
)

// Node is what a node gives its units: the stages that make their
// batches' bytes, and its rules for what it cannot serve. A stage may be
// nil (a harness without it): a batch that needs it fails, naming it.
type Node struct {
	// Pack writes token and vision batches' sequences
	// (sequences.Stage).
	Pack interface {
		tokens.Stage
		vision.Stage
	}
	// Clips decodes clip batches' clips (tensorize.Stage), through the
	// transform stage's Pipelines, which make the bucket pipelines bucket
	// jobs' images go through too.
	Clips     clips.Stage
	Pipelines Pipelines
	// Sizes are the datasets' image sizes (buckets.CatalogSizes).
	Sizes buckets.Sizes
	// SkipBadImages (--on-bad-image=skip) leaves out a vision job's
	// samples whose images are bad; SkipDamaged (--on-damaged-chunk=skip)
	// a clip job's clips whose video does not decode.
	SkipBadImages, SkipDamaged bool
	// NoVideo is why this node serves no clip job (a build without a
	// video decoder), nil where it serves them.
	NoVideo error
	// GOPCacheBytes is the clip stage's decoded-GOP cache, which a clip
	// job's /plan plans its decode with.
	GOPCacheBytes int64
	Log           zerolog.Logger
}

// Pipelines are the transform stage's pipelines, a bucket's made on
// demand (tensorize.Stage).
type Pipelines interface {
	Pipeline(name string) (*transform.Pipeline, error)
}

// New returns the node's kinds of batch, for layout.New.
func New(n Node) layout.Kinds {
	return func(b layout.Base) ([]layout.Unit, layout.Composer) {
		tok := tokens.New(b, n.Pack)
		cu := clips.New(b, clips.Config{Stage: n.Clips, Pipelines: n.Pipelines, SkipDamaged: n.SkipDamaged, NoDecoder: n.NoVideo,
			GOPCacheBytes: n.GOPCacheBytes, Log: n.Log})
		return []layout.Unit{
			samples.New(b),
			tok,
			vision.New(b, tok, vision.Config{Stage: n.Pack, SkipBadImages: n.SkipBadImages, Log: n.Log}),
			cu,
			buckets.New(b, cu, n.Sizes, n.Pipelines),
			runs.New(b),
		}, mixture.New(b)
	}
}

// Orders are orders of the node's kinds of batch made without stages
// (layout.New with New(Node{})): they lay out, plan and describe every
// kind's batches, and a batch that needs a stage to make its bytes fails
// naming it. What a planner or a test needs of the layout.
func Orders(snaps layout.Snapshots) *layout.Orders { return layout.New(snaps, New(Node{})) }
