package main

import (
	"io"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/brandgw/brand/cmd/brand-bench/internal/bench"
	"github.com/brandgw/brand/internal/cli"
)

// TestParseRun checks that the run command's flags land in the parts of
// bench.Config they name, on top of the preset, wherever the preset flag
// stands.
func TestParseRun(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want func(*runOptions) // the change from the default options
		err  string
	}{
		{name: "defaults", want: func(*runOptions) {}},
		{name: "run is the default command", args: []string{"--samples", "7"}, want: func(o *runOptions) { o.cfg.Dataset.Samples = 7 }},
		{name: "small", args: []string{"--small"}, want: func(o *runOptions) { o.cfg = bench.SmallConfig() }},
		{name: "smoke", args: []string{"--smoke"}, want: func(o *runOptions) { o.cfg = bench.SmokeConfig() }},
		{name: "flags override the preset, before or after it",
			args: []string{"--samples", "5000", "--small", "--cache", "25,100", "--epochs", "2"},
			want: func(o *runOptions) {
				o.cfg = bench.SmallConfig()
				o.cfg.Dataset.Samples = 5000
				o.cfg.Brand.CacheFractions = []float64{0.25, 1}
				o.cfg.Brand.Epochs = 2
			}},
		{name: "dataset",
			args: []string{"--mean-bytes", "10KiB", "--chunk-size", "1MiB", "--seed", "9"},
			want: func(o *runOptions) {
				o.cfg.Dataset = bench.Dataset{Samples: o.cfg.Dataset.Samples, MeanBytes: 10 << 10, ChunkSize: 1 << 20, Seed: 9}
			}},
		{name: "job",
			args: []string{"--shuffle-seed", "0", "--batch-size", "64", "--window", "4"},
			want: func(o *runOptions) { o.cfg.Job.Seed, o.cfg.Job.BatchSize, o.cfg.Job.Window = 0, 64, 4 }},
		{name: "concurrency",
			args: []string{"--stream-readers", "1,3", "--object-readers", "16", "--shard-readers", "2"},
			want: func(o *runOptions) {
				o.cfg.Concurrency = bench.Concurrency{StreamReaders: []int{1, 3}, ObjectReaders: []int{16}, ShardReaders: []int{2}}
			}},
		{name: "brand",
			args: []string{"--ahead", "5", "--ahead-levels", "2,4"},
			want: func(o *runOptions) { o.cfg.Brand.Ahead, o.cfg.Brand.AheadLevels = 5, []int{2, 4} }},
		{name: "policy",
			args: []string{"--policy-cache", "30%", "--policy-epochs", "1"},
			want: func(o *runOptions) { o.cfg.Policy = bench.Policy{Cache: 0.3, Epochs: 1} }},
		{name: "processes",
			args: []string{"--gateway-binary", "/opt/brand", "--gateway-arg=--s3-part-size=8MiB", "--gateway-arg", "--prefetch-concurrency=2", "--gateway-profiles", "prof"},
			want: func(o *runOptions) {
				o.cfg.Processes = bench.Processes{GatewayBinary: "/opt/brand", GatewayArgs: []string{"--s3-part-size=8MiB", "--prefetch-concurrency=2"}, GatewayProfiles: "prof"}
			}},
		{name: "run",
			args: []string{"--only", "brand, policy", "--bucket", "b", "--work-dir", "/w", "--config-timeout", "1m", "--shuffle-buffer", "10"},
			want: func(o *runOptions) {
				o.cfg.Groups = []string{bench.GroupBrand, bench.GroupPolicy}
				o.cfg.Bucket, o.cfg.WorkDir, o.cfg.ConfigTimeout, o.cfg.ShuffleBuffer = "b", "/w", time.Minute, 10
			}},
		{name: "the command's own",
			args: []string{"--out", "/r", "--timeout", "2h", "--cpuprofile", "h.pprof"},
			want: func(o *runOptions) { o.out, o.timeout, o.cpuProfile = "/r", 2*time.Hour, "h.pprof" }},
		{name: "smoke and small", args: []string{"--smoke", "--small"}, err: "exclude each other"},
		{name: "unknown flag", args: []string{"--cache-size", "1GiB"}, err: "usage"},
		{name: "unknown group", args: []string{"--only", "limits,speed"}, err: "usage"},
		{name: "bad percentage", args: []string{"--cache", "0"}, err: "usage"},
		{name: "bad level", args: []string{"--stream-readers", "1,-2"}, err: "usage"},
		{name: "an argument", args: []string{"--small", "extra"}, err: "unexpected arguments"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseRun(&cli.Env{Stdout: io.Discard, Stderr: io.Discard}, tt.args)
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("error %v, want one containing %q", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			want := newRunOptions(bench.DefaultConfig())
			tt.want(want)
			want.cfg.Command, want.cfg.Log = got.cfg.Command, got.cfg.Log
			if !reflect.DeepEqual(got, want) {
				t.Errorf("got  %+v\nwant %+v", *got, *want)
			}
			if !strings.HasPrefix(got.cfg.Command, "brand-bench run") {
				t.Errorf("recorded command %q", got.cfg.Command)
			}
		})
	}
}

func TestCommands(t *testing.T) {
	tests := []struct {
		args []string
		code int
		out  string
	}{
		{[]string{"help"}, 0, "brand-bench limit --kind"},
		{[]string{"--help"}, 0, "brand-bench [run]"},
		{[]string{"help", "run"}, 0, "-policy-cache"},
		{[]string{"run", "-h"}, 0, "-gateway-binary"},
		{[]string{"help", "train"}, 0, "-gateway-cores"},
		{[]string{"help"}, 0, "brand-bench train [--small]"},
		{[]string{"help", "vision"}, 0, "-balance"},
		{[]string{"help", "gops"}, 0, "-gop-window"},
		{[]string{"bench"}, 2, `unknown command "bench"`},
		{[]string{"--bogus"}, 2, "flag provided but not defined: -bogus"},
		{[]string{"run", "--smoke", "--small"}, 1, "--smoke and --small exclude each other"},
		{[]string{"version"}, 0, "brand-bench dev"},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			code, out, errOut := brandBench(t, tt.args...)
			if code != tt.code || !strings.Contains(out+errOut, tt.out) {
				t.Fatalf("exit %d, want %d; output:\n%s%s\nwant it to contain %q", code, tt.code, out, errOut, tt.out)
			}
		})
	}
}

func TestCommandLine(t *testing.T) {
	got := commandLine("brand-bench run", []string{"--small", "--gateway-arg=--x=a b", "it's"})
	if want := `brand-bench run --small '--gateway-arg=--x=a b' 'it'\''s'`; got != want {
		t.Errorf("got %s, want %s", got, want)
	}
}
