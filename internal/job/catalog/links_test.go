package catalog

import (
	"strings"
	"testing"

	"github.com/brandgw/brand/internal/testsupport/cmdtest"
)

// TestLinksNoBuildTools keeps the serving catalog, and the gateway that
// serves through it, on the read side of a stored dataset
// (dataset/stored): the tools that build datasets (package dataset:
// `brand pack`, `brand index`, verification) are not linked by what
// serves them, directly or through another package (the seals' snapshots
// are importance/snapshots').
func TestLinksNoBuildTools(t *testing.T) {
	const tools = "github.com/brandgw/brand/dataset"
	for _, pkg := range []string{"github.com/brandgw/brand/internal/job/catalog", "github.com/brandgw/brand/gateway"} {
		out := cmdtest.Go(t, "list", "-deps", "-f", "{{.ImportPath}} {{join .Imports \" \"}}", pkg)
		lines := strings.Split(strings.TrimSpace(out), "\n")
		if len(lines) < 2 || !strings.HasPrefix(lines[len(lines)-1], pkg+" ") {
			t.Fatalf("go list -deps %s did not list it last:\n%s", pkg, out)
		}
		for _, line := range lines {
			f := strings.Fields(line)
			for _, imp := range f[1:] {
				if imp == tools {
					t.Errorf("%s imports %s: %s links the build tools", f[0], tools, pkg)
				}
			}
		}
	}
}
