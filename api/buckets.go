package api

import (
	"fmt"
	"math"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/brandgw/brand/bucket"
	"github.com/brandgw/brand/internal/quote"
	"github.com/brandgw/brand/shuffle"
)

// Query parameters of a bucket job (Job.Buckets, docs/http-api.md "Shape
// buckets"): images batched by shape, each resized to cover the bucket
// whose aspect ratio is nearest its own and cropped to it, a bucket's
// batch size set by a budget a rank and step.
const (
	ParamBuckets      = "buckets"       // a preset (sdxl, sdxl-768, sdxl-512) or HxW,HxW,...
	ParamBudget       = "budget"        // pixels a rank's batch of a step holds
	ParamBudgetTokens = "budget_tokens" // or latent tokens, with vae= and patch=
	ParamVAE          = "vae"           // the VAE's spatial factor (default 8)
	ParamPatch        = "patch"         // the model's patch (default 2)
	ParamVAET         = "vae_t"         // a video VAE's temporal factor, for a clip's latent frames (default 4)
	ParamMaxUpscale   = "max_upscale"   // the most an image is scaled up to cover its bucket (default 2)
	ParamSmall        = "small"         // an image too small for its bucket, or none: skip (default) or fail
	ParamCrop         = "crop"          // where an image is cropped to its bucket: center (default) or random
	ParamFlip         = "flip"          // the probability an image is flipped left to right (default 0)
	ParamResume       = "resume"        // the epoch's steps taken so far, WORLD:STEPS,... (bucket.ParseResume)
)

// BucketParams are the parameters of Job.Buckets, in the order Values
// writes them.
var BucketParams = []string{ParamBuckets, ParamBudget, ParamBudgetTokens, ParamVAE, ParamPatch, ParamVAET, ParamMaxUpscale, ParamSmall, ParamCrop, ParamFlip, ParamResume}

// Defaults of a bucket job's parameters.
const (
	DefaultMaxUpscale = 2.0
	DefaultVAE        = 8
	DefaultPatch      = 2
	DefaultVAET       = 4
	SmallSkip         = "skip"
	SmallFail         = "fail"
	CropCenter        = "center"
	CropRandom        = "random"
)

// Buckets is a bucket job's parameters; the zero value is no bucket job.
// Shapes is as given (a preset's name or a list), the rest at their
// defaults when not given (Set fills none; Shaped reads them).
type Buckets struct {
	Shapes string
	Pixels int64
	Tokens int64
	// PixelStages and TokenStages are a staged budget= or budget_tokens=
	// as given (STEP@N|STEP@N, Stages); Pixels and Tokens are then 0.
	PixelStages, TokenStages string
	VAE, Patch               int
	VAET                     int
	MaxUpscale               float64
	Small                    string
	Crop                     string
	Flip                     float64
	Resume                   string
}

// On reports whether the job batches by shape.
func (b Buckets) On() bool { return b.Shapes != "" }

// Params are Job.Buckets' parameters (BucketParams).
func (*Buckets) Params() []string { return BucketParams }

