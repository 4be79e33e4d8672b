// Package query is the one table of every query parameter Brand's HTTP
// API knows — the public endpoints' and the peers' internal ones — and
// the parser that applies it: defaults, limits, unknown and repeated
// parameters refused. The gateway and the peer protocol both parse
// through it, so a parameter means the same thing everywhere.
package query

import (
	"fmt"
	"maps"
	"math"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/dustin/go-humanize"

	"github.com/brandgw/brand/api"
	"github.com/brandgw/brand/importance"
	"github.com/brandgw/brand/internal/errkind"
	"github.com/brandgw/brand/internal/job/features"
	"github.com/brandgw/brand/internal/quote"
	"github.com/brandgw/brand/transform"
	"github.com/brandgw/brand/vision"
)

var (
	// ErrBadRequest marks a malformed or out-of-bounds parameter.
	ErrBadRequest = errkind.New(errkind.Invalid, "bad request")
	// ErrOutOfRange marks a rank or number outside its valid range (a
	// resource that does not exist, rather than a malformed request).
	ErrOutOfRange = errkind.New(errkind.NotFound, "not found")
	// ErrNotServed marks a parameter of a job the table knows but this
	// gateway does not serve yet (notServed): 501, naming it, rather than
	// the 400 of a parameter nobody knows.
	ErrNotServed = errkind.New(errkind.NotImplemented, "not served")
)

// notServed are the job parameters the table of features holds whose
// jobs the gateway does not serve yet, each with why.
var notServed = map[string]string{}

// Defaults are the job parameters used when a request does not give them,
// so that plain curl needs none.
type Defaults struct {
	Seed      uint64
	BatchSize int  // default DefaultBatchSize
	Window    int  // default DefaultWindow
	DropLast  bool // default false
}

// The defaults of a job's parameters and of the limits on them, stated
// once: the gateway fills a Config's zero values with them and `brand
// serve` and `brand plan` show them as their flags' defaults.
const (
	DefaultBatchSize    = 32
	DefaultWindow       = 8
	DefaultMaxBatchSize = 65536
	DefaultMaxWindow    = 65536
	DefaultMaxWorld     = 65536
)

// Fill applies the defaults' own defaults.
func (d *Defaults) Fill() {
	if d.BatchSize == 0 {
		d.BatchSize = DefaultBatchSize
	}
	if d.Window == 0 {
		d.Window = DefaultWindow
	}
}

// Limits bound what one request may ask for.
type Limits struct {
	MaxBatchSize int    // default DefaultMaxBatchSize
	MaxWindow    int    // default DefaultMaxWindow
	MaxWorld     int    // default DefaultMaxWorld
	MaxEpoch     uint64 // epochs are 0..MaxEpoch; default and at most 1<<31-1
	// MaxBatchBytes bounds the body of one response carrying samples: a
	// batch, a peer's sample request or a sample; default 256 MiB. A
	// batch above it is refused with 400 before anything is read.
	MaxBatchBytes int64
}

// MaxEpoch is the largest epoch number: statistics and the planner keep
// epochs in 32 bits.
const MaxEpoch = 1<<31 - 1

// DefaultMaxBatchBytes is Limits.MaxBatchBytes when zero.
const DefaultMaxBatchBytes = 256 << 20

// Fill applies the limits' defaults.
func (l *Limits) Fill() {
	if l.MaxBatchSize == 0 {
		l.MaxBatchSize = DefaultMaxBatchSize
	}
	if l.MaxWindow == 0 {
		l.MaxWindow = DefaultMaxWindow
	}
	if l.MaxWorld == 0 {
		l.MaxWorld = DefaultMaxWorld
	}
	if l.MaxEpoch == 0 || l.MaxEpoch > MaxEpoch {
		l.MaxEpoch = MaxEpoch
	}
	if l.MaxBatchBytes == 0 {
		l.MaxBatchBytes = DefaultMaxBatchBytes
	}
}

