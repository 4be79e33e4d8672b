// Package api defines Brand's HTTP API as data: a training job's parameters
// and their query encoding, the response headers and the JSON bodies. The
// gateway that serves them and the clients that read them share these
// definitions, so the two cannot drift apart. docs/http-api.md describes
// the same API for people and other languages.
//
// The package holds no behaviour beyond encoding: parsing a request,
// applying a server's defaults and limits, is the gateway's job.
package api

import (
	"fmt"
	"net/url"
	"strconv"
	"strings"

	"github.com/brandgw/brand/internal/quote"
	"github.com/brandgw/brand/shuffle"
)

// Job is the set of parameters that, with an epoch and a batch number,
// determines a batch. Any gateway given the same Job and index serves the
// same bytes. The embedded shuffle.Params are the permutation's parameters
// (seed and window fix the order; batch size, world, rank, drop_last and
// offset only cut it).
type Job struct {
	Dataset string // "" means the gateway's default dataset
	shuffle.Params
	// NoLocality turns off locality-aware assignment on a cluster
	// (locality=false): each rank then takes the plain cut of the global
	// batch, wherever its chunks live. It changes which rank receives
	// which sample, never which samples a global batch holds. A single
	// gateway ignores it.
	NoLocality bool
	// Importance selects importance sampling (docs/importance.md):
	// sampling=importance with the job's name and the snapshot version
	// sealed for the previous epoch. The zero value is the uniform
	// shuffle, as is a named job without a version (its first epoch).
	Importance Importance
	// Index pins the dataset's index version the job reads (index=, the
	// ID the Brand-Index header and /datasets give). A gateway that does
	// not hold that version answers 409 rather than serve another
	// version's order: a dataset re-packed under a running job never
	// mixes two orders in one epoch without the client being told. ""
	// reads the version the cluster serves now.
	Index string
	// Members pins the cluster membership version the job's global
	// batches are assigned to ranks under (members=, the version the
	// Brand-Members header gives): only which rank of a global batch
	// receives which sample depends on it, never which samples the batch
	// holds. Brand's clients pin the first answer's at the start of each
	// epoch, so that every rank of a step uses the same one; a version no
	// node knows any more is answered 409 naming the current one. ""
	// takes the version the cluster agrees on. A single gateway ignores
	// it.
	Members string
	// Name names the job (job=, 1–128 of [A-Za-z0-9._-]): the gateway
	// follows each named job apart, so that jobs reading one order (the
	// same seed) are two streams to its cache, and reports figures per
	// job. It changes no byte served. An unnamed job is known by its
	// order (dataset, seed, window). With sampling=importance it is also
	// the name the job's feedback is sent under (Importance.Job).
	Name string
	// Weight is the job's share of a contended cache relative to other
	// jobs (weight=, (0, 100]; 0 means 1): its next uses count as nearer
	// by that factor when the gateway chooses what to keep
	// (docs/architecture.md). It changes no byte served.
	Weight float64
	// Mix reads a mixture of datasets instead of Dataset (mix=): each
	// component's own order, interleaved by weight (docs/shuffle.md §11).
	// MixBlock is its mixing block K (mix_block=; 0: BatchSize × World),
	// MixSamples its epoch length (mix_samples=; 0: the components' sizes
	// summed). Both are part of the order: a job that resumes at another
	// world size passes the MixBlock it started with.
	Mix        Mix
	MixBlock   int
	MixSamples int
	// Schedule is a mixture whose weights change by global step
	// (mix_schedule=, docs/shuffle.md §11.9). A server that reads one sets
	// Mix to its first phase's mixture (its datasets, in the order that
	// numbers them); Values sends mix_schedule= in place of mix=.
	Schedule Schedule
	// ScheduleVersion reads the schedule stored under Name (schedule=):
	// "latest", or the version pinned. A server resolves it: Schedule,
	// Mix and ScheduleVersion become the version's.
	ScheduleVersion string
	// Edit is the version of the newest of the edits stored under Name
	// (POST /jobs/NAME/exclude and /jobs/NAME/append, one chain of
	// either kind) that the job's batches are laid out under, which a
	// server fills in: no parameter names it, and a client leaves it "".
	Edit string
	// Transform names the server's pipeline the batch's images go
	// through (transform=, a name /stats lists, such as imagenet-train):
	// each JPEG or PNG member becomes a .npy member holding its decoded,
	// augmented uint8 tensor, drawn from the sample's key alone
	// (docs/transform.md). "" serves the bytes as stored.
	Transform string
	// TransformFingerprint is, on a server, the fingerprint of the
	// pipeline Transform names there (transform.Pipeline.Fingerprint),
	// which the batch's ETag names: a server whose configuration changes
	// a pipeline serves other ETags. The server fills it in; a client
	// leaves it empty and Values does not send it.
	TransformFingerprint string
	// Columns selects the fields of a dataset served in place that its
	// samples carry (columns=, the manifest's field names): a job that
	// selects two of twenty columns reads only those from the store.
	// Empty reads every field. A tar dataset has none to select.
	Columns []string
	// Seq turns a token dataset's documents into batches of packed
	// sequences of Seq tokens each (seq=, 1..1,048,576; 0: the samples
	// as stored): every sample of a batch is then one sequence, with an
	// input_ids.npy and a position_ids.npy member (int32, [Seq]), and
	// batch_size, world, rank, offset and the epoch's extent count
	// sequences (docs/http-api.md, "Token jobs").
	Seq int
	// Pack is how documents become sequences (pack=): "bestfit" (the
	// default, "" alike) or "concat" (docs/shuffle.md §12).
	Pack string
	// Pad is the token ID of a sequence's pad (pad=, default 0): what is
	// pad is told by position_ids' last segment, not by this value.
	Pad int
	// EOS is the token ID concat puts after every document (eos=), when
	// EOSSet; a dataset whose vocabulary does not name its EOS needs it.
	EOS    int
	EOSSet bool
	// Vision makes a token job's samples image-text pairs (vision=, with
	// seq=; package vision's rule, as written): each image resized by the
	// rule and counted as vision tokens in its sequence, whole samples
	// packed best fit (docs/http-api.md, "Image-text sequences"). "" is
	// a text token job.
	Vision string
	// Balance assigns each global batch's samples to its ranks by cost
	// (balance=, docs/shuffle.md §13): BalanceAttention or BalanceTokens
	// for a token job's sequences (and BalanceVision for a vision job's),
	// BalanceBytes for samples of a dataset whose index sizes them. Each rank still takes as many samples as
	// the plain cut gives it, and the global batch holds the same ones;
	// only which rank takes which changes, so the ranks' costs are as
	// even as the batch allows. "" takes the plain cut (or, on a cluster,
	// the locality-aware assignment, which balancing replaces).
	Balance string
	// Clip turns a video dataset's samples into clips (clip=, stride=,
	// fps=, step=, clip_start=, clip_layout=; over a LeRobot dataset
	// delta_timestamps= or frames=): each sample is a clip whose frames
	// are decoded on the data node into a uint8 .npy member, with their
	// source frame numbers and timestamps beside it, and batch_size,
	// world, rank, offset and the epoch's extent count clips
	// (docs/http-api.md, "Video clips"). The zero value serves the
	// samples as stored.
	Clip Clip
	// Buckets batches a dataset's images by shape (buckets=, budget=,
	// docs/http-api.md "Shape buckets"): every global step one bucket,
	// each image resized to cover it and cropped to it on the data node.
	// A bucket job's items are its ranks' batches: batch_size is 1 (one
	// batch of the step's bucket's size), an epoch's extent is its steps
	// times world, and a job resumes at any world size with resume=.
	Buckets Buckets
	// Run serves a dataset's samples as runs of consecutive records
	// (run=, docs/http-api.md "Runs"): each item a run of Run.Len
	// samples of one chunk in the index's order, shuffled as samples
	// are; batch_size, world, rank, offset and the epoch's extent count
	// runs.
	Run Runs
}