// Set parses one of BucketParams into b.
func (b *Buckets) Set(name, v string) error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s: "+format, append([]any{bucket.ErrSpec, name}, args...)...)
	}
	positive := func(hi int64) (int64, error) {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 1 || n > hi {
			return 0, bad("an integer in [1, %d], got %s", hi, quote.Input(v))
		}
		return n, nil
	}
	var err error
	var n int64
	switch name {
	case ParamBuckets:
		if v == Stored {
			b.Shapes = v // the stages stored with the job's schedule
			break
		}
		if staged(v) {
			if _, err = parseStaged(name, v, func(list string) error { _, err := parseLists(list); return err }); err == nil {
				b.Shapes = v
			}
			break
		}
		if _, err = parseLists(v); err == nil {
			b.Shapes = v
		}
	case ParamBudget:
		if v == Stored {
			b.PixelStages = v
			break
		}
		if staged(v) {
			if _, err = parseStaged(name, v, budgetValue); err == nil {
				b.PixelStages = v
			}
			break
		}
		b.Pixels, err = positive(1 << 40)
	case ParamBudgetTokens:
		if v == Stored {
			b.TokenStages = v
			break
		}
		if staged(v) {
			if _, err = parseStaged(name, v, budgetValue); err == nil {
				b.TokenStages = v
			}
			break
		}
		b.Tokens, err = positive(1 << 40)
	case ParamVAE:
		n, err = positive(64)
		b.VAE = int(n)
	case ParamPatch:
		n, err = positive(64)
		b.Patch = int(n)
	case ParamVAET:
		n, err = positive(64)
		b.VAET = int(n)
	case ParamMaxUpscale:
		f, perr := strconv.ParseFloat(v, 64)
		if perr != nil || !(f >= 1 && f <= 64) {
			return bad("a scale in [1, 64], got %s", quote.Input(v))
		}
		b.MaxUpscale = f
	case ParamSmall:
		if v != SmallSkip && v != SmallFail {
			return bad("skip or fail, got %s", quote.Input(v))
		}
		b.Small = v
	case ParamCrop:
		if v != CropCenter && v != CropRandom {
			return bad("center or random, got %s", quote.Input(v))
		}
		b.Crop = v
	case ParamFlip:
		f, perr := strconv.ParseFloat(v, 64)
		if perr != nil || !(f >= 0 && f <= 1) || math.IsNaN(f) {
			return bad("a probability in [0, 1], got %s", quote.Input(v))
		}
		b.Flip = f
	case ParamResume:
		if _, err = bucket.ParseResume(v); err == nil {
			b.Resume = v
		}
	default:
		return bad("not a bucket parameter")
	}
	return err
}

// Shaped returns the job's buckets, budget and upscale limit with the
// defaults filled in, and each bucket's batch size: a budget that holds
// no image of a bucket is refused (bucket.ErrSpec).
func (b Buckets) Shaped() (shapes []bucket.Shape, budget bucket.Budget, sizes []int, err error) {
	if b.Staged() {
		return nil, budget, nil, fmt.Errorf("%w: a staged bucket job's buckets are its stages' (Stages)", bucket.ErrSpec)
	}
	if PerSource(b.Shapes) {
		return nil, budget, nil, fmt.Errorf("%w: buckets=%s names its sources' lists: a job of one dataset gives one list", bucket.ErrSpec, quote.Input(b.Shapes))
	}
	if shapes, err = bucket.Parse(b.Shapes); err != nil {
		return nil, budget, nil, err
	}
	if b.Pixels > 0 && b.Tokens > 0 {
		return nil, budget, nil, fmt.Errorf("%w: give one budget, %s or %s", bucket.ErrSpec, ParamBudget, ParamBudgetTokens)
	}
	budget = bucket.Budget{Pixels: b.Pixels, Tokens: b.Tokens, VAE: b.VAE, Patch: b.Patch, VAET: b.VAET}
	if budget.Tokens > 0 {
		if budget.VAET == 0 {
			budget.VAET = DefaultVAET
		}
		if budget.VAE == 0 {
			budget.VAE = DefaultVAE
		}
		if budget.Patch == 0 {
			budget.Patch = DefaultPatch
		}
	}
	sizes, err = budget.Sizes(shapes)
	return shapes, budget, sizes, err
}

// ClipOf returns the clip parameters of a clip bucket job (buckets of
// HxWxT) whose request gave c, and true; false for an image bucket job.
// A clip bucket job takes one clip a video an epoch, of its bucket's
// frames (bucket.NearestClip), stride= apart, the video resampled at
// fps= first, its start drawn anew each epoch (or its first frame, with
// clip_start=first): its base order is the clip job of one clip a video
// (step= the most) of the shortest bucket's frames, whose samples are
// the videos long enough for some bucket. A request that gives clip= or
// step= otherwise, or LeRobot windows, is refused (ErrSpec), and so is a
// clip job with buckets of images.
func (b Buckets) ClipOf(c Clip) (Clip, bool, error) {
	if !b.On() || b.FromStore() {
		return c, false, nil
	}
	t := 0 // the fewest frames of a clip bucket, of any source's list at any stage
	stages, err := b.Stages()
	if err != nil {
		return c, false, err
	}
	for _, st := range stages {
		lists, err := parseLists(st.B.Shapes)
		if err != nil {
			return c, false, err
		}
		for _, shapes := range lists {
			for _, s := range shapes {
				if s.T > 0 && (t == 0 || s.T < t) {
					t = s.T
				}
			}
		}
	}
	if t == 0 {
		// clip= beside buckets of HxW: the table's refusal (a clip
		// bucket job's clips are its buckets').
		return c, false, nil
	}
	switch {
	case len(c.Windows) > 0 || c.Step != 0 && c.Step != MaxClipStep || c.Frames != 0 && c.Step == 0:
		// A LeRobot job's windows, or clip= or step= given: the table's
		// refusals, of the request as given.
		return c, false, nil
	case c.Frames != 0 && c.Frames != t:
		return c, true, fmt.Errorf("%w: a clip bucket job's clips take their bucket's frames, one a video an epoch: give no clip= or step=", bucket.ErrSpec)
	}
	c.Frames, c.Step = t, MaxClipStep
	return c, true, nil
}

