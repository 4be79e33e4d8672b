package jobmodel

import (
	"net/url"
	"slices"
)

// The features of a job, in the order docs/http-api.md's table lists
// them: a request refused for several pairs is refused for the first in
// this order (pairs (a, b) with a before b, by a then b).
var Features = []string{
	"dataset", "mix", "schedule", "index", "importance", "samples", "tokens", "vision", "clips",
	"buckets", "runs", "transform", "columns", "in-place", "exclusion", "append", "locality",
	"balance-bytes", "balance-cost", "resize", "cluster",
}

// What a pair of features does, by the rules of docs/http-api.md.
const (
	Compose   = "compose"
	Refuse    = "refuse"
	Downgrade = "downgrade"
)

// A Rule is what a pair of features does; Drops is the feature a
// downgrade leaves without effect; NotPlanned marks a pair served but
// not planned (/plan answers 501).
type Rule struct {
	A, B       string
	Kind       string
	Drops      string
	NotPlanned bool
}

// rules are the pairs that do not simply compose.
var rules = []Rule{
	// One source.
	{A: "dataset", B: "mix", Kind: Refuse},
	{A: "dataset", B: "schedule", Kind: Refuse},
	{A: "mix", B: "schedule", Kind: Refuse},
	// A mixture or schedule reads each component's current version
	// uniformly, has no edits and plans no resize.
	{A: "mix", B: "index", Kind: Refuse},
	{A: "mix", B: "importance", Kind: Refuse},
	{A: "mix", B: "exclusion", Kind: Refuse},
	{A: "mix", B: "append", Kind: Refuse},
	{A: "mix", B: "resize", Kind: Refuse},
	{A: "schedule", B: "index", Kind: Refuse},
	{A: "schedule", B: "importance", Kind: Refuse},
	{A: "schedule", B: "exclusion", Kind: Refuse},
	{A: "schedule", B: "append", Kind: Refuse},
	{A: "schedule", B: "resize", Kind: Refuse},
	// Importance draws by weight: no packing, no clips, no edits, no
	// resize plan.
	{A: "importance", B: "tokens", Kind: Refuse},
	{A: "importance", B: "clips", Kind: Refuse},
	{A: "importance", B: "exclusion", Kind: Refuse},
	{A: "importance", B: "append", Kind: Refuse},
	{A: "importance", B: "resize", Kind: Refuse},
	{A: "samples", B: "balance-cost", Kind: Refuse},
	// Sequences: one unit, no images, no view, no edits, their own cost.
	{A: "tokens", B: "clips", Kind: Refuse},
	{A: "tokens", B: "transform", Kind: Refuse},
	{A: "tokens", B: "columns", Kind: Refuse},
	{A: "tokens", B: "exclusion", Kind: Refuse},
	{A: "tokens", B: "append", Kind: Refuse},
	{A: "tokens", B: "locality", Kind: Downgrade, Drops: "locality"},
	{A: "tokens", B: "balance-bytes", Kind: Refuse},
	{A: "tokens", B: "resize", Kind: Refuse},
	// Clips: drawn afresh each epoch, all of one cost.
	{A: "clips", B: "columns", Kind: Refuse},
	{A: "clips", B: "exclusion", Kind: Refuse},
	{A: "clips", B: "append", Kind: Refuse},
	{A: "clips", B: "locality", Kind: Downgrade, Drops: "locality"},
	{A: "clips", B: "balance-bytes", Kind: Refuse},
	{A: "clips", B: "balance-cost", Kind: Refuse},
	{A: "clips", B: "resize", Kind: Refuse},
	// Buckets: images (or clips) each once a pass, all of a step one
	// shape of one source; a mixture's steps by its sources' weights; an
	// edit cuts a pass at its step.
	{A: "importance", B: "buckets", Kind: Refuse},
	{A: "tokens", B: "buckets", Kind: Refuse},
	{A: "buckets", B: "transform", Kind: Refuse},
	{A: "buckets", B: "locality", Kind: Downgrade, Drops: "locality"},
	{A: "buckets", B: "balance-bytes", Kind: Refuse},
	{A: "buckets", B: "balance-cost", Kind: Refuse},
	{A: "buckets", B: "resize", Kind: Refuse},
	// Runs: one dataset's runs of records, each once, the plain cut.
	{A: "mix", B: "runs", Kind: Refuse},
	{A: "schedule", B: "runs", Kind: Refuse},
	{A: "importance", B: "runs", Kind: Refuse},
	{A: "tokens", B: "runs", Kind: Refuse},
	{A: "clips", B: "runs", Kind: Refuse},
	{A: "buckets", B: "runs", Kind: Refuse},
	{A: "runs", B: "exclusion", Kind: Refuse},
	{A: "runs", B: "append", Kind: Refuse},
	{A: "runs", B: "locality", Kind: Downgrade, Drops: "locality"},
	{A: "runs", B: "balance-bytes", Kind: Refuse},
	{A: "runs", B: "balance-cost", Kind: Refuse},
	{A: "runs", B: "resize", Kind: Refuse},
	// Bytes are known before the read only of tar chunks.
	{A: "in-place", B: "balance-bytes", Kind: Refuse},
	// Balance replaces locality; one cost.
	{A: "locality", B: "balance-bytes", Kind: Downgrade, Drops: "locality"},
	{A: "locality", B: "balance-cost", Kind: Downgrade, Drops: "locality"},
	{A: "balance-bytes", B: "balance-cost", Kind: Refuse},
	// Served, not planned.
	{A: "mix", B: "tokens", Kind: Compose, NotPlanned: true},
	{A: "schedule", B: "tokens", Kind: Compose, NotPlanned: true},
	{A: "importance", B: "cluster", Kind: Compose, NotPlanned: true},
	// Image-text sequences mixed with text (package vision; the layout's
	// facts: brand index --tokenizer): served, their mixture not planned.
	{A: "mix", B: "vision", Kind: Compose, NotPlanned: true},
	{A: "schedule", B: "vision", Kind: Compose, NotPlanned: true},
}

