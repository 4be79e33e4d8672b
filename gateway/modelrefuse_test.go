package gateway_test

import (
	"encoding/json"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"

	"github.com/brandgw/brand/internal/job/features"
	"github.com/brandgw/brand/internal/testsupport/jobmodel"
)

// tableRefusal is the error a refusal by the table answers, by the
// model's verdict: the table's message for the group of exclusive
// parameters, the companion, the pair or the rule the model names. A
// pair the model refuses and the table does not fails the test.
func tableRefusal(t *testing.T, v jobmodel.Verdict) string {
	t.Helper()
	msg := ""
	switch v.Kind {
	case "exclusive":
		msg = features.Exclusives()[v.Exclusive].Message
	case "companion":
		for _, c := range features.Companions() {
			if slices.Contains(c.Params, v.Companion) {
				msg = strings.ReplaceAll(c.Message, "{param}", v.Companion)
			}
		}
	case "pair":
		c := features.Lookup(features.Feature(v.A), features.Feature(v.B))
		if c.Verdict != features.Refuse {
			// The answer is then held to a message no answer has.
			t.Errorf("the model refuses %s with %s; the table's cell is %s", v.A, v.B, c.Verdict)
			return "(the table's refusal of " + v.A + " with " + v.B + ")"
		}
		msg = c.Message
	case "rule":
		return features.Rules()[v.Rule].Refusal(v.Param).Error()
	default:
		return ""
	}
	return features.ErrIncompatible.Error() + ": " + msg
}

// errorOf is an answer's error, if its body is one.
func errorOf(body []byte) string {
	var e struct {
		Error string `json:"error"`
	}
	_ = json.Unmarshal(body, &e)
	return e.Error
}

// expectRefusal sends a request (a GET of path, or a POST of body to it)
// and holds its answer to want: exactly the table's refusal (400) if
// sure, or if not sure (the request may fail earlier, for a reason not
// the table's) that answer or no refusal of the table's; with want ""
// no refusal of the table's.
func expectRefusal(t *testing.T, base, path string, body []byte, want string, sure bool) {
	t.Helper()
	method := http.MethodGet
	if body != nil {
		method = http.MethodPost
	}
	resp, b := do(t, method, base+path, body, "Content-Type", "application/json")
	got := errorOf(b)
	table := resp.StatusCode == http.StatusBadRequest && strings.HasPrefix(got, features.ErrIncompatible.Error()+": ")
	switch {
	case want != "" && sure && (resp.StatusCode != http.StatusBadRequest || got != want):
		t.Fatalf("%s %s: %s %s; want 400 %q", method, path, resp.Status, b, want)
	case want != "" && !sure && table && got != want:
		t.Fatalf("%s %s: %s %s; want no refusal of the table's but %q", method, path, resp.Status, b, want)
	case want == "" && table:
		t.Fatalf("%s %s: %s %s; the table allows it", method, path, resp.Status, b)
	}
}