// A bucketed mixture's sources each take a list of their own:
// buckets=NAME:LIST;NAME:LIST, a list (a preset or HxW[xT] sizes) for
// each source of the mixture, named as mix= names it (an image source's
// list of HxW, a video source's of HxWxT). A plain list is every
// source's. sourceSep parts the sources' lists, nameSep a source's name
// from its list.
const (
	sourceSep = ";"
	nameSep   = ":"
)

// PerSource reports whether a buckets= value names its sources' lists.
func PerSource(shapes string) bool { return strings.Contains(shapes, nameSep) }

// parseLists parses a buckets= value: one list (under the name ""), or
// one a source named (PerSource).
func parseLists(v string) (map[string][]bucket.Shape, error) {
	if !PerSource(v) {
		shapes, err := bucket.Parse(v)
		if err != nil {
			return nil, err
		}
		return map[string][]bucket.Shape{"": shapes}, nil
	}
	parts := strings.Split(v, sourceSep)
	if len(parts) > shuffle.MaxMixComponents {
		return nil, fmt.Errorf("%w: buckets= names %d sources' lists, more than a mixture's %d", bucket.ErrSpec, len(parts), shuffle.MaxMixComponents)
	}
	out := make(map[string][]bucket.Shape, len(parts))
	for _, p := range parts {
		name, list, ok := strings.Cut(p, nameSep)
		if !ok || name == "" {
			return nil, fmt.Errorf("%w: buckets=%s: each source's list is NAME:LIST, parted by %q (a list: a preset or HxW[xT] sizes)", bucket.ErrSpec, quote.Input(v), sourceSep)
		}
		if _, dup := out[name]; dup {
			return nil, fmt.Errorf("%w: buckets= names source %s's list twice", bucket.ErrSpec, quote.Input(name))
		}
		shapes, err := bucket.Parse(list)
		if err != nil {
			return nil, fmt.Errorf("source %s's list: %w", quote.Input(name), err)
		}
		out[name] = shapes
	}
	return out, nil
}

// For returns b as source name of a bucketed mixture takes it: Shapes
// its own list, or the plain list every source takes. A list that names
// no list for name is refused, naming it.
func (b Buckets) For(name string) (Buckets, error) {
	if staged(b.Shapes) {
		// Each stage's list for name, staged as given.
		stages, err := parseStaged(ParamBuckets, b.Shapes, func(string) error { return nil })
		if err != nil {
			return b, err
		}
		parts := make([]string, len(stages))
		for i, st := range stages {
			x := b
			x.Shapes = st.value
			if x, err = x.For(name); err != nil {
				return b, err
			}
			parts[i] = strconv.FormatUint(st.from, 10) + stageMark + x.Shapes
		}
		b.Shapes = strings.Join(parts, stageSep)
		return b, nil
	}
	if !PerSource(b.Shapes) {
		return b, nil
	}
	for _, p := range strings.Split(b.Shapes, sourceSep) {
		if n, list, ok := strings.Cut(p, nameSep); ok && n == name {
			b.Shapes = list
			return b, nil
		}
	}
	return b, fmt.Errorf("%w: buckets=%s names no list for source %s: name every source of the mixture (NAME:LIST, parted by %q)", bucket.ErrSpec, quote.Input(b.Shapes), name, sourceSep)
}

// Sources are the sources a buckets= value names lists for, in its
// order; nil for a plain list.
func (b Buckets) Sources() []string {
	if !PerSource(b.Shapes) {
		return nil
	}
	var out []string
	for _, p := range strings.Split(b.Shapes, sourceSep) {
		n, _, _ := strings.Cut(p, nameSep)
		out = append(out, n)
	}
	return out
}

