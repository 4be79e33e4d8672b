// Package hubtest holds a package's types to a size: a type that every
// feature hangs a method off (a hub) is how a package stops being read in
// a sitting, so a test fails when one grows past a bound (issue 54: "no
// type over about 30 methods").
//
// Methods are counted in the package's source, exported and unexported,
// on value and pointer receivers alike: reflect sees only the exported
// ones, and a hub grows by its unexported helpers as much as by its API.
// A test may check the exported count against reflect (Exported), so
// that the two views of one type cannot drift apart.
//
// It is test support, as net/http's httptest is: the server links none
// of it.
package hubtest

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// MaxMethods is the bound the issue set: no type over about 30 methods.
const MaxMethods = 30

// Methods returns the names of the methods declared on each type of the
// package in dir, counting the Go files that are not tests, sorted.
func Methods(t testing.TB, dir string) map[string][]string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	methods := map[string][]string{}
	n := 0
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		file, err := parser.ParseFile(fset, f, src, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		n++
		for _, d := range file.Decls {
			fn, ok := d.(*ast.FuncDecl)
			if !ok || fn.Recv == nil || len(fn.Recv.List) != 1 {
				continue
			}
			if name := receiverType(fn.Recv.List[0].Type); name != "" {
				methods[name] = append(methods[name], fn.Name.Name)
			}
		}
	}
	if n == 0 {
		t.Fatalf("no Go files in %s", dir)
	}
	for _, m := range methods {
		slices.Sort(m)
	}
	return methods
}

// receiverType names a receiver's type: T for T, *T, T[P] and *T[P].
func receiverType(e ast.Expr) string {
	for {
		switch x := e.(type) {
		case *ast.StarExpr:
			e = x.X
		case *ast.IndexExpr:
			e = x.X
		case *ast.IndexListExpr:
			e = x.X
		case *ast.Ident:
			return x.Name
		default:
			return ""
		}
	}
}

// Exported returns the exported names among methods.
func Exported(methods []string) []string {
	var out []string
	for _, m := range methods {
		if ast.IsExported(m) {
			out = append(out, m)
		}
	}
	return out
}

// NoHubs fails t for every type of the package in dir with more than max
// methods, naming them.
func NoHubs(t testing.TB, dir string, max int) map[string][]string {
	t.Helper()
	methods := Methods(t, dir)
	for typ, m := range methods {
		if len(m) > max {
			t.Errorf("%s has %d methods, over %d: split it by concern: %s", typ, len(m), max, strings.Join(m, " "))
		}
	}
	return methods
}
