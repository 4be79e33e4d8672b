package features

import (
	"net/url"
	"slices"

	"github.com/brandgw/brand/api"
)

// A Feature is one thing a job can be or do: a source, a sampling, a
// unit, an edit, an assignment, a transform. Its name is the table's,
// the golden file's and the docs'.
type Feature string

// The features, in the table's order (Features).
const (
	Dataset    Feature = "dataset"
	Mix        Feature = "mix"
	Schedule   Feature = "schedule"
	Index      Feature = "index"
	Importance Feature = "importance"
	Samples    Feature = "samples"
	Tokens     Feature = "tokens"
	Vision     Feature = "vision"
	Clips      Feature = "clips"
	Buckets    Feature = "buckets"
	Runs       Feature = "runs"
	Transform  Feature = "transform"
	Columns    Feature = "columns"
	InPlace    Feature = "in-place"
	Exclusion  Feature = "exclusion"
	Append     Feature = "append"
	Locality   Feature = "locality"
	BalanceB   Feature = "balance-bytes"
	BalanceC   Feature = "balance-cost"
	Resize     Feature = "resize"
	Cluster    Feature = "cluster"
)

// A Param is a query parameter, and the value that matters ("": any
// value given).
type Param struct {
	Name  string `json:"param"`
	Value string `json:"value,omitempty"`
}

// in reports whether v gives p.
func (p Param) in(v url.Values) bool {
	x := v.Get(p.Name)
	if want, ok := boolOf(p.Value); ok {
		// A boolean parameter, in any spelling its parser takes
		// (locality=0 is locality=false).
		got, ok := boolOf(x)
		return ok && got == want
	}
	return x != "" && (p.Value == "" || x == p.Value)
}

// boolOf is strconv.ParseBool without the error it allocates for a word
// that is not a boolean (every request's parameters are matched).
func boolOf(s string) (v, ok bool) {
	switch s {
	case "1", "t", "T", "true", "TRUE", "True":
		return true, true
	case "0", "f", "F", "false", "FALSE", "False":
		return false, true
	}
	return false, false
}

// A Def defines a feature: what it is, and how a request names it.
type Def struct {
	Name Feature `json:"name"`
	What string  `json:"what"`
	// SetBy are the parameters any of which names the feature; a feature
	// with DefaultUnless is named unless one of those is given; one with
	// neither is Resolved: only the server knows it (a stored edit, the
	// dataset's kind, a plan's option), and adds it (Set.With).
	SetBy         []Param `json:"set_by,omitempty"`
	DefaultUnless []Param `json:"default_unless,omitempty"`
	Resolved      bool    `json:"resolved,omitempty"`
	// Unit marks a kind of batch (a unit: layout.Unit); a job's is the
	// one of its features that no other of them takes over (Over names
	// those a unit takes over: a vision job is a token job whose samples
	// are image-text pairs, a clip bucket job a clip job bucketed), or
	// Samples (Set.Unit). Not in the clients' table: they read the
	// pairs.
	Unit bool      `json:"-"`
	Over []Feature `json:"-"`
	// Row are the feature's cells against the other features that do
	// not simply compose: a feature's row in one place (Table has every
	// cell). The table's older features keep theirs in cells.
	Row []Cell `json:"-"`
}

// Features are the features, in the table's order: a request refused for
// several pairs is refused for the first pair in this order.
func Features() []Def { return slices.Clone(defs) }

// defs are the features, made once: every request detects and checks
// against them. Never modified.
var defs = features()

// bits are each feature's bit, by its place in defs. Never modified.
var bits = func() map[Feature]Set {
	m := make(map[Feature]Set, len(defs))
	for i, d := range defs {
		m[d.Name] = 1 << i
	}
	return m
}()

