// Command brand-chart draws the benchmark harness's charts. brand-bench
// writes each chart as data, NAME.chart.json beside its report (see
// cmd/brand-bench/internal/chart); brand-chart draws each file it is given
// (or every such file in a directory it is given) as NAME.png beside it.
//
//	brand-chart bench-results/                       # every chart there
//	brand-chart bench-results/throughput.chart.json  # one
//
// It is a module of its own so that the plotting library and what it
// brings (fonts, a LaTeX renderer, a PDF writer, image codecs) stay out of
// the product's go.mod: brand-bench finds brand-chart beside itself or on
// $PATH, and scripts/bench.sh builds both.
package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
)

// ext is the extension of a chart written as data.
const ext = ".chart.json"

func main() {
	if err := run(os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "brand-chart:", err)
		os.Exit(1)
	}
}

// run draws the charts args name and says which PNGs it wrote.
func run(args []string, stdout io.Writer) error {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		return errors.New("usage: brand-chart DIR|FILE" + ext + "...: draws each chart as a PNG beside it")
	}
	var files []string
	for _, a := range args {
		fi, err := os.Stat(a)
		if err != nil {
			return err
		}
		if !fi.IsDir() {
			files = append(files, a)
			continue
		}
		found, err := filepath.Glob(filepath.Join(a, "*"+ext))
		if err != nil {
			return err
		}
		if len(found) == 0 {
			return fmt.Errorf("%s: no *%s files", a, ext)
		}
		files = append(files, found...)
	}
	for _, f := range files {
		out, err := drawFile(f)
		if err != nil {
			return err
		}
		fmt.Fprintln(stdout, "wrote", out)
	}
	return nil
}

// drawFile draws one chart file as a PNG beside it and returns its path.
func drawFile(path string) (string, error) {
	if !strings.HasSuffix(path, ext) {
		return "", fmt.Errorf("%s: not a *%s file", path, ext)
	}
	in, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer in.Close()
	c, err := decode(in)
	if err != nil {
		return "", fmt.Errorf("%s: %w", path, err)
	}
	outPath := strings.TrimSuffix(path, ext) + ".png"
	out, err := os.Create(outPath)
	if err != nil {
		return "", err
	}
	if err := c.draw(out); err != nil {
		out.Close()
		return "", fmt.Errorf("%s: %w", path, err)
	}
	return outPath, out.Close()
}