// ParamRun is a run job's run length (Job.Run), and HeaderRun names it in
// a run job's batch, whose samples come in runs of that many.
const (
	ParamRun  = "run"
	HeaderRun = "Brand-Run"
	// MaxRun bounds run=.
	MaxRun = 4096
)

// Runs are a run job's parameters: a dataset's samples served as runs
// of Len consecutive records of a chunk (2..MaxRun); 0 serves samples as
// stored.
type Runs struct{ Len int }

// On reports whether the job serves runs.
func (r Runs) On() bool { return r.Len > 0 }

// Params are Job.Run's parameters.
func (*Runs) Params() []string { return []string{ParamRun} }

// Set parses run=.
func (r *Runs) Set(name, v string) error {
	n, err := strconv.Atoi(v)
	if err != nil || n < 2 || n > MaxRun {
		return fmt.Errorf("%s must be a run length of 2..%d records, got %s", name, MaxRun, quote.Input(v))
	}
	r.Len = n
	return nil
}

func (r Runs) setValues(v url.Values) { setPositive(v, ParamRun, r.Len) }

// Clips reports whether the job serves video clips.
func (j Job) Clips() bool { return j.Clip.On() }

// Space is the key of the item space the job's epochs are of when they
// are not of its dataset's samples — a clip job's clip parameters
// (Clip.Key) — and "" otherwise: the layout keys a stream's order by it
// (jobstream.Stream.Space).
func (j Job) Space() string { return j.Clip.Key() }

// Tokens reports whether the job packs a token dataset into sequences
// (seq=).
func (j Job) Tokens() bool { return j.Seq > 0 }