// Rules is every pair of features, each once, a before b in Features'
// order, with what it does.
func Rules() []Rule {
	var out []Rule
	for i, a := range Features {
		for _, b := range Features[i+1:] {
			r := Rule{A: a, B: b, Kind: Compose}
			for _, x := range rules {
				if x.A == a && x.B == b || x.A == b && x.B == a {
					r = x
					r.A, r.B = a, b
				}
			}
			out = append(out, r)
		}
	}
	return out
}

// Exclusives are the groups of parameters of which a request gives at
// most one: they name one thing two ways.
var Exclusives = [][]string{
	{"dataset", "mix", "mix_schedule", "schedule"},
	{"clip", "delta_timestamps"},
	{"clip", "frames"},
}

// Companions are the parameters that shape one feature and mean nothing
// without one of its Needs; with a Value, the parameter given that value.
var Companions = []struct {
	Params []string
	Value  string
	Needs  []string
}{
	{Params: []string{"pack", "pad", "eos"}, Needs: []string{"tokens"}},
	{Params: []string{"stride", "fps", "step", "clip_start", "clip_layout", "gop_window"}, Needs: []string{"clips"}},
	{Params: []string{"mix_block", "mix_samples"}, Needs: []string{"mix", "schedule"}},
	{Params: []string{"importance", "hot"}, Needs: []string{"importance"}},
	{Params: []string{"vision"}, Needs: []string{"tokens"}},
	{Params: []string{"balance"}, Value: "vision", Needs: []string{"vision"}},
}

// A Cond is a rule of docs/http-api.md beyond a pair: a request with
// every feature of Features that gives a parameter of Given (if any;
// with its value, where one is named) and none of Unless is refused.
type Cond struct {
	Features []string
	Given    [][2]string // parameter, value ("": any)
	Unless   [][2]string
}