// Query is what a request's query string says, every default applied.
type Query struct {
	Job      api.Job
	Sampling string // as given; Parse checks it against the importance parameters
	// The importance endpoints' own: the epoch their feedback is for
	// (EpochSet: given), the snapshot a seal builds on.
	Epoch    uint64
	EpochSet bool
	Prev     string
	// Seal names the seal a peer's feedback request collects for, or
	// tells how it ended; Sealed is then the version it sealed ("": none).
	Seal, Sealed string
	// Pos is the epoch position a peer's sample request is for (PosSet:
	// given).
	Pos    int
	PosSet bool
	// Chunk is the chunk a peer asks for the bytes of (ChunkSet: given);
	// PrefetchWindows how many windows past their current one a peer
	// asks about the chunks the followed streams need; Held asks instead
	// which of them the node's cache holds; Keep tells it instead that
	// the asker will ask it for them (handover.Kept).
	Chunk           int
	ChunkSet        bool
	PrefetchWindows int
	Held            bool
	// Through, in a peer's chunk request, asks the node to read the chunk
	// from the store through its cache if the cache does not hold it:
	// the asker cannot reach the store (storepath).
	Through bool
	Keep    bool
	// Given, in a question about chunks, says instead that the asker's
	// cache holds them, chunks of this node's it read while it could not
	// reach this node: this node takes those it lacks from it.
	Given  bool
	Plan   api.PlanOptions
	Format string
}

// MaxWeight bounds a job's cache weight (weight=).
const MaxWeight = 100

// param parses the value v of the query parameter name into q, within a
// gateway's limits.
type param func(q *Query, name, v string, l Limits) error

