package features

import (
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strings"

	"github.com/brandgw/brand/api"
	"github.com/brandgw/brand/internal/errkind"
)

// ErrIncompatible marks a request whose features, or parameters, do not
// go together: the table's refusal, the same from every entry point
// (400: the asker changes the request).
var ErrIncompatible = errkind.New(errkind.Invalid, "features do not go together")

// A Verdict is what a cell of the table says of a pair.
type Verdict string

// The verdicts a cell gives (a composed pair the planner does not model
// also has a Plan: /plan refuses it, ErrNotPlanned).
const (
	// Compose: the job has both, each as it has it alone.
	Compose Verdict = "compose"
	// Refuse: the job is refused, with the cell's message.
	Refuse Verdict = "refuse"
	// Downgrade: the job is served; the cell's Drops feature has no
	// effect with the other, as its message says.
	Downgrade Verdict = "downgrade"
)

// A Cell is the table's answer for a pair of features.
type Cell struct {
	A       Feature `json:"a"`
	B       Feature `json:"b"`
	Verdict Verdict `json:"kind"`
	Message string  `json:"message,omitempty"`
	// Drops is, for a downgrade, the feature that has no effect.
	Drops Feature `json:"drops,omitempty"`
	// Plan is, for a pair a job is served with but the planner does not
	// model, why: /plan answers 501 with it (ErrNotPlanned).
	Plan string `json:"plan,omitempty"`
}

