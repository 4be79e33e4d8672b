package jobmodel_test

import (
	"fmt"
	"math/rand/v2"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/brandgw/brand/balance"
	"github.com/brandgw/brand/importance"
	"github.com/brandgw/brand/internal/job/features"
	"github.com/brandgw/brand/internal/testsupport/jobmodel"
	"github.com/brandgw/brand/shuffle"
)

// randomChain is a random job over a version of 1 to 10 chunks (some
// empty) and a chain of up to 6 edits of either kind in epochs 0 to 2,
// each from a position at or after the one before it; and the same
// chain as shuffle.EditedEpoch takes it, over the last version's counts.
func randomChain(r *rand.Rand) (*jobmodel.Job, []shuffle.Edit, []int) {
	counts := make([]int, 1+r.IntN(10))
	for c := range counts {
		counts[c] = r.IntN(9)
	}
	j := &jobmodel.Job{Counts: counts, Seed: r.Uint64(), Window: 1 + r.IntN(4)}
	var edits []shuffle.Edit
	cur := counts
	drop := map[int]bool{}
	var epoch uint64
	pos := 0
	for range r.IntN(7) {
		if r.IntN(3) == 0 {
			epoch, pos = epoch+uint64(r.IntN(2)), 0
		}
		pos += r.IntN(12)
		if r.IntN(2) == 0 && len(edits) < shuffle.MaxAppends {
			grown := append(slices.Clone(cur), make([]int, 1+r.IntN(4))...)
			for c := len(cur); c < len(grown); c++ {
				grown[c] = r.IntN(9)
			}
			j.Chain = append(j.Chain, jobmodel.Edit{Kind: jobmodel.Append, Epoch: epoch, Pos: pos, OldChunks: len(cur), Counts: grown})
			edits = append(edits, shuffle.Edit{Epoch: epoch, From: pos, Chunks: len(cur)})
			cur = grown
			continue
		}
		n := 0
		for _, k := range cur {
			n += k
		}
		var ids []int
		for range r.IntN(6) {
			if n > 0 {
				id := r.IntN(n)
				ids = append(ids, id)
				drop[id] = true
			}
		}
		bits := make([]uint64, (n+63)/64)
		for id := range drop {
			bits[id/64] |= 1 << (id % 64)
		}
		j.Chain = append(j.Chain, jobmodel.Edit{Kind: jobmodel.Exclude, Epoch: epoch, Pos: pos, IDs: ids})
		edits = append(edits, shuffle.Edit{Epoch: epoch, From: pos, Drop: shuffle.NewDrop(bits, cur)})
	}
	return j, edits, cur
}

// TestOrderIsEditedEpochs: the model's order of every epoch of random
// chains of edits is shuffle.EditedEpoch's, the order the gateway and the
// planner lay a job out by: two implementations of §14–§16, one of
// windows materialised, one of composed views.
func TestOrderIsEditedEpochs(t *testing.T) {
	for seed := range uint64(400) {
		r := rand.New(rand.NewPCG(seed, 0x6a6f626d6f64656c))
		j, edits, counts := randomChain(r)
		for epoch := range uint64(4) {
			want, err := shuffle.EditedEpoch(counts, edits, j.Seed, epoch, j.Window)
			if err != nil {
				t.Fatalf("seed %d: %v", seed, err)
			}
			var flat []int
			for w := range want.NumWindows() {
				flat = append(flat, want.Window(w)...)
			}
			got, err := j.Order(epoch)
			if err != nil {
				t.Fatalf("seed %d: %v", seed, err)
			}
			if !slices.Equal(got, flat) {
				t.Fatalf("seed %d epoch %d (chain %+v):\nmodel  %v\nshuffle %v", seed, epoch, j.Chain, got, flat)
			}
		}
	}
}