// params is the one table of every query parameter the API knows. Each
// endpoint accepts a subset (see JobParams and the others); parsing goes
// through here for all of them. It is never modified.
var params = withUnits(map[string]param{
	api.ParamDataset: func(q *Query, _, v string, _ Limits) error {
		if err := api.CheckDatasetName(v); err != nil {
			return fmt.Errorf("%w: dataset=: %w", ErrBadRequest, err)
		}
		q.Job.Dataset = v
		return nil
	},
	api.ParamSeed: func(q *Query, _, v string, _ Limits) error {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			return fmt.Errorf("%w: seed must be an unsigned 64-bit integer, got %s", ErrBadRequest, quote.Input(v))
		}
		q.Job.Seed = n
		return nil
	},
	api.ParamBatchSize: intParam(func(q *Query) *int { return &q.Job.BatchSize }, 1, func(l Limits) int { return l.MaxBatchSize }, "the server's --max-batch-size"),
	api.ParamWindow:    intParam(func(q *Query) *int { return &q.Job.Window }, 1, func(l Limits) int { return l.MaxWindow }, "the server limit"),
	api.ParamWorld:     intParam(func(q *Query) *int { return &q.Job.World }, 1, func(l Limits) int { return l.MaxWorld }, "the server limit"),
	api.ParamRank:      intParam(func(q *Query) *int { return &q.Job.Rank }, 0, nil, ""),
	api.ParamOffset:    intParam(func(q *Query) *int { return &q.Job.Offset }, 0, nil, ""),
	api.ParamDropLast:  boolParam(func(q *Query) *bool { return &q.Job.DropLast }, false),
	api.ParamLocality:  boolParam(func(q *Query) *bool { return &q.Job.NoLocality }, true),
	api.ParamSampling: func(q *Query, _, v string, _ Limits) error {
		switch v {
		case api.SamplingUniform, api.SamplingImportance:
			q.Sampling = v
			return nil
		}
		return fmt.Errorf("%w: sampling must be uniform or importance, got %s", ErrBadRequest, quote.Input(v))
	},
	api.ParamJob: func(q *Query, _, v string, _ Limits) error {
		if err := importance.ValidJobName(v); err != nil {
			return fmt.Errorf("%w: %w", ErrBadRequest, err)
		}
		q.Job.Name = v
		return nil
	},
	api.ParamWeight: func(q *Query, name, v string, _ Limits) error {
		w, err := strconv.ParseFloat(v, 64)
		if err != nil || !(w > 0 && w <= MaxWeight) {
			return fmt.Errorf("%w: %s must be a number in (0, %d], got %s", ErrBadRequest, name, MaxWeight, quote.Input(v))
		}
		q.Job.Weight = w
		return nil
	},
	api.ParamImportance: versionParam(func(q *Query) *string { return &q.Job.Importance.Version }),
	ParamEdit:           versionParam(func(q *Query) *string { return &q.Job.Edit }),
	ParamExclusion:      versionParam(func(q *Query) *string { return &q.Job.Edit }),
	ParamAppend:         versionParam(func(q *Query) *string { return &q.Job.Edit }),
	api.ParamHot:        intParam(func(q *Query) *int { return &q.Job.Importance.Hot }, 0, nil, ""),
	api.ParamIndex: func(q *Query, _, v string, _ Limits) error {
		if !validIndexID(v) {
			return fmt.Errorf("%w: index must be an index ID (16 hex digits, as /datasets and the Brand-Index header give it), got %s", ErrBadRequest, quote.Input(v))
		}
		q.Job.Index = v
		return nil
	},
	api.ParamMembers: func(q *Query, _, v string, _ Limits) error {
		if !validIndexID(v) {
			return fmt.Errorf("%w: members must be a membership version (16 hex digits, as the Brand-Members header gives it), got %s", ErrBadRequest, quote.Input(v))
		}
		q.Job.Members = v
		return nil
	},
	api.ParamMix: func(q *Query, _, v string, _ Limits) error {
		m, err := api.ParseMix(v)
		if err != nil {
			return fmt.Errorf("%w: mix: %w", ErrBadRequest, err)
		}
		q.Job.Mix = m
		return nil
	},
	api.ParamMixSchedule: func(q *Query, _, v string, _ Limits) error {
		s, err := api.ParseSchedule(v)
		if err != nil {
			return fmt.Errorf("%w: mix_schedule: %w", ErrBadRequest, err)
		}
		if len(s) > 0 {
			q.Job.Schedule = s
			if len(q.Job.Mix) == 0 {
				q.Job.Mix = s[0].Mix
			}
		}
		return nil
	},
	api.ParamScheduleVersion: func(q *Query, _, v string, _ Limits) error {
		if v != "latest" && !ValidVersion(v) {
			return fmt.Errorf("%w: schedule must be latest or a schedule version (16 hex digits, as the Brand-Schedule-Version header gives it), got %s", ErrBadRequest, quote.Input(v))
		}
		q.Job.ScheduleVersion = v
		return nil
	},
	api.ParamMixBlock:   intParam(func(q *Query) *int { return &q.Job.MixBlock }, 1, fixed(1<<24), "the mixture's limit"),
	api.ParamMixSamples: intParam(func(q *Query) *int { return &q.Job.MixSamples }, 1, nil, ""),
	ParamEpoch: func(q *Query, name, v string, l Limits) error {
		n, err := ParseNumber(name, v, l.MaxEpoch)
		q.Epoch, q.EpochSet = n, err == nil
		return err
	},
	ParamPrev: versionParam(func(q *Query) *string { return &q.Prev }),
	ParamSeal: func(q *Query, name, v string, _ Limits) error {
		if !ValidVersion(v) {
			return fmt.Errorf("%w: %s must be a seal's ID (16 hex digits), got %s", ErrBadRequest, name, quote.Input(v))
		}
		q.Seal = v
		return nil
	},
	ParamSealed: versionParam(func(q *Query) *string { return &q.Sealed }),
	ParamPos: func(q *Query, name, v string, _ Limits) error {
		err := intParam(func(q *Query) *int { return &q.Pos }, 0, nil, "")(q, name, v, Limits{})
		q.PosSet = err == nil
		return err
	},
	ParamChunk: func(q *Query, name, v string, _ Limits) error {
		err := intParam(func(q *Query) *int { return &q.Chunk }, 0, nil, "")(q, name, v, Limits{})
		q.ChunkSet = err == nil
		return err
	},
	ParamPeerPrefetchWindows: intParam(func(q *Query) *int { return &q.PrefetchWindows }, 0, fixed(64), "the peers' limit"),
	ParamHeld:                boolParam(func(q *Query) *bool { return &q.Held }, false),
	ParamThrough:             boolParam(func(q *Query) *bool { return &q.Through }, false),
	ParamKeep:                boolParam(func(q *Query) *bool { return &q.Keep }, false),
	ParamGiven:               boolParam(func(q *Query) *bool { return &q.Given }, false),
	api.ParamTransform: func(q *Query, name, v string, _ Limits) error {
		if !transform.ValidName(v) {
			return fmt.Errorf("%w: %s must be a pipeline's name (1 to 64 of a-z, 0-9, '-', '_', '.'), got %s", ErrBadRequest, name, quote.Input(v))
		}
		q.Job.Transform = v
		return nil
	},
	api.ParamColumns: func(q *Query, name, v string, _ Limits) error {
		cols, err := ParseColumns(v)
		if err != nil {
			return fmt.Errorf("%w: %s: %w", ErrBadRequest, name, err)
		}
		q.Job.Columns = cols
		return nil
	},
	api.ParamSeq: intParam(func(q *Query) *int { return &q.Job.Seq }, 1, fixed(api.MaxSeq), "the packer's limit"),
	api.ParamPack: func(q *Query, name, v string, _ Limits) error {
		if v != api.PackBestFit && v != api.PackConcat {
			return fmt.Errorf("%w: %s must be bestfit or concat, got %s", ErrBadRequest, name, quote.Input(v))
		}
		q.Job.Pack = v
		return nil
	},
	api.ParamPad: intParam(func(q *Query) *int { return &q.Job.Pad }, 0, fixed(math.MaxInt32), "a token ID of int32"),
	api.ParamEOS: func(q *Query, name, v string, l Limits) error {
		err := intParam(func(q *Query) *int { return &q.Job.EOS }, 0, fixed(math.MaxInt32), "a token ID of int32")(q, name, v, l)
		q.Job.EOSSet = err == nil
		return err
	},
	api.ParamVision: func(q *Query, name, v string, _ Limits) error {
		if _, err := vision.ParseRule(v); err != nil {
			return fmt.Errorf("%w: %w", ErrBadRequest, err)
		}
		q.Job.Vision = v
		return nil
	},
	api.ParamBalance: func(q *Query, name, v string, _ Limits) error {
		if !slices.Contains(api.BalanceKinds, v) {
			return fmt.Errorf("%w: %s must be one of %s, got %s", ErrBadRequest, name, strings.Join(api.BalanceKinds, ", "), quote.Input(v))
		}
		q.Job.Balance = v
		return nil
	},
	ParamClipKey: func(q *Query, name, v string, _ Limits) error {
		c, err := api.ParseClipKey(v)
		if err != nil {
			return fmt.Errorf("%w: %s: %w", ErrBadRequest, name, err)
		}
		q.Job.Clip = c
		return nil
	},
	ParamTransformFingerprint: func(q *Query, name, v string, _ Limits) error {
		if len(v) != 16 || !lowerHex(v) {
			return fmt.Errorf("%w: %s must be a pipeline's fingerprint (16 hex digits), got %s", ErrBadRequest, name, quote.Input(v))
		}
		q.Job.TransformFingerprint = v
		return nil
	},
	api.ParamFormat: func(q *Query, _, v string, _ Limits) error {
		if v != "json" && v != "tar" {
			return fmt.Errorf("%w: format must be tar or json, got %s", ErrBadRequest, quote.Input(v))
		}
		q.Format = v
		return nil
	},
	api.ParamCacheSize: func(q *Query, _, v string, _ Limits) error {
		n, err := humanize.ParseBytes(v)
		if err != nil || n > 1<<62 {
			return fmt.Errorf("%w: cache_size must be a size such as 2GiB, got %s", ErrBadRequest, quote.Input(v))
		}
		q.Plan.CacheBytes = int64(n)
		return nil
	},
	api.ParamDiskCacheSize: func(q *Query, name, v string, _ Limits) error {
		n, err := humanize.ParseBytes(v)
		if err != nil || n > 1<<62 {
			return fmt.Errorf("%w: %s must be a size of at least 0 such as 100GiB (0: no disk tier), got %s", ErrBadRequest, name, quote.Input(v))
		}
		q.Plan.DiskCacheBytes = int64(n)
		return nil
	},
	api.ParamEpochs:          intParam(func(q *Query) *int { return &q.Plan.Epochs }, 2, fixed(20), "the planner's limit"),
	api.ParamFirstEpoch:      intParam(func(q *Query) *int { return &q.Plan.FirstEpoch }, 0, fixed(1<<30), "the planner's limit"),
	api.ParamPrefetchWindows: intParam(func(q *Query) *int { return &q.Plan.PrefetchWindows }, 0, fixed(64), "the planner's limit"),
	api.ParamBandwidth:       rateParam(func(q *Query) *float64 { return &q.Plan.BackendBytesPerSec }),
	api.ParamConsume:         rateParam(func(q *Query) *float64 { return &q.Plan.ConsumeBytesPerSec }),
	api.ParamNodes:           intParam(func(q *Query) *int { return &q.Plan.Nodes }, 1, fixed(api.MaxPlanNodes), "the planner's limit"),
	api.ParamNodesAfter:      intParam(func(q *Query) *int { return &q.Plan.NodesAfter }, 1, fixed(api.MaxPlanNodes), "the planner's limit"),
	api.ParamPeerBandwidth:   rateParam(func(q *Query) *float64 { return &q.Plan.PeerBytesPerSec }),
	api.ParamImagesPerSec: func(q *Query, name, v string, _ Limits) error {
		r, err := strconv.ParseFloat(v, 64)
		if err != nil || !(r > 0 && r <= 1e9) {
			return fmt.Errorf("%w: %s must be a rate of images a second in (0, 1e9], got %s", ErrBadRequest, name, quote.Input(v))
		}
		q.Plan.ImagesPerSec = r
		return nil
	},
})

