package query

import (
	"errors"
	"flag"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/brandgw/brand/api"
	"github.com/brandgw/brand/internal/job/features"
	"github.com/brandgw/brand/shuffle"
)

var update = flag.Bool("update", false, "rewrite testdata/job_params.golden from api.JobParams")

// endpoints are the lists of parameters each kind of endpoint accepts.
var endpoints = map[string][]string{
	"JobParams": JobParams, "PlanParams": PlanParams, "SampleParams": SampleParams,
	"FeedbackParams": FeedbackParams, "SealParams": SealParams, "SealedParams": SealedParams,
	"PeerSampleParams": PeerSampleParams, "PeerFeedbackParams": PeerFeedbackParams,
	"PeerChunkParams": PeerChunkParams, "PeerNeededParams": PeerNeededParams, "PeerSettleParams": PeerSettleParams,
}

// TestJobParamsGolden pins the public job parameters, one name a line,
// sorted, in testdata/job_params.golden: the names api.JobParams lists,
// which the Go client writes (api.Job.Values) and every batch endpoint
// accepts. The Python client's tests read the same file to pin its
// encoder, so a parameter added here and not there fails one of them.
func TestJobParamsGolden(t *testing.T) {
	names := slices.Sorted(slices.Values(api.JobParams))
	got := strings.Join(names, "\n") + "\n"
	path := filepath.Join("testdata", "job_params.golden")
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if got != string(want) {
		t.Errorf("api.JobParams, sorted:\n%s\nwant (%s; go test -update rewrites it):\n%s", got, path, want)
	}
	if len(slices.Compact(slices.Clone(names))) != len(names) {
		t.Errorf("api.JobParams names a parameter twice: %v", names)
	}
}

// TestTableCoversEveryEndpoint: every parameter an endpoint accepts is in
// the one table (Parse would otherwise call a missing entry), every entry
// is accepted somewhere, no list names one twice, and the batch endpoints
// take exactly the job's parameters and format, the plan endpoint the
// job's and its own.
func TestTableCoversEveryEndpoint(t *testing.T) {
	used := map[string]bool{}
	for name, list := range endpoints {
		seen := map[string]bool{}
		for _, p := range list {
			if params[p] == nil {
				t.Errorf("%s accepts %q, which the parameter table lacks", name, p)
			}
			if seen[p] {
				t.Errorf("%s names %q twice", name, p)
			}
			seen[p], used[p] = true, true
		}
	}
	for p := range params {
		if !used[p] {
			t.Errorf("the table has %q, which no endpoint accepts", p)
		}
	}
	if want := append(slices.Clone(api.JobParams), api.ParamFormat); !slices.Equal(JobParams, want) {
		t.Errorf("JobParams %v, want api.JobParams and format: %v", JobParams, want)
	}
	if !reflect.DeepEqual(PlanParams[:len(api.JobParams)], api.JobParams) {
		t.Errorf("PlanParams %v do not begin with api.JobParams %v", PlanParams, api.JobParams)
	}
}

