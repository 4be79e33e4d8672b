package api

// Response headers of a batch (and, for the first two, of a sample). The
// counts let a client know an epoch's extent from any one of its batches.
const (
	HeaderDataset      = "Brand-Dataset"
	HeaderIndex        = "Brand-Index" // the index's content identity
	HeaderEpoch        = "Brand-Epoch"
	HeaderBatch        = "Brand-Batch"
	HeaderEpochBatches = "Brand-Epoch-Batches" // global batches in the epoch for the job
	HeaderEpochSamples = "Brand-Epoch-Samples" // samples in the whole epoch
	HeaderBatchSamples = "Brand-Batch-Samples" // samples in this response
	HeaderOffset       = "Brand-Offset"        // the job's offset, when not 0
	// A mixture's batch (mix=): the mixture as given, its mixing block,
	// each component's index ID (comma-separated, in the mixture's order),
	// and each sample's component (its number in the mixture), in the
	// order of the tar's samples.
	HeaderMix           = "Brand-Mix"
	HeaderMixBlock      = "Brand-Mix-Block"
	HeaderMixIndex      = "Brand-Mix-Index"
	HeaderMixComponents = "Brand-Mix-Components"
	// HeaderMixSchedule is, on a batch of a schedule (mix_schedule=), the
	// schedule as its requests write it; Brand-Mix is its first phase.
	HeaderMixSchedule = "Brand-Mix-Schedule"

	// A batch served without the samples of a chunk damaged at rest
	// (gateway --on-damaged-chunk=skip) says how many it lacks, and which:
	// their keys, comma-separated ("%", ",", spaces and
	// bytes outside printable ASCII as %XX), cut with "…" past
	// 2 KiB. Brand-Batch-Samples counts the samples actually sent.
	HeaderMissingSamples = "Brand-Missing-Samples"
	HeaderMissingKeys    = "Brand-Missing-Keys"

	// HeaderMembers is, on a cluster, the membership version a job's
	// batch (or epoch, or manifest) was laid out under: members=, or the
	// one the cluster agrees on. Clients pin it for the epoch. A 409 for
	// a version no node knows names the current one in it.
	HeaderMembers = "Brand-Members"
	// HeaderTransform names the pipeline a batch's images went through
	// (transform=): each image member is a .npy member.
	HeaderTransform = "Brand-Transform"
	// HeaderBucketGeometry is, for a bucket job's batch (whose
	// Brand-Transform names its bucket, bucket:HxW), each image's
	// displayed size, its crop's offsets in the image resized to cover
	// the bucket, and whether it is flipped: "W,H,LEFT,TOP,FLIP" each,
	// semicolon-separated, in the batch's order (SDXL's size and crop
	// conditioning).
	HeaderBucketGeometry = "Brand-Bucket-Geometry"
	// A balanced job's batch (balance=): the cost its ranks are weighed
	// by, and every rank's cost in this global batch, comma-separated in
	// rank order (docs/shuffle.md §13).
	HeaderBalance   = "Brand-Balance"
	HeaderRankCosts = "Brand-Rank-Costs"
	// HeaderUnanswered, on a client's request to a node of a cluster,
	// names the node (its URL as the peer list spells it) whose answer
	// to the same request the client stopped waiting for — a hedge, or
	// a failover after its probe went unanswered — and
	// HeaderUnansweredFor how long it had waited, in whole milliseconds.
	// A node that has heard nothing from the named one for as long
	// reads that node's chunks elsewhere for the request, without
	// waiting on it first (docs/scale-out.md, "Hedged reads").
	HeaderUnanswered    = "Brand-Unanswered"
	HeaderUnansweredFor = "Brand-Unanswered-For"
)