// The parameters each kind of endpoint accepts. The epoch, batch and
// manifest endpoints take the same ones, format included, so that one query
// string works for all three.
var (
	JobParams    = append(slices.Clone(api.JobParams), api.ParamFormat)
	PlanParams   = append(slices.Clone(api.JobParams), api.ParamCacheSize, api.ParamDiskCacheSize, api.ParamEpochs, api.ParamFirstEpoch, api.ParamBandwidth, api.ParamConsume, api.ParamPrefetchWindows, api.ParamNodes, api.ParamImagesPerSec, api.ParamNodesAfter, api.ParamPeerBandwidth)
	SampleParams = []string{api.ParamDataset, api.ParamIndex}

	// Importance feedback and seals name their epoch in the query; a seal
	// also the snapshot it builds on.
	FeedbackParams = []string{api.ParamDataset, ParamEpoch}
	SealParams     = []string{api.ParamDataset, ParamEpoch, ParamPrev}
	SealedParams   = []string{api.ParamDataset}

	// The peers' internal requests (package peer): a node's sample
	// request names the index version and, when the samples are for a
	// job's batch, the job stream and position, so that the owner's
	// schedule follows streams whose ranks live elsewhere; a node handing
	// over its feedback is asked for one index version's.
	PeerSampleParams   = []string{api.ParamDataset, api.ParamIndex, api.ParamSeed, api.ParamWindow, ParamEpoch, ParamPos, api.ParamSampling, api.ParamJob, api.ParamImportance, api.ParamHot, api.ParamWeight, api.ParamTransform, ParamTransformFingerprint, api.ParamColumns, ParamClipKey, ParamEdit, ParamExclusion, ParamAppend}
	PeerFeedbackParams = []string{api.ParamDataset, api.ParamIndex, ParamEpoch, ParamSeal}
	// A sealing node telling the others how its seal ended.
	PeerSettleParams = []string{api.ParamDataset, api.ParamIndex, ParamEpoch, ParamSeal, ParamSealed}
	// A node asking another for a membership version's member list.
	PeerMembersParams = []string{api.ParamMembers}
	// A node asking a chunk's old owner for its bytes, and a node asking
	// which chunks the followed streams need soon, in a membership change.
	PeerChunkParams  = []string{api.ParamDataset, api.ParamIndex, ParamChunk, api.ParamColumns, ParamThrough}
	PeerNeededParams = []string{api.ParamDataset, api.ParamIndex, ParamPeerPrefetchWindows, ParamHeld, ParamKeep, ParamGiven}
)