// TestJobValuesParseBack: a job the Go client encodes (api.Job.Values) is
// parsed back into the same job, and between them the two jobs below write
// every job parameter: the encoder and the table agree on every name and
// what it means.
func TestJobValuesParseBack(t *testing.T) {
	sched, err := api.ParseSchedule("0:web:0.7,code:0.3;40~80:web:0,code:1")
	if err != nil {
		t.Fatal(err)
	}
	jobs := []api.Job{
		{Dataset: "in", Params: shuffle.Params{Seed: 7, Window: 4, BatchSize: 64, World: 4, Rank: 3, DropLast: true, Offset: 640},
			NoLocality: true, Name: "j", Importance: api.Importance{Job: "j", Version: "0123456789abcdef", Hot: 3},
			Index: "fedcba9876543210", Members: "0011223344556677", Weight: 2.5, Transform: "imagenet-train"},
		{Params: shuffle.Params{Seed: 9, Window: 2, BatchSize: 16, World: 1}, Name: "mixed", Weight: 0.5,
			Mix: api.Mix{{Dataset: "web", Weight: "0.7"}, {Dataset: "code", Weight: "0.3"}}, MixBlock: 128, MixSamples: 1000,
			Columns: []string{"image", "label"}},
		{Dataset: "tok", Params: shuffle.Params{Seed: 3, Window: 8, BatchSize: 8, World: 1}, Seq: 4096, Pack: "concat", Pad: 7, EOS: 2, EOSSet: true, Balance: "attention"},
		{Dataset: "pairs", Params: shuffle.Params{Seed: 3, Window: 8, BatchSize: 8, World: 1}, Seq: 4096, Vision: "min:3136,max:1003520,patch:14,merge:2,image:151655,images:8"},
		{Params: shuffle.Params{Seed: 9, Window: 2, BatchSize: 16, World: 1},
			Mix: sched[0].Mix, Schedule: sched, MixBlock: 64},
		{Params: shuffle.Params{Seed: 9, Window: 2, BatchSize: 16, World: 1}, Name: "run", ScheduleVersion: "0123456789abcdef", MixBlock: 64},
		{Dataset: "kinetics", Params: shuffle.Params{Seed: 5, Window: 4, BatchSize: 8, World: 2, Rank: 1}, Transform: "imagenet-train",
			Clip: api.Clip{Frames: 16, Stride: 2, FPS: 7.5, Step: 3, First: true, Layout: api.ClipTCHW}},
		{Dataset: "aloha", Params: shuffle.Params{Seed: 5, Window: 4, BatchSize: 8, World: 1},
			Clip: api.Clip{Layout: api.ClipCTHW, Windows: []api.ClipWindow{
				{Key: "observation.images.top", Offsets: []float64{-0.1, 0}}, {Key: "action", Offsets: []float64{0, 0.02, 0.04}},
				{Offsets: []float64{-2, 0}, InFrames: true}}, GOPWindow: 4}},
		{Dataset: "photos", Params: shuffle.Params{Seed: 5, Window: 4, BatchSize: 1, World: 4, Rank: 2},
			Buckets: api.Buckets{Shapes: "sdxl", Pixels: 4 << 20, MaxUpscale: 1.5, Small: api.SmallFail, Crop: api.CropRandom, Flip: 0.5, Resume: "4:10,3:2"}},
		{Dataset: "photos", Params: shuffle.Params{Seed: 5, Window: 4, BatchSize: 1, World: 1},
			Buckets: api.Buckets{Shapes: "512x512,384x640", Tokens: 8192, VAE: 8, Patch: 2}},
		{Dataset: "clips", Params: shuffle.Params{Seed: 5, Window: 4, BatchSize: 1, World: 2},
			Buckets: api.Buckets{Shapes: "480x848x49,640x640x17", Tokens: 1 << 20, VAE: 8, Patch: 2, VAET: 4},
			Clip:    api.Clip{Frames: 17, Stride: 2, FPS: 8, Step: api.MaxClipStep}},
		{Dataset: "steps", Params: shuffle.Params{Seed: 5, Window: 4, BatchSize: 8, World: 2}, Run: api.Runs{Len: 16}},
	}
	written := map[string]bool{}
	l := Limits{}
	l.Fill()
	for _, job := range jobs {
		v := job.Values()
		for k := range v {
			written[k] = true
		}
		q, err := Parse(v.Encode(), JobParams, Query{Job: api.Job{Params: shuffle.Params{BatchSize: 32, Window: 8, World: 1}}}, l)
		if err != nil {
			t.Fatalf("%s: %v", v.Encode(), err)
		}
		if !reflect.DeepEqual(q.Job, job) {
			t.Errorf("%s parsed as\n%+v\nwant\n%+v", v.Encode(), q.Job, job)
		}
	}
	if got := slices.Sorted(maps.Keys(written)); !slices.Equal(got, slices.Sorted(slices.Values(api.JobParams))) {
		t.Errorf("the jobs wrote %v, want every one of api.JobParams %v", got, api.JobParams)
	}
}