// EpochInfo is the body of GET /epoch/{epoch}: the epoch's extent under a
// job, with every default resolved.
type EpochInfo struct {
	Dataset   string `json:"dataset"`
	IndexID   string `json:"index"`
	Epoch     int    `json:"epoch"`
	Samples   int    `json:"samples"` // samples in the whole epoch over all ranks
	Batches   int    `json:"batches"` // global batches from the offset on, numbered from 0
	BatchSize int    `json:"batch_size"`
	World     int    `json:"world"`
	Rank      int    `json:"rank"`
	Window    int    `json:"window"` // chunks per shuffle window
	Seed      uint64 `json:"seed"`
	DropLast  bool   `json:"drop_last"`
	Offset    int    `json:"offset"`  // epoch positions consumed before batch 0
	Chunks    int    `json:"chunks"`  // chunks in the dataset
	Windows   int    `json:"windows"` // shuffle windows in the epoch
	// RankSamples is how many samples this rank receives from the offset
	// to the end of the epoch.
	RankSamples int `json:"rank_samples"`
	// Mix describes a mixture's epoch (mix=); nil for one dataset. Dataset
	// is then the mixture as given, IndexID empty, Chunks all components'
	// and Windows 0.
	Mix *MixInfo `json:"mix,omitempty"`
	// Tokens describes a token job's epoch (seq=): Samples, Batches and
	// RankSamples then count sequences. nil for an ordinary job.
	Tokens *TokenInfo `json:"tokens,omitempty"`
	// Clips describes a clip job's epoch (clip=, delta_timestamps=,
	// frames=): Samples, Batches and RankSamples then count clips, and
	// Windows the shuffle's windows of units. nil for an ordinary job.
	Clips *ClipInfo `json:"clips,omitempty"`
	// Buckets describes a bucket job's epoch (buckets=): Samples and
	// RankSamples then count the ranks' batches (steps × world), Batches
	// the steps. nil for any other job.
	Buckets *BucketsInfo `json:"buckets,omitempty"`
	// ScheduleVersion is, for a job's stored schedule (schedule=), the
	// version the epoch was laid out under: a client pins it for the
	// epoch's batches.
	ScheduleVersion string `json:"schedule_version,omitempty"`
}

// ClipInfo is a clip job's epoch in EpochInfo: the dataset's kind
// ("video", a tree of videos; "lerobot"), its units (a tree's chunks, a
// LeRobot dataset's episodes: what the shuffle permutes and a window
// counts), its videos, a tree's frames a clip, the frames' layout, and a
// LeRobot job's windows (offsets in seconds; a camera with no window of
// the job's reads its anchor frame).
type ClipInfo struct {
	Kind    string           `json:"kind"`
	Units   int              `json:"units"`
	Videos  int              `json:"videos"`
	Frames  int              `json:"frames,omitempty"`
	Layout  string           `json:"layout"`
	Windows []ClipWindowInfo `json:"windows,omitempty"`
}

// ClipWindowInfo is one window of a LeRobot clip job.
type ClipWindowInfo struct {
	Key    string    `json:"key"`
	Camera bool      `json:"camera"`
	Deltas []float64 `json:"deltas"`
}

// TokenInfo is a token job's epoch in EpochInfo: its packing, the
// documents packed, their tokens (with concat's EOS) and the fill
// (tokens ÷ (sequences × seq)), and how many documents the packing
// cuts into more than one sequence.
type TokenInfo struct {
	Seq       int     `json:"seq"`
	Pack      string  `json:"pack"`
	Pad       int     `json:"pad"`
	EOS       *int    `json:"eos,omitempty"`
	Documents int     `json:"documents"`
	Tokens    int64   `json:"tokens"`
	Fill      float64 `json:"fill"`
	Split     int     `json:"split"`
}

// TokenStats are a gateway's token jobs' figures in /stats: the
// sequences packed into the batches it served, their tokens (sequences ×
// seq), those that are not pad, the fill (NonPad ÷ Tokens), and the
// pieces that are part of a document cut across sequences.
type TokenStats struct {
	Sequences   int64   `json:"sequences"`
	Tokens      int64   `json:"tokens"`
	NonPad      int64   `json:"nonpad_tokens"`
	Fill        float64 `json:"fill"`
	SplitPieces int64   `json:"split_pieces"`
}

