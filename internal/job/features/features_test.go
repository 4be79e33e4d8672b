package features

import (
	"bytes"
	"cmp"
	"errors"
	"flag"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/brandgw/brand/api"
	"github.com/brandgw/brand/internal/errkind"
	"github.com/brandgw/brand/internal/testsupport/golden"
)

var update = flag.Bool("update", false, "rewrite python/brand/compat.json and docs/http-api.md's table from the table")

const (
	pythonGolden = "../../../python/brand/compat.json"
	httpDocs     = "../../../docs/http-api.md"
	docsBegin    = "<!-- the compatibility table: generated from internal/job/features (go test ./internal/job/features -update) -->\n"
	docsEnd      = "<!-- end of the compatibility table -->"
)

// TestGolden: the Python client's copy of the table is the table.
func TestGolden(t *testing.T) {
	want := golden.Encode(t, Publish())
	if *update {
		if err := os.WriteFile(pythonGolden, want, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	got, err := os.ReadFile(pythonGolden)
	if err != nil {
		t.Fatalf("%v (write it with go test ./internal/job/features -update)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s is not the table (rewrite it with go test ./internal/job/features -update)", pythonGolden)
	}
}

// TestDocs: docs/http-api.md shows the table as it is.
func TestDocs(t *testing.T) {
	b, err := os.ReadFile(httpDocs)
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	i, j := strings.Index(doc, docsBegin), strings.Index(doc, docsEnd)
	if i < 0 || j < i {
		t.Fatalf("%s has no generated compatibility table between %q and %q", httpDocs, docsBegin, docsEnd)
	}
	want := doc[:i+len(docsBegin)] + "\n" + Markdown() + "\n" + doc[j:]
	if want == doc {
		return
	}
	if *update {
		if err := os.WriteFile(httpDocs, []byte(want), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	t.Errorf("%s's compatibility table is not the table's (rewrite it with go test ./internal/job/features -update)", httpDocs)
}

// TestTableIsComplete: every pair of features has one cell, each
// feature's name is unique, and every cell that is not a composition
// says why; a downgrade drops one of its pair.
func TestTableIsComplete(t *testing.T) {
	defs := Features()
	if len(defs) > 64 {
		t.Fatalf("%d features: a Set holds 64", len(defs))
	}
	seen := map[Feature]bool{}
	for _, d := range defs {
		if seen[d.Name] {
			t.Errorf("feature %s defined twice", d.Name)
		}
		seen[d.Name] = true
		if d.What == "" {
			t.Errorf("feature %s says not what it is", d.Name)
		}
		if len(d.SetBy) == 0 && len(d.DefaultUnless) == 0 && !d.Resolved {
			t.Errorf("feature %s: neither named by a parameter nor resolved", d.Name)
		}
	}
	tab := Table()
	if want := len(defs) * (len(defs) - 1) / 2; len(tab) != want {
		t.Fatalf("%d cells for %d features; want %d", len(tab), len(defs), want)
	}
	pairs := map[[2]Feature]bool{}
	for _, c := range cells() {
		k := [2]Feature{min(c.A, c.B), max(c.A, c.B)}
		if pairs[k] {
			t.Errorf("pair %s × %s listed twice", c.A, c.B)
		}
		pairs[k] = true
		if !seen[c.A] || !seen[c.B] || c.A == c.B {
			t.Errorf("cell %s × %s: not a pair of features", c.A, c.B)
		}
		if c.Message == "" && c.Plan == "" {
			t.Errorf("cell %s × %s says not why", c.A, c.B)
		}
		if c.Verdict == Downgrade && c.Drops != c.A && c.Drops != c.B {
			t.Errorf("downgrade %s × %s drops %s, neither of them", c.A, c.B, c.Drops)
		}
		if c.Verdict == Compose && c.Plan == "" {
			t.Errorf("cell %s × %s listed to compose: every unlisted pair does", c.A, c.B)
		}
	}
}

// TestCheckParams: what a request's parameters name, checked against the
// table, each refusal with its one message.
func TestCheckParams(t *testing.T) {
	for _, tc := range []struct {
		query string
		want  string // "" for none; else the message after the prefix
	}{
		{"dataset=a&seed=1", ""},
		{"mix=a:1,b:1&seq=128&balance=attention", ""},
		{"seq=128&pack=concat&eos=2", ""},
		{"dataset=a&mix=a:1,b:1", Exclusives()[0].Message},
		{"mix=a:1&mix_schedule=0:a:1", Exclusives()[0].Message},
		{"clip=8&frames=0,1", Exclusives()[2].Message},
		{"pack=concat", "pack applies only to a token job (seq=)"},
		{"stride=2", "stride applies only to a clip job (clip=, or delta_timestamps= or frames= over a LeRobot dataset)"},
		{"mix_block=4", Companions()[2].Message},
		{"hot=3", Companions()[3].Message},
		{"seq=128&sampling=importance&job=j", Lookup(Importance, Tokens).Message},
		{"mix=a:1,b:1&sampling=importance&job=j", Lookup(Mix, Importance).Message},
		{"balance=attention", Lookup(Samples, BalanceC).Message},
		{"seq=64&balance=bytes", Lookup(Tokens, BalanceB).Message},
		{"clip=8&balance=bytes", Lookup(Clips, BalanceB).Message},
		{"seq=64&transform=imagenet-train", Lookup(Tokens, Transform).Message},
		{"seq=64&clip=8", Lookup(Tokens, Clips).Message},
		{"seq=64&locality=true", ""}, // a downgrade: served
		{"seq=64&vision=patch:14,merge:2,min:3136,max:1003520,pad:151655", ""},
		{"vision=size:448x448,patch:14,pad:1", "vision applies only to a token job (seq=): its images are counted in the sequence's tokens"},
		{"seq=64&vision=size:448x448,patch:14,pad:1&transform=imagenet-train", Lookup(Tokens, Transform).Message},
		{"mix=a:1,b:1&seq=64&vision=size:448x448,patch:14,pad:1", ""},
		{"mix_schedule=0:a:1,b:1&seq=64&vision=size:448x448,patch:14,pad:1", ""},
		{"seq=64&vision=size:448x448,patch:14,pad:1&balance=tokens", ""},
		{"seq=64&vision=size:448x448,patch:14,pad:1&balance=attention", ""},
		{"seq=64&vision=size:448x448,patch:14,pad:1&balance=vision", ""},
		{"seq=64&balance=vision", Companions()[5].Message},
		{"balance=vision", Companions()[5].Message},
		{"clip=8&balance=vision", Companions()[5].Message},
		{"seq=64&vision=size:448x448,patch:14,pad:1&columns=a", Lookup(Tokens, Columns).Message},
		// The rules, after the pairs.
		{"mix=a:1,b:1&seq=64&vision=size:448x448,patch:14,pad:1&balance=vision", Rules()[4].Message},
		{"mix=a:1,b:1&seq=64&vision=size:448x448,patch:14,pad:1&balance=tokens", Rules()[4].Message},
		{"mix_schedule=0:a:1,b:1&seq=64&vision=size:448x448,patch:14,pad:1&balance=attention", Rules()[5].Message},
		{"mix=a:1,b:1&seq=64&balance=tokens", ""}, // a text token mixture is balanced
		{"mix=a:1,b:1&seq=64&vision=size:448x448,patch:14,pad:1&balance=bytes", Lookup(Tokens, BalanceB).Message},
		{"seq=64&vision=size:448x448,patch:14,pad:1&pack=concat", Rules()[6].Message},
		{"seq=64&vision=size:448x448,patch:14,pad:1&pack=bestfit", ""},
		{"seq=64&eos=2", Rules()[1].Message},
		{"seq=64&eos=2&pack=bestfit", Rules()[1].Message},
		{"schedule=latest", Rules()[0].Message},
		{"schedule=latest&job=j", ""},
		{"sampling=importance", Rules()[2].Message},
		{"frames=0,1&fps=5", "fps shapes a tree of videos' clips (clip=T); a LeRobot job's windows are delta_timestamps= or frames="},
		{"clip=8&fps=5", ""},
		{"seq=64&sampling=importance", Lookup(Importance, Tokens).Message}, // a pair before a rule
		{"buckets=sdxl&budget=4194304", ""},
		{"buckets=sdxl&budget_tokens=16384&vae=8&patch=2", ""},
		{"buckets=sdxl&budget=4194304&batch_size=4", "batch_size does not apply to a bucket job: each bucket's batch size is set by budget= or budget_tokens=, and a bucket job resumes with resume=WORLD:STEPS"},
		{"buckets=sdxl&budget=4194304&offset=8", "offset does not apply to a bucket job: each bucket's batch size is set by budget= or budget_tokens=, and a bucket job resumes with resume=WORLD:STEPS"},
		{"buckets=sdxl", Rules()[11].Message},
		{"budget=100", "budget applies to a bucket job: give buckets="},
		{"resume=4:10", "resume applies to a bucket job: give buckets="},
		{"buckets=sdxl&budget=4194304&transform=imagenet-train", Lookup(Buckets, Transform).Message},
		{"buckets=sdxl&budget=4194304&seq=64", Lookup(Tokens, Buckets).Message},
		{"buckets=sdxl&budget=4194304&balance=bytes", Lookup(Buckets, BalanceB).Message},
		{"clip=8&gop_window=4", ""},
		{"delta_timestamps=0&gop_window=1", ""},
		{"gop_window=4", "gop_window applies only to a clip job (clip=, or delta_timestamps= or frames= over a LeRobot dataset)"},
		{"buckets=video-480&budget=4194304&gop_window=2", "gop_window applies only to a clip job (clip=, or delta_timestamps= or frames= over a LeRobot dataset)"},
		{"buckets=video-480&budget=4194304&clip=8&gop_window=2", Rules()[8].Message},
	} {
		v, err := url.ParseQuery(tc.query)
		if err != nil {
			t.Fatal(err)
		}
		err = CheckParams(v)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: %v", tc.query, err)
		case tc.want != "" && (err == nil || err.Error() != ErrIncompatible.Error()+": "+tc.want):
			t.Errorf("%s: %v; want %q", tc.query, err, tc.want)
		case err != nil && (!errors.Is(err, ErrIncompatible) || !errkind.Has(err, errkind.Invalid)):
			t.Errorf("%s: %v is not the table's refusal, a bad request", tc.query, err)
		}
	}
}

// TestRules: every rule says why, names features and parameters there
// are, says what no pair already does (a rule of features alone is of
// three or more, each pair of which the table takes), and refuses a
// request that meets it with its message, no earlier refusal before it:
// a request of its features and Given, and what their companions need.
func TestRules(t *testing.T) {
	known := map[string]bool{}
	for _, p := range api.JobParams {
		known[p] = true
	}
	for _, r := range Rules() {
		name := ruleText(r)
		if r.Message == "" {
			t.Errorf("rule %s says not why", name)
		}
		for _, f := range r.Features {
			if bit(f) == 0 {
				t.Errorf("rule %s: %s is no feature", name, f)
			}
		}
		for _, p := range append(slices.Clone(r.Given), r.Unless...) {
			if !known[p.Name] {
				t.Errorf("rule %s: %s is no job parameter", name, p.Name)
			}
		}
		if r.featuresOnly() {
			if len(r.Features) < 3 {
				t.Errorf("rule %s of %d features: a pair is a cell", name, len(r.Features))
			}
			for i, a := range r.Features {
				for _, b := range r.Features[i+1:] {
					if Lookup(a, b).Verdict == Refuse {
						t.Errorf("rule %s: the pair %s × %s is refused already", name, a, b)
					}
				}
			}
		}
		v := meeting(r)
		param := ""
		if len(r.Given) > 0 {
			param = r.Given[0].Name
		}
		want := r.Refusal(param).Error()
		if err := CheckParams(v); err == nil || err.Error() != want || !IsRefusal(err) {
			t.Errorf("rule %s: %s is refused with %v; want %q", name, v.Encode(), err, want)
		}
		if r.featuresOnly() {
			if err := Detect(v).Check(); err == nil || err.Error() != want {
				t.Errorf("rule %s: the features of %s are refused with %v; want %q", name, v.Encode(), err, want)
			}
		}
		for _, p := range r.Unless {
			v.Set(p.Name, cmp.Or(p.Value, "1"))
			if err := CheckParams(v); err != nil && err.Error() == want {
				t.Errorf("rule %s: %s, which gives %s=, is refused by it", name, v.Encode(), p.Name)
			}
			v.Del(p.Name)
		}
	}
}

// meeting is a request that meets r and no refusal before it: a
// parameter naming each of its features (one not in Unless), the first
// of Given, and a parameter naming a feature each companion given needs.
func meeting(r Rule) url.Values {
	v := url.Values{}
	name := func(f Feature) {
		for _, d := range defs {
			if d.Name != f {
				continue
			}
			for _, p := range d.SetBy {
				if !slices.ContainsFunc(r.Unless, func(u Param) bool { return u.Name == p.Name }) {
					v.Set(p.Name, cmp.Or(p.Value, "1"))
					return
				}
			}
		}
	}
	for _, f := range r.Features {
		name(f)
	}
	if len(r.Given) > 0 {
		v.Set(r.Given[0].Name, cmp.Or(r.Given[0].Value, "1"))
	}
	for _, c := range companions {
		for _, p := range c.Params {
			if c.given(v, p) && !slices.ContainsFunc(c.Needs, Detect(v).Has) {
				name(c.Needs[0])
			}
		}
	}
	return v
}

// TestAssignment: a job's global batches go by cost where balance= has
// effect, by locality where locality has effect on a cluster with
// several ranks, else the plain cut.
func TestAssignment(t *testing.T) {
	for _, tc := range []struct {
		s     Set
		world int
		want  string
	}{
		{Of(Dataset, Samples, Locality), 4, api.AssignPlain},
		{Of(Dataset, Samples, Locality, Cluster), 4, api.AssignLocality},
		{Of(Dataset, Samples, Locality, Cluster), 1, api.AssignPlain},
		{Of(Dataset, Samples, Cluster), 4, api.AssignPlain},
		{Of(Dataset, Samples, Locality, BalanceB, Cluster), 4, api.AssignBalance},
		{Of(Dataset, Tokens, Locality, Cluster), 4, api.AssignPlain},
		{Of(Dataset, Tokens, Locality, BalanceC), 1, api.AssignBalance},
		{Of(Dataset, Clips, Locality, Cluster), 4, api.AssignPlain},
	} {
		if got := tc.s.Assignment(tc.world); got != tc.want {
			t.Errorf("%v at world %d: %s; want %s", tc.s.List(), tc.world, got, tc.want)
		}
	}
}

// TestRequested: a job's features, as its parameters name them.
func TestRequested(t *testing.T) {
	job := api.Job{Dataset: "a", Seq: 64, Balance: api.BalanceAttention}
	if got, want := Requested(job), Of(Dataset, Tokens, Locality, BalanceC); got != want {
		t.Errorf("%v; want %v", got.List(), want.List())
	}
	if got := Requested(job).Effective(); got.Has(Locality) || !got.Has(BalanceC) {
		t.Errorf("effective %v: locality is dropped, balance kept", got.List())
	}
	job = api.Job{Mix: api.Mix{{Dataset: "a", Weight: "1"}}, NoLocality: true}
	if got, want := Requested(job), Of(Mix, Samples); got != want {
		t.Errorf("%v; want %v", got.List(), want.List())
	}
	if err := Requested(job).With(Exclusion).Check(); err == nil || !strings.Contains(err.Error(), Lookup(Mix, Exclusion).Message) {
		t.Errorf("a mixture with an exclusion list: %v", err)
	}
	if err := Of(Dataset, Samples, Exclusion, Append, Locality, BalanceB).Check(); err != nil {
		t.Errorf("an exclusion and an append, balanced: %v", err)
	}
}

// TestDetectBooleans: a boolean parameter names its feature in any
// spelling the parser takes: locality=0, f or FALSE turn locality off as
// locality=false does.
func TestDetectBooleans(t *testing.T) {
	for _, tc := range []struct {
		q    string
		want bool
	}{
		{"dataset=a", true}, {"dataset=a&locality=true", true}, {"dataset=a&locality=1", true},
		{"dataset=a&locality=false", false}, {"dataset=a&locality=0", false}, {"dataset=a&locality=f", false}, {"dataset=a&locality=FALSE", false},
	} {
		v, _ := url.ParseQuery(tc.q)
		if got := Detect(v).Has(Locality); got != tc.want {
			t.Errorf("%s: locality %v, want %v", tc.q, got, tc.want)
		}
	}
	// boolOf takes what strconv.ParseBool (the parser's) takes.
	for _, w := range []string{"1", "t", "T", "true", "TRUE", "True", "0", "f", "F", "false", "FALSE", "False", "", "yes", "tRUE", "2", "on"} {
		want, err := strconv.ParseBool(w)
		if got, ok := boolOf(w); ok != (err == nil) || ok && got != want {
			t.Errorf("boolOf(%q) = %v %v; strconv.ParseBool: %v %v", w, got, ok, want, err)
		}
	}
}

// BenchmarkCheck is the table's cost a request pays: its parameters'
// features detected and checked (CheckParams, the parser's), and its
// job's (Requested and Check, the resolver's).
func BenchmarkCheck(b *testing.B) {
	v, _ := url.ParseQuery("dataset=a&seed=3&batch_size=32&world=8&rank=3&job=run&transform=imagenet-train&balance=bytes")
	job := api.Job{Dataset: "a", Name: "run", Transform: "imagenet-train", Balance: api.BalanceBytes}
	for b.Loop() {
		if err := CheckParams(v); err != nil {
			b.Fatal(err)
		}
		if err := Requested(job).With(InPlace).Check(); err == nil {
			b.Fatal("in place, balanced by bytes: taken")
		}
	}
}