// Conds are the rules beyond pairs, in the order a request is checked
// against them, after the pairs.
var Conds = []Cond{
	// A stored schedule is read under the job's name.
	{Given: [][2]string{{"schedule", ""}}, Unless: [][2]string{{"job", ""}}},
	// An EOS goes between documents only where they are concatenated.
	{Features: []string{"tokens"}, Given: [][2]string{{"eos", ""}}, Unless: [][2]string{{"pack", "concat"}}},
	// Importance feedback is sent under the job's name.
	{Features: []string{"importance"}, Unless: [][2]string{{"job", ""}}},
	// A LeRobot job's windows are its own: a tree's clip parameters
	// shape clips of clip=T alone.
	{Features: []string{"clips"}, Given: [][2]string{{"stride", ""}, {"fps", ""}, {"step", ""}, {"clip_start", ""}},
		Unless: [][2]string{{"clip", ""}}},
	// A vision mixture's sequences take the plain cut.
	{Features: []string{"mix", "vision", "balance-cost"}},
	{Features: []string{"schedule", "vision", "balance-cost"}},
	// A vision job packs whole samples best fit.
	{Features: []string{"vision"}, Given: [][2]string{{"pack", "concat"}}},
	// A bucket job's batch sizes are its budget's, its resume point its
	// steps; it needs a budget; its parameters need it.
	{Features: []string{"buckets"}, Given: [][2]string{{"batch_size", ""}, {"offset", ""}}},
	// A bucket job's steps are drawn by bucket: no GOP-then-sample order.
	{Features: []string{"buckets"}, Given: [][2]string{{"gop_window", ""}}},
	// A clip bucket job's clip= and step= are its buckets' (the parser's
	// step is the most, 2^30): a request gives neither, nor a LeRobot
	// job's windows.
	{Features: []string{"buckets"}, Given: [][2]string{{"delta_timestamps", ""}, {"frames", ""}}},
	{Features: []string{"buckets"}, Given: [][2]string{{"clip", ""}, {"step", ""}}, Unless: [][2]string{{"step", "1073741824"}}},
	{Features: []string{"buckets"}, Unless: [][2]string{{"budget", ""}, {"budget_tokens", ""}}},
	{Given: [][2]string{{"budget", ""}, {"budget_tokens", ""}, {"vae", ""}, {"patch", ""}, {"vae_t", ""}, {"max_upscale", ""}, {"small", ""}, {"crop", ""}, {"flip", ""}, {"resume", ""}},
		Unless: [][2]string{{"buckets", ""}}},
	// A clip job reads one video dataset; a bucketed mixture's video
	// sources are bucketed.
	{Features: []string{"mix", "clips"}, Unless: [][2]string{{"buckets", ""}}},
	{Features: []string{"schedule", "clips"}, Unless: [][2]string{{"buckets", ""}}},
}

// meets reports whether features fs and parameters v meet c (v nil:
// only a rule of features alone can be met), and the parameter of Given
// given.
func (c Cond) meets(fs []string, v url.Values) (string, bool) {
	for _, f := range c.Features {
		if !slices.Contains(fs, f) {
			return "", false
		}
	}
	if v == nil {
		return "", len(c.Given) == 0 && len(c.Unless) == 0
	}
	gives := func(p [2]string) bool { return v.Get(p[0]) != "" && (p[1] == "" || v.Get(p[0]) == p[1]) }
	param := ""
	if len(c.Given) > 0 {
		i := slices.IndexFunc(c.Given, gives)
		if i < 0 {
			return "", false
		}
		param = c.Given[i][0]
	}
	return param, !slices.ContainsFunc(c.Unless, gives)
}

// firstCond is the first of Conds fs and v meet (v as for meets).
func firstCond(fs []string, v url.Values) (Verdict, bool) {
	for i, c := range Conds {
		if p, ok := c.meets(fs, v); ok {
			return Verdict{Kind: "rule", Rule: i, Param: p}, true
		}
	}
	return Verdict{}, false
}

