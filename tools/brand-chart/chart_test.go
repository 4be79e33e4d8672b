package main

import (
	"bytes"
	"image/png"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// goldenDir holds the harness's golden charts, one of each report's
// (cmd/brand-bench/internal/bench's TestGoldenCharts writes them).
const goldenDir = "../../cmd/brand-bench/internal/bench/testdata/charts"

// TestGoldenCharts draws every golden chart of the harness: each decodes
// in this module's form (no field unknown to it) and draws as a PNG of a
// readable size.
func TestGoldenCharts(t *testing.T) {
	files, err := filepath.Glob(filepath.Join(goldenDir, "*"+ext))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) < 6 {
		t.Fatalf("%d golden charts in %s, want one of each of the six reports with a chart", len(files), goldenDir)
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			in, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			c, err := decode(bytes.NewReader(in))
			if err != nil {
				t.Fatal(err)
			}
			var img bytes.Buffer
			if err := c.draw(&img); err != nil {
				t.Fatal(err)
			}
			m, err := png.Decode(&img)
			if err != nil {
				t.Fatalf("the chart is not a PNG: %v", err)
			}
			if b := m.Bounds(); b.Dx() < 200 || b.Dy() < 200 {
				t.Errorf("chart of %v, want a readable size", b)
			}
		})
	}
}

func TestDecodeRefuses(t *testing.T) {
	tests := []struct {
		name, json, want string
	}{
		{"unknown field", `{"title":"t","width_pt":100,"height_pt":100,"bars":[{"color":"#000000","width_pt":1,"values":[]}],"pie":true}`, "unknown field"},
		{"no size", `{"title":"t","bars":[{"color":"#000000","width_pt":1,"values":[]}]}`, "want both positive"},
		{"nothing drawn", `{"title":"t","width_pt":100,"height_pt":100}`, errEmpty.Error()},
		{"values and categories", `{"title":"t","width_pt":100,"height_pt":100,"categories":["a","b"],"bars":[{"color":"#000000","width_pt":1,"values":[1]}]}`, "1 values for 2 categories"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := decode(strings.NewReader(tt.json))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("decode: %v, want an error saying %q", err, tt.want)
			}
		})
	}
}

func TestBadColour(t *testing.T) {
	c, err := decode(strings.NewReader(`{"title":"t","width_pt":100,"height_pt":100,"categories":["a"],"bars":[{"color":"blue","width_pt":1,"values":[1]}]}`))
	if err != nil {
		t.Fatal(err)
	}
	if err := c.draw(&bytes.Buffer{}); err == nil || !strings.Contains(err.Error(), "#rrggbb") {
		t.Errorf("draw with colour \"blue\": %v", err)
	}
}

// TestRunDrawsADirectory: given a directory, brand-chart draws every
// chart in it as NAME.png beside NAME.chart.json.
func TestRunDrawsADirectory(t *testing.T) {
	dir := t.TempDir()
	for _, name := range []string{"throughput", "jobs"} {
		b, err := os.ReadFile(filepath.Join(goldenDir, name+ext))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name+ext), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	var out bytes.Buffer
	if err := run([]string{dir}, &out); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"throughput", "jobs"} {
		f, err := os.Open(filepath.Join(dir, name+".png"))
		if err != nil {
			t.Fatal(err)
		}
		_, err = png.Decode(f)
		f.Close()
		if err != nil {
			t.Errorf("%s.png: %v", name, err)
		}
	}
	if !strings.Contains(out.String(), "jobs.png") {
		t.Errorf("brand-chart said %q", out.String())
	}
	if err := run([]string{t.TempDir()}, &out); err == nil {
		t.Error("a directory with no charts drew nothing and said nothing")
	}
	if err := run(nil, &out); err == nil || !strings.Contains(err.Error(), "usage") {
		t.Errorf("no arguments: %v", err)
	}
	if err := run([]string{filepath.Join(dir, "jobs.png")}, &out); err == nil {
		t.Error("a PNG taken for a chart")
	}
}