func features() []Def {
	p := func(name string) Param { return Param{Name: name} }
	sources := []Param{p(api.ParamMix), p(api.ParamMixSchedule), p(api.ParamScheduleVersion)}
	defs := []Def{
		{Name: Dataset, What: "a job over one dataset", DefaultUnless: sources},
		{Name: Mix, What: "a mixture of datasets (mix=)", SetBy: []Param{p(api.ParamMix)}},
		{Name: Schedule, What: "a mixture whose weights change by step (mix_schedule=, or schedule= for one stored under the job's name)",
			SetBy: []Param{p(api.ParamMixSchedule), p(api.ParamScheduleVersion)}},
		{Name: Index, What: "the dataset's index version pinned (index=)", SetBy: []Param{p(api.ParamIndex)}},
		{Name: Importance, What: "epochs drawn by the trainer's losses (sampling=importance)",
			SetBy: []Param{{Name: api.ParamSampling, Value: api.SamplingImportance}}},
		{Name: Samples, What: "samples served as stored", Unit: true}, // DefaultUnless: every other unit's parameters
		{Name: Tokens, What: "a token dataset's documents packed into sequences (seq=)", SetBy: []Param{p(api.ParamSeq)}, Unit: true},
		{Name: Vision, What: "a token job's samples are image-text pairs: each image resized by a rule and counted as vision tokens in the sequence (vision=, with seq=; package vision), over a dataset indexed with its image-text facts (brand index --tokenizer): tar chunks of WebDataset pairs, or Parquet rows served in place (an image column and a text or conversation column); another format served in place is refused naming it",
			SetBy: []Param{p(api.ParamVision)}, Unit: true, Over: []Feature{Tokens}},
		{Name: Clips, What: "a video dataset's clips decoded on the data node (clip=, delta_timestamps=, frames=)",
			SetBy: []Param{p(api.ParamClip), p(api.ParamDeltaTimestamps), p(api.ParamFrames)}, Unit: true},
		{Name: Buckets, What: "a dataset's images batched by shape (buckets=, with budget= or budget_tokens=): each image resized to cover the bucket of nearest aspect ratio and cropped to it on the data node, a bucket's batch size set by the budget, every step one bucket; over a dataset indexed with its image sizes (brand index --sizes), or a tree of videos' clips by (height, width, frames) (buckets=HxWxT, with clip=)",
			SetBy: []Param{p(api.ParamBuckets)}, Unit: true, Over: []Feature{Clips}},
		{Name: Runs, What: "a dataset's samples served as runs of consecutive records (run=K): each item K samples of one chunk in the index's order, the runs shuffled as samples are",
			SetBy: []Param{p(api.ParamRun)}, Unit: true, Row: []Cell{
				refuse(Mix, Runs, "a run job reads one dataset's runs, not a mixture"),
				refuse(Schedule, Runs, "a run job reads one dataset's runs, not a schedule"),
				refuse(Importance, Runs, "sampling=importance draws samples by their weight, some more than once; a run job serves each run once an epoch"),
				refuse(Tokens, Runs, "seq and run do not go together: a token job's items are sequences, a run job's runs of records"),
				refuse(Clips, Runs, "clip and run do not go together: a clip job's items are clips"),
				refuse(Buckets, Runs, "buckets and run do not go together: a bucket job's items are its steps' batches"),
				refuse(Runs, Exclusion, "an exclusion list leaves samples out of an order of samples; a run job's runs are read whole, which a list would split"),
				refuse(Runs, Append, "an append record merges samples into an order of samples; a run job's runs are cut from its chunks, which a record would change"),
				downgrade(Runs, Locality, Locality, "a run job's ranks take the plain cut of each global batch of runs: locality does not apply"),
				refuse(Runs, BalanceB, "every run of a run job holds as many records: balance= has nothing to weigh"),
				refuse(Runs, BalanceC, "balance=attention and balance=tokens weigh a token job's sequences; a run job's runs are records"),
				refuse(Runs, Resize, "a run job's plan is of its epochs, not of a resize (nodes_after=)"),
			}},
		{Name: Transform, What: "images decoded and augmented into tensors on the data node (transform=)", SetBy: []Param{p(api.ParamTransform)}},
		{Name: Columns, What: "some fields of a dataset served in place (columns=)", SetBy: []Param{p(api.ParamColumns)}},
		{Name: InPlace, What: "a dataset served in place (Parquet, MDS, Megatron, video, LeRobot): its samples sized once their chunk is read", Resolved: true},
		{Name: Exclusion, What: "samples left out from a step on (POST /jobs/{job}/exclude, stored under the job's name)", Resolved: true},
		{Name: Append, What: "files appended to the dataset taken from a step on (POST /jobs/{job}/append, stored under the job's name)", Resolved: true},
		{Name: Locality, What: "each rank given the samples its own node holds, on a cluster (locality=false turns it off)",
			DefaultUnless: []Param{{Name: api.ParamLocality, Value: "false"}}},
		{Name: BalanceB, What: "ranks balanced by their samples' stored bytes (balance=bytes)",
			SetBy: []Param{{Name: api.ParamBalance, Value: api.BalanceBytes}}},
		{Name: BalanceC, What: "ranks balanced by their sequences' attention or tokens (balance=attention, balance=tokens), or a vision job's by their vision tokens (balance=vision)",
			SetBy: []Param{{Name: api.ParamBalance, Value: api.BalanceAttention}, {Name: api.ParamBalance, Value: api.BalanceTokens},
				{Name: api.ParamBalance, Value: api.BalanceVision}}},
		{Name: Resize, What: "a plan of the cluster resized under the job (/plan's nodes_after=)", Resolved: true},
		{Name: Cluster, What: "a job served by a cluster of several nodes, or a plan of several (/plan's nodes=)", Resolved: true},
	}
	// A job is of samples as stored unless a parameter names another
	// unit: a unit's own, not one that means something only beside
	// another's (vision= beside seq=: a companion).
	for i, d := range defs {
		if d.Name != Samples {
			continue
		}
		for _, u := range defs {
			if !u.Unit || u.Name == Samples {
				continue
			}
			for _, p := range u.SetBy {
				if !companion(p.Name) {
					defs[i].DefaultUnless = append(defs[i].DefaultUnless, p)
				}
			}
		}
	}
	return defs
}