// Query parameters of the importance endpoints (docs/http-api.md) and of
// the peers' internal ones.
const (
	ParamEpoch = "epoch"
	ParamPrev  = "prev"
	// ParamSeal names a seal in the peers' feedback requests, and
	// ParamSealed the version it sealed.
	ParamSeal                = "seal"
	ParamSealed              = "sealed"
	ParamPos                 = "pos"
	ParamChunk               = "chunk"
	ParamPeerPrefetchWindows = "ahead"
	ParamHeld                = "held"
	// ParamThrough is a peer's chunk request's "read it from the store
	// for me" (Query.Through).
	ParamThrough = "through"
	ParamKeep    = "keep"
	// ParamGiven is a question about chunks' "my cache holds these of
	// yours" (Query.Given).
	ParamGiven = "given"
	// ParamTransformFingerprint is, in a peer's sample request for
	// transformed samples, the fingerprint of the asker's pipeline: the
	// owner transforms only with a pipeline of the same fingerprint.
	ParamTransformFingerprint = "transform_fp"
	// ParamClipKey is, in a peer's sample request for a clip job's
	// batch, the job's clip parameters as one key (api.Clip.Key): the
	// owner's schedule follows the clip job's own order.
	ParamClipKey = "clips"
	// ParamEdit is, in a peer's sample request for a batch of a job with
	// edits, the version of the edit the batch is laid out under: the
	// asker's positions are of the order under the chain up to it
	// (layout.Stream.Edit). ParamExclusion and ParamAppend are its names
	// from before a job's edits were one chain, taken from nodes not yet
	// upgraded.
	ParamEdit      = "edit"
	ParamExclusion = "exclude"
	ParamAppend    = "append"
)