// BalanceStats are a gateway's balanced jobs' figures in /stats, per
// cost (balance=): the batches it served, over their global batches the
// busiest rank's cost over the ranks' mean — balanced, and as the plain
// cut would have left it — on average and at worst, and the ranks' costs
// of the last global batches it served.
type BalanceStats struct {
	Balance        string        `json:"balance"`
	Batches        int64         `json:"batches"`
	RatioMean      float64       `json:"max_over_mean"`
	RatioWorst     float64       `json:"max_over_mean_worst"`
	PlainRatioMean float64       `json:"plain_max_over_mean"`
	PlainWorst     float64       `json:"plain_max_over_mean_worst"`
	Recent         []BalanceStep `json:"recent"`
}

// BalanceStep is one global batch of a balanced job in /stats: its rank
// 0's ETag (which names it), its epoch and number, and every rank's cost,
// balanced and as the plain cut would have left them.
type BalanceStep struct {
	Global     string   `json:"global_etag"`
	Epoch      uint64   `json:"epoch"`
	Batch      uint64   `json:"batch"`
	Costs      []uint64 `json:"rank_costs"`
	PlainCosts []uint64 `json:"plain_rank_costs"`
}

// TokenPlan is the "tokens" section of /plan for a token job (seq=):
// the packing, per planned epoch its sequences and global batches, its
// tokens that are not pad, its fill and the documents it splits; and
// the documents a global batch holds on average, which the plan's own
// figures (store bytes, hits, stalls) are computed with.
type TokenPlan struct {
	Seq               int              `json:"seq"`
	Pack              string           `json:"pack"`
	DocumentsPerBatch int              `json:"documents_per_batch"`
	Epochs            []TokenPlanEpoch `json:"epochs"`
}

// TokenPlanEpoch is one planned epoch of a token job: for a vision job
// (vision=) its documents are its samples, and Vision says what its
// ranks carry of its images.
type TokenPlanEpoch struct {
	Epoch     int              `json:"epoch"`
	Sequences int              `json:"sequences"`
	Batches   int              `json:"batches"`
	Tokens    int64            `json:"tokens"`
	Fill      float64          `json:"fill"`
	Split     int              `json:"split"`
	Vision    *VisionPlanEpoch `json:"vision,omitempty"`
}

// VisionPlanEpoch is a vision job's planned epoch's images: how many,
// their vision tokens, and each global batch's ranks' vision tokens,
// the busiest rank's over the ranks' mean, averaged over the epoch's
// global batches and at worst — under the job's assignment (its
// balance=, or the plain cut) and under the plain cut. Exact: the
// epoch is a pure function of the dataset's facts and the job.
type VisionPlanEpoch struct {
	Images                int     `json:"images"`
	VisionTokens          int64   `json:"vision_tokens"`
	MaxOverMean           float64 `json:"max_over_mean"`
	MaxOverMeanWorst      float64 `json:"max_over_mean_worst"`
	PlainMaxOverMean      float64 `json:"plain_max_over_mean"`
	PlainMaxOverMeanWorst float64 `json:"plain_max_over_mean_worst"`
}

// MixInfo is a mixture's epoch in EpochInfo.
type MixInfo struct {
	Block      int                `json:"block"` // the mixing block K; 0 for a bucketed mixture, whose blocks are its steps
	Components []MixComponentInfo `json:"components"`
}

// MixComponentInfo is one component of a mixture's epoch.
type MixComponentInfo struct {
	Dataset string `json:"dataset"`
	Weight  string `json:"weight"` // as given
	IndexID string `json:"index"`
	// Samples is the dataset's size: a pass. EpochSamples is how many the
	// mixture's every epoch takes from it; FirstPass and FirstIndex where
	// this epoch starts in the component's stream (pass, position in the
	// pass's order).
	Samples      int `json:"samples"`
	EpochSamples int `json:"epoch_samples"`
	// Window is the shuffle window of the component's passes: the job's
	// window split by weight (docs/shuffle.md §11.4).
	Window     int    `json:"window"`
	FirstPass  uint64 `json:"first_pass"`
	FirstIndex int    `json:"first_index"`
	// Buckets is, for a source of a bucketed mixture, its pass
	// FirstPass's buckets (their images, steps and fill), as a bucket
	// job's /epoch/N gives them; Samples and EpochSamples then count its
	// ranks' batches (a step's world of them), as a bucket job's do.
	Buckets *BucketsInfo `json:"buckets,omitempty"`
}