// TestOrderKeepsWhatWasBefore: each edit leaves every position before its
// own as the edits before it made them, and every epoch serves each
// sample of its version not excluded by then exactly once.
func TestOrderKeepsWhatWasBefore(t *testing.T) {
	for seed := range uint64(300) {
		r := rand.New(rand.NewPCG(seed, 0x6b656570))
		j, _, _ := randomChain(r)
		for k := range j.Chain {
			before := &jobmodel.Job{Counts: j.Counts, Seed: j.Seed, Window: j.Window, Chain: j.Chain[:k]}
			after := &jobmodel.Job{Counts: j.Counts, Seed: j.Seed, Window: j.Window, Chain: j.Chain[:k+1]}
			e := j.Chain[k]
			for epoch := range e.Epoch + 1 {
				b, _ := before.Order(epoch)
				a, _ := after.Order(epoch)
				keep := len(b)
				if epoch == e.Epoch {
					keep = min(e.Pos, len(b))
				}
				if len(a) < keep || !slices.Equal(a[:keep], b[:keep]) {
					t.Fatalf("seed %d: edit %d changed epoch %d before position %d", seed, k, epoch, keep)
				}
			}
		}
		for epoch := range uint64(4) {
			o, _ := j.Order(epoch)
			out := map[int]bool{}
			for _, e := range j.Chain {
				if e.Epoch < epoch {
					for _, id := range e.IDs {
						out[id] = true
					}
				}
			}
			seen := map[int]int{}
			for _, id := range o {
				seen[id]++
			}
			n := 0
			for _, k := range j.Version(epoch) {
				n += k
			}
			for id := range n {
				// A sample excluded in this epoch may have been served
				// before its exclusion's position: at most once.
				if c := seen[id]; c > 1 || !out[id] && c == 0 && !excludedIn(j, epoch, id) {
					t.Fatalf("seed %d epoch %d: sample %d served %d times", seed, epoch, id, c)
				}
			}
		}
	}
}

func excludedIn(j *jobmodel.Job, epoch uint64, id int) bool {
	for _, e := range j.Chain {
		if e.Epoch == epoch && slices.Contains(e.IDs, id) {
			return true
		}
	}
	return false
}

// TestCutIsShuffles: the model's cut is shuffle.Params' (§6).
func TestCutIsShuffles(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for range 2000 {
		n := r.IntN(60)
		c := jobmodel.Cut{B: 1 + r.IntN(6), World: 1 + r.IntN(5), Offset: r.IntN(n + 1), DropLast: r.IntN(2) == 0}
		p := shuffle.Params{Window: 1, BatchSize: c.B, World: c.World, Offset: c.Offset, DropLast: c.DropLast}
		if got, want := c.Batches(n), p.NumBatches(n); got != want {
			t.Fatalf("%+v over %d: %d batches, shuffle %d", c, n, got, want)
		}
		for m := range c.Batches(n) {
			s, e := c.Global(n, m)
			ws, we, err := p.GlobalBatch(n, m)
			if err != nil || s != ws || e != we {
				t.Fatalf("%+v over %d: global batch %d [%d, %d), shuffle [%d, %d) %v", c, n, m, s, e, ws, we, err)
			}
			for rank := range c.World {
				p.Rank = rank
				s, e := c.Rank(n, m, rank)
				ws, we, err := p.BatchRange(n, m)
				if err != nil || s != ws || e != we {
					t.Fatalf("%+v over %d: batch %d rank %d [%d, %d), shuffle [%d, %d) %v", c, n, m, rank, s, e, ws, we, err)
				}
			}
		}
	}
}

// TestAssignIsBalances: §13.3 as the model writes it from the Python
// reference is package balance's assignment, on random batches with
// ties.
func TestAssignIsBalances(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for range 3000 {
		world := 1 + r.IntN(6)
		shares := make([]int, world)
		n := 0
		for k := range shares {
			shares[k] = r.IntN(5)
			n += shares[k]
		}
		costs := make([]uint64, n)
		for i := range costs {
			costs[i] = uint64(r.IntN(1 + r.IntN(3000)))
		}
		want, err := balance.Assign(costs, shares)
		if err != nil {
			t.Fatal(err)
		}
		got := jobmodel.Assign(costs, shares)
		for k := range got {
			if !slices.Equal(got[k], want.Ranks[k]) && !(len(got[k]) == 0 && len(want.Ranks[k]) == 0) {
				t.Fatalf("costs %v shares %v: rank %d takes %v, balance.Assign %v", costs, shares, k, got[k], want.Ranks[k])
			}
		}
	}
}