// Stages of a bucket job: its buckets and budget may change at stated
// global steps (generation models train at 256² up to a step, 512² after,
// and so on). A staged buckets=, budget= or budget_tokens= is
// STEP@VALUE|STEP@VALUE, the first from step 0, steps ascending; a value
// not staged is every stage's. Each stage's list and budget are as an
// unstaged job's (a plain or per-source list; a budget in pixels or
// latent tokens).
const (
	stageSep  = "|"
	stageMark = "@"
	// MaxStages bounds a job's stages.
	MaxStages = 64
)

// A BucketStage is one stage of a bucket job: from global step From
// (counted from the job's first step, over its epochs), the job's bucket
// parameters unstaged: its list and budget in force.
type BucketStage struct {
	From uint64
	B    Buckets
}

// staged reports whether a parameter's value is staged.
func staged(v string) bool { return strings.Contains(v, stageMark) }

// budgetValue checks a stage's budget.
func budgetValue(v string) error {
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < 1 || n > 1<<40 {
		return fmt.Errorf("an integer in [1, %d], got %s", int64(1<<40), quote.Input(v))
	}
	return nil
}

// stagedValue is one stage of a staged parameter.
type stagedValue struct {
	from  uint64
	value string
}

// parseStaged parses a staged value of parameter name (STEP@VALUE|...),
// each value checked by check.
func parseStaged(name, v string, check func(string) error) ([]stagedValue, error) {
	return parseStagedFrom(name, v, 0, check)
}

// parseStagedFrom is parseStaged of stages the first of which is at step
// first (an edit's, from its step).
func parseStagedFrom(name, v string, first uint64, check func(string) error) ([]stagedValue, error) {
	parts := strings.Split(v, stageSep)
	if len(parts) > MaxStages {
		return nil, fmt.Errorf("%w: %s: %d stages, more than %d", bucket.ErrSpec, name, len(parts), MaxStages)
	}
	out := make([]stagedValue, 0, len(parts))
	for i, p := range parts {
		step, value, ok := strings.Cut(p, stageMark)
		n, err := strconv.ParseUint(step, 10, 64)
		if !ok || err != nil || n > 1<<40 {
			return nil, fmt.Errorf("%w: %s: stage %s is not STEP@VALUE (stages parted by %q, the first from step 0)", bucket.ErrSpec, name, quote.Input(p), stageSep)
		}
		if i == 0 && n != first || i > 0 && n <= out[i-1].from {
			return nil, fmt.Errorf("%w: %s: the stages' steps start at %d and ascend, got %s", bucket.ErrSpec, name, first, quote.Input(v))
		}
		if err := check(value); err != nil {
			return nil, fmt.Errorf("%w: %s: stage from step %d: %w", bucket.ErrSpec, name, n, err)
		}
		out = append(out, stagedValue{n, value})
	}
	return out, nil
}

// FromStore reports whether the job reads its buckets (and budget) from
// the stages stored with its schedule (buckets=stored).
func (b Buckets) FromStore() bool {
	return b.Shapes == Stored || b.PixelStages == Stored || b.TokenStages == Stored
}

// WithStored is b with the stages stored with the job's schedule in
// place of the values that name them (Stored); a stored schedule of no
// stages is refused, as is buckets=stored with a budget given that
// names none.
func (b Buckets) WithStored(st BucketStages) (Buckets, error) {
	if st.Buckets == "" && b.Shapes == Stored {
		return b, fmt.Errorf("%w: buckets=stored: the job's schedule stores no bucket stages", bucket.ErrSpec)
	}
	out := b
	if out.Shapes == Stored {
		out.Shapes = st.Buckets
		if err := (&Buckets{}).Set(ParamBuckets, out.Shapes); err != nil {
			return b, err
		}
	}
	for _, x := range []struct {
		name   string
		cur    *string
		n      *int64
		stored string
	}{{ParamBudget, &out.PixelStages, &out.Pixels, st.Budget}, {ParamBudgetTokens, &out.TokenStages, &out.Tokens, st.BudgetTokens}} {
		if *x.cur != Stored {
			continue
		}
		*x.cur = ""
		if x.stored == "" {
			continue
		}
		var set Buckets
		if err := set.Set(x.name, x.stored); err != nil {
			return b, err
		}
		if x.name == ParamBudget {
			out.Pixels, out.PixelStages = set.Pixels, set.PixelStages
		} else {
			out.Tokens, out.TokenStages = set.Tokens, set.TokenStages
		}
	}
	if out.Pixels == 0 && out.PixelStages == "" && out.Tokens == 0 && out.TokenStages == "" {
		return b, fmt.Errorf("%w: budget=stored: the job's schedule stores no budget (store budget or budget_tokens with its buckets, or give one)", bucket.ErrSpec)
	}
	return out, out.Check()
}