// Manifest is the body of a batch asked for with format=json, or of
// /epoch/{epoch}/batch/{batch}/manifest: the batch without its data.
type Manifest struct {
	Dataset   string           `json:"dataset"`
	IndexID   string           `json:"index"`
	Epoch     int              `json:"epoch"`
	Batch     int              `json:"batch"`
	Rank      int              `json:"rank"`
	World     int              `json:"world"`
	BatchSize int              `json:"batch_size"`
	Offset    int              `json:"offset"`
	Batches   int              `json:"batches"` // global batches from the offset on
	ETag      string           `json:"etag"`    // the batch's ETag, as in the tar response
	Bytes     int64            `json:"bytes"`   // the tar response's length; 0 with a pipeline (Transform)
	Samples   []ManifestSample `json:"samples"`
	// Transform is the pipeline the batch's images go through
	// (transform=). The samples' offsets, lengths and CRC32Cs are then
	// those of the stored samples, and the response's length is known only
	// once its images' headers are read: Bytes is 0.
	Transform string `json:"transform,omitempty"`
	// Balance is the cost a balanced job's ranks are weighed by
	// (balance=) and RankCosts every rank's cost in this global batch, as
	// the Brand-Balance and Brand-Rank-Costs headers give them.
	Balance   string   `json:"balance,omitempty"`
	RankCosts []uint64 `json:"rank_costs,omitempty"`
	// Missing names the samples of Samples whose chunk the gateway last
	// found damaged at rest: with --on-damaged-chunk=skip a GET of the
	// batch leaves them out (and has another ETag and length; its
	// Brand-Missing-* headers are authoritative); with the default
	// --on-damaged-chunk=fail it answers 502.
	Missing []string `json:"missing,omitempty"`
}

// ManifestSample describes one sample of a batch.
type ManifestSample struct {
	ID     int    `json:"id"`     // global sample ID in the index
	Key    string `json:"key"`    // WebDataset key
	Chunk  string `json:"chunk"`  // chunk object key, relative to the dataset root
	Offset int64  `json:"offset"` // first byte of the sample's first tar header
	Length int64  `json:"length"` // bytes through the padding of its last member
	CRC32C uint32 `json:"crc32c"` // Castagnoli CRC of those bytes
	// Dataset is the sample's dataset in a mixture's batch (mix=), and ID
	// its ID in that dataset's index; empty for one dataset.
	Dataset string `json:"dataset,omitempty"`
}

// DatasetInfo describes one served dataset in GET /datasets.
type DatasetInfo struct {
	Name    string `json:"name"`
	URL     string `json:"url,omitempty"` // where its chunks live (s3://… or file://…); only where operators look (see http-api.md)
	IndexID string `json:"index"`         // content identity of its index
	Chunks  int    `json:"chunks"`
	Samples int    `json:"samples"`
	Bytes   int64  `json:"bytes"`   // total size of its chunks
	Default bool   `json:"default"` // served when a request names no dataset
	// The index version served: 1 for the index loaded at start, one more
	// per reload; the index object's ETag; when this version was loaded.
	IndexVersion  int    `json:"index_version"`
	IndexETag     string `json:"index_etag,omitempty"`
	IndexLoadedAt string `json:"index_loaded_at"` // RFC 3339
}

// DatasetList is the body of GET /datasets.
type DatasetList struct {
	Datasets []DatasetInfo `json:"datasets"`
}

