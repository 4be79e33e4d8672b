package main

import (
	"os"
	"strings"
	"testing"

	"github.com/brandgw/brand/internal/testsupport/cmdtest"
)

// plotting are the modules a plotting library brings: the library, its
// fonts, its LaTeX renderer, its PDF, SVG and raster back ends.
var plotting = []string{
	"gonum.org/v1/plot",
	"codeberg.org/go-fonts/",
	"codeberg.org/go-latex/",
	"codeberg.org/go-pdf/",
	"git.sr.ht/~sbinet/gg",
	"github.com/ajstarks/svgo",
	"github.com/golang/freetype",
}

// TestProductModuleCarriesNoPlotting: the harness's charts are data, drawn
// by tools/brand-chart, a module of its own; the product's go.mod names no
// gonum module, and its module graph no plotting library.
func TestProductModuleCarriesNoPlotting(t *testing.T) {
	mod, err := os.ReadFile("../../go.mod")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(mod), "\n") {
		if strings.Contains(line, "gonum.org/") {
			t.Errorf("go.mod: %s", strings.TrimSpace(line))
		}
	}
	for _, edge := range strings.Split(strings.TrimSpace(cmdtest.Go(t, "mod", "graph")), "\n") {
		for _, p := range plotting {
			if strings.Contains(edge, " "+p) {
				t.Errorf("go mod graph: %s", edge)
			}
		}
	}
}