// withUnits is m with every kind's own parameters (api.Job.Units), each
// parsed by its kind's Set.
func withUnits(m map[string]param) map[string]param {
	for i, u := range (&api.Job{}).Units() {
		for _, name := range u.Params() {
			m[name] = func(q *Query, name, v string, _ Limits) error {
				if err := q.Job.Units()[i].Set(name, v); err != nil {
					return fmt.Errorf("%w: %w", ErrBadRequest, err)
				}
				return nil
			}
		}
	}
	return m
}

// intParam is an integer parameter of at least lo and, if hi is not nil,
// at most hi(limits); hint names where the upper bound comes from.
func intParam(dst func(*Query) *int, lo int, hi func(Limits) int, hint string) param {
	return func(q *Query, name, v string, l Limits) error {
		n, err := strconv.Atoi(v)
		switch {
		case err != nil:
			return fmt.Errorf("%w: %s must be an integer, got %s", ErrBadRequest, name, quote.Input(v))
		case hi != nil && (n < lo || n > hi(l)):
			return fmt.Errorf("%w: %s must be between %d and %d (%s), got %d", ErrBadRequest, name, lo, hi(l), hint, n)
		case n < lo:
			return fmt.Errorf("%w: %s must be at least %d, got %d", ErrBadRequest, name, lo, n)
		}
		*dst(q) = n
		return nil
	}
}

