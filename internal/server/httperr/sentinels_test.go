package httperr_test

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/brandgw/brand/internal/errkind"
	"github.com/brandgw/brand/internal/server/httperr"
)

const module = "github.com/brandgw/brand"

// sentinelCase is an exported sentinel error of a package the server
// links, and what a client meets it with.
type sentinelCase struct {
	name   string // import path within the module, a dot, the variable
	err    error
	status int
	reason string // brand_http_errors_total's label
	public bool   // the client is told a message other than the error's own
}

// namedError is an exported sentinel error of a package the server does
// not link.
type namedError struct {
	name string
	err  error
}

// TestEverySentinel holds every exported sentinel error of the module
// (an exported package-level variable named Err…) to the status, reason
// and message the server answers it with, and fails on a sentinel the
// tables do not list: a new sentinel states what a client meets it with.
func TestEverySentinel(t *testing.T) {
	found := moduleSentinels(t)
	listed := map[string]bool{}
	for _, c := range served {
		listed[c.name] = true
		if !found[c.name].served {
			t.Errorf("%s: listed as served, but the server does not link it (or it is gone)", c.name)
		}
		status := httperr.Status(c.err)
		if status != c.status {
			t.Errorf("%s: status %d, want %d", c.name, status, c.status)
		}
		if got := httperr.Reason(status, c.err); got != c.reason {
			t.Errorf("%s: reason %q, want %q", c.name, got, c.reason)
		}
		if got := httperr.Public(status, c.err) != ""; got != c.public {
			t.Errorf("%s: a message other than its own: %v, want %v", c.name, got, c.public)
		}
	}
	for _, c := range elsewhere {
		listed[c.name] = true
		if s, ok := found[c.name]; !ok || s.served {
			t.Errorf("%s: listed as linked elsewhere, but the server links it (or it is gone)", c.name)
		}
	}
	for name, s := range found {
		if !listed[name] && s.importable {
			t.Errorf("%s: an exported sentinel the tables do not list (served: %v)", name, s.served)
		}
	}
}

// TestEverySentinelHasAKind: every exported sentinel of the module says
// its kind (internal/errkind), so whoever answers it needs no list of the
// module's errors; a sentinel that names the reason its answers are
// counted under names one of the few httperr counts.
func TestEverySentinelHasAKind(t *testing.T) {
	found := moduleSentinels(t)
	check := func(name string, err error) {
		if errkind.Of(err) == errkind.Other {
			t.Errorf("%s has no kind: define it with errkind.New or errkind.Named", name)
		}
		for _, r := range errkind.Names(err) {
			if !slices.Contains(httperr.Reasons, r) {
				t.Errorf("%s is counted under %q, not among httperr's reasons", name, r)
			}
		}
	}
	for _, c := range served {
		check(c.name, c.err)
	}
	for _, c := range elsewhere {
		check(c.name, c.err)
	}
	// A package this test cannot import (under another parent's internal
	// directory, or a command) defines its sentinels with errkind itself.
	for name, s := range found {
		if !s.importable && !definedWithKind(s) {
			t.Errorf("%s has no kind: define it with errkind.New or errkind.Named", name)
		}
	}
}

// definedWithKind reports whether s's initializer calls errkind.New or
// errkind.Named, in a file that imports internal/errkind.
func definedWithKind(s foundSentinel) bool {
	call, ok := s.value.(*ast.CallExpr)
	if !ok {
		return false
	}
	sel, ok := call.Fun.(*ast.SelectorExpr)
	if !ok || sel.Sel.Name != "New" && sel.Sel.Name != "Named" {
		return false
	}
	pkg, ok := sel.X.(*ast.Ident)
	if !ok {
		return false
	}
	for _, im := range s.file.Imports {
		local := "errkind"
		if im.Name != nil {
			local = im.Name.Name
		}
		if im.Path.Value == strconv.Quote(module+"/internal/errkind") && local == pkg.Name {
			return true
		}
	}
	return false
}

// foundSentinel is an exported sentinel the walk of the module found.
type foundSentinel struct {
	served     bool      // its package is linked into the server (cmd/brand)
	importable bool      // this test can import its package
	value      ast.Expr  // its initializer
	file       *ast.File // the file that declares it
}