// Error is the JSON body of every error response.
type Error struct {
	Error  string `json:"error"`
	Status int    `json:"status"`
	// ScheduleVersion is, on a 409 about a job's stored schedule, its
	// current version: the one to read, or to base an edit on.
	ScheduleVersion string `json:"schedule_version,omitempty"`
	// EditVersion is, on a 409 refusing an edit of a job's chain of
	// exclusions and appends that does not name the job's current edit
	// (of either kind) as its previous, that edit: the one to name
	// (ExclusionEdit.Previous, AppendEdit.Previous). ExclusionVersion is
	// the same, on an exclusion's refusal, under the name clients read
	// it by before a job's edits were one chain.
	EditVersion      string `json:"edit_version,omitempty"`
	ExclusionVersion string `json:"exclusion_version,omitempty"`
	// FirstEditableStep is, on a 409 refusing a schedule edit from a step
	// the job has read, the first step an edit could start at when it was
	// refused: the job's loaders may have read further since, which an
	// edit from "next" (NextStep) allows for.
	FirstEditableStep *uint64 `json:"first_editable_step,omitempty"`
}

// PlanOptions are GET /plan's parameters beside the job's: the cache to
// simulate and the rates that decide whether the trainer would stall.
type PlanOptions struct {
	// Prices bill the plan's store reads (the plan's bill); the
	// gateway's (--price-per-1000-gets, …).
	Prices Prices
	// MemberIDs are the members' IDs of the cluster planned, when it is
	// the gateway's own (cluster.Membership.IDs): its chunks are owned as
	// the live cluster's are. Nil: nodes= planned positions.
	MemberIDs          []uint64
	CacheBytes         int64   // cache_size; the gateway's own when 0
	DiskCacheBytes     int64   // disk_cache_size: a disk tier below the cache (each node's); 0 means none
	Epochs             int     // epochs, 2..20; default 3
	FirstEpoch         int     // first_epoch; default 0
	BackendBytesPerSec float64 // bandwidth; default 1 GiB/s
	ConsumeBytesPerSec float64 // consume; 0 means as fast as the backend
	PrefetchWindows    int     // prefetch_windows; the gateway's own when 0
	// Nodes (nodes, 1..MaxPlanNodes) asks for a cluster prediction over
	// that many nodes, CacheBytes being each node's cache; 0 asks for a
	// single gateway's plan. A gateway in a cluster defaults to its own
	// node count.
	Nodes int
	// NodesAfter (nodes_after, 1..MaxPlanNodes) asks instead what
	// resizing the cluster from Nodes (its own membership on a gateway of
	// a cluster) to that many nodes costs the job: the chunks that move,
	// those the job needs next, loaded before the change from the old
	// owners' caches or the store, and the warm-up at BackendBytesPerSec
	// and PeerBytesPerSec (peer_bandwidth, default 10 Gb/s).
	NodesAfter      int
	PeerBytesPerSec float64
	// ImagesPerSec (images_per_sec) is the rate of images the trainers
	// want through the job's pipeline (transform=): the plan says how
	// many cores a node needs for it.
	ImagesPerSec float64
	// Transform is filled by the server for a job that names a pipeline:
	// its measured (or calibrated) costs, which the planner answers the
	// pipeline's questions from. Not a query parameter.
	Transform *TransformCosts
	// Assignment is filled by the server: how the job's global batches
	// are given to its ranks (AssignPlain, AssignLocality, AssignBalance),
	// which a plan of several nodes names beside its figures of both the
	// locality-aware assignment and the plain cut. Not a query parameter.
	Assignment string
	// Edit is filled by the server for a named job (job=) with edits
	// over the dataset (exclusions and appends, one chain): the newest,
	// with those before it. With appends the dataset is the version they
	// grew the job to, and the plan lays the job's epochs out under the
	// chain, as its batches are (docs/shuffle.md §16). Not a query
	// parameter.
	Edit *PlanEdit
}

// The assignments of a job's global batches to its ranks, as a plan
// names them (PlanOptions.Assignment): the plain cut, the locality-aware
// assignment of a cluster, or balance= (whose ranks' costs decide; the
// chunks read are the plain cut's).
const (
	AssignPlain    = "plain"
	AssignLocality = "locality"
	AssignBalance  = "balance"
)