// boolParam is true or false, stored negated if negate (locality=false
// sets NoLocality).
func boolParam(dst func(*Query) *bool, negate bool) param {
	return func(q *Query, name, v string, _ Limits) error {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return fmt.Errorf("%w: %s must be true or false, got %s", ErrBadRequest, name, quote.Input(v))
		}
		*dst(q) = b != negate
		return nil
	}
}

// versionParam is an importance snapshot version.
func versionParam(dst func(*Query) *string) param {
	return func(q *Query, name, v string, _ Limits) error {
		if !ValidVersion(v) {
			return fmt.Errorf("%w: %s must be a snapshot version (16 hex digits), got %s", ErrBadRequest, name, quote.Input(v))
		}
		*dst(q) = v
		return nil
	}
}

func fixed(n int) func(Limits) int { return func(Limits) int { return n } }

// rateParam is a positive rate in bytes per second, such as 500MiB.
func rateParam(dst func(*Query) *float64) param {
	return func(q *Query, name, v string, _ Limits) error {
		n, err := humanize.ParseBytes(v)
		if err != nil || n == 0 {
			return fmt.Errorf("%w: %s must be a positive rate in bytes per second such as 500MiB, got %s", ErrBadRequest, name, quote.Input(v))
		}
		*dst(q) = float64(n)
		return nil
	}
}

// Known is raw's parameters, if each is one of accepted and given once,
// and raw reads whole: Parse's refusals, for an endpoint whose parameters
// are not a job's (a pprof profile's seconds=) or that takes none (a
// schedule edit, POST /plan: their fields are in the body), so that every
// endpoint refuses what it does not know alike.
func Known(raw string, accepted []string) (url.Values, error) {
	values, err := url.ParseQuery(raw)
	if err != nil {
		return nil, fmt.Errorf("%w: query string: %w", ErrBadRequest, quote.Error(err))
	}
	for k, vs := range values {
		if why, ok := notServed[k]; ok {
			return nil, fmt.Errorf("%w: query parameter %s: %s", ErrNotServed, quote.Input(k), why)
		}
		if !slices.Contains(accepted, k) {
			known := "none"
			if len(accepted) > 0 {
				known = strings.Join(accepted, ", ")
			}
			return nil, fmt.Errorf("%w: unknown query parameter %s (known here: %s)", ErrBadRequest, quote.Input(k), known)
		}
		if len(vs) > 1 {
			return nil, fmt.Errorf("%w: query parameter %s given %d times; give it once", ErrBadRequest, quote.Input(k), len(vs))
		}
	}
	return values, nil
}

