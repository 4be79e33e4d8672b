package hubtest

import (
	"bytes"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/brandgw/brand/internal/job/features"
)

func TestMethods(t *testing.T) {
	dir := t.TempDir()
	for name, src := range map[string]string{
		"a.go": `package p
type Hub struct{}
func (h *Hub) A() {}
func (h Hub) b() {}
func (Hub) C() {}
type G[T any] struct{}
func (g *G[T]) D() {}
type H[K, V any] struct{}
func (h H[K, V]) E() {}
func F() {}
`,
		"b.go":      "package p\nfunc (h *Hub) z() {}\n",
		"a_test.go": "package p\nfunc (h *Hub) InTest() {}\n",
	} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got := Methods(t, dir)
	want := map[string][]string{"Hub": {"A", "C", "b", "z"}, "G": {"D"}, "H": {"E"}}
	if len(got) != len(want) {
		t.Fatalf("Methods = %v, want %v", got, want)
	}
	for typ, m := range want {
		if !slices.Equal(got[typ], m) {
			t.Errorf("%s: %v, want %v", typ, got[typ], m)
		}
	}
	if e := Exported(got["Hub"]); !slices.Equal(e, []string{"A", "C"}) {
		t.Errorf("Exported = %v", e)
	}
	ft := &fakeT{TB: t}
	NoHubs(ft, dir, 3)
	if ft.errors != 1 {
		t.Errorf("NoHubs with a bound of 3 over a type of 4 methods: %d errors, want 1", ft.errors)
	}
	ft = &fakeT{TB: t}
	NoHubs(ft, dir, 4)
	if ft.errors != 0 {
		t.Errorf("NoHubs with a bound of 4: %d errors, want 0", ft.errors)
	}
}

// fakeT counts the errors reported to it.
type fakeT struct {
	testing.TB
	errors int
}

func (f *fakeT) Errorf(string, ...any) { f.errors++ }
func (f *fakeT) Helper()               {}

// TestModuleHasNoHubs holds every package of the module to MaxMethods,
// not only those whose own tests call NoHubs: a hub grows where nobody
// looks.
func TestModuleHasNoHubs(t *testing.T) {
	root, err := filepath.Abs(filepath.Join("..", "..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		t.Fatalf("the module's root: %v", err)
	}
	n := 0
	err = filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() {
			return nil
		}
		if name := d.Name(); path != root && (name == "testdata" || name == "python" || name == "node_modules" || strings.HasPrefix(name, ".")) {
			return filepath.SkipDir
		}
		goFiles, _ := filepath.Glob(filepath.Join(path, "*.go"))
		tests, _ := filepath.Glob(filepath.Join(path, "*_test.go"))
		if len(goFiles) == len(tests) {
			return nil // no Go files, or tests only
		}
		rel, _ := filepath.Rel(root, path)
		t.Run(rel, func(t *testing.T) { NoHubs(t, path, MaxMethods) })
		n++
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if n < 90 {
		t.Errorf("walked %d packages of the module; it has over 90", n)
	}
}

// TestNoHubInTheTree holds every type of the module to MaxMethods,
// counting the functions that take it.
func TestNoHubInTheTree(t *testing.T) { Tree(t, "../../..", MaxMethods) }

// maxGatewayTestRatio bounds the gateway's test lines over its code
// lines, as issue 77 asks: a room's tests in its room, the gateway
// keeping its HTTP contract (statuses, headers, the table over every
// endpoint, the model-based test), and the tests of several gateways as
// one cluster in a package of their own (gateway/clustertest, not
// counted here). Lower it as suites move, never raise it.
const maxGatewayTestRatio = 2.0

// TestGatewayTestsBesideItsCode holds the gateway's tests to
// maxGatewayTestRatio times its code, in lines (`cat gateway/*_test.go |
// wc -l` over the same of its other Go files), so that tests of a room
// that drift back into the gateway are seen.
func TestGatewayTestsBesideItsCode(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("..", "..", "..", "gateway", "*.go"))
	if err != nil || len(files) == 0 {
		t.Fatalf("the gateway's Go files: %v (%d)", err, len(files))
	}
	var tests, code int
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if n := bytes.Count(b, []byte("\n")); strings.HasSuffix(f, "_test.go") {
			tests += n
		} else {
			code += n
		}
	}
	ratio := float64(tests) / float64(code)
	t.Logf("gateway: %d test lines, %d code lines: %.2f×", tests, code, ratio)
	if ratio > maxGatewayTestRatio {
		t.Errorf("gateway's tests are %.2f× its code (%d lines over %d), over %.2f×: test a room's semantics in its room (internal/testsupport/stagetest wires a node's stages without HTTP), several gateways as one cluster in gateway/clustertest", ratio, tests, code, maxGatewayTestRatio)
	}
}

// maxUnitBranches bounds the places outside tests that choose a kind of
// batch (docs/architecture.md, "One seam"): the unit is chosen once, by
// the table (features.Set.Unit), and everything a kind decides is asked
// of its unit; a new kind is an entry in internal/batch/units, not a
// branch in every path.
const maxUnitBranches = 3

