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

// Tree fails t for every type of the module under root (test files,
// testdata and the Python package aside) with more than max methods
// counting the functions of its package whose first parameter is the
// type (T or *T): a method turned into a function that takes its type
// keeps the hub it came from (the limit is a ceiling, not a target).
func Tree(t testing.TB, root string, max int) {
	t.Helper()
	fset := token.NewFileSet()
	count := map[string][]string{} // "dir.Type" → its methods and functions
	types := map[string]bool{}
	err := filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if n := d.Name(); p != root && (n == "testdata" || n == "python" || n == "node_modules" || strings.HasPrefix(n, ".")) {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") {
			return nil
		}
		file, err := parser.ParseFile(fset, p, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		dir, _ := filepath.Rel(root, filepath.Dir(p))
		for _, decl := range file.Decls {
			switch d := decl.(type) {
			case *ast.GenDecl:
				for _, s := range d.Specs {
					if ts, ok := s.(*ast.TypeSpec); ok {
						if _, iface := ts.Type.(*ast.InterfaceType); !iface {
							types[dir+"."+ts.Name.Name] = true
						}
					}
				}
			case *ast.FuncDecl:
				var typ string
				switch {
				case d.Recv != nil && len(d.Recv.List) == 1:
					typ = receiverType(d.Recv.List[0].Type)
				case d.Type.Params != nil && len(d.Type.Params.List) > 0:
					typ = receiverType(d.Type.Params.List[0].Type)
				}
				if typ != "" {
					count[dir+"."+typ] = append(count[dir+"."+typ], d.Name.Name)
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for typ, fns := range count {
		if types[typ] && len(fns) > max {
			slices.Sort(fns)
			t.Errorf("%s has %d methods and functions that take it, over %d: give a part of it a type of its own: %s", typ, len(fns), max, strings.Join(fns, " "))
		}
	}
}
