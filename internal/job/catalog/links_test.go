package catalog

import (
	"strings"
	"testing"

	"github.com/brandgw/brand/internal/testsupport/cmdtest"
)

// TestLinksNoBuildTools keeps the serving catalog on the read side of a
// stored dataset (dataset/stored): the tools that build datasets
// (package dataset: `brand pack`, `brand index`, verification) are not
// linked by what serves them, directly or through another package.
func TestLinksNoBuildTools(t *testing.T) {
	const (
		catalog = "github.com/brandgw/brand/internal/job/catalog"
		tools   = "github.com/brandgw/brand/dataset"
	)
	out := cmdtest.Go(t, "list", "-deps", "-f", "{{.ImportPath}} {{join .Imports \" \"}}", catalog)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) < 2 || !strings.HasPrefix(lines[len(lines)-1], catalog+" ") {
		t.Fatalf("go list -deps %s did not list the catalog last:\n%s", catalog, out)
	}
	for _, line := range lines {
		f := strings.Fields(line)
		for _, imp := range f[1:] {
			if imp == tools {
				t.Errorf("%s imports %s: the catalog links the build tools", f[0], tools)
			}
		}
	}
}