// TestParse: defaults, limits, and what is refused, on the parameters
// each kind of endpoint accepts.
func TestParse(t *testing.T) {
	base := Query{Job: api.Job{Dataset: "d", Params: shuffle.Params{Seed: 5, BatchSize: 32, Window: 8, World: 1}}}
	filled := Limits{}
	filled.Fill()
	small := Limits{MaxBatchSize: 100, MaxWindow: 4, MaxWorld: 8, MaxEpoch: 9}
	small.Fill()
	tests := []struct {
		name     string
		raw      string
		accepted []string
		limits   Limits
		want     func(q *Query) // base, changed as the query says
		err      error
		says     string // in the error
	}{
		{name: "nothing given: the defaults", raw: "", want: func(*Query) {}},
		{name: "empty values are the defaults", raw: "seed=&batch_size=&job=", want: func(*Query) {}},
		{name: "every cut of a job", raw: "seed=7&batch_size=64&window=4&world=8&rank=7&drop_last=true&offset=640&locality=false",
			want: func(q *Query) {
				q.Job.Params = shuffle.Params{Seed: 7, BatchSize: 64, Window: 4, World: 8, Rank: 7, DropLast: true, Offset: 640}
				q.Job.NoLocality = true
			}},
		{name: "the largest seed", raw: "seed=18446744073709551615", want: func(q *Query) { q.Job.Seed = 1<<64 - 1 }},
		{name: "a seed past 64 bits", raw: "seed=18446744073709551616", err: ErrBadRequest, says: "seed"},
		{name: "a negative seed", raw: "seed=-1", err: ErrBadRequest, says: "seed"},
		{name: "batch size at the default limit", raw: "batch_size=65536", want: func(q *Query) { q.Job.BatchSize = 65536 }},
		{name: "batch size past the default limit", raw: "batch_size=65537", err: ErrBadRequest, says: "--max-batch-size"},
		{name: "batch size past a server's limit", raw: "batch_size=101", limits: small, err: ErrBadRequest, says: "between 1 and 100"},
		{name: "batch size 0", raw: "batch_size=0", err: ErrBadRequest, says: "batch_size"},
		{name: "batch size not a number", raw: "batch_size=lots", err: ErrBadRequest, says: "integer"},
		{name: "window past a server's limit", raw: "window=5", limits: small, err: ErrBadRequest, says: "window"},
		{name: "world past a server's limit", raw: "world=9", limits: small, err: ErrBadRequest, says: "world"},
		{name: "rank outside the world: not found", raw: "world=4&rank=4", err: ErrOutOfRange, says: "rank must be 0..3"},
		{name: "a negative rank", raw: "rank=-1", err: ErrBadRequest, says: "rank"},
		{name: "a negative offset", raw: "offset=-1", err: ErrBadRequest, says: "offset"},
		{name: "drop_last not a boolean", raw: "drop_last=maybe", err: ErrBadRequest, says: "true or false"},
		{name: "a pipeline", raw: "transform=imagenet-train", want: func(q *Query) { q.Job.Transform = "imagenet-train" }},
		{name: "a pipeline named with other characters", raw: "transform=v1.small_train", want: func(q *Query) { q.Job.Transform = "v1.small_train" }},
		{name: "a pipeline name in capitals", raw: "transform=ImageNet", err: ErrBadRequest, says: "pipeline's name"},
		{name: "a pipeline name too long", raw: "transform=" + strings.Repeat("a", 65), err: ErrBadRequest, says: "1 to 64"},
		{name: "a pipeline's fingerprint is the peers' alone", raw: "transform_fp=0123456789abcdef", err: ErrBadRequest, says: "unknown query parameter"},
		{name: "a peer's pipeline and fingerprint", raw: "dataset=d&transform=t&transform_fp=0123456789abcdef", accepted: PeerSampleParams,
			want: func(q *Query) { q.Job.Transform, q.Job.TransformFingerprint = "t", "0123456789abcdef" }},
		{name: "a peer's fingerprint malformed", raw: "transform_fp=0123", accepted: PeerSampleParams, err: ErrBadRequest, says: "16 hex digits"},
		{name: "weight", raw: "weight=0.25", want: func(q *Query) { q.Job.Weight = 0.25 }},
		{name: "weight at its limit", raw: "weight=100", want: func(q *Query) { q.Job.Weight = 100 }},
		{name: "weight past its limit", raw: "weight=100.5", err: ErrBadRequest, says: "(0, 100]"},
		{name: "weight 0", raw: "weight=0", err: ErrBadRequest, says: "weight"},
		{name: "weight NaN", raw: "weight=NaN", err: ErrBadRequest, says: "weight"},
		{name: "weight infinite", raw: "weight=Inf", err: ErrBadRequest, says: "weight"},
		{name: "a job name", raw: "job=lr-0.1_a", want: func(q *Query) { q.Job.Name = "lr-0.1_a" }},
		{name: "a job name with a space", raw: "job=a+b", err: ErrBadRequest, says: "job"},
		{name: "importance sampling", raw: "sampling=importance&job=j&importance=0123456789abcdef&hot=2",
			want: func(q *Query) {
				q.Sampling, q.Job.Name = "importance", "j"
				q.Job.Importance = api.Importance{Job: "j", Version: "0123456789abcdef", Hot: 2}
			}},
		{name: "importance sampling without a job name", raw: "sampling=importance", err: features.ErrIncompatible, says: "job=NAME"},
		{name: "a snapshot without importance sampling", raw: "importance=0123456789abcdef", err: features.ErrIncompatible, says: "importance and hot apply only with sampling=importance"},
		{name: "hot without importance sampling", raw: "hot=2", err: features.ErrIncompatible, says: "importance and hot apply only with sampling=importance"},
		{name: "a snapshot version not in hex", raw: "sampling=importance&job=j&importance=XYZ", err: ErrBadRequest, says: "16 hex digits"},
		{name: "another sampling", raw: "sampling=random", err: ErrBadRequest, says: "uniform or importance"},
		{name: "an index version", raw: "index=0123456789abcdef", want: func(q *Query) { q.Job.Index = "0123456789abcdef" }},
		{name: "an index version in capitals", raw: "index=0123456789ABCDEF", err: ErrBadRequest, says: "index ID"},
		{name: "a mixture", raw: "mix=web:0.7,code:0.3&mix_block=64&mix_samples=1000&dataset=",
			want: func(q *Query) {
				q.Job.Mix = api.Mix{{Dataset: "web", Weight: "0.7"}, {Dataset: "code", Weight: "0.3"}}
				q.Job.MixBlock, q.Job.MixSamples = 64, 1000
			}},
		{name: "a mixture and a dataset", raw: "mix=web:1&dataset=web", err: features.ErrIncompatible, says: "a job reads one source"},
		{name: "a mixture pinned to an index", raw: "mix=web:1&index=0123456789abcdef", err: features.ErrIncompatible, says: "index= pins one dataset's version"},
		{name: "a mixture by importance", raw: "mix=web:1&sampling=importance&job=j", err: features.ErrIncompatible, says: "per dataset"},
		{name: "a mixing block without a mixture", raw: "mix_block=64", err: features.ErrIncompatible, says: "apply only with mix="},
		{name: "a mixing block past its limit", raw: "mix=web:1&mix_block=16777217", err: ErrBadRequest, says: "mix_block"},
		{name: "a mixture named twice", raw: "mix=web:1,web:2", err: ErrBadRequest, says: "twice"},
		{name: "a token job", raw: "seq=2048", want: func(q *Query) { q.Job.Seq = 2048 }},
		{name: "a token job of every parameter", raw: "seq=1048576&pack=concat&pad=3&eos=0",
			want: func(q *Query) {
				q.Job.Seq, q.Job.Pack, q.Job.Pad, q.Job.EOS, q.Job.EOSSet = 1<<20, "concat", 3, 0, true
			}},
		{name: "seq 0", raw: "seq=0", err: ErrBadRequest, says: "between 1 and 1048576"},
		{name: "seq past its bound", raw: "seq=1048577", err: ErrBadRequest, says: "between 1 and 1048576"},
		{name: "seq not a number", raw: "seq=4k", err: ErrBadRequest, says: "integer"},
		{name: "another packing", raw: "seq=8&pack=greedy", err: ErrBadRequest, says: "bestfit or concat"},
		{name: "a negative pad", raw: "seq=8&pad=-1", err: ErrBadRequest, says: "pad"},
		{name: "a pad past int32", raw: "seq=8&pad=2147483648", err: ErrBadRequest, says: "int32"},
		{name: "an eos past int32", raw: "seq=8&pack=concat&eos=2147483648", err: ErrBadRequest, says: "int32"},
		{name: "pack without seq", raw: "pack=concat", err: features.ErrIncompatible, says: "token job (seq=)"},
		{name: "pad without seq", raw: "pad=1", err: features.ErrIncompatible, says: "token job (seq=)"},
		{name: "eos without seq", raw: "eos=1", err: features.ErrIncompatible, says: "token job (seq=)"},
		{name: "eos with bestfit", raw: "seq=8&eos=1", err: features.ErrIncompatible, says: "only with pack=concat"},
		{name: "seq with a pipeline", raw: "seq=8&transform=t", err: features.ErrIncompatible, says: "no images"},
		{name: "seq with columns", raw: "seq=8&columns=tokens", err: features.ErrIncompatible, says: "token field"},
		{name: "a schedule over token datasets", raw: "seq=64&mix_schedule=0:web:0.7,code:0.3%3B4000:web:0.3,code:0.7",
			want: func(q *Query) {
				s, err := api.ParseSchedule("0:web:0.7,code:0.3;4000:web:0.3,code:0.7")
				if err != nil {
					panic(err)
				}
				q.Job.Seq, q.Job.Schedule, q.Job.Mix = 64, s, s[0].Mix
			}},
		{name: "a token job's stored schedule", raw: "seq=64&job=run&schedule=latest",
			want: func(q *Query) { q.Job.Seq, q.Job.Name, q.Job.ScheduleVersion = 64, "run", "latest" }},
		{name: "a token schedule with pad without seq", raw: "pad=1&mix_schedule=0:web:1", err: features.ErrIncompatible, says: "token job (seq=)"},
		{name: "a schedule beside a mixture", raw: "mix_schedule=0:web:1&mix=web:1", err: features.ErrIncompatible, says: "a job reads one source"},
		{name: "a stored schedule without a job", raw: "schedule=latest", err: features.ErrIncompatible, says: "give job=NAME"},
		{name: "a LeRobot window with a tree's stride", raw: "frames=0,1&stride=2", err: features.ErrIncompatible, says: "stride shapes a tree of videos' clips"},
		{name: "a vision job packed by concat", raw: "seq=64&vision=size:28x28,patch:14,image:1&pack=concat", err: features.ErrIncompatible, says: "best fit, never cut"},
		{name: "a vision mixture balanced", raw: "mix=a:1,b:1&seq=64&vision=size:28x28,patch:14,image:1&balance=vision", err: features.ErrIncompatible, says: "balance= does not weigh a mixture"},
		{name: "the manifest", raw: "format=json", want: func(q *Query) { q.Format = "json" }},
		{name: "another format", raw: "format=xml", err: ErrBadRequest, says: "tar or json"},
		{name: "an unknown parameter", raw: "batchsize=64", err: ErrBadRequest, says: `unknown query parameter "batchsize"`},
		{name: "another endpoint's parameter", raw: "cache_size=1GiB", err: ErrBadRequest, says: "unknown"},
		{name: "a parameter given twice", raw: "seed=1&seed=2", err: ErrBadRequest, says: "given 2 times"},
		{name: "a parameter given twice, once empty", raw: "seed=&seed=2", err: ErrBadRequest, says: "given 2 times"},
		{name: "a malformed query", raw: "seed=%zz", err: ErrBadRequest, says: "query string"},
		{name: "more parameters than the URL parser reads", raw: strings.Repeat("x=1&", 10001), err: ErrBadRequest, says: "query string"},
		{name: "a parameter where none is accepted", raw: "a=1", accepted: []string{}, err: ErrBadRequest, says: "known here: none"},
		{name: "a plan", raw: "cache_size=2GiB&disk_cache_size=0&epochs=3&nodes=4&bandwidth=500MiB", accepted: PlanParams,
			want: func(q *Query) {
				q.Plan = api.PlanOptions{CacheBytes: 2 << 30, Epochs: 3, Nodes: 4, BackendBytesPerSec: 500 << 20}
			}},
		{name: "a plan of one epoch", raw: "epochs=1", accepted: PlanParams, err: ErrBadRequest, says: "between 2 and 20"},
		{name: "a plan's cache size not a size", raw: "cache_size=big", accepted: PlanParams, err: ErrBadRequest, says: "cache_size"},
		{name: "a plan's bandwidth of 0", raw: "bandwidth=0", accepted: PlanParams, err: ErrBadRequest, says: "positive rate"},
		{name: "feedback's epoch", raw: "epoch=9", accepted: FeedbackParams, limits: small,
			want: func(q *Query) { q.Epoch, q.EpochSet = 9, true }},
		{name: "feedback's epoch past a server's limit", raw: "epoch=10", accepted: FeedbackParams, limits: small, err: ErrOutOfRange, says: "0..9"},
		{name: "a peer's position", raw: "pos=12&epoch=1", accepted: PeerSampleParams,
			want: func(q *Query) { q.Pos, q.PosSet, q.Epoch, q.EpochSet = 12, true, 1, true }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			accepted, limits := tt.accepted, tt.limits
			if accepted == nil {
				accepted = JobParams
			}
			if limits == (Limits{}) {
				limits = filled
			}
			got, err := Parse(tt.raw, accepted, base, limits)
			if tt.err != nil {
				if !errors.Is(err, tt.err) || !strings.Contains(err.Error(), tt.says) {
					t.Fatalf("error %v, want %v saying %q", err, tt.err, tt.says)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			want := base
			tt.want(&want)
			if !reflect.DeepEqual(got, want) {
				t.Errorf("parsed\n%+v\nwant\n%+v", got, want)
			}
		})
	}
}

// TestFill: the defaults' and the limits' own defaults, and MaxEpoch never
// above what the statistics and the planner keep in 32 bits.
func TestFill(t *testing.T) {
	var d Defaults
	d.Fill()
	if d != (Defaults{BatchSize: 32, Window: 8}) {
		t.Errorf("defaults %+v", d)
	}
	d = Defaults{Seed: 3, BatchSize: 7, Window: 2, DropLast: true}
	if d.Fill(); d != (Defaults{Seed: 3, BatchSize: 7, Window: 2, DropLast: true}) {
		t.Errorf("given defaults changed: %+v", d)
	}
	var l Limits
	l.Fill()
	if want := (Limits{MaxBatchSize: 65536, MaxWindow: 65536, MaxWorld: 65536, MaxEpoch: MaxEpoch, MaxBatchBytes: DefaultMaxBatchBytes}); l != want {
		t.Errorf("limits %+v, want %+v", l, want)
	}
	l = Limits{MaxEpoch: 1 << 40}
	if l.Fill(); l.MaxEpoch != MaxEpoch {
		t.Errorf("MaxEpoch %d given, %d kept; want at most %d", uint64(1<<40), l.MaxEpoch, uint64(MaxEpoch))
	}
}

// TestVisionParam: vision= is a job parameter on every endpoint that
// takes a job, kept as written; a rule ParseRule refuses is 400 naming
// vision= and the part at fault.
func TestVisionParam(t *testing.T) {
	base := Query{Job: api.Job{Params: shuffle.Params{BatchSize: 32, Window: 8, World: 1}}}
	for _, accepted := range [][]string{JobParams, PlanParams} {
		q, err := Parse("seq=64&vision=size:28x28,patch:14,image:1", accepted, base, Limits{})
		if err != nil || q.Job.Vision != "size:28x28,patch:14,image:1" {
			t.Errorf("accepted %v: %+v, %v; want the rule kept", accepted, q.Job, err)
		}
		_, err = Parse("seq=64&vision=size:28x28,image:1", accepted, base, Limits{})
		if !errors.Is(err, ErrBadRequest) || !strings.Contains(err.Error(), "vision") || !strings.Contains(err.Error(), "patch") {
			t.Errorf("accepted %v: %v; want 400 naming vision= and patch", accepted, err)
		}
	}
}

// TestClipBuckets: buckets of HxWxT make a clip job of one clip a video,
// of the shortest bucket's frames (api.Buckets.ClipOf), which the table
// checks as both features; clip= or step= otherwise are refused by the
// table, in its words (as both clients refuse them), not by the parser.
func TestClipBuckets(t *testing.T) {
	l := Limits{}
	l.Fill()
	base := Query{Job: api.Job{Params: shuffle.Params{BatchSize: 32, Window: 8, World: 1}}}
	q, err := Parse("buckets=480x848x49,640x640x17&budget=100000000&fps=8", JobParams, base, l)
	if err != nil || !reflect.DeepEqual(q.Job.Clip, api.Clip{Frames: 17, FPS: 8, Step: api.MaxClipStep}) || q.Job.BatchSize != 1 {
		t.Fatalf("a clip bucket job: %+v, %v", q.Job.Clip, err)
	}
	for qs, says := range map[string]string{
		"buckets=480x848x49&budget=100000000&clip=9":        "features do not go together: clip does not apply to a bucket job",
		"buckets=480x848x49&budget=100000000&step=3":        "features do not go together: step applies only to a clip job",
		"buckets=480x848x49&budget=100000000&transform=x":   "transform",
		"buckets=480x848x49&budget=100000000&columns=a":     "columns and clip",
		"buckets=480x848x49&budget=100000000&balance=bytes": "balance",
		"buckets=480x848x49&budget=100000000&frames=x:0":    "features do not go together: frames does not apply to a bucket job",
		"buckets=480x848&budget=100000000&clip=8":           "features do not go together: clip does not apply to a bucket job",
		"buckets=480x848x49,480x848&budget=100000000&fps=8": "not both",
		"buckets=480x848x49&budget_tokens=100000&vae_t=0":   "vae_t",
		"buckets=480x848&budget=100000000&vae_t=2&stride=2": "applies only to a clip job",
	} {
		if _, err := Parse(qs, JobParams, base, l); err == nil || !strings.Contains(err.Error(), says) {
			t.Errorf("%s: %v, want an error saying %q", qs, err, says)
		}
	}
}