// A Set is a set of features.
type Set uint64

// bit is f's bit, by its place in Features; 0 for a name that is none.
func bit(f Feature) Set { return bits[f] }

// Of is the set of fs.
func Of(fs ...Feature) Set {
	var s Set
	for _, f := range fs {
		s |= bit(f)
	}
	return s
}

// Has reports whether s holds f.
func (s Set) Has(f Feature) bool { b := bit(f); return b != 0 && s&b != 0 }

// With is s and fs.
func (s Set) With(fs ...Feature) Set { return s | Of(fs...) }

// Without is s less fs.
func (s Set) Without(fs ...Feature) Set { return s &^ Of(fs...) }

// List is s's features, in the table's order.
func (s Set) List() []Feature {
	var out []Feature
	for i, d := range defs {
		if s&(1<<i) != 0 {
			out = append(out, d.Name)
		}
	}
	return out
}

// units are, for each unit feature's bit (Def.Unit), the bits of the
// unit features it takes over (Def.Over). Never modified.
var units = func() map[Set]Set {
	m := map[Set]Set{}
	for _, d := range defs {
		if d.Unit {
			m[bit(d.Name)] = Of(d.Over...)
		}
	}
	return m
}()

// Unit is the kind of batch a job of features s serves: its one unit
// feature (Def.Unit) that no other of its unit features takes over
// (Def.Over), or Samples if it has none. A set of two units neither of
// which takes over the other is refused by the table; Unit then names the
// first of them.
func (s Set) Unit() Feature {
	var over Set
	for b, o := range units {
		if s&b != 0 {
			over |= o
		}
	}
	for i, d := range defs {
		if d.Unit && s&(1<<i) != 0 && over&(1<<i) == 0 {
			return d.Name
		}
	}
	return Samples
}

// Detect is the features a request's query parameters name, by the
// definitions' rules (Def.SetBy, Def.DefaultUnless).
func Detect(v url.Values) Set {
	var s Set
	for i, d := range defs {
		on := false
		for _, p := range d.SetBy {
			on = on || p.in(v)
		}
		if len(d.DefaultUnless) > 0 {
			on = !slices.ContainsFunc(d.DefaultUnless, func(p Param) bool { return p.in(v) })
		}
		if on {
			s |= 1 << i
		}
	}
	return s
}

// Requested is the features job names, as its query parameters name them
// (api.Job.Values). The features only a server knows (its stored edits,
// its dataset's kind) are the resolver's to add.
func Requested(job api.Job) Set { return Detect(job.Values()) }