// refuseStored asks for the job under features its stored edits do not
// go with — as a mixture or a schedule over its dataset, drawn by
// importance, a dataset served in place balanced by bytes — on
// /epoch/N, a batch and /plan: each refused with the table's message for
// the pair its features make with the edits, never served without them.
func (j *mJob) refuseStored() {
	j.t.Helper()
	if len(j.model.Chain) == 0 {
		return
	}
	other := mTar2
	if j.ds == mLines {
		other = mTar
	}
	name := j.q.Get("job")
	resolved := j.resolved([]string{j.ds})
	base := url.Values{"job": {name}, "seed": {"1"}, "batch_size": {"2"}, "world": {"2"}}
	with := func(kv ...string) url.Values {
		v := url.Values{}
		for k, x := range base {
			v[k] = x
		}
		for i := 0; i+1 < len(kv); i += 2 {
			v.Set(kv[i], kv[i+1])
		}
		return v
	}
	queries := []url.Values{
		with("mix", j.ds+":1,"+other+":1"),
		with("mix", other+":1,"+j.ds+":2"),
		with("mix_schedule", "0:"+j.ds+":1,"+other+":1"),
		with("dataset", j.ds, "sampling", "importance", "index", j.q.Get("index")),
	}
	if j.ds == mLines {
		queries = append(queries, with("dataset", j.ds, "balance", "bytes", "index", j.q.Get("index")))
	}
	for _, v := range queries {
		for _, path := range []string{"/epoch/0?", "/epoch/0/batch/0?", "/plan?"} {
			var extra []string
			if path == "/plan?" && len(j.nodes.urls) > 1 {
				extra = []string{"cluster"}
			}
			verdict := jobmodel.Judge(v, extra, resolved)
			if verdict.Kind == "" {
				j.t.Fatalf("%s: the model serves a job with its edits under %v", v.Encode(), jobmodel.Detect(v))
			}
			expectRefusal(j.t, j.nodes.urls[j.anyNode(0)], path+v.Encode(), nil, tableRefusal(j.t, verdict), true)
		}
	}
}

// resolved are the features only the server knows of a request of the
// job's name reading datasets: a stored edit's kinds (over the job's
// dataset), a dataset served in place, a cluster.
func (j *mJob) resolved(datasets []string) []string {
	var out []string
	if j.model != nil && slices.Contains(datasets, j.ds) {
		for _, x := range j.model.Chain {
			f := "exclusion"
			if x.Kind == jobmodel.Append {
				f = "append"
			}
			if !slices.Contains(out, f) {
				out = append(out, f)
			}
		}
	}
	if slices.Contains(datasets, mLines) || slices.Contains(datasets, mTok) {
		out = append(out, "in-place")
	}
	if len(j.nodes.urls) > 1 {
		out = append(out, "cluster")
	}
	return out
}

// modelParams is a pool of parameters of every feature, each with a
// value its parser takes; "job" is the round's job's name.
func modelParams(job string) [][2]string {
	return [][2]string{
		{"dataset", mTar}, {"dataset", mLines}, {"dataset", mTok}, {"dataset", "nope"},
		{"mix", mTar + ":1," + mTar2 + ":2"}, {"mix", mLines + ":1," + mTar + ":1"}, {"mix_schedule", "0:" + mTar + ":1," + mTar2 + ":1"},
		{"schedule", "latest"}, {"index", "0123456789abcdef"},
		{"sampling", "importance"}, {"sampling", "uniform"}, {"importance", "0123456789abcdef"}, {"hot", "1"},
		{"seq", "64"}, {"pack", "concat"}, {"pad", "0"}, {"eos", "1"}, {"vision", "size:28x28,patch:14,image:1"},
		{"clip", "4"}, {"stride", "2"}, {"fps", "10"}, {"step", "3"}, {"clip_start", "first"}, {"clip_layout", "tchw"},
		{"delta_timestamps", "observation.image:0,0.1"}, {"frames", "action:0,1"},
		{"transform", "imagenet-train"}, {"columns", "txt"}, {"locality", "false"}, {"locality", "true"},
		{"balance", "bytes"}, {"balance", "attention"}, {"balance", "tokens"}, {"balance", "vision"},
		{"mix_block", "8"}, {"mix_samples", "16"}, {"job", job}, {"job", "probe"},
	}
}

// readable reports whether a request of v reaches the point where the
// server adds what only it knows (its stored edits, its dataset's kind):
// it names no stored schedule, no index version, no clips, sequences of
// a token dataset alone, a view of fields only of the dataset served in
// place, a vision job of mVis alone, and datasets that exist.
func readable(v url.Values) bool {
	if v.Get("schedule") != "" || v.Get("index") != "" || v.Get("importance") != "" ||
		v.Get("clip") != "" || v.Get("delta_timestamps") != "" || v.Get("frames") != "" {
		return false
	}
	ds := datasetsOf(v)
	if slices.Contains(ds, "nope") {
		return false
	}
	if v.Get("seq") != "" && !slices.Equal(ds, []string{mTok}) && v.Get("vision") == "" {
		return false
	}
	if v.Get("vision") != "" && !slices.Equal(ds, []string{mVis}) {
		return false // a vision job reads image-text facts: only mVis, where a round serves it, has them
	}
	if v.Get("columns") != "" && !slices.Equal(ds, []string{mLines}) {
		return false
	}
	return true
}