// PlanEdit is one edit of a job's chain, for a plan (PlanOptions.Edit):
// from position From of epoch Epoch of the order of the edits before it
// (Previous), an append of the chunks after the dataset's first Chunks
// (the version it extends), or an exclusion of the samples Drop marks (a
// bitset over sample IDs, Samples of them, holding every earlier
// exclusion's too; the server's, read only).
type PlanEdit struct {
	Version  string
	Epoch    uint64
	From     int
	Chunks   int
	Samples  int
	Drop     []uint64
	Previous *PlanEdit
}

// TransformCosts are a pipeline's costs on a server, for a plan
// (PlanOptions.Transform).
type TransformCosts struct {
	Pipeline string
	// CPUPerImage is the pipeline's thread CPU per image, nanoseconds;
	// Measured: over the images the node served, else a calibration on
	// generated photos.
	CPUPerImage int64
	Measured    bool
	// DecodePerImage is decoding alone, nanoseconds per image, and
	// DecodedFactor a decoded image's bytes per byte of its JPEG, both
	// calibrated on generated photos.
	DecodePerImage int64
	DecodedFactor  float64
	// Workers is the node's transform workers.
	Workers int
}

// MaxPlanNodes bounds PlanOptions.Nodes.
const MaxPlanNodes = 4096

// Query parameter names of PlanOptions.
const (
	ParamCacheSize       = "cache_size"
	ParamDiskCacheSize   = "disk_cache_size"
	ParamEpochs          = "epochs"
	ParamFirstEpoch      = "first_epoch"
	ParamBandwidth       = "bandwidth"
	ParamConsume         = "consume"
	ParamPrefetchWindows = "prefetch_windows"
	ParamNodes           = "nodes"
	ParamImagesPerSec    = "images_per_sec"
	ParamNodesAfter      = "nodes_after"
	ParamPeerBandwidth   = "peer_bandwidth"
)

// Cluster is the body of GET /cluster: the peer list every node of a
// cluster was given, which one answered, and what it knows of the others'
// liveness. Node k is Nodes[k]; rank r of a world of W ranks has its home
// on node ⌊r·len(Nodes)/W⌋ (Homes lists them when the request names a
// world). A single gateway answers with itself as the only node.
type Cluster struct {
	Nodes []ClusterNode `json:"nodes"`
	Self  int           `json:"self"`
	Homes []int         `json:"homes,omitempty"` // per rank, with ?world=W
	// Agreed is, per dataset, the index version the cluster serves: the
	// one most live nodes serve now (docs/scale-out.md). A node that
	// does not hold it answers that dataset's batch requests with 409.
	Agreed map[string]string `json:"agreed,omitempty"`
	// Members is the membership version the cluster agrees on, whose
	// members Nodes lists (with the answering node after them if it is
	// not one of them): requests without members= are laid out under it.
	// Local is the version the answering node's member source lists now,
	// Reported the one it tells its peers (Local once its warm-up for it
	// has run). docs/scale-out.md, "Membership".
	Members  string `json:"members,omitempty"`
	Local    string `json:"local,omitempty"`
	Reported string `json:"reported,omitempty"`
	// Warming is the membership version the answering node is loading
	// the chunks it gains under (its peers read them from their old
	// owners until it is done); Leaving, that it was told to leave and
	// hands its chunks over. LastChange is its figures of the last
	// change of its member list. docs/scale-out.md, "Resizing".
	Warming    string            `json:"warming,omitempty"`
	Leaving    bool              `json:"leaving,omitempty"`
	LastChange *MembershipChange `json:"last_change,omitempty"`
}

