package api

import (
	"fmt"
	"math"

	"github.com/brandgw/brand/internal/errkind"
)

// ErrPlanBudget reports a plan that ran out of the work a server allows one
// (planner.Budget) while it computed: the gateway answers 503, naming the
// bound. A plan over a bound its input alone decides is refused up front
// with 400 instead.
var ErrPlanBudget = errkind.Named(errkind.Busy, "plan_budget", "plan over its budget")

// SharedPlanRequest is the body of POST /plan: several jobs reading one
// dataset at once through one gateway's cache, to be simulated together
// (docs/planner.md, "Several jobs sharing a cache"). GET /plan's query
// string describes one job; a list of jobs, each with its own speed and
// start, is a body's.
type SharedPlanRequest struct {
	Dataset string `json:"dataset,omitempty"` // "" means the gateway's default dataset
	// Index pins the dataset's index version, as a job's index= does
	// (Job.Index); "" plans for the version the cluster serves now.
	Index string `json:"index,omitempty"`
	// CacheSize is the cache to simulate, in bytes; 0 means the
	// gateway's own.
	CacheSize int64           `json:"cache_size,omitempty"`
	Jobs      []SharedPlanJob `json:"jobs"` // 1..MaxSharedPlanJobs
}

// SharedPlanJob is one job of a SharedPlanRequest. A field the body leaves
// out takes the gateway's default: its --seed, --window, --batch-size and
// --drop-last, world 1, 3 epochs from epoch 0, speed 1, start 0. A field
// given is taken as given, zero included, and checked against the limits
// GET /plan applies to the same parameter (window 0 is refused, not the
// default). As Job.Values does, the encoding leaves out the zero values
// that are no valid choice (Window, BatchSize, World, Epochs, Speed), so
// that a Go client's zero value means the default; Seed, FirstEpoch,
// DropLast and Start are always sent.
type SharedPlanJob struct {
	// Name labels the job in the plan (1–128 of [A-Za-z0-9._-], as a
	// job's job=); "" leaves it unnamed.
	Name       string `json:"name,omitempty"`
	Seed       uint64 `json:"seed"`
	Window     int    `json:"window,omitempty"`
	BatchSize  int    `json:"batch_size,omitempty"`
	World      int    `json:"world,omitempty"`
	Epochs     int    `json:"epochs,omitempty"` // 2..20, as GET /plan's
	FirstEpoch int    `json:"first_epoch"`
	DropLast   bool   `json:"drop_last"`
	// Speed is how fast the job reads relative to the others: a job of
	// speed s reads an epoch while one of speed 1 reads s epochs. > 0.
	Speed float64 `json:"speed,omitempty"`
	// Start is when the job sends its first batch, in epochs of a job of
	// speed 1, the jobs of start 0 beginning together. >= 0.
	Start float64 `json:"start"`
	// Edit is filled by the server for a job named as a job with edits
	// over the dataset (PlanOptions.Edit). Not a field of the body.
	Edit *PlanEdit `json:"-"`
}

// Bounds of a POST /plan.
const (
	// MaxSharedPlanJobs is the most jobs a request may plan: a gateway
	// follows at most 64 job streams, so a plan of more describes a cache
	// no gateway runs (planner.MaxSharedJobs, which a test holds equal).
	MaxSharedPlanJobs = 64
	// MaxSharedPlanEpochs bounds the jobs' epochs summed: the plan holds
	// every job's trace and their merge in memory, and this keeps it
	// within about ten times GET /plan's 20 epochs of one job while
	// allowing 64 jobs of the default 3 epochs.
	MaxSharedPlanEpochs = 192
	// MaxSharedPlanBodyBytes bounds the request body: 64 jobs with every
	// field given take under 16 KiB.
	MaxSharedPlanBodyBytes = 64 << 10
)

// PlanEpoch is one epoch a plan of one job plans, as the server serves
// it: what /epoch/N answers of it from offset 0 (EpochInfo's Samples and
// Batches) — its samples (a token job's sequences, a clip job's clips),
// which a job's edits make differ from the dataset's and from epoch to
// epoch, and its global batches, none for drop_last and fewer samples
// than one global batch. Every GET /plan answer of a job's epochs (all
// but a resize's) lists them so ("epochs"), its "batches_per_epoch"
// being the first's.
type PlanEpoch struct {
	Epoch   int `json:"epoch"`
	Samples int `json:"samples"`
	Batches int `json:"batches"`
}

// PlanDataset is what a plan needs of the data a job reads, as a server
// describes it to its planner: the dataset's index version and, per chunk,
// its samples, its bytes in the cache and the bytes a load of it reads
// from the store. A server builds it from the dataset's index or, for a
// job that names fields of a dataset served in place (Job.Columns), from
// the view the job reads, whose chunks are smaller; in its own types, so
// that the server need not link a planner (docs/architecture.md).
type PlanDataset struct {
	// ID is the index version's ID. Root is the first version of its
	// lineage (chunkindex.Lineage.Root), "" for an index that extends
	// none: a cluster's chunk owners depend on it (cluster.IndexKey of
	// Root, or of ID without one), so that an append keeps the old
	// chunks' owners.
	ID, Root string
	// Counts is each chunk's samples; Sizes its bytes in the cache (a
	// chunk of a dataset served in place: its resident bound with the
	// fields read).
	Counts []int
	Sizes  []int64
	// StoreSizes is each chunk's bytes a load reads from the store (a
	// chunk of a dataset served in place: its store extent with the
	// fields read); nil when they are Sizes (tar chunks, read whole).
	StoreSizes []int64
	// GETs is each chunk's requests a load sends to the store; nil when
	// not known (a dataset served in place reads ranges by field).
	GETs []int32
}

