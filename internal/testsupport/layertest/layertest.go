// Package layertest holds a package to the layers it sits in: a test
// fails when the package links, directly or through any other, a package
// a rule says it must not (docs/architecture.md, "Packages": the data path
// reads downward; the cluster's membership knows no transport). The
// failure names the chain of imports that brings the package in, so the
// import to cut is plain.
//
// It reads the graph the go command sees (go list -deps), of the
// packages as the server builds them: test files and their imports are
// not part of it.
//
// It is test support, as net/http's httptest is: the server links none
// of it.
package layertest

import (
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/brandgw/brand/internal/testsupport/cmdtest"
)

// Module is the import path every package of the module starts with.
const Module = "github.com/brandgw/brand"

// Never fails t for each package matched by pattern (a path in the
// module, "internal/cluster/transport", or a pattern of them,
// "internal/cache/...") that links a package under one of the paths
// never names ("internal/batch": the package of that path and every one
// below it), naming why the rule holds and the imports that break it.
func Never(t testing.TB, pattern, why string, never ...string) {
	t.Helper()
	out := cmdtest.Go(t, "list", "-deps", "-json=ImportPath,DepOnly,Dir,Imports,GoFiles,CgoFiles", Module+"/"+pattern)
	graph := map[string][]string{}
	var roots []string
	dec := json.NewDecoder(strings.NewReader(out))
	for {
		var p struct {
			ImportPath, Dir            string
			DepOnly                    bool
			Imports, GoFiles, CgoFiles []string
		}
		if err := dec.Decode(&p); err == io.EOF {
			break
		} else if err != nil {
			t.Fatalf("go list -deps %s: %v", pattern, err)
		}
		graph[p.ImportPath] = p.Imports
		if !p.DepOnly {
			roots = append(roots, p.ImportPath)
		}
		if strings.HasPrefix(p.ImportPath, Module+"/") || p.ImportPath == Module {
			watch(p.Dir, append(p.GoFiles, p.CgoFiles...))
		}
	}
	if len(roots) == 0 {
		t.Fatalf("go list -deps %s matched no package", pattern)
	}
	for _, chain := range Violations(graph, roots, never) {
		for i := range chain {
			chain[i] = strings.TrimPrefix(chain[i], Module+"/")
		}
		t.Errorf("%s links %s (%s), but %s", chain[0], chain[len(chain)-1], strings.Join(chain, " → "), why)
	}
}

// watch opens dir and stats its files: the go command's test cache keys a
// test's result on the files the test opened and stated, so a result
// cached before an import of one of the module's packages changed (or a
// file was added to one) is not reused. The go list that read them is a
// process of its own, which the cache does not see.
func watch(dir string, files []string) {
	if d, err := os.Open(dir); err == nil {
		_, _ = d.ReadDir(-1)
		d.Close()
	}
	for _, f := range files {
		_, _ = os.Stat(filepath.Join(dir, f))
	}
}

// Violations returns, for each root, the shortest chain of imports in
// graph (a package → the packages it imports) from the root to each
// package under one of the paths never names (relative to Module), one
// chain per package reached, sorted.
func Violations(graph map[string][]string, roots, never []string) [][]string {
	under := func(pkg string) bool {
		for _, p := range never {
			if p := Module + "/" + p; pkg == p || strings.HasPrefix(pkg, p+"/") {
				return true
			}
		}
		return false
	}
	var found [][]string
	for _, root := range roots {
		// Breadth first, so that each chain named is a shortest one.
		from := map[string]string{root: ""}
		queue := []string{root}
		for len(queue) > 0 {
			pkg := queue[0]
			queue = queue[1:]
			if pkg != root && under(pkg) {
				chain := []string{pkg}
				for p := from[pkg]; p != ""; p = from[p] {
					chain = append(chain, p)
				}
				slices.Reverse(chain)
				found = append(found, chain)
				continue // what it links is its own rule's business
			}
			for _, imp := range graph[pkg] {
				if _, seen := from[imp]; !seen {
					from[imp] = pkg
					queue = append(queue, imp)
				}
			}
		}
	}
	slices.SortFunc(found, func(a, b []string) int { return slices.Compare(a, b) })
	return found
}