// cells are the pairs that do not simply compose. Every other pair
// composes. Each message says why, in the words a user of both reads.
func cells() []Cell {
	const oneSource = "a job reads one source: give dataset=, mix=, mix_schedule= or schedule= (the schedule stored under its name)"
	const editsOneDataset = "is stored under the job's name over one dataset and applies to that dataset's own order; a mixture or schedule reads each component's order: read the job over its dataset, or name the mixture another job"
	return []Cell{
		refuse(Dataset, Mix, oneSource),
		refuse(Dataset, Schedule, oneSource),
		refuse(Mix, Schedule, oneSource),
		refuse(Mix, Index, "index= pins one dataset's version; a mixture reads each component's current version (its ETag names them all)"),
		refuse(Mix, Importance, "sampling=importance is per dataset; a mixture (mix=) draws uniformly from each component"),
		refuse(Mix, Exclusion, "an exclusion list "+editsOneDataset),
		refuse(Mix, Append, "an append record "+editsOneDataset),
		refuse(Mix, Resize, "nodes_after plans a resize for a job of one dataset, not a mixture"),
		refuse(Schedule, Index, "index= pins one dataset's version; a schedule reads each component's current version"),
		refuse(Schedule, Importance, "sampling=importance is per dataset; a schedule draws uniformly from each component"),
		refuse(Schedule, Exclusion, "an exclusion list "+editsOneDataset),
		refuse(Schedule, Append, "an append record "+editsOneDataset),
		refuse(Schedule, Resize, "nodes_after plans a resize for a job of one dataset, not a schedule"),
		refuse(Importance, Tokens, "sampling=importance and seq= do not go together: a token job packs each document once an epoch, and an importance epoch draws documents by their weight, some more than once"),
		refuse(Importance, Clips, "sampling=importance and clip do not go together: clips are drawn uniformly"),
		refuse(Importance, Exclusion, "an exclusion list leaves samples out of the uniform shuffle; an importance epoch draws samples by their weight"),
		refuse(Importance, Append, "an append record merges new samples into the uniform shuffle; an importance epoch draws samples by their weight"),
		refuse(Importance, Resize, "nodes_after plans a resize for the uniform shuffle, not sampling=importance"),
		refuse(Samples, BalanceC, "balance=attention and balance=tokens weigh a token job's sequences (seq=); a job of samples as stored takes balance=bytes, on a dataset of tar chunks"),
		refuse(Tokens, Clips, "seq and clip do not go together: a clip job's samples are frames"),
		refuse(Tokens, Transform, "transform and seq do not go together: a token job's sequences have no images"),
		refuse(Tokens, Columns, "columns and seq do not go together: a token job reads its dataset's token field"),
		refuse(Tokens, Exclusion, "an exclusion list leaves samples out of an order of samples; a token job's steps are sequences packed from many documents, which a list would change before its step"),
		refuse(Tokens, Append, "an append record merges samples into an order of samples; a token job's steps are sequences packed from many documents, which a record would change before its step"),
		downgrade(Tokens, Locality, Locality, "a token job's ranks take the plain cut of each global batch of sequences: locality does not apply"),
		refuse(Tokens, BalanceB, "balance=bytes weighs samples as stored; a token job's sequences are weighed by balance=attention or balance=tokens"),
		refuse(Tokens, Resize, "a token job's plan is of its epochs, not of a resize (nodes_after=)"),
		notPlanned(Mix, Vision, "the planner models a text token job's documents over one dataset; a mixture of an image-text dataset and text token datasets is not modelled yet"),
		notPlanned(Schedule, Vision, "the planner models a text token job's documents over one dataset; a schedule of an image-text dataset and text token datasets is not modelled yet"),
		refuse(Clips, Columns, "columns and clip do not go together: a clip job reads the GOPs (and rows) its clips need"),
		refuse(Clips, Exclusion, "an exclusion list leaves samples out of an order of samples; a clip job's samples are clips drawn afresh each epoch"),
		refuse(Clips, Append, "an append record merges samples into an order of samples; a clip job's samples are clips drawn afresh each epoch"),
		downgrade(Clips, Locality, Locality, "a clip job's ranks take the plain cut of each global batch of clips: locality does not apply"),
		refuse(Clips, BalanceB, "balance=bytes weighs samples as stored; every clip of a clip job decodes the same number of frames"),
		refuse(Clips, BalanceC, "balance=attention and balance=tokens weigh a token job's sequences; a clip job's clips are frames"),
		refuse(Clips, Resize, "a clip job's plan is of its epochs, not of a resize (nodes_after=)"),
		refuse(Importance, Buckets, "sampling=importance draws samples by their weight, some more than once; a bucket job serves each image once an epoch"),
		refuse(Tokens, Buckets, "seq and buckets do not go together: a token job's samples are sequences, a bucket job's images"),
		refuse(Buckets, Transform, "a bucket job resizes and crops each image to its bucket on the data node; transform= names another pipeline"),
		downgrade(Buckets, Locality, Locality, "a bucket job's ranks take the plain cut of each step's batch: locality does not apply"),
		refuse(Buckets, BalanceB, "every image of a bucket job's step has its bucket's size: balance= has nothing to weigh"),
		refuse(Buckets, BalanceC, "every image of a bucket job's step has its bucket's size: balance= has nothing to weigh"),
		refuse(Buckets, Resize, "a bucket job's plan is of its epochs, not of a resize (nodes_after=)"),
		refuse(InPlace, BalanceB, "a dataset served in place sizes its samples only once their chunk is read, so balance=bytes cannot weigh them before the batch is laid out"),
		downgrade(Locality, BalanceB, Locality, "balance= replaces locality: the ranks' costs decide which rank takes which sample, not where the chunks live"),
		downgrade(Locality, BalanceC, Locality, "balance= replaces locality: the ranks' costs decide which rank takes which sequence, not where the chunks live"),
		refuse(BalanceB, BalanceC, "a job is balanced by one cost: give balance= once"),
		notPlanned(Mix, Tokens, "the planner models a token job's documents over one dataset; a token mixture's epochs are not modelled yet"),
		notPlanned(Schedule, Tokens, "the planner models a token job's documents over one dataset; a token schedule's epochs are not modelled yet"),
		notPlanned(Importance, Cluster, "the planner models importance sampling on one gateway; a cluster's epochs drawn by importance are not modelled yet"),
	}
}

// refuse is a refused pair's cell, with the message every entry point
// answers it with.
func refuse(a, b Feature, msg string) Cell { return Cell{A: a, B: b, Verdict: Refuse, Message: msg} }

// downgrade is the cell of a pair served with drops having no effect.
func downgrade(a, b, drops Feature, msg string) Cell {
	return Cell{A: a, B: b, Verdict: Downgrade, Message: msg, Drops: drops}
}

// notPlanned is the cell of a pair served but not modelled by the
// planner, why.
func notPlanned(a, b Feature, why string) Cell { return Cell{A: a, B: b, Verdict: Compose, Plan: why} }

// Table is every pair of features, each once (A before B in Features'
// order), with its cell.
func Table() []Cell { return slices.Clone(table) }

// table is Table, made once: every request is checked against it, so its
// walks are of the few cells that say something (notable). Never modified.
var table = makeTable()

// notable are table's cells that do not simply compose, in its order.
var notable = func() []Cell {
	var out []Cell
	for _, c := range table {
		if c.Verdict != Compose || c.Plan != "" {
			out = append(out, c)
		}
	}
	return out
}()

// pairs are notable's pairs as sets, by its index: s holds cell i's pair
// when s&pairs[i] == pairs[i] (no lookup of a feature's bit by name on
// a request's path). Never modified.
var pairs = func() []Set {
	out := make([]Set, len(notable))
	for i, c := range notable {
		out[i] = Of(c.A, c.B)
	}
	return out
}()