// TestRulesAreTheTable: the model's rules are the table every entry point
// asks (internal/job/features): its features in order, every pair's kind and
// downgrade, what /plan does not model, the exclusive parameters and the
// companions. A change to the table is a change to the rules: this
// fails until the model says it too.
func TestRulesAreTheTable(t *testing.T) {
	var names []string
	for _, d := range features.Features() {
		names = append(names, string(d.Name))
	}
	if !slices.Equal(names, jobmodel.Features) {
		t.Fatalf("the table's features %v; the model's %v", names, jobmodel.Features)
	}
	table := features.Table()
	rules := jobmodel.Rules()
	if len(table) != len(rules) {
		t.Fatalf("%d cells, %d rules", len(table), len(rules))
	}
	for i, c := range table {
		r := rules[i]
		got := fmt.Sprintf("%s×%s %s drops %q not planned %v", c.A, c.B, c.Verdict, c.Drops, c.Plan != "")
		want := fmt.Sprintf("%s×%s %s drops %q not planned %v", r.A, r.B, r.Kind, r.Drops, r.NotPlanned)
		if got != want {
			t.Errorf("the table says %s; the model %s", got, want)
		}
		if c.Verdict == features.Refuse && c.Message == "" {
			t.Errorf("%s×%s is refused without a message", c.A, c.B)
		}
	}
	var ex [][]string
	for _, e := range features.Exclusives() {
		ex = append(ex, e.Params)
	}
	if fmt.Sprint(ex) != fmt.Sprint(jobmodel.Exclusives) {
		t.Errorf("the table's exclusive parameters %v; the model's %v", ex, jobmodel.Exclusives)
	}
	var co, mo []string
	for _, c := range features.Companions() {
		co = append(co, fmt.Sprint(c.Params, c.Needs))
	}
	for _, c := range jobmodel.Companions {
		mo = append(mo, fmt.Sprint(c.Params, c.Needs))
	}
	if !slices.Equal(co, mo) {
		t.Errorf("the table's companions %v; the model's %v", co, mo)
	}
	var ru, mr []string
	for _, r := range features.Rules() {
		ru = append(ru, fmt.Sprint(r.Features, r.Given, r.Unless))
	}
	for _, c := range jobmodel.Conds {
		var fs []features.Feature
		for _, f := range c.Features {
			fs = append(fs, features.Feature(f))
		}
		ps := func(ps [][2]string) []features.Param {
			var out []features.Param
			for _, p := range ps {
				out = append(out, features.Param{Name: p[0], Value: p[1]})
			}
			return out
		}
		mr = append(mr, fmt.Sprint(fs, ps(c.Given), ps(c.Unless)))
	}
	if !slices.Equal(ru, mr) {
		t.Errorf("the table's rules %v; the model's %v", ru, mr)
	}
}

// Params is a pool of parameters of every feature, each with a value its
// parser takes.
var Params = [][2]string{
	{"dataset", "tar"}, {"mix", "tar:1,tar2:1"}, {"mix_schedule", "0:tar:1,tar2:1"}, {"schedule", "latest"},
	{"index", "0123456789abcdef"}, {"sampling", "importance"}, {"sampling", "uniform"}, {"importance", "0123456789abcdef"}, {"hot", "1"},
	{"seq", "64"}, {"pack", "concat"}, {"pad", "0"}, {"eos", "1"}, {"vision", "size:448x448,patch:14,image:1"},
	{"clip", "4"}, {"stride", "2"}, {"fps", "10"}, {"step", "3"}, {"clip_start", "first"}, {"clip_layout", "tchw"},
	{"delta_timestamps", "observation.image:0,0.1"}, {"frames", "action:0,1"},
	{"transform", "imagenet-train"}, {"columns", "txt"}, {"locality", "false"}, {"locality", "true"},
	{"balance", "bytes"}, {"balance", "attention"}, {"balance", "tokens"}, {"balance", "vision"},
	{"mix_block", "8"}, {"mix_samples", "16"}, {"job", "j1"},
}

