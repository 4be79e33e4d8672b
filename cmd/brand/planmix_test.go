package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/brandgw/brand/cluster"
	"github.com/brandgw/brand/dataset"
	"github.com/brandgw/brand/dataset/stored"
	"github.com/brandgw/brand/internal/gen/synth"
	"github.com/brandgw/brand/planner"
	"github.com/brandgw/brand/s3backend"
	"github.com/brandgw/brand/shuffle"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata from the current output")

// planMixDatasets packs two small datasets, web (about 40 chunks) and
// code (a third of its samples, in smaller chunks), the latter in a
// directory named code, and returns their store directories and the
// planner's mixture of them at weights 7:3.
func planMixDatasets(t *testing.T) (web, code string, mix planner.Mix) {
	t.Helper()
	web = packLocal(t, t.TempDir(), synth.Spec{Samples: 640, MeanBytes: 3000, Seed: 5}, dataset.PackOptions{ChunkSize: 48 << 10, Shuffle: true})
	packed := packLocal(t, t.TempDir(), synth.Spec{Samples: 200, MeanBytes: 2000, Seed: 6}, dataset.PackOptions{ChunkSize: 16 << 10, Shuffle: true})
	code = filepath.Join(filepath.Dir(packed), "code")
	if err := os.Rename(packed, code); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name, dir string
		weight    uint64
	}{{"web", web, 7}, {"code", code, 3}} {
		store, err := s3backend.NewLocal(c.dir)
		if err != nil {
			t.Fatal(err)
		}
		ix, err := stored.ReadIndex(context.Background(), store)
		if err != nil {
			t.Fatal(err)
		}
		mix.Components = append(mix.Components, planner.MixComponent{Name: c.name, Weight: c.weight,
			Dataset: planner.WithGETs(planner.DatasetOf(ix), store.Requests), IndexKey: cluster.IndexKey(ix.ID())})
	}
	return web, code, mix
}

// `brand plan --mix` prints the planner's plan of the mixture of the
// datasets its --src flags name (name=URL, or a URL named after its last
// path element), in text and in JSON, with --mix-block and --mix-samples,
// and with --nodes the cluster's prediction.
func TestPlanMix(t *testing.T) {
	web, code, mix := planMixDatasets(t)
	job := planner.Job{Params: shuffle.Params{Seed: 3, Window: 4, BatchSize: 16, World: 1}, Epochs: 3}
	in := planner.PlanInput{Mix: &mix, Job: job, CacheBytes: 256 << 10, BackendBytesPerSec: 1 << 30, PrefetchWindows: 1}
	plain, err := planner.MakePlan(context.Background(), in)
	if err != nil {
		t.Fatal(err)
	}
	if plain.Mix == nil || len(plain.Optimal.Components) != 2 || plain.Optimal.Components[1].BackendBytes == 0 {
		t.Fatalf("the datasets are too small for this test: %+v", plain.Optimal.Components)
	}
	shaped := mix
	shaped.Block, shaped.Samples = 10, 500
	in.Mix = &shaped
	blocked, err := planner.MakePlan(context.Background(), in)
	if err != nil {
		t.Fatal(err)
	}
	withDisk := in
	withDisk.Mix, withDisk.DiskCacheBytes = &mix, 1<<20
	disked, err := planner.MakePlan(context.Background(), withDisk)
	if err != nil {
		t.Fatal(err)
	}
	phased := mix
	phased.Phases = []shuffle.SchedulePhase{{Weights: []uint64{7, 3}}, {Step: 40, Weights: []uint64{1, 9}}}
	in.Mix = &phased
	scheduled, err := planner.MakePlan(context.Background(), in)
	if err != nil {
		t.Fatal(err)
	}
	if len(scheduled.Mix.Phases) != 2 || len(scheduled.Optimal.Phases) != 2 || scheduled.Mix.Phases[1].WorkingSetBytes == 0 {
		t.Fatalf("the schedule's plan has no phases: %+v", scheduled.Mix)
	}
	job.World = 4
	clustered, err := planner.MakeClusterPlan(context.Background(), planner.ClusterInput{Mix: &mix, Job: job, Nodes: 2, NodeCacheBytes: 256 << 10})
	if err != nil {
		t.Fatal(err)
	}

	args := []string{"plan", "--mix", "web:0.7,code:0.3", "--src", "web=" + web, "--src", code, "--cache-size", "256KiB", "--seed", "3", "--batch-size", "16", "--window", "4"}
	for _, tt := range []struct {
		name string
		args []string
		plan interface{ WriteText(io.Writer) error }
	}{
		{"text", args, plain},
		{"json", append(args, "--json"), plain},
		{"block and length", append(args, "--mix-block", "10", "--mix-samples", "500"), blocked},
		{"disk", append(args, "--disk-cache-size", "1MiB"), disked},
		{"schedule", append(append([]string{"plan"}, args[3:]...), "--mix-schedule", "0:web:0.7,code:0.3;40:code:0.9,web:0.1"), scheduled},
		{"nodes", append(args, "--nodes", "2", "--ranks-per-node", "2"), clustered},
		{"nodes json", append(args, "--nodes", "2", "--ranks-per-node", "2", "--json"), clustered},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var want bytes.Buffer
			if strings.HasSuffix(tt.name, "json") {
				enc := json.NewEncoder(&want)
				enc.SetIndent("", "  ")
				if err := enc.Encode(tt.plan); err != nil {
					t.Fatal(err)
				}
			} else if err := tt.plan.WriteText(&want); err != nil {
				t.Fatal(err)
			}
			code, stdout, stderr := brand(t, tt.args...)
			if code != 0 {
				t.Fatalf("exit %d: %s", code, stderr)
			}
			if stdout != want.String() {
				t.Errorf("printed\n%s\nwant\n%s", stdout, want.String())
			}
		})
	}

	// The report itself, pinned: the packed datasets are a pure function
	// of their specs.
	_, stdout, _ := brand(t, args...)
	path := filepath.Join("testdata", "plan-mix.txt")
	if *update {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(stdout), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	golden, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	if stdout != string(golden) {
		t.Errorf("brand plan --mix printed\n%s\nwant (%s)\n%s", stdout, path, golden)
	}
}