// unitBranch matches a question of a job's kind of batch, as issue 89
// counts them: an if, case or switch on a unit's feature (features.X of
// every unit feature the table has, Def.Unit, or a unit's Feature()), on
// a job's kind parameters (Clip.On(), Buckets.On(), Seq against 0,
// Vision against "", Tokens(), Clips()), and a type switch or a branch
// on a batch's content type (a case of a *…Batch type, a switch on a
// Content's type, an if on a Content's type assertion).
func unitBranch(t *testing.T) *regexp.Regexp {
	var kinds []string
	for _, d := range features.Features() {
		if d.Unit {
			kinds = append(kinds, goName(t, string(d.Name)))
		}
	}
	if len(kinds) < 5 {
		t.Fatalf("the table names %d units (%v); it has at least five", len(kinds), kinds)
	}
	k := strings.Join(kinds, "|")
	return regexp.MustCompile(`Has\(features\.(` + k + `)\)|case .*\bfeatures\.(` + k + `)\b|[=!]= *features\.(` + k + `)\b|switch [^{]*\.Feature\(\)|` +
		`\.Clip\.On\(\)|\.Buckets\.On\(\)|\.Seq *(>|<|>=|<=|==|!=) *0\b|\.Vision *(!=|==) *""|\.(Tokens|Clips)\(\)|` +
		`case \*[\w.]*Batch\b|switch [^{]*Content\.\(type\)|if .*Content\.\(`)
}

// goName is the Go constant of a feature of the table (features.go):
// its name with its first letter upper-cased, as the constants are
// named (the test fails if a unit's is not).
func goName(t *testing.T, name string) string {
	src, err := os.ReadFile(filepath.Join("..", "..", "job", "features", "features.go"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^\s*(\w+)\s+Feature = "` + regexp.QuoteMeta(name) + `"`).FindSubmatch(src)
	if m == nil {
		t.Fatalf("feature %q has no constant in features.go", name)
	}
	return string(m[1])
}

// TestUnitBranchesFew: the places in the module's non-test Go code (the
// brand-bench harness aside) that choose a kind of batch are at most
// maxUnitBranches.
func TestUnitBranchesFew(t *testing.T) {
	unitBranch := unitBranch(t)
	root := filepath.Join("..", "..", "..")
	var sites []string
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		if d.IsDir() {
			if path != root && strings.HasPrefix(d.Name(), ".") || rel == filepath.Join("cmd", "brand-bench") || d.Name() == "testdata" || d.Name() == "python" {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for i, line := range strings.Split(string(b), "\n") {
			code, _, _ := strings.Cut(line, "//")
			if strings.HasPrefix(strings.TrimSpace(code), "func ") {
				continue // a definition (api.Job.Tokens, a unit's Feature), not a question
			}
			if unitBranch.MatchString(code) && isBranch(code) {
				sites = append(sites, fmt.Sprintf("%s:%d", rel, i+1))
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d unit branches: %s", len(sites), strings.Join(sites, " "))
	if len(sites) > maxUnitBranches {
		t.Errorf("%d places choose a kind of batch, over %d: choose the unit once (features.Set.Unit, layout.Orders.UnitOf) and ask it (docs/architecture.md, \"One seam\"): %s", len(sites), maxUnitBranches, strings.Join(sites, " "))
	}
}

// isBranch reports whether a line that asks a kind's question branches
// on it: an if, a case or a switch, or a boolean term of one (a line of
// && or ||), not a value's use (a feature named in a table's row, a
// unit saying which feature it is).
func isBranch(code string) bool {
	c := strings.TrimSpace(code)
	for _, p := range []string{"if ", "case ", "switch ", "} else if ", "for "} {
		if strings.HasPrefix(c, p) {
			return true
		}
	}
	return strings.Contains(c, "&&") || strings.Contains(c, "||") || strings.HasPrefix(c, "return ") && (strings.Contains(c, "==") || strings.Contains(c, "!=") || strings.Contains(c, "Has("))
}

// TestUnitBranchPattern holds the pattern to the sites it must see (and
// the uses it must not), so that a pattern that misses one is seen.
func TestUnitBranchPattern(t *testing.T) {
	re := unitBranch(t)
	for _, c := range []struct {
		line string
		want bool
	}{
		{"	if set.Has(features.Clips) {", true},
		{"	case features.Tokens:", true},
		{"	case features.Buckets, features.Vision:", true},
		{"	switch src.Unit.Feature() {", true},
		{"	if f == features.Vision {", true},
		{"	if !job.Clip.On() {", true},
		{"	if job.Buckets.On() {", true},
		{"	if q.Job.Seq > 0 {", true},
		{"	if j.Vision != \"\" {", true},
		{"	if !q.Job.Clips() && q.Pos > n {", true},
		{"	if job.Tokens() {", true},
		{"	switch c := b.Content.(type) {", true},
		{"	case *layout.TokenBatch:", true},
		{"	case *VisionBatch:", true},
		{"	if cb, ok := b.Content.(*ClipBatch); ok {", true},
		{"	if q.Job.Space() == \"\" && q.Pos > n {", false},
		{"	{Name: Tokens, What: \"…\"},", false},
		{"	switch r := err.(type) {", false},
		{"	tb := b.Content.(*TokenBatch)", false},
	} {
		if got := re.MatchString(c.line) && isBranch(c.line); got != c.want {
			t.Errorf("%q: counted %t, want %t", c.line, got, c.want)
		}
	}
}

// TestBatchTypesUnder25 holds the types of a batch's rooms — the common
// layout and every kind of batch, each a package of internal/batch/units
// — to 25 methods and functions that take them (issue 89: no new type
// over 25), under the module's ceiling of MaxMethods.
func TestBatchTypesUnder25(t *testing.T) { Tree(t, filepath.Join("..", "..", "batch"), 25) }
