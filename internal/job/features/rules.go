package features

import (
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/brandgw/brand/api"
)

// A Rule refuses a request that meets all its conditions: it has every
// feature of Features, gives a parameter of Given if Given names any
// (with its value, if the Param names one), and gives no parameter of
// Unless. A rule holds what no pair of features can say: three features
// that do not go together though every two of them do (a vision mixture
// balanced by cost), and a parameter that means something only beside
// another parameter's value (eos= only with pack=concat). "{param}" in
// Message is the parameter of Given the request gave.
//
// A rule of features alone is checked wherever the table is (Set.Check:
// the parser, the resolver with the features only the server knows,
// every edit); one naming parameters where the parameters are
// (CheckParams: the parser, and the Go client).
type Rule struct {
	Features []Feature `json:"features,omitempty"`
	Given    []Param   `json:"given,omitempty"`
	Unless   []Param   `json:"unless,omitempty"`
	Message  string    `json:"message"`
}

// Rules are the table's rules, in the order a request is checked
// against them: after the pairs, the first met refuses it.
func Rules() []Rule { return slices.Clone(rules) }

// rules are Rules, made once (read only). Each message says why, in the
// words a user of the features reads.
var rules = func() []Rule {
	p := func(name string) Param { return Param{Name: name} }
	const visionMixBalance = "balance= does not weigh a mixture of image-text and text sequences: its sequences take the plain cut"
	return []Rule{
		// What a parameter means beside another's value (the parser's
		// own checks, before).
		{Given: []Param{p(api.ParamScheduleVersion)}, Unless: []Param{p(api.ParamJob)},
			Message: "schedule= reads the schedule stored under the job's name: give job=NAME"},
		{Features: []Feature{Tokens}, Given: []Param{p(api.ParamEOS)}, Unless: []Param{{Name: api.ParamPack, Value: api.PackConcat}},
			Message: "eos applies only with pack=concat: bestfit puts no token between documents"},
		{Features: []Feature{Importance}, Unless: []Param{p(api.ParamJob)},
			Message: "sampling=importance needs job=NAME, the name the job's feedback is sent under"},
		{Features: []Feature{Clips}, Given: []Param{p(api.ParamStride), p(api.ParamFPS), p(api.ParamStep), p(api.ParamClipStart)},
			Unless:  []Param{p(api.ParamClip)},
			Message: "{param} shapes a tree of videos' clips (clip=T); a LeRobot job's windows are delta_timestamps= or frames="},
		// Three features (the layout's, before): a vision mixture's
		// sequences are of two kinds, which no one cost weighs alike.
		{Features: []Feature{Mix, Vision, BalanceC}, Message: visionMixBalance},
		{Features: []Feature{Schedule, Vision, BalanceC}, Message: visionMixBalance},
		// A vision job's packing (the layout's, before).
		{Features: []Feature{Vision}, Given: []Param{{Name: api.ParamPack, Value: api.PackConcat}},
			Message: "a vision job packs whole samples best fit, never cut: pack=concat and eos= do not apply"},
		// A bucket job's batch sizes are its budget's, its resume point
		// its steps (api.Job.Buckets).
		{Features: []Feature{Buckets}, Given: []Param{p(api.ParamBatchSize), p(api.ParamOffset)},
			Message: "{param} does not apply to a bucket job: each bucket's batch size is set by budget= or budget_tokens=, and a bucket job resumes with resume=WORLD:STEPS"},
		{Features: []Feature{Buckets}, Given: []Param{p(api.ParamGOPWindow)},
			Message: "gop_window orders a clip job's windows GOP then sample; a bucket job's steps are drawn by bucket"},
		// A clip bucket job's clips are its buckets' (the parser derives
		// clip= and step= from buckets of HxWxT, step= the most: what a
		// request may not give itself).
		{Features: []Feature{Buckets}, Given: []Param{p(api.ParamDeltaTimestamps), p(api.ParamFrames)},
			Message: "{param} does not apply to a bucket job: clip buckets are of a tree of videos (buckets=HxWxT)"},
		{Features: []Feature{Buckets}, Given: []Param{p(api.ParamClip), p(api.ParamStep)},
			Unless:  []Param{{Name: api.ParamStep, Value: strconv.Itoa(api.MaxClipStep)}},
			Message: "{param} does not apply to a bucket job: a clip bucket job's clips take their bucket's frames (buckets=HxWxT), one a video an epoch"},
		{Features: []Feature{Buckets}, Unless: []Param{p(api.ParamBudget), p(api.ParamBudgetTokens)},
			Message: "a bucket job needs a budget: budget= (the pixels of a rank's batch) or budget_tokens= (its latent tokens, with vae= and patch=)"},
		{Given: []Param{p(api.ParamBudget), p(api.ParamBudgetTokens), p(api.ParamVAE), p(api.ParamPatch), p(api.ParamVAET), p(api.ParamMaxUpscale), p(api.ParamSmall), p(api.ParamCrop), p(api.ParamFlip), p(api.ParamResume)},
			Unless: []Param{p(api.ParamBuckets)}, Message: "{param} applies to a bucket job: give buckets="},
		// A clip job reads one video dataset; a bucketed mixture's video
		// sources are bucketed (the parser derives clip= from their
		// lists of HxWxT), each in steps of its own.
		{Features: []Feature{Mix, Clips}, Unless: []Param{p(api.ParamBuckets)},
			Message: "a clip job reads one video dataset, not a mixture: a mixture of videos and images is bucketed (buckets=NAME:LIST;...)"},
		{Features: []Feature{Schedule, Clips}, Unless: []Param{p(api.ParamBuckets)},
			Message: "a clip job reads one video dataset, not a schedule: a schedule of videos and images is bucketed (buckets=NAME:LIST;...)"},
	}
}()

// ruleSets are rules' features as sets, by index. Never modified.
var ruleSets = func() []Set {
	out := make([]Set, len(rules))
	for i, r := range rules {
		out[i] = Of(r.Features...)
	}
	return out
}()

// featuresOnly reports whether r names no parameter: a rule Set.Check
// applies.
func (r Rule) featuresOnly() bool { return len(r.Given) == 0 && len(r.Unless) == 0 }

// givenIn reports whether the parameters v meet r's Given and Unless
// (r's features are the caller's to have checked), and the parameter of
// Given given ("" if r names none).
func (r Rule) givenIn(v url.Values) (string, bool) {
	param := ""
	if len(r.Given) > 0 {
		i := slices.IndexFunc(r.Given, func(p Param) bool { return p.in(v) })
		if i < 0 {
			return "", false
		}
		param = r.Given[i].Name
	}
	if slices.ContainsFunc(r.Unless, func(p Param) bool { return p.in(v) }) {
		return "", false
	}
	return param, true
}

// Refusal is the error r answers where a request gives param (one of
// its Given; "" for a rule that names none): ErrIncompatible with its
// message, "{param}" replaced by param, the same text whoever asks.
func (r Rule) Refusal(param string) error {
	msg := strings.ReplaceAll(r.Message, "{param}", param)
	return &Refused{Rule: r, Param: param, err: fmt.Errorf("%w: %s", ErrIncompatible, msg)}
}