// MembershipChange is what one change of a node's member list cost the
// node: the chunks it gained that the jobs needed soon and loaded before
// it reported the new version, where their bytes came from, and how long
// it took to warm up and for the cluster to agree on the new version.
type MembershipChange struct {
	From string `json:"from"`
	To   string `json:"to"`
	// Chunks were loaded for the change; their bytes came from the old
	// owner's cache (PeerBytes), this node's disk tier (DiskBytes) or the
	// store (StoreBytes).
	Chunks     int   `json:"chunks"`
	PeerBytes  int64 `json:"peer_bytes"`
	DiskBytes  int64 `json:"disk_bytes"`
	StoreBytes int64 `json:"store_bytes"`
	// WarmSeconds is the warm-up; FlipSeconds from the list's change to
	// this node reporting the new version (the warm-up, then the wait for
	// the other gainers); AgreeSeconds to the cluster agreeing on it, 0
	// until then. FlipTimedOut: the node reported it without every
	// gainer warm, past --membership-flip-timeout.
	WarmSeconds  float64 `json:"warm_seconds"`
	FlipSeconds  float64 `json:"flip_seconds"`
	AgreeSeconds float64 `json:"agree_seconds"`
	FlipTimedOut bool    `json:"flip_timed_out,omitempty"`
}

// ClusterNode is one node of a Cluster.
type ClusterNode struct {
	URL string `json:"url"`
	// Up is the answering node's view: whether the node answered its
	// last probe ready. A node is always up to itself.
	Up bool `json:"up"`
	// Indexes is the index version the node serves of each dataset, as
	// its last probe said; absent before the first probe.
	Indexes map[string]string `json:"indexes,omitempty"`
	// Members is the membership version the node reports, as its last
	// probe said; absent before the first probe. Warming and Leaving are
	// what its last probe said of a change (Cluster).
	Members string `json:"members,omitempty"`
	Warming string `json:"warming,omitempty"`
	Leaving bool   `json:"leaving,omitempty"`
	// StoreUnreachable says the node cannot reach its datasets' store
	// now, as it said (itself: as it finds): the other nodes read the
	// chunks its cache does not hold for it.
	StoreUnreachable bool `json:"store_unreachable,omitempty"`
}

// ClusterStats is a node's view of its cluster in /stats: the layout and
// liveness of GET /cluster, and the traffic this node exchanged.
type ClusterStats struct {
	Cluster
	Peers []PeerStats `json:"peers"`
	// HomeBytes and PeerBytes are the sample bytes of the batches this
	// node served that came from its own cache and from peers; Locality
	// is HomeBytes over both (1 before any batch).
	HomeBytes int64   `json:"home_bytes"`
	PeerBytes int64   `json:"peer_bytes"`
	Locality  float64 `json:"locality"`
}

// PeerStats is this node's traffic with one peer.
type PeerStats struct {
	URL          string `json:"url"`
	Up           bool   `json:"up"`
	FetchedBytes int64  `json:"fetched_bytes"` // sample bytes this node fetched from it
	ServedBytes  int64  `json:"served_bytes"`  // sample bytes this node served it
	Failures     int64  `json:"fetch_failures"`
}

// JobStat is one job's figures in /stats "jobs", over everything the
// gateway served it since it first saw it (the most recent jobs only, as
// for EpochStat). A job is known by its order (dataset, index, seed,
// window) and its name, if it gave one (job=).
type JobStat struct {
	Dataset string `json:"dataset"`
	Index   string `json:"index"`
	Seed    uint64 `json:"seed"`
	Window  int    `json:"window"`
	Job     string `json:"job,omitempty"`
	Batches int64  `json:"batches"`
	Samples int64  `json:"samples"`
	// Accesses, Loads and HitRatio are as in EpochStat, over all its
	// epochs; BackendBytes (from the store) and DiskBytes (from the disk
	// tier) include chunks prefetched for it.
	Accesses     int64 `json:"chunk_accesses"`
	Loads        int64 `json:"chunk_loads"`
	BackendBytes int64 `json:"backend_bytes"`
	DiskBytes    int64 `json:"disk_bytes,omitempty"`
	// StoreGETs are the requests its loads from the store sent (a chunk
	// read whole in the store's parts), as a plan's bill counts them
	// (api.BillFigures.GETs); absent for a dataset served in place.
	StoreGETs int64   `json:"store_gets,omitempty"`
	HitRatio  float64 `json:"hit_ratio"`
	// WaitSeconds is how long its batches waited for their samples in
	// all: for the job's turn when the jobs' windows did not fit in the
	// cache together, for room in the cache, for chunks to load.
	WaitSeconds float64 `json:"wait_seconds"`
}