// datasetsOf are the datasets a request of v reads: without dataset=,
// the gateway's default, the first it serves (mWorld.specs).
func datasetsOf(v url.Values) []string {
	spec := v.Get("mix")
	if s := v.Get("mix_schedule"); s != "" {
		spec = s[strings.Index(s, ":")+1:]
	}
	if spec == "" {
		if d := v.Get("dataset"); d != "" {
			return []string{d}
		}
		return []string{mTar}
	}
	var out []string
	for _, c := range strings.Split(spec, ",") {
		out = append(out, c[:strings.Index(c, ":")])
	}
	return out
}

// refuseRandom sends n requests of random parameters over every feature
// — tokens, clips, importance, transforms and columns among them, of
// datasets that have none — to a batch, an epoch, /plan and the edit
// endpoints, and holds each answer to the rules: refused by the table
// with the message of the first pair (or group, or companion) the model
// refuses, in the table's order, before the dataset is read for what
// the request names; no refusal of the table's where the model serves
// it. An edit is sent only where the model refuses it (it would be made
// otherwise).
func (j *mJob) refuseRandom(n int) {
	j.t.Helper()
	pool := modelParams(j.q.Get("job"))
	for range n {
		v := url.Values{"seed": {"3"}, "batch_size": {"2"}, "world": {"2"}}
		for range 1 + j.r.IntN(5) {
			p := pool[j.r.IntN(len(pool))]
			v.Set(p[0], p[1])
		}
		paths := []string{"/epoch/1?", "/epoch/1/batch/0?", "/plan?", "/jobs/probe/exclude?", "/jobs/probe/append?"}
		path := paths[j.r.IntN(len(paths))]
		var before []string // the features known before anything is read
		var body []byte
		switch path {
		case "/plan?":
			if j.r.IntN(3) == 0 {
				v.Set("nodes_after", "2")
				before = append(before, "resize")
			}
			if len(j.nodes.urls) > 1 {
				before = append(before, "cluster")
			}
		case "/jobs/probe/exclude?":
			before = append(before, "exclusion")
			body = []byte(`{"from_step": 1000, "keys": ["class0/sample00000"]}`)
		case "/jobs/probe/append?":
			before = append(before, "append")
			body = []byte(`{"from_step": 1000, "index": "0123456789abcdef"}`)
		}
		first := jobmodel.Judge(v)
		early := jobmodel.Judge(v, before)
		var resolved []string
		if v.Get("job") == j.q.Get("job") {
			resolved = j.resolved(datasetsOf(v))
		} else {
			resolved = (&mJob{nodes: j.nodes}).resolved(datasetsOf(v))
		}
		all := jobmodel.Judge(v, before, resolved)
		switch {
		case first.Kind != "":
			expectRefusal(j.t, j.nodes.urls[0], path+v.Encode(), body, tableRefusal(j.t, first), true)
		case early.Kind != "":
			sure := body != nil || v.Get("schedule") == ""
			expectRefusal(j.t, j.nodes.urls[0], path+v.Encode(), body, tableRefusal(j.t, early), sure)
		case body != nil:
			// An edit the table allows: not sent.
		default:
			expectRefusal(j.t, j.nodes.urls[0], path+v.Encode(), nil, tableRefusal(j.t, all), all.Kind != "" && readable(v))
		}
	}
}