// PlanTrace is a demand the gateway computed itself (a clip job's, whose
// chunks are those its clips' GOPs are in): its global batches in the
// order they are served and, for the epochs they are of and the one after
// the last, the windows of the epochs' orders, by which the gateway's use
// table keys chunks for eviction (docs/planner.md, *Clip jobs*).
type PlanTrace struct {
	Batches []PlanBatch
	// Orders are the epochs' orders, ascending and consecutive: every
	// epoch of Batches, and the one after the last. None: the trace is
	// simulated under Belady's rule alone.
	Orders []PlanOrder
}

// PlanBatch is one global batch of a PlanTrace: its epoch, its positions
// [Start, End) in the epoch's order, and its distinct chunks in the order
// the gateway asks its cache for them.
type PlanBatch struct {
	Epoch      int
	Start, End int
	Chunks     []int32
}

// PlanOrder is an epoch's order as the gateway's use table sees it: its
// samples, each window's first position, and per chunk the first window
// whose samples need it (-1: none).
type PlanOrder struct {
	Epoch        int
	Samples      int
	WindowStarts []int
	ChunkWindows []int32
}

// ClipPlan is what /plan answers of a clip job beside the simulation of
// its chunks: per planned epoch what its clips need (ClipPlanEpoch), and
// the CPU a decoded frame costs on this node, measured (Measured) or the
// documented figure scaled by the frames' pixels.
type ClipPlan struct {
	Kind          string  `json:"kind"`
	Clips         int     `json:"clips"`
	CPUPerFrameMs float64 `json:"decode_cpu_per_frame_ms"`
	Measured      bool    `json:"measured"`
	// GOPWindow is the job's gop_window (0: the default order);
	// GOPCacheBytes the node's decoded-GOP cache (--gop-cache-bytes),
	// which the decode is planned with.
	GOPWindow     int             `json:"gop_window"`
	GOPCacheBytes int64           `json:"gop_cache_bytes"`
	Epochs        []ClipPlanEpoch `json:"epochs"`
}

// ClipPlanEpoch is one epoch of a clip job's plan: its clips and their
// frames; the GOPs their frames need and those GOPs' bytes (covering
// bytes: what a store reads at least, once); the bytes the cache of the
// plan reads from the store for it under the gateway's policy, and that
// over the covering bytes; on one node, the GOPs decoded (each once a
// decode horizon while the node's decoded-GOP cache holds it: /stats'
// gops_decoded) and the frames of their runs (every packet from a run's
// keyframe to its last wanted frame: /stats' frames_decoded), in all and
// a clip, and the GOPs batches took decoded (gop_cache.hits); the frames
// decoding each clip alone would pass through (a loader that decodes per
// sample), and that over the frames decoded (the reuse); and the CPU the
// decode takes, in all and a clip.
type ClipPlanEpoch struct {
	Epoch                int     `json:"epoch"`
	Clips                int     `json:"clips"`
	Frames               int64   `json:"frames"`
	GOPs                 int     `json:"gops"`
	CoveringBytes        int64   `json:"covering_gop_bytes"`
	StoreBytes           int64   `json:"store_bytes"`
	StoreOverCovering    float64 `json:"store_over_covering"`
	GOPsDecoded          int64   `json:"gops_decoded"`
	FramesDecoded        int64   `json:"frames_decoded"`
	FramesDecodedPerClip float64 `json:"frames_decoded_per_clip"`
	GOPHits              int64   `json:"gop_hits"`
	FramesDecodedAlone   int64   `json:"frames_decoded_alone"`
	Reuse                float64 `json:"reuse"`
	DecodeCPUSeconds     float64 `json:"decode_cpu_seconds"`
	DecodeCPUPerClip     float64 `json:"decode_cpu_per_clip_ms"`
}

// Prices are a store's prices, for the bill a plan reports (the store's
// GETs and bytes read, and the bytes crossing a cluster's nodes): per
// 1,000 GET requests, per GiB read out of the store, per GiB sent from
// node to node; zero prices bill nothing. S3 Standard's published prices
// in us-east-1 are the documented example (docs/http-api.md "GET /plan").
type Prices struct {
	GETsPer1000     float64 `json:"gets_per_1000"`
	PerGiB          float64 `json:"per_gib"`
	CrossNodePerGiB float64 `json:"cross_node_per_gib"`
	Currency        string  `json:"currency,omitempty"`
}

// Check refuses prices a bill cannot be made of: a price that is not a
// finite number ≥ 0.
func (p Prices) Check() error {
	for _, c := range []struct {
		name string
		v    float64
	}{{"per 1,000 GETs", p.GETsPer1000}, {"per GiB", p.PerGiB}, {"per cross-node GiB", p.CrossNodePerGiB}} {
		if math.IsNaN(c.v) || math.IsInf(c.v, 0) || c.v < 0 {
			return fmt.Errorf("the store's price %s is %v: a price is a finite number ≥ 0", c.name, c.v)
		}
	}
	return nil
}