// Detect is the features a request's parameters name: a source (dataset
// unless a mixture or schedule is named), a sampling, a unit (samples
// unless sequences or clips are), and the rest as named; locality unless
// locality=false. An empty value is a parameter not given.
func Detect(v url.Values) []string {
	given := func(names ...string) bool {
		return slices.ContainsFunc(names, func(n string) bool { return v.Get(n) != "" })
	}
	on := map[string]bool{
		"dataset":       !given("mix", "mix_schedule", "schedule"),
		"mix":           given("mix"),
		"schedule":      given("mix_schedule", "schedule"),
		"index":         given("index"),
		"importance":    v.Get("sampling") == "importance",
		"samples":       !given("seq", "clip", "delta_timestamps", "frames", "buckets", "run"),
		"buckets":       given("buckets"),
		"runs":          given("run"),
		"tokens":        given("seq"),
		"vision":        given("vision"),
		"clips":         given("clip", "delta_timestamps", "frames"),
		"transform":     given("transform"),
		"columns":       given("columns"),
		"locality":      v.Get("locality") != "false",
		"balance-bytes": v.Get("balance") == "bytes",
		"balance-cost":  v.Get("balance") == "attention" || v.Get("balance") == "tokens" || v.Get("balance") == "vision",
	}
	var out []string
	for _, f := range Features {
		if on[f] {
			out = append(out, f)
		}
	}
	return out
}

// A Verdict is what the rules say of a request: served (Kind ""), or
// refused for a group of exclusive parameters given together
// (Exclusive, its index in Exclusives), a companion parameter without
// its feature (Companion, the parameter), a refused pair (A, B) or a
// rule beyond pairs (Rule, its index in Conds, and Param, the parameter
// of its Given the request gave).
type Verdict struct {
	Kind      string // "", "exclusive", "companion", "pair", "rule"
	Exclusive int
	Companion string
	A, B      string
	Rule      int
	Param     string
}

// Judge is the rules' verdict on a request's parameters v with the
// features only the server knows, added in stages (a plan's resize or
// cluster, known before anything is read; then a stored edit, the
// dataset's kind, a cluster's members): first a group of exclusive
// parameters given together, then a companion without its feature (in
// the order of Companions, each's parameters in order), then the first
// refused pair of the request's features in the table's order, then the
// first rule beyond pairs they and v meet; only then, stage by stage, the
// first refused pair of all the features known by that stage, or the
// first rule of features alone they meet.
func Judge(v url.Values, stages ...[]string) Verdict {
	for i, g := range Exclusives {
		n := 0
		for _, p := range g {
			if v.Get(p) != "" {
				n++
			}
		}
		if n > 1 {
			return Verdict{Kind: "exclusive", Exclusive: i}
		}
	}
	fs := Detect(v)
	for _, c := range Companions {
		needed := slices.ContainsFunc(c.Needs, func(f string) bool { return slices.Contains(fs, f) })
		for _, p := range c.Params {
			if v.Get(p) != "" && (c.Value == "" || v.Get(p) == c.Value) && !needed {
				return Verdict{Kind: "companion", Companion: p}
			}
		}
	}
	if a, b, ok := FirstRefused(fs); ok {
		return Verdict{Kind: "pair", A: a, B: b}
	}
	if verdict, ok := firstCond(fs, v); ok {
		return verdict
	}
	for _, extra := range stages {
		fs = append(fs, extra...)
		if a, b, ok := FirstRefused(fs); ok {
			return Verdict{Kind: "pair", A: a, B: b}
		}
		if verdict, ok := firstCond(fs, nil); ok {
			return verdict
		}
	}
	return Verdict{}
}

// FirstRefused is the first pair of fs the rules refuse, in the table's
// order.
func FirstRefused(fs []string) (a, b string, ok bool) {
	for _, r := range Rules() {
		if r.Kind == Refuse && slices.Contains(fs, r.A) && slices.Contains(fs, r.B) {
			return r.A, r.B, true
		}
	}
	return "", "", false
}

// NotPlanned is the first pair of fs the rules serve but do not plan
// (/plan answers 501), in the table's order.
func NotPlanned(fs []string) (Rule, bool) {
	for _, r := range Rules() {
		if r.NotPlanned && slices.Contains(fs, r.A) && slices.Contains(fs, r.B) {
			return r, true
		}
	}
	return Rule{}, false
}

// Effective reports whether feature f has effect in fs: present, and
// dropped by no downgrade of fs.
func Effective(fs []string, f string) bool {
	if !slices.Contains(fs, f) {
		return false
	}
	for _, r := range Rules() {
		if r.Kind == Downgrade && r.Drops == f && slices.Contains(fs, r.A) && slices.Contains(fs, r.B) {
			return false
		}
	}
	return true
}