// RandomParams is a random set of Params, each parameter at most once.
func RandomParams(r *rand.Rand) url.Values {
	v := url.Values{}
	for range 1 + r.IntN(6) {
		p := Params[r.IntN(len(Params))]
		v.Set(p[0], p[1])
	}
	return v
}

// TestJudgeIsCheckParams: on random parameters of every feature, the
// model's verdict on the request is the table's (spec.CheckParams): the
// same refusal, or none.
func TestJudgeIsCheckParams(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	for range 5000 {
		v := RandomParams(r)
		var want string
		switch verdict := jobmodel.Judge(v); verdict.Kind {
		case "exclusive":
			want = features.Exclusives()[verdict.Exclusive].Message
		case "companion":
			for _, c := range features.Companions() {
				if slices.Contains(c.Params, verdict.Companion) {
					want = strings.ReplaceAll(c.Message, "{param}", verdict.Companion)
				}
			}
		case "pair":
			want = features.Lookup(features.Feature(verdict.A), features.Feature(verdict.B)).Message
		case "rule":
			want = strings.TrimPrefix(features.Rules()[verdict.Rule].Refusal(verdict.Param).Error(), features.ErrIncompatible.Error()+": ")
		}
		var got string
		if err := features.CheckParams(v); err != nil {
			got = strings.TrimPrefix(err.Error(), features.ErrIncompatible.Error()+": ")
		}
		if got != want {
			t.Fatalf("%s: the table refuses with %q; the model's verdict %+v, whose message is %q", v.Encode(), got, jobmodel.Judge(v), want)
		}
		var detected []string
		for _, f := range features.Detect(v).List() {
			detected = append(detected, string(f))
		}
		if !slices.Equal(detected, jobmodel.Detect(v)) {
			t.Fatalf("%s: the table detects %v; the model %v", v.Encode(), detected, jobmodel.Detect(v))
		}
	}
}

// TestMixtureReadsEachPassOnce: a mixture's draws read each component's
// passes in order, every sample of a pass once.
func TestMixtureReadsEachPassOnce(t *testing.T) {
	m := jobmodel.Mixture{Counts: [][]int{{3, 5, 2}, {4, 4}}, Weights: []uint64{2, 1}, Block: 6, Seed: 9, Window: 2}
	var stream [2][]int
	for epoch := range uint64(4) {
		draws, err := m.Order(epoch)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range draws {
			stream[d.Component] = append(stream[d.Component], d.ID)
		}
	}
	for i, s := range stream {
		n := 0
		for _, k := range m.Counts[i] {
			n += k
		}
		for p := 0; p+n <= len(s); p += n {
			if got := slices.Sorted(slices.Values(s[p : p+n])); got[0] != 0 || got[n-1] != n-1 || len(slices.Compact(got)) != n {
				t.Fatalf("component %d pass %d: %v", i, p/n, s[p:p+n])
			}
		}
	}
}

// TestSeparateRepeatsIsTheServers holds the model's separate_repeats,
// written from docs/importance.md §6, to the server's
// (importance.SeparateRepeats) on random runs with many repeats.
func TestSeparateRepeatsIsTheServers(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	for range 2000 {
		n := r.IntN(12)
		ids := make([]int, n)
		keys := make([]string, n)
		for i := range ids {
			ids[i] = r.IntN(1 + r.IntN(4))
			keys[i] = strconv.Itoa(ids[i])
		}
		was := slices.Clone(keys)
		importance.SeparateRepeats(ids)
		jobmodel.SeparateRepeats(keys)
		for i := range ids {
			if keys[i] != strconv.Itoa(ids[i]) {
				t.Fatalf("%v: the model separates it to %v, the server to %v", was, keys, ids)
			}
		}
	}
}
