package main

import (
	"io"
	"reflect"
	"strings"
	"testing"

	"github.com/brandgw/brand/cmd/brand-bench/internal/bench"
	"github.com/brandgw/brand/internal/cli"
)

// TestBenchmarkParse: the shared parse gives each command its defaults,
// --small's configuration under flags given explicitly, and runs what a
// command does once its flags are parsed (a list flag that replaces its
// default, a preset, a check across flags).
func TestBenchmarkParse(t *testing.T) {
	env := &cli.Env{Stdout: io.Discard, Stderr: io.Discard}
	jobs := func(args ...string) bench.JobsConfig {
		t.Helper()
		o, err := jobsBenchmark().parse(env, args)
		if err != nil {
			t.Fatal(err)
		}
		return o.cfg
	}
	if got := jobs(); !reflect.DeepEqual(got, bench.DefaultJobsConfig()) {
		t.Errorf("jobs: %+v", got)
	}
	if got := jobs("--speeds", bench.SpeedsHalf); !reflect.DeepEqual(got.Speeds, []string{bench.SpeedsHalf}) {
		t.Errorf("jobs --speeds 1:2: %v", got.Speeds)
	}
	if got := jobs("--quick", "--samples", "9"); !reflect.DeepEqual(got.Jobs, []int{1, 4}) || !reflect.DeepEqual(got.Speeds, []string{bench.SpeedsEqual}) || got.Samples != 9 {
		t.Errorf("jobs --quick: %+v", got)
	}

	o, err := indexBenchmark().parse(env, []string{"--samples", "1e6", "--keys", bench.KeysOrdered})
	if err != nil || o.cfg.Samples != 1e6 || !reflect.DeepEqual(o.cfg.Keys, []string{bench.KeysOrdered}) {
		t.Errorf("index: %+v, %v", o, err)
	}
	if _, err := indexBenchmark().parse(env, []string{"--samples", "0"}); err == nil || !strings.Contains(err.Error(), "want 1 to 2^32-1") {
		t.Errorf("index --samples 0: %v", err)
	}

	m, err := mixBenchmark().parse(env, []string{"--samples", "5", "--small", "--out", "r"})
	want := bench.SmallMixConfig()
	want.Samples = 5
	if err != nil || !reflect.DeepEqual(m.cfg, want) || !m.small || m.out != "r" || m.timeout != mixBenchmark().timeout {
		t.Errorf("mix --small: %+v, %v", m, err)
	}
	if _, err := tensorsBenchmark().parse(env, []string{"--small"}); err == nil {
		t.Error("tensors took --small, which it has not")
	}

	// --out names the chart where the report draws one.
	if f := jobsBenchmark().files(); !strings.Contains(f, "jobs.chart.json and jobs.png") {
		t.Errorf("jobs writes %s", f)
	}
	if f := mixBenchmark().files(); f != "mix.txt and mix.json" {
		t.Errorf("mix writes %s", f)
	}
}
