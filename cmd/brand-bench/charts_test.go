package main

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/brandgw/brand/cmd/brand-bench/internal/chart"
)

// fakeReport charts one bar.
type fakeReport struct{}

func (fakeReport) Chart() (*chart.Chart, error) {
	return &chart.Chart{Title: "t", Width: 100, Height: 100, Categories: []string{"a"},
		Bars: []chart.Bars{{Color: "#000000", Width: 1, Values: []float64{1}}}}, nil
}

// TestChartsDrawnByBrandChart: writeReports writes a chart as data and
// hands every chart file to the brand-chart on $PATH, once; without one
// the charts stay data and it says how to draw them.
func TestChartsDrawnByBrandChart(t *testing.T) {
	text := report{"x.txt", func(w io.Writer) error { _, err := io.WriteString(w, "x\n"); return err }}

	t.Run("drawn", func(t *testing.T) {
		bin, out := t.TempDir(), t.TempDir()
		args := filepath.Join(out, "args")
		// A stand-in that records what it was asked to draw.
		script := "#!/bin/sh\necho \"$@\" >> " + args + "\n"
		if err := os.WriteFile(filepath.Join(bin, "brand-chart"), []byte(script), 0o755); err != nil {
			t.Fatal(err)
		}
		t.Setenv("PATH", bin)
		var stderr bytes.Buffer
		if err := writeReports(&stderr, out, text, chartReport("a", fakeReport{}), chartReport("b", fakeReport{})); err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(args)
		if err != nil {
			t.Fatal(err)
		}
		want := filepath.Join(out, "a"+chart.Ext) + " " + filepath.Join(out, "b"+chart.Ext) + "\n"
		if string(got) != want {
			t.Errorf("brand-chart ran with %q, want %q once", got, want)
		}
		if _, err := os.Stat(filepath.Join(out, "a"+chart.Ext)); err != nil {
			t.Error(err)
		}
	})

	t.Run("no brand-chart", func(t *testing.T) {
		out := t.TempDir()
		t.Setenv("PATH", t.TempDir())
		var stderr bytes.Buffer
		if err := writeReports(&stderr, out, text, chartReport("a", fakeReport{})); err != nil {
			t.Fatal(err)
		}
		if _, err := os.Stat(filepath.Join(out, "a"+chart.Ext)); err != nil {
			t.Error(err)
		}
		if !strings.Contains(stderr.String(), "not drawn") || !strings.Contains(stderr.String(), "tools/brand-chart") {
			t.Errorf("without brand-chart it said %q; want how to draw the charts", stderr.String())
		}
	})
}