// TurnStats are /stats "turns": how the jobs took turns for the cache
// when the windows they read did not fit in it together
// (docs/architecture.md, "Several jobs").
type TurnStats struct {
	WaitSeconds float64 `json:"wait_seconds"` // batches' waits for a turn, in all
	Overdue     int64   `json:"overdue"`      // turns given past the maximum wait, over capacity
	Waiting     int     `json:"waiting"`      // job streams waiting now
}

// EpochStat is one epoch of one job stream as a gateway measured it
// (/stats "epochs").
type EpochStat struct {
	Dataset string `json:"dataset"`
	// Index is the index version the stream read.
	Index  string `json:"index"`
	Seed   uint64 `json:"seed"`
	Window int    `json:"window"`
	// Job is the job's name (job=), "" for an unnamed job; Snapshot
	// names the importance snapshot the epoch is drawn from ("" for the
	// uniform order).
	Job          string `json:"job,omitempty"`
	Snapshot     string `json:"snapshot,omitempty"`
	Epoch        uint64 `json:"epoch"`
	Accesses     int64  `json:"chunk_accesses"`
	Loads        int64  `json:"chunk_loads"`
	BackendBytes int64  `json:"backend_bytes"`
	// DiskBytes are the bytes of chunk loads the disk tier served (not
	// in BackendBytes, which are the store's); absent without one.
	DiskBytes int64 `json:"disk_bytes,omitempty"`
	// StoreGETs are the requests the epoch's loads from the store sent,
	// as JobStat's.
	StoreGETs int64    `json:"store_gets,omitempty"`
	HitRatio  float64  `json:"hit_ratio"`
	Optimal   *float64 `json:"optimal_hit_ratio,omitempty"`
	// Complete says batches of the epoch have carried all its samples.
	Complete bool `json:"complete"`
}

// DiskStats are /stats "disk": the disk tier under the chunk cache
// (--disk-cache), absent without one.
type DiskStats struct {
	Capacity int64 `json:"capacity_bytes"` // the bound, lowered for a drive found full
	Bytes    int64 `json:"bytes"`          // of its files, written or being written
	Chunks   int64 `json:"chunks"`         // written
	Writing  int64 `json:"writing"`        // being written now
	FullDirs int   `json:"full_dirs"`      // directories whose drive said it was full
	// Found is how many chunk files the gateway found when it started.
	Found int64 `json:"found"`
	// Reads and ReadBytes are the chunks the RAM cache missed that the
	// disk served; Misses those it did not hold (read from the store).
	Reads     int64 `json:"reads"`
	ReadBytes int64 `json:"read_bytes"`
	Misses    int64 `json:"misses"`
	// Writes and WriteBytes are the chunks written; Skipped those loaded
	// from the store and not written (needed later than everything on
	// disk, or no writer free in time); Evictions those removed for a
	// chunk needed sooner.
	Writes     int64 `json:"writes"`
	WriteBytes int64 `json:"write_bytes"`
	Skipped    int64 `json:"skipped"`
	Evictions  int64 `json:"evictions"`
	// Dropped are files removed without being served (incomplete,
	// malformed, stale, damaged, unreadable); Errors I/O errors.
	Dropped int64 `json:"dropped"`
	Errors  int64 `json:"errors"`
}

// MixStat is what a gateway served of one mixture (GET /stats, "mixtures"):
// per component, the samples it served and the bytes its loads read from
// the store and from the disk tier.
type MixStat struct {
	Mix        string             `json:"mix"`
	Components []MixComponentStat `json:"components"`
}

// MixComponentStat is one component's figures in MixStat.
type MixComponentStat struct {
	Dataset      string `json:"dataset"`
	Samples      int64  `json:"samples"`
	BackendBytes int64  `json:"backend_bytes"`
	DiskBytes    int64  `json:"disk_bytes"`
}