// Staged reports whether the job's buckets or budget change at stated
// steps.
func (b Buckets) Staged() bool {
	return staged(b.Shapes) || b.PixelStages != "" || b.TokenStages != ""
}

// Stages returns the job's stages: one from step 0 for a job not staged;
// otherwise one from each step where its list or its budget changes,
// each with the list and the budget in force from there.
func (b Buckets) Stages() ([]BucketStage, error) {
	if !b.Staged() {
		return []BucketStage{{From: 0, B: b}}, nil
	}
	plain := func(v string) []stagedValue { return []stagedValue{{0, v}} }
	lists := plain(b.Shapes)
	if staged(b.Shapes) {
		var err error
		if lists, err = parseStaged(ParamBuckets, b.Shapes, func(string) error { return nil }); err != nil {
			return nil, err
		}
	}
	var pixels, tokens []stagedValue
	var err error
	switch {
	case b.PixelStages != "":
		if pixels, err = parseStaged(ParamBudget, b.PixelStages, budgetValue); err != nil {
			return nil, err
		}
	case b.Pixels > 0:
		pixels = plain(strconv.FormatInt(b.Pixels, 10))
	}
	switch {
	case b.TokenStages != "":
		if tokens, err = parseStaged(ParamBudgetTokens, b.TokenStages, budgetValue); err != nil {
			return nil, err
		}
	case b.Tokens > 0:
		tokens = plain(strconv.FormatInt(b.Tokens, 10))
	}
	var steps []uint64
	for _, vs := range [][]stagedValue{lists, pixels, tokens} {
		for _, x := range vs {
			steps = append(steps, x.from)
		}
	}
	slices.Sort(steps)
	steps = slices.Compact(steps)
	if len(steps) > MaxStages {
		return nil, fmt.Errorf("%w: %d stages, more than %d", bucket.ErrSpec, len(steps), MaxStages)
	}
	at := func(vs []stagedValue, step uint64) string {
		v := ""
		for _, x := range vs {
			if x.from <= step {
				v = x.value
			}
		}
		return v
	}
	out := make([]BucketStage, len(steps))
	for i, step := range steps {
		x := b
		x.Shapes, x.PixelStages, x.TokenStages, x.Pixels, x.Tokens = at(lists, step), "", "", 0, 0
		if v := at(pixels, step); v != "" {
			x.Pixels, _ = strconv.ParseInt(v, 10, 64)
		}
		if v := at(tokens, step); v != "" {
			x.Tokens, _ = strconv.ParseInt(v, 10, 64)
		}
		out[i] = BucketStage{From: step, B: x}
	}
	return out, nil
}

// Check is nil for a job without buckets, or for buckets and a budget
// that go together (Shaped), at every stage.
func (b Buckets) Check() error {
	if !b.On() || b.FromStore() {
		return nil // a stored job's are checked once read (Resolved)
	}
	if b.Staged() {
		stages, err := b.Stages()
		if err != nil {
			return err
		}
		for _, st := range stages {
			if err := st.B.Check(); err != nil {
				return fmt.Errorf("the stage from step %d: %w", st.From, err)
			}
		}
		return nil
	}
	if names := b.Sources(); names != nil {
		for _, n := range names {
			x, _ := b.For(n)
			if _, _, _, err := x.Shaped(); err != nil {
				return fmt.Errorf("source %s: %w", n, err)
			}
		}
		return nil
	}
	_, _, _, err := b.Shaped()
	return err
}

// Items is the batch size of a job's layout: a bucket job's items are its
// ranks' batches, each of its bucket's size (1), any other job's
// batchSize.
func (b Buckets) Items(batchSize int) int {
	if b.On() {
		return 1
	}
	return batchSize
}

// Upscale is the upscale limit in force.
func (b Buckets) Upscale() float64 {
	if b.MaxUpscale == 0 {
		return DefaultMaxUpscale
	}
	return b.MaxUpscale
}

// RandomCrop reports whether an image is cropped to its bucket at
// offsets drawn from its key (crop=random) rather than at the centre.
func (b Buckets) RandomCrop() bool { return b.Crop == CropRandom }

