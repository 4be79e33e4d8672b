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

// maxUnitBranches bounds the places outside tests that ask which kind of
// batch a job is (docs/architecture.md, "One seam"): the unit is chosen
// once, in internal/batch/layout/unit.go, and a new kind is an entry
// there, not a branch in every path.
const maxUnitBranches = 8

// unitBranch matches a question of a job's kind of batch: vision=,
// seq=, clips, buckets, and the table's features of them.
var unitBranch = regexp.MustCompile(`\.Vision != ""|(\bj|[Jj]ob)\.(Tokens|Clips)\(\)|\.Seq > 0|\.Clip\.On\(\)|\.Buckets\.On\(\)|Has\(features\.(Tokens|Vision|Clips|Buckets)\)`)

// TestUnitBranchesFew: the unit branches in the module's non-test Go
// code (the brand-bench harness aside) are at most maxUnitBranches.
func TestUnitBranchesFew(t *testing.T) {
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
				continue // a definition (api.Job.Tokens), not a question
			}
			if unitBranch.MatchString(code) {
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
		t.Errorf("%d places ask which kind of batch a job is, over %d: choose the unit once (internal/batch/layout/unit.go) and ask it: %s", len(sites), maxUnitBranches, strings.Join(sites, " "))
	}
}