// featureParams are parameters that name each feature the rules know of
// a request alone, or for a feature only the server knows, what makes
// it: a dataset served in place, an edit's endpoint (its kind), a
// plan's resize.
var featureParams = map[string]url.Values{
	"dataset":       {"dataset": {mTar}},
	"mix":           {"mix": {mTar + ":1," + mTar2 + ":1"}},
	"schedule":      {"mix_schedule": {"0:" + mTar + ":1," + mTar2 + ":1"}},
	"index":         {"index": {"0123456789abcdef"}},
	"importance":    {"sampling": {"importance"}, "job": {"probe"}},
	"samples":       {},
	"tokens":        {"seq": {"64"}},
	"vision":        {"seq": {"64"}, "vision": {"size:28x28,patch:14,image:1"}},
	"clips":         {"clip": {"4"}},
	"buckets":       {"buckets": {"32x32"}, "budget": {"4096"}},
	"runs":          {"run": {"2"}},
	"transform":     {"transform": {"imagenet-train"}},
	"columns":       {"columns": {"txt"}},
	"in-place":      {"dataset": {mLines}},
	"locality":      {},
	"balance-bytes": {"balance": {"bytes"}},
	"balance-cost":  {"balance": {"attention"}},
	"resize":        {"nodes_after": {"2"}},
}

// pairStride is how many rounds share the refused pairs out: any
// pairStride rounds of consecutive seeds ask every one (a run's rounds
// are at least that many).
const pairStride = 9

// refusePairs asks, for every refused pair of the rules whose place in
// their order is seed modulo pairStride, for a job of just that pair
// on every endpoint it can be asked of — a batch, an epoch and /plan, or
// for an edit the edit's endpoint, for a resize /plan — and holds the
// answer to the table's message for the pair (or for what the rules
// refuse first in such a request). Over the rounds of every kind, every
// refused pair is asked.
func (j *mJob) refusePairs(seed uint64) {
	j.t.Helper()
	var refused []jobmodel.Rule
	for _, r := range jobmodel.Rules() {
		if r.Kind == jobmodel.Refuse {
			refused = append(refused, r)
		}
	}
	for i := int(seed % pairStride); i < len(refused); i += pairStride {
		pair := refused[i]
		v := url.Values{"seed": {"5"}, "batch_size": {"2"}, "world": {"2"}}
		var kind string
		plan := false
		for _, f := range []string{pair.A, pair.B} {
			switch f {
			case "exclusion":
				kind = "exclude"
			case "append":
				kind = "append"
			case "resize":
				plan = true
			case "cluster":
				j.t.Fatalf("the rules refuse %s with %s: no round asks for it", pair.A, pair.B)
			}
			for k, x := range featureParams[f] {
				v[k] = x
			}
		}
		var paths []string
		var before []string
		var body []byte
		switch {
		case kind != "":
			paths = []string{"/jobs/probe/" + kind + "?"}
			before = []string{map[string]string{"exclude": "exclusion", "append": "append"}[kind]}
			body = []byte(`{"from_step": 1000, "keys": ["class0/sample00000"]}`)
			if kind == "append" {
				body = []byte(`{"from_step": 1000, "index": "0123456789abcdef"}`)
			}
		case plan:
			paths = []string{"/plan?"}
			before = []string{"resize"}
		default:
			paths = []string{"/epoch/0?", "/epoch/0/batch/0?", "/plan?"}
		}
		for _, path := range paths {
			stage := before
			if path == "/plan?" && len(j.nodes.urls) > 1 {
				stage = append(slices.Clone(stage), "cluster")
			}
			verdict := jobmodel.Judge(v, stage, (&mJob{nodes: j.nodes}).resolved(datasetsOf(v)))
			if verdict.Kind == "" {
				j.t.Fatalf("%s: the rules refuse %s with %s, and serve it", v.Encode(), pair.A, pair.B)
			}
			expectRefusal(j.t, j.nodes.urls[j.anyNode(0)], path+v.Encode(), body, tableRefusal(j.t, verdict), true)
		}
	}
}