// Mixture flags that do not fit together are refused before any dataset
// is read, each naming the flag to fix.
func TestPlanMixRefused(t *testing.T) {
	web, code, _ := planMixDatasets(t)
	srcs := []string{"--src", "web=" + web, "--src", "code=" + code}
	for _, tt := range []struct {
		name, want string
		args       []string
	}{
		{"block without mix", "--mix-block and --mix-samples apply only with --mix", []string{"--src", web, "--mix-block", "8"}},
		{"length without mix", "--mix-block and --mix-samples apply only with --mix", []string{"--src", web, "--mix-samples", "8"}},
		{"two sources without mix", "--src given 2 times", srcs},
		{"no source for a component", `--mix names dataset "books": give its URL as --src books=URL`, append([]string{"--mix", "web:1,books:1"}, srcs...)},
		{"a source no component names", `the mixture web:1 has no dataset "code"`, append([]string{"--mix", "web:1"}, srcs...)},
		{"a name twice", `--src names dataset "web" twice`, []string{"--mix", "web:1", "--src", "web=" + web, "--src", "web=" + code}},
		{"mix and schedule", "--mix and --mix-schedule are one or the other", append([]string{"--mix", "web:1,code:1", "--mix-schedule", "0:web:1,code:1"}, srcs...)},
		{"bad schedule", "--mix-schedule: ", append([]string{"--mix-schedule", "0:web:1,code:1;0:web:1,code:2"}, srcs...)},
		{"schedule naming no source", `--mix-schedule names dataset "books": give its URL as --src books=URL`, append([]string{"--mix-schedule", "0:web:1,books:1"}, srcs...)},
		{"bad weight", "--mix: invalid mixture", append([]string{"--mix", "web:-1,code:1"}, srcs...)},
		{"negative block", "--mix-block -1", append([]string{"--mix", "web:1,code:1", "--mix-block", "-1"}, srcs...)},
		{"block past the limit", "mixing block", append([]string{"--mix", "web:1,code:1", "--mix-block", "100000000"}, srcs...)},
		{"shared jobs", "--mix and --shared-job are not supported together", append([]string{"--mix", "web:1,code:1", "--shared-job", "seed=1"}, srcs...)},
		{"importance", "importance mode (--snapshot, --importance, --job, --hot) is per dataset", append([]string{"--mix", "web:1,code:1", "--snapshot", "x.brandimp"}, srcs...)},
		{"one epoch", "epochs", append([]string{"--mix", "web:1,code:1", "--epochs", "1"}, srcs...)},
	} {
		t.Run(tt.name, func(t *testing.T) {
			code, _, stderr := brand(t, append([]string{"plan"}, tt.args...)...)
			if code == 0 || !strings.Contains(stderr, tt.want) {
				t.Errorf("exit %d, %q; want a failure saying %q", code, stderr, tt.want)
			}
		})
	}
}
