package main

import (
	"io"
	"testing"

	"github.com/brandgw/brand/cmd/brand-bench/internal/bench"
	"github.com/brandgw/brand/internal/cli"
)

// TestParseFormats checks that --small is the base that flags given
// explicitly override, wherever they stand.
func TestParseFormats(t *testing.T) {
	env := &cli.Env{Stdout: io.Discard, Stderr: io.Discard}
	o, err := formatsBenchmark().parse(env, []string{"--images", "900", "--small", "--no-torch"})
	if err != nil {
		t.Fatal(err)
	}
	want := bench.SmallFormatsConfig()
	want.Images, want.NoTorch = 900, true
	if o.cfg != want || !o.small {
		t.Errorf("got %+v\nwant %+v", o.cfg, want)
	}
	if o, err = formatsBenchmark().parse(env, []string{"--index-files", "20000"}); err != nil || o.cfg.IndexFiles != 20000 || o.cfg.Images != bench.DefaultFormatsConfig().Images {
		t.Errorf("%+v, %v", o, err)
	}
	if _, err := formatsBenchmark().parse(env, []string{"--rounds", "x"}); err == nil {
		t.Error("a bad flag parsed")
	}
}