// PackMode is the job's packing mode as written: Pack, or "bestfit" when
// it is "".
func (j Job) PackMode() string {
	if j.Pack == "" {
		return PackBestFit
	}
	return j.Pack
}

// Block is the mixing block a job over a mixture uses: MixBlock, or
// BatchSize × World when it is 0.
func (j Job) Block() int {
	if j.MixBlock > 0 {
		return j.MixBlock
	}
	return j.BatchSize * max(j.World, 1)
}

// Importance names the importance snapshot an epoch is drawn from.
type Importance struct {
	Job     string // the feedback's job name: 1–128 of [A-Za-z0-9._-]
	Version string // the snapshot sealed for the previous epoch; "" for the uniform order
	Hot     int    // the heaviest chunks put first in the epoch, to be found in the cache
}

// On reports whether the job samples by importance.
func (i Importance) On() bool { return i.Job != "" }

// Query parameter names of a job, in the order Values writes them.
const (
	ParamDataset   = "dataset"
	ParamSeed      = "seed"
	ParamBatchSize = "batch_size"
	ParamWindow    = "window"
	ParamWorld     = "world"
	ParamRank      = "rank"
	ParamDropLast  = "drop_last"
	ParamOffset    = "offset"
	ParamLocality  = "locality"
	// Importance sampling: sampling=importance, the job name, the
	// snapshot version and the hot chunk count.
	ParamSampling   = "sampling"
	ParamJob        = "job"
	ParamImportance = "importance"
	ParamHot        = "hot"
	// ParamIndex pins the index version (Job.Index).
	ParamIndex = "index"
	// ParamMembers pins the cluster membership version (Job.Members).
	ParamMembers = "members"
	// ParamWeight is the job's cache weight (Job.Weight).
	ParamWeight = "weight"
	// ParamFormat selects a batch's representation: tar (the default) or
	// json (its manifest).
	ParamFormat = "format"
	// ParamTransform names the pipeline a batch's images go through
	// (Job.Transform).
	ParamTransform = "transform"
	// ParamColumns selects the fields of a dataset served in place
	// (Job.Columns), comma-separated.
	ParamColumns = "columns"
	// A token job (Job.Seq): the sequence length, the packing mode, the
	// pad ID and concat's EOS ID.
	ParamSeq  = "seq"
	ParamPack = "pack"
	ParamPad  = "pad"
	ParamEOS  = "eos"
	// ParamVision is a token job's vision side (package vision's Rule):
	// its samples are image-text pairs whose images count as vision
	// tokens (Job.Vision).
	ParamVision = "vision"
	// ParamBalance balances each global batch's ranks by cost
	// (Job.Balance).
	ParamBalance = "balance"
)

// What balance= may say: the cost a rank's samples are weighed by.
const (
	// BalanceAttention weighs a packed sequence by the sum of the
	// squares of its pieces' lengths: variable-length attention's work.
	BalanceAttention = "attention"
	// BalanceTokens weighs a packed sequence by its tokens that are not
	// pad.
	BalanceTokens = "tokens"
	// BalanceBytes weighs a sample by its stored bytes, which the index
	// of a dataset of tar chunks records.
	BalanceBytes = "bytes"
	// BalanceVision weighs a vision job's sequence by its vision tokens
	// (its images' placeholders): the vision encoder's inputs, which
	// attention and tokens leave uneven across ranks on a mix of images
	// and text.
	BalanceVision = "vision"
)

// BalanceKinds lists what balance= may say.
var BalanceKinds = []string{BalanceAttention, BalanceTokens, BalanceBytes, BalanceVision}

// The packing modes a job may name (pack=), and the bound on seq=.
const (
	PackBestFit = "bestfit"
	PackConcat  = "concat"
	MaxSeq      = 1 << 20
)

// What sampling may say.
const (
	SamplingUniform    = "uniform"
	SamplingImportance = "importance"
)

// JobParams lists the query parameters that make up a Job: its own and
// its kinds' (Job.Units).
var JobParams = append([]string{ParamDataset, ParamSeed, ParamBatchSize, ParamWindow, ParamWorld, ParamRank, ParamDropLast, ParamOffset, ParamLocality,
	ParamSampling, ParamJob, ParamImportance, ParamHot, ParamIndex, ParamWeight, ParamMix, ParamMixSchedule, ParamScheduleVersion, ParamMixBlock, ParamMixSamples, ParamMembers,
	ParamTransform, ParamColumns, ParamSeq, ParamPack, ParamPad, ParamEOS, ParamVision, ParamBalance}, UnitParamNames()...)