// holds reports whether s holds the pair of notable's cell i.
func (s Set) holds(i int) bool { return s&pairs[i] == pairs[i] }

func makeTable() []Cell {
	listed := cells()
	for _, d := range defs {
		listed = append(listed, d.Row...)
	}
	var out []Cell
	for i, a := range defs {
		for _, b := range defs[i+1:] {
			c := Cell{A: a.Name, B: b.Name, Verdict: Compose}
			for _, x := range listed {
				if x.A == a.Name && x.B == b.Name || x.A == b.Name && x.B == a.Name {
					c.Verdict, c.Message, c.Drops, c.Plan = x.Verdict, x.Message, x.Drops, x.Plan
				}
			}
			out = append(out, c)
		}
	}
	return out
}

// Lookup is the cell of the pair a, b (in either order).
func Lookup(a, b Feature) Cell {
	for _, c := range table {
		if c.A == a && c.B == b || c.A == b && c.B == a {
			return c
		}
	}
	return Cell{A: a, B: b, Verdict: Compose}
}

// Check refuses s if a pair of its features is refused, or a rule of
// features alone holds them all: the first such pair in the table's
// order, else the first such rule in Rules' order, with its message
// (ErrIncompatible). The rules that name parameters are CheckParams'.
func (s Set) Check() error {
	return s.check(nil)
}

// check is Check, and with the request's parameters v (not nil) the
// rules that name parameters too.
func (s Set) check(v url.Values) error {
	for i, c := range notable {
		if c.Verdict == Refuse && s.holds(i) {
			return Refusal(c)
		}
	}
	for i, r := range rules {
		if s&ruleSets[i] != ruleSets[i] || v == nil && !r.featuresOnly() {
			continue
		}
		if p, ok := r.givenIn(v); ok {
			return r.Refusal(p)
		}
	}
	return nil
}

// ErrNotPlanned marks a job /plan does not model though its batches are
// served: a cell's Plan (501).
var ErrNotPlanned = errkind.New(errkind.NotImplemented, "not planned")

// CheckPlan refuses a plan of s where the planner does not model a pair
// of its features: the first such pair in the table's order
// (ErrNotPlanned with the cell's Plan).
func (s Set) CheckPlan() error {
	for i, c := range notable {
		if c.Plan != "" && s.holds(i) {
			return fmt.Errorf("%w: %s", ErrNotPlanned, c.Plan)
		}
	}
	return nil
}

// Refusal is the error a refused cell answers: ErrIncompatible with the
// cell's message, the same text whoever asks.
func Refusal(c Cell) error {
	return &Refused{Cell: c, err: fmt.Errorf("%w: %s", ErrIncompatible, c.Message)}
}

// A Refused is a refusal by the table: the cell, or the rule (with the
// parameter of its Given the request gave), and its error.
type Refused struct {
	Cell  Cell
	Rule  Rule
	Param string
	err   error
}

func (r *Refused) Error() string { return r.err.Error() }
func (r *Refused) Unwrap() error { return r.err }

// Dropped reports whether f has no effect in s: a downgrade cell of s's
// features drops it.
func (s Set) Dropped(f Feature) bool {
	if !s.Has(f) {
		return false
	}
	for i, c := range notable {
		if c.Verdict == Downgrade && c.Drops == f && s.holds(i) {
			return true
		}
	}
	return false
}

// Effective is s less the features a downgrade drops.
func (s Set) Effective() Set {
	out := s
	for i, c := range notable {
		if c.Verdict == Downgrade && s.holds(i) {
			out = out.Without(c.Drops)
		}
	}
	return out
}

// Assignment is how the global batches of a job of features s and world
// ranks are given to its ranks (api.AssignBalance, api.AssignLocality,
// api.AssignPlain), by the table's downgrades: by their cost where a
// balance= feature has effect; by locality where locality has effect
// (no downgrade drops it) on a cluster of several nodes (Cluster: the
// job's, or a plan's nodes=) with several ranks; else the plain cut.
// /plan reports it, and the layout assigns by it (layout.Source's
// assignment, with Cluster exactly when the job's members are several).
func (s Set) Assignment(world int) string {
	f := s.Effective()
	switch {
	case f.Has(BalanceB) || f.Has(BalanceC):
		return api.AssignBalance
	case f.Has(Locality) && f.Has(Cluster) && world > 1:
		return api.AssignLocality
	}
	return api.AssignPlain
}