// Parse reads the parameters an endpoint accepts from a raw query string
// onto base (the gateway's defaults). Unknown parameters are rejected so
// that a typo such as "batchsize" does not silently fall back to a
// default; so is a parameter given twice (seed=1&seed=2: which one would
// the job mean?), and a query url.ParseQuery cannot read whole: past its
// limit of 10,000 parameters (GODEBUG urlmaxqueryparams) it returns none,
// and r.URL.Query() would hide that behind the defaults.
func Parse(raw string, accepted []string, base Query, l Limits) (Query, error) {
	values, err := Known(raw, accepted)
	if err != nil {
		return Query{}, err
	}
	q := base
	for _, name := range accepted {
		// An empty value means the default, as if the parameter were absent.
		if v := values.Get(name); v != "" {
			if err := params[name](&q, name, v, l); err != nil {
				return Query{}, err
			}
		}
	}
	if slices.Contains(accepted, api.ParamRank) && q.Job.Rank >= q.Job.World {
		return Query{}, fmt.Errorf("%w: rank %d out of range: with world=%d, rank must be 0..%d", ErrOutOfRange, q.Job.Rank, q.Job.World, q.Job.World-1)
	}
	if q.Sampling == api.SamplingImportance {
		q.Job.Importance.Job = q.Job.Name
	}
	// A clip bucket job (buckets of HxWxT) is a clip job of one clip a
	// video whose clips take their bucket's frames: its clip parameters
	// are derived here, so that the table sees both features.
	if c, ok, err := q.Job.Buckets.ClipOf(q.Job.Clip); err != nil {
		return Query{}, fmt.Errorf("%w: %w", ErrBadRequest, err)
	} else if ok {
		q.Job.Clip = c
		values = maps.Clone(values)
		values.Set(api.ParamClip, strconv.Itoa(c.Frames))
		values.Set(api.ParamStep, strconv.Itoa(c.Step))
	}
	// Which parameters and features go together is the table's (package
	// spec): the same answer here, on every edit and in /plan, and in the
	// clients, which read it.
	if err := features.CheckParams(values); err != nil {
		return Query{}, err
	}
	// A bucket job's items are its ranks' batches (api.Job.Buckets); the
	// table refuses batch_size= and offset= beside buckets=.
	if err := q.Job.Buckets.Check(); err != nil {
		return Query{}, fmt.Errorf("%w: %w", ErrBadRequest, err)
	}
	if err := bucketBatches(q.Job.Buckets, l); err != nil {
		return Query{}, err
	}
	q.Job.BatchSize = q.Job.Buckets.Items(q.Job.BatchSize)
	return q, nil
}

// ValidVersion reports whether v looks like a snapshot version: 16
// lowercase hex digits (importance.Snapshot.Version).
func ValidVersion(v string) bool { return len(v) == 16 && lowerHex(v) }

// validIndexID reports whether v looks like an index ID
// (chunkindex.Index.ID): 16 lowercase hex digits.
func validIndexID(v string) bool { return len(v) == 16 && lowerHex(v) }

func lowerHex(v string) bool {
	for _, c := range v {
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}

// ParseNumber reads a path number such as the N of /epoch/N.
func ParseNumber(name, v string, maxValue uint64) (uint64, error) {
	n, err := strconv.ParseUint(v, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%w: %s must be a non-negative integer, got %s", ErrBadRequest, name, quote.Input(v))
	}
	if n > maxValue {
		return 0, fmt.Errorf("%w: %s %d out of range: valid %s numbers are 0..%d", ErrOutOfRange, name, n, name, maxValue)
	}
	return n, nil
}

// MaxColumns bounds the fields a job selects (columns=).
const MaxColumns = 256

// ParseColumns parses columns=: field names, comma-separated, each 1 to
// 256 bytes, at most MaxColumns of them, none twice.
func ParseColumns(v string) ([]string, error) {
	cols := strings.Split(v, ",")
	if len(cols) > MaxColumns {
		return nil, fmt.Errorf("%d fields, at most %d", len(cols), MaxColumns)
	}
	seen := make(map[string]bool, len(cols))
	for _, c := range cols {
		switch {
		case c == "" || len(c) > 256:
			return nil, fmt.Errorf("a field name of %d bytes (1 to 256) in %s", len(c), quote.Input(v))
		case seen[c]:
			return nil, fmt.Errorf("field %s named twice", quote.Input(c))
		}
		seen[c] = true
	}
	return cols, nil
}

// bucketBatches refuses a bucket job whose budget holds more samples of a
// bucket a rank than a batch may (l.MaxBatchSize), as batch_size= is
// refused past it, rather than cut them silently.
func bucketBatches(b api.Buckets, l Limits) error {
	if !b.On() {
		return nil
	}
	shapes, budget, per, err := b.Shaped()
	if err != nil {
		return nil // refused by Check
	}
	for i, k := range per {
		if k > l.MaxBatchSize {
			return fmt.Errorf("%w: a budget of %d %s holds %d samples of bucket %s a rank, over the most a batch holds (the server's --max-batch-size, %d): give a smaller budget",
				ErrBadRequest, budget.Limit(), budget.Unit(), k, shapes[i], l.MaxBatchSize)
		}
	}
	return nil
}