// UnitParams are a kind of batch's own parameters in a Job, each of a
// type of this package (Clip, Buckets): the query parameters it takes,
// parsed into it one by one, and written back. Job.Units lists them, and
// the parser (internal/job/query), JobParams and Values go through the
// list, so that a kind's parameters are its type and one entry there.
type UnitParams interface {
	// Params are its parameters' names, in the order Values writes them.
	Params() []string
	// Set parses one of its parameters.
	Set(name, value string) error
	setValues(v url.Values)
}

// Units are the job's kinds' own parameters, one entry a kind.
func (j *Job) Units() []UnitParams { return []UnitParams{&j.Clip, &j.Buckets, &j.Run} }

// UnitParamNames are the names of every kind's own parameters
// (Job.Units), in order.
func UnitParamNames() []string {
	var out []string
	for _, u := range (&Job{}).Units() {
		out = append(out, u.Params()...)
	}
	return out
}

// setPositive sets k to n when n is positive.
func setPositive(v url.Values, k string, n int) {
	if n > 0 {
		v.Set(k, strconv.Itoa(n))
	}
}

// setNonEmpty sets k to s when s is not empty.
func setNonEmpty(v url.Values, k, s string) {
	if s != "" {
		v.Set(k, s)
	}
}

// Values encodes j as query parameters. Fields at their zero value that a
// gateway has its own default for (Dataset, BatchSize, Window, World) are
// left out so that the gateway's defaults apply, and so is Transform when
// "" (bytes as stored); Rank is sent with World.
// Seed and DropLast are always sent: their zero values are valid choices,
// and a program that reads data should not depend on a server flag for its
// order. Offset is sent when it is not 0, locality only when it is off.
func (j Job) Values() url.Values {
	v := url.Values{}
	if j.Dataset != "" {
		v.Set(ParamDataset, j.Dataset)
	}
	v.Set(ParamSeed, strconv.FormatUint(j.Seed, 10))
	if j.BatchSize > 0 { // a bucket job's is not sent (Buckets.setValues)
		v.Set(ParamBatchSize, strconv.Itoa(j.BatchSize))
	}
	if j.Window > 0 {
		v.Set(ParamWindow, strconv.Itoa(j.Window))
	}
	if j.World > 0 || j.Rank > 0 {
		v.Set(ParamWorld, strconv.Itoa(max(j.World, 1)))
		v.Set(ParamRank, strconv.Itoa(j.Rank))
	}
	v.Set(ParamDropLast, strconv.FormatBool(j.DropLast))
	if j.Offset != 0 {
		v.Set(ParamOffset, strconv.Itoa(j.Offset))
	}
	if j.NoLocality {
		v.Set(ParamLocality, "false")
	}
	if j.Name != "" {
		v.Set(ParamJob, j.Name)
	}
	if j.Importance.On() {
		v.Set(ParamSampling, SamplingImportance)
		v.Set(ParamJob, j.Importance.Job)
		if j.Importance.Version != "" {
			v.Set(ParamImportance, j.Importance.Version)
		}
		if j.Importance.Hot != 0 {
			v.Set(ParamHot, strconv.Itoa(j.Importance.Hot))
		}
	}
	if j.Index != "" {
		v.Set(ParamIndex, j.Index)
	}
	if j.Members != "" {
		v.Set(ParamMembers, j.Members)
	}
	if j.Weight != 0 {
		v.Set(ParamWeight, strconv.FormatFloat(j.Weight, 'g', -1, 64))
	}
	switch {
	case j.ScheduleVersion != "":
		v.Set(ParamScheduleVersion, j.ScheduleVersion)
	case len(j.Schedule) > 0:
		v.Set(ParamMixSchedule, j.Schedule.String())
	case len(j.Mix) > 0:
		v.Set(ParamMix, j.Mix.String())
	}
	if len(j.Mix) > 0 || len(j.Schedule) > 0 || j.ScheduleVersion != "" {
		if j.MixBlock > 0 {
			v.Set(ParamMixBlock, strconv.Itoa(j.MixBlock))
		}
		if j.MixSamples > 0 {
			v.Set(ParamMixSamples, strconv.Itoa(j.MixSamples))
		}
	}
	if j.Transform != "" {
		v.Set(ParamTransform, j.Transform)
	}
	if len(j.Columns) > 0 {
		v.Set(ParamColumns, strings.Join(j.Columns, ","))
	}
	// Sequences' parameters, each sent when set (a job that gives pack=
	// without seq= is refused by the server, not mended here).
	setPositive(v, ParamSeq, j.Seq)
	setNonEmpty(v, ParamPack, j.Pack)
	if j.Pad != 0 {
		v.Set(ParamPad, strconv.Itoa(j.Pad))
	}
	if j.EOSSet {
		v.Set(ParamEOS, strconv.Itoa(j.EOS))
	}
	setNonEmpty(v, ParamVision, j.Vision)
	if j.Balance != "" {
		v.Set(ParamBalance, j.Balance)
	}
	for _, u := range j.Units() {
		u.setValues(v)
	}
	return v
}