// Fails reports whether an image that fits no bucket fails the job
// (small=fail) rather than being skipped.
func (b Buckets) Fails() bool { return b.Small == SmallFail }

func (b Buckets) setValues(v url.Values) {
	if !b.On() {
		return
	}
	v.Set(ParamBuckets, b.Shapes)
	if b.Pixels > 0 {
		v.Set(ParamBudget, strconv.FormatInt(b.Pixels, 10))
	}
	if b.PixelStages != "" {
		v.Set(ParamBudget, b.PixelStages)
	}
	if b.Tokens > 0 {
		v.Set(ParamBudgetTokens, strconv.FormatInt(b.Tokens, 10))
	}
	if b.TokenStages != "" {
		v.Set(ParamBudgetTokens, b.TokenStages)
	}
	if b.VAE > 0 {
		v.Set(ParamVAE, strconv.Itoa(b.VAE))
	}
	if b.Patch > 0 {
		v.Set(ParamPatch, strconv.Itoa(b.Patch))
	}
	if b.VAET > 0 {
		v.Set(ParamVAET, strconv.Itoa(b.VAET))
	}
	if b.MaxUpscale > 0 {
		v.Set(ParamMaxUpscale, strconv.FormatFloat(b.MaxUpscale, 'g', -1, 64))
	}
	if b.Small != "" {
		v.Set(ParamSmall, b.Small)
	}
	if b.Crop != "" {
		v.Set(ParamCrop, b.Crop)
	}
	if b.Flip > 0 {
		v.Set(ParamFlip, strconv.FormatFloat(b.Flip, 'g', -1, 64))
	}
	if b.Resume != "" {
		v.Set(ParamResume, b.Resume)
	}
	// A bucket job's batch sizes are its budget's: a server's job has
	// batch size 1 (Items), which is not sent.
	v.Del(ParamBatchSize)
}

// BucketsInfo is a bucket job's epoch in EpochInfo: each bucket's share,
// and the images no bucket takes.
type BucketsInfo struct {
	// Budget is the budget a rank's batch of a step holds, in Unit
	// ("pixels" or "latent tokens").
	Budget int64  `json:"budget"`
	Unit   string `json:"unit"`
	// Resume is the resume point the epoch's steps start from ("" for
	// its start), Taken the images it took of each bucket.
	Resume  string       `json:"resume,omitempty"`
	Buckets []BucketInfo `json:"buckets"`
	// TooSmall are the images that would be scaled up by more than the
	// limit (MaxUpscale) to cover their bucket, NoImage the samples with
	// no image whose size the index holds, TooShort a clip bucket job's
	// videos too short for every bucket's frames: all skipped
	// (small=skip).
	TooSmall   int     `json:"too_small"`
	NoImage    int     `json:"no_image"`
	TooShort   int     `json:"too_short,omitempty"`
	MaxUpscale float64 `json:"max_upscale"`
	// Fill is the mean share of the budget a step's batch uses, over
	// the epoch's steps.
	Fill float64 `json:"fill"`
}

// BucketInfo is one bucket of a bucket job's epoch.
type BucketInfo struct {
	Shape string `json:"shape"` // HxW
	// Samples are the epoch's images in the bucket, Taken those the
	// resume point took, Batches the steps of the bucket from it on,
	// each of BatchSize images a rank, and Dropped its images left over
	// (fewer than a global batch, served by no step of the epoch).
	Samples   int     `json:"samples"`
	Taken     int     `json:"taken,omitempty"`
	Batches   int     `json:"batches"`
	BatchSize int     `json:"batch_size"`
	Dropped   int     `json:"dropped"`
	Fill      float64 `json:"fill"` // the share of the budget its batch uses
	// Stage is, for a staged job, the global step its stage starts at: a
	// stage's buckets from where it starts in the epoch, their Samples
	// the images the steps before left (those a stage's steps leave are
	// the next stage's: Dropped counts the last stage's alone).
	Stage *uint64 `json:"stage,omitempty"`
}

// BucketPlanEpoch is one epoch of a bucket job's plan (GET /plan): its
// steps and its buckets, as /epoch/N gives them.
type BucketPlanEpoch struct {
	Epoch int `json:"epoch"`
	Steps int `json:"steps"`
	BucketsInfo
}