// moduleSentinels parses every non-test Go file of the module and returns
// its exported package-level variables named Err…, by name.
func moduleSentinels(t *testing.T) map[string]foundSentinel {
	t.Helper()
	root, err := filepath.Abs("../../..")
	if err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(filepath.Join(root, "go.mod")); err != nil || !strings.Contains(string(b), "module "+module+"\n") {
		t.Fatalf("the module's root is not %s: %v", root, err)
	}
	found := map[string]foundSentinel{}
	imports := map[string][]string{} // a package's directory → the module's packages it imports
	mains := map[string]bool{}
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			n := d.Name()
			if path != root && (n == "testdata" || n == "python" || strings.HasPrefix(n, ".") || strings.HasPrefix(n, "_")) {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		dir, err := filepath.Rel(root, filepath.Dir(path))
		if err != nil {
			return err
		}
		dir = filepath.ToSlash(dir)
		if f.Name.Name == "main" {
			mains[dir] = true
		}
		for _, im := range f.Imports {
			p, err := strconv.Unquote(im.Path.Value)
			if err == nil && strings.HasPrefix(p, module+"/") {
				imports[dir] = append(imports[dir], strings.TrimPrefix(p, module+"/"))
			}
		}
		for _, decl := range f.Decls {
			g, ok := decl.(*ast.GenDecl)
			if !ok || g.Tok != token.VAR {
				continue
			}
			for _, spec := range g.Specs {
				v := spec.(*ast.ValueSpec)
				for i, n := range v.Names {
					if !isSentinelName(n.Name) {
						continue
					}
					var value ast.Expr
					if i < len(v.Values) {
						value = v.Values[i]
					}
					found[dir+"."+n.Name] = foundSentinel{value: value, file: f}
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	// Conservative: a file's imports count whatever its build tags.
	linked := map[string]bool{}
	var link func(dir string)
	link = func(dir string) {
		if linked[dir] {
			return
		}
		linked[dir] = true
		for _, p := range imports[dir] {
			link(p)
		}
	}
	link("cmd/brand")
	for name, s := range found {
		dir := name[:strings.LastIndexByte(name, '.')]
		s.served = linked[dir]
		s.importable = !mains[dir] && importable(dir)
		found[name] = s
	}
	if len(found) < 100 {
		t.Fatalf("the walk found %d sentinels; the module holds more than 100", len(found))
	}
	return found
}

// isSentinelName reports whether name is an exported sentinel's: Err and
// a capital.
func isSentinelName(name string) bool {
	return len(name) > 3 && strings.HasPrefix(name, "Err") && name[3] >= 'A' && name[3] <= 'Z'
}

// importable reports whether a test of internal/server/httperr may import
// the module's package in dir: not one under an internal directory of
// another parent than the module's root.
func importable(dir string) bool {
	parts := strings.Split(dir, "/")
	i := slices.Index(parts, "internal")
	return i < 0 || i == 0 && !slices.Contains(parts[1:], "internal")
}

var update = flag.Bool("update", false, "rewrite testdata/pairs.txt from the current mapping")

// TestSentinelPairs holds an error that wraps two sentinels (a store
// unavailable while a chunk failed its checksum, a busy cache behind a
// request too large) to what a client met it with before errors carried
// their kinds: testdata/pairs.txt holds the status, reason and message of
// every pair of outcomes (sentinels with one outcome alone answer alike
// in pairs; the deadline and a client gone are among them).
func TestSentinelPairs(t *testing.T) {
	errs := []namedError{
		{"context.DeadlineExceeded", context.DeadlineExceeded},
		{"context.Canceled", context.Canceled},
		{"errors.New", errors.New("anything else")},
	}
	for _, c := range served {
		errs = append(errs, namedError{c.name, c.err})
	}
	outcome := func(err error) string {
		status := httperr.Status(err)
		return fmt.Sprintf("%d %s %q", status, httperr.Reason(status, err), httperr.Public(status, err))
	}
	// Each outcome alone, and whether the error names its own reason
	// (Reason with no status to fall back on), names a class, by its first
	// sentinel.
	class := map[string]string{}
	classOf := make([]string, len(errs))
	for i, e := range errs {
		o := outcome(e.err) + " " + httperr.Reason(0, e.err)
		if _, ok := class[o]; !ok {
			class[o] = e.name
		}
		classOf[i] = class[o]
	}
	got := map[string]string{}
	for i, a := range errs {
		for j, b := range errs {
			if classOf[i] > classOf[j] || i == j {
				continue
			}
			key := classOf[i] + " + " + classOf[j]
			o := outcome(fmt.Errorf("%w: %w", a.err, b.err))
			if prev, ok := got[key]; ok && prev != o {
				t.Errorf("%s + %s: %s, but another pair of their classes: %s", a.name, b.name, o, prev)
				continue
			}
			got[key] = o
		}
	}
	var lines []string
	for k, o := range got {
		lines = append(lines, k+" → "+o)
	}
	slices.Sort(lines)
	text := strings.Join(lines, "\n") + "\n"
	const golden = "testdata/pairs.txt"
	if *update {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(golden, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	if text != string(want) {
		wantLines := strings.Split(strings.TrimSuffix(string(want), "\n"), "\n")
		for _, l := range lines {
			if !slices.Contains(wantLines, l) {
				t.Errorf("now: %s", l)
			}
		}
		for _, l := range wantLines {
			if !slices.Contains(lines, l) {
				t.Errorf("was: %s", l)
			}
		}
	}
}