// A Companion is a parameter that shapes a feature and means nothing
// without it (pack= without seq=): given alone, the request is refused
// with Message, where "{param}" is the parameter's name. With a Value,
// it is the parameter given that value (balance=vision without vision=).
type Companion struct {
	Params  []string  `json:"params"`
	Value   string    `json:"value,omitempty"`
	Needs   []Feature `json:"needs"` // any of them
	Message string    `json:"message"`
}

// Companions are the parameters that apply only with a feature.
func Companions() []Companion { return slices.Clone(companions) }

// companions and exclusives are the tables CheckParams reads, built once
// (read only).
var companions = []Companion{
	{Params: []string{api.ParamPack, api.ParamPad, api.ParamEOS}, Needs: []Feature{Tokens},
		Message: "{param} applies only to a token job (seq=)"},
	{Params: []string{api.ParamStride, api.ParamFPS, api.ParamStep, api.ParamClipStart, api.ParamClipLayout, api.ParamGOPWindow}, Needs: []Feature{Clips},
		Message: "{param} applies only to a clip job (clip=, or delta_timestamps= or frames= over a LeRobot dataset)"},
	{Params: []string{api.ParamMixBlock, api.ParamMixSamples}, Needs: []Feature{Mix, Schedule},
		Message: "mix_block and mix_samples apply only with mix=, mix_schedule= or schedule="},
	{Params: []string{api.ParamImportance, api.ParamHot}, Needs: []Feature{Importance},
		Message: "importance and hot apply only with sampling=importance"},
	{Params: []string{api.ParamVision}, Needs: []Feature{Tokens},
		Message: "{param} applies only to a token job (seq=): its images are counted in the sequence's tokens"},
	{Params: []string{api.ParamBalance}, Value: api.BalanceVision, Needs: []Feature{Vision},
		Message: "balance=vision weighs a vision job's sequences (vision=, with seq=) by their vision tokens; a text token job takes balance=attention or balance=tokens, a job of samples balance=bytes"},
}

// companion reports whether the parameter name is a companion's: it
// means something only with another feature.
func companion(name string) bool {
	for _, c := range companions {
		if slices.Contains(c.Params, name) {
			return true
		}
	}
	return false
}

// given reports whether v gives c's parameter p (with c's value, if it
// names one).
func (c Companion) given(v url.Values, p string) bool {
	x := v.Get(p)
	return x != "" && (c.Value == "" || x == c.Value)
}

// message is c's message for param.
func (c Companion) message(param string) string {
	return strings.ReplaceAll(c.Message, "{param}", param)
}

// An Exclusive is a group of parameters of which a request gives one.
type Exclusive struct {
	Params  []string `json:"params"`
	Message string   `json:"message"`
}

// Exclusives are the groups of parameters that name the same thing two
// ways: a request gives at most one of each.
func Exclusives() []Exclusive { return slices.Clone(exclusives) }

var exclusives = []Exclusive{
	{Params: []string{api.ParamDataset, api.ParamMix, api.ParamMixSchedule, api.ParamScheduleVersion},
		Message: "a job reads one source: give dataset=, mix=, mix_schedule= or schedule= (the schedule stored under its name), not two"},
	{Params: []string{api.ParamClip, api.ParamDeltaTimestamps}, Message: "give clip= (clips of a tree of videos) or delta_timestamps=/frames= (windows of a LeRobot dataset), not both"},
	{Params: []string{api.ParamClip, api.ParamFrames}, Message: "give clip= (clips of a tree of videos) or delta_timestamps=/frames= (windows of a LeRobot dataset), not both"},
}

// CheckParams refuses a request's parameters v that the table refuses: a
// group of exclusive parameters given two ways, a companion without its
// feature, a refused pair of the features v names, and a rule they and v
// meet; in that order, the first found in the table's order.
func CheckParams(v url.Values) error {
	for _, e := range exclusives {
		given := 0
		for _, p := range e.Params {
			if v.Get(p) != "" {
				given++
			}
		}
		if given > 1 {
			return &Refused{err: fmt.Errorf("%w: %s", ErrIncompatible, e.Message)}
		}
	}
	s := Detect(v)
	for _, c := range companions {
		needed := false
		for _, f := range c.Needs {
			needed = needed || s.Has(f)
		}
		for _, p := range c.Params {
			if c.given(v, p) && !needed {
				return &Refused{err: fmt.Errorf("%w: %s", ErrIncompatible, c.message(p))}
			}
		}
	}
	return s.check(v)
}

// IsRefusal reports whether err is the table's refusal.
func IsRefusal(err error) bool { return errors.Is(err, ErrIncompatible) }
