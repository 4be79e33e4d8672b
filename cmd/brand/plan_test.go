package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"github.com/brandgw/brand/api"
	"io"
	"strings"
	"testing"

	"github.com/brandgw/brand/cluster"
	"github.com/brandgw/brand/dataset"
	"github.com/brandgw/brand/dataset/stored"
	"github.com/brandgw/brand/internal/cli"
	"github.com/brandgw/brand/internal/gen/synth"
	"github.com/brandgw/brand/planner"
	"github.com/brandgw/brand/s3backend"
	"github.com/brandgw/brand/shuffle"
)

func TestPlanClusterWorld(t *testing.T) {
	tests := []struct {
		args    []string
		world   int
		wantErr string
	}{
		{nil, 1, ""},
		{[]string{"--world", "6"}, 6, ""},
		{[]string{"--nodes", "4"}, 4, ""},
		{[]string{"--nodes", "4", "--ranks-per-node", "2"}, 8, ""},
		{[]string{"--nodes", "4", "--ranks-per-node", "2", "--world", "6"}, 6, ""},
		{[]string{"--nodes", "4", "--world", "1"}, 1, ""},
		{[]string{"--nodes", "-1"}, 0, "--nodes -1"},
		{[]string{"--nodes", "5000"}, 0, "--nodes 5000"},
		{[]string{"--nodes", "4", "--ranks-per-node", "0"}, 0, "--ranks-per-node 0"},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			var c planCluster
			var world int
			fs := flag.NewFlagSet("plan", flag.ContinueOnError)
			fs.IntVar(&world, "world", 1, "")
			c.register(fs)
			if err := fs.Parse(tt.args); err != nil {
				t.Fatal(err)
			}
			got, err := c.world(fs, world)
			switch {
			case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
				t.Errorf("error %v; want one naming %q", err, tt.wantErr)
			case tt.wantErr == "" && err != nil:
				t.Errorf("error %v", err)
			case tt.wantErr == "" && got != tt.world:
				t.Errorf("world %d, want %d", got, tt.world)
			}
		})
	}
}

// planDataset packs a small dataset into a local store (about 40 chunks)
// and returns the store's directory and the planner's view of its index.
func planDataset(t *testing.T) (string, planner.Dataset, uint64) {
	t.Helper()
	dir := packLocal(t, t.TempDir(), synth.Spec{Samples: 640, MeanBytes: 3000, Seed: 5}, dataset.PackOptions{ChunkSize: 48 << 10, Shuffle: true})
	store, err := s3backend.NewLocal(dir)
	if err != nil {
		t.Fatal(err)
	}
	ix, err := stored.ReadIndex(context.Background(), store)
	if err != nil {
		t.Fatal(err)
	}
	return dir, planner.WithGETs(planner.DatasetOf(ix), store.Requests), cluster.IndexKey(ix.ID())
}

// `brand plan --nodes` prints the planner's cluster prediction for the
// dataset's own index, in text and in JSON.
func TestPlanNodes(t *testing.T) {
	dir, d, key := planDataset(t)
	want, err := planner.MakeClusterPlan(context.Background(), planner.ClusterInput{
		Dataset:        d,
		Job:            planner.Job{Params: shuffle.Params{Seed: 3, Window: 8, BatchSize: 16, World: 8}, Epochs: 3},
		IndexKey:       key,
		Nodes:          4,
		NodeCacheBytes: 256 << 10,
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(want.Epochs) != 3 || want.Chunks < 20 {
		t.Fatalf("the dataset is too small for this test: %d chunks", want.Chunks)
	}
	var text, js bytes.Buffer
	if err := want.WriteText(&text); err != nil {
		t.Fatal(err)
	}
	enc := json.NewEncoder(&js)
	enc.SetIndent("", "  ")
	if err := enc.Encode(want); err != nil {
		t.Fatal(err)
	}
	args := []string{"plan", "--src", dir, "--nodes", "4", "--ranks-per-node", "2", "--cache-size", "256KiB", "--seed", "3", "--batch-size", "16"}
	for _, tt := range []struct {
		name string
		args []string
		want string
	}{
		{"text", args, text.String()},
		{"json", append(args, "--json"), js.String()},
	} {
		t.Run(tt.name, func(t *testing.T) {
			code, stdout, stderr := brand(t, tt.args...)
			if code != 0 {
				t.Fatalf("exit %d: %s", code, stderr)
			}
			if stdout != tt.want {
				t.Errorf("printed\n%s\nwant\n%s", stdout, tt.want)
			}
		})
	}
	if code, _, stderr := brand(t, "plan", "--src", dir, "--nodes", "4", "--epochs", "1"); code == 0 || !strings.Contains(stderr, "epochs") {
		t.Errorf("one epoch: exit %d, %s; want a failure naming epochs", code, stderr)
	}
}

// GET /plan?nodes=N answers the same prediction, and a bad node count is
// the client's error.
func TestPlanEndpointNodes(t *testing.T) {
	dir, d, key := planDataset(t)
	want, err := planner.MakeClusterPlan(context.Background(), planner.ClusterInput{
		Dataset:        d,
		Job:            planner.Job{Params: shuffle.Params{Seed: 3, Window: 8, BatchSize: 16, World: 8}, Epochs: 3},
		IndexKey:       key,
		Nodes:          4,
		NodeCacheBytes: 256 << 10,
	})
	if err != nil {
		t.Fatal(err)
	}
	want.Assignment = api.AssignLocality // the gateway names the job's: 8 ranks on 4 nodes, locality on
	var stderr syncBuffer
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan int, 1)
	go func() {
		done <- run(ctx, &cli.Env{Stdout: io.Discard, Stderr: &stderr, Getenv: func(string) string { return "" }},
			[]string{"serve", "--listen", "127.0.0.1:0", "--dataset", "d=" + dir, "--log-format", "json", "--memory-limit", "off"})
	}()
	defer func() { stop(); <-done }()
	base := waitReady(t, &stderr, done)

	tests := []struct {
		query  string
		status int
		check  func(t *testing.T, body []byte)
	}{
		{"nodes=4&world=8&seed=3&batch_size=16&window=8&cache_size=256KiB", 200, func(t *testing.T, body []byte) {
			var got planner.ClusterPlan
			if err := json.Unmarshal(body, &got); err != nil {
				t.Fatal(err)
			}
			g, _ := json.Marshal(got)
			w, _ := json.Marshal(want)
			if !bytes.Equal(g, w) {
				t.Errorf("/plan?nodes=4 answered\n%s\nwant\n%s", g, w)
			}
		}},
		{"world=8&cache_size=256KiB", 200, func(t *testing.T, body []byte) {
			if !bytes.Contains(body, []byte(`"lru"`)) || bytes.Contains(body, []byte(`"nodes"`)) {
				t.Errorf("without nodes, a single gateway's plan expected: %s", body)
			}
		}},
		{"nodes=&world=8", 200, func(t *testing.T, body []byte) {
			if !bytes.Contains(body, []byte(`"lru"`)) {
				t.Errorf("an empty nodes is the default, a single gateway's plan: %s", body)
			}
		}},
		{"nodes=0", 400, nil},
		{"nodes=many", 400, nil},
		{"nodes=4097", 400, nil},
		{"nodes=4&epochs=1", 400, nil},
	}
	for _, tt := range tests {
		t.Run(tt.query, func(t *testing.T) {
			status, body := httpGet(t, fmt.Sprintf("%s/plan?%s", base, tt.query))
			if status != tt.status {
				t.Fatalf("status %d, want %d: %s", status, tt.status, body)
			}
			if tt.check != nil {
				tt.check(t, body)
			}
		})
	}
}

// `brand plan --disk-cache-size` prints the plan with a disk tier below
// the cache, in text and in JSON, and with --nodes each node's disk; a
// size that does not parse and a shared plan are refused.
func TestPlanDiskCacheSize(t *testing.T) {
	dir, d, key := planDataset(t)
	job := planner.Job{Params: shuffle.Params{Seed: 3, Window: 8, BatchSize: 16, World: 1}, Epochs: 3}
	single, err := planner.MakePlan(context.Background(), planner.PlanInput{
		Dataset:            d,
		Job:                job,
		CacheBytes:         256 << 10,
		DiskCacheBytes:     1 << 20,
		BackendBytesPerSec: 1 << 30,
		PrefetchWindows:    1,
	})
	if err != nil {
		t.Fatal(err)
	}
	if single.Disk == nil || single.Disk.Optimal.DiskBytes == 0 {
		t.Fatalf("the dataset is too small for this test: disk section %+v", single.Disk)
	}
	job.World = 4
	clustered, err := planner.MakeClusterPlan(context.Background(), planner.ClusterInput{
		Dataset:            d,
		Job:                job,
		IndexKey:           key,
		Nodes:              4,
		NodeCacheBytes:     256 << 10,
		NodeDiskCacheBytes: 1 << 20,
	})
	if err != nil {
		t.Fatal(err)
	}
	args := []string{"plan", "--src", dir, "--cache-size", "256KiB", "--disk-cache-size", "1MiB", "--seed", "3", "--batch-size", "16"}
	nodes := append(append([]string{}, args...), "--nodes", "4")
	for _, tt := range []struct {
		name string
		args []string
		plan interface{ WriteText(io.Writer) error }
	}{
		{"text", args, single},
		{"json", append(args, "--json"), single},
		{"nodes", nodes, clustered},
		{"nodes json", append(nodes, "--json"), clustered},
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
			if !strings.Contains(stdout, "Disk") && !strings.Contains(stdout, "disk") {
				t.Errorf("no disk figures:\n%s", stdout)
			}
		})
	}

	// Without the flag, or with 0, the plan has no disk figures.
	for _, size := range []string{"", "0"} {
		a := []string{"plan", "--src", dir, "--cache-size", "256KiB", "--seed", "3", "--batch-size", "16", "--json"}
		if size != "" {
			a = append(a, "--disk-cache-size", size)
		}
		code, stdout, stderr := brand(t, a...)
		if code != 0 || strings.Contains(stdout, `"disk`) {
			t.Errorf("--disk-cache-size %q: exit %d, %s; want a plan without disk figures\n%s", size, code, stderr, stdout)
		}
	}

	for _, tt := range []struct {
		name, want string
		args       []string
	}{
		{"negative", `invalid value "-1GiB" for flag -disk-cache-size`, []string{"--disk-cache-size", "-1GiB"}},
		{"not a size", `invalid value "big" for flag -disk-cache-size`, []string{"--disk-cache-size", "big"}},
		{"shared jobs", "--shared-job and --disk-cache-size are not supported together", []string{"--disk-cache-size", "1MiB", "--shared-job", "seed=1"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			code, _, stderr := brand(t, append([]string{"plan", "--src", dir}, tt.args...)...)
			if code == 0 || !strings.Contains(stderr, tt.want) {
				t.Errorf("exit %d, %q; want a failure saying %q", code, stderr, tt.want)
			}
		})
	}
}

// TestPlanNodesAfter: brand plan --nodes N --nodes-after M prints the cost
// of resizing N planned nodes to M for the job (MakeResizePlan's figures,
// worked out by hand in planner's tests), as text or JSON.
func TestPlanNodesAfter(t *testing.T) {
	dir, d, key := planDataset(t)
	job := planner.Job{Params: shuffle.Params{Seed: 3, Window: 8, BatchSize: 16, World: 1}, FirstEpoch: 1, Epochs: 3}
	want, err := planner.MakeResizePlan(planner.ResizeInput{Dataset: d, IndexKey: key, Job: job, From: planner.PlannedMembers(3),
		To: planner.PlannedMembers(4), PrefetchWindows: 1, NodeCacheBytes: 4 << 20, StoreBytesPerSec: 1 << 30, PeerBytesPerSec: planner.DefaultPeerBytesPerSec})
	if err != nil {
		t.Fatal(err)
	}
	if want.MovedChunks == 0 || want.SoonChunks == 0 || want.PeerBytes == 0 {
		t.Fatalf("the dataset is too small for this test: %+v", *want)
	}
	var text, js bytes.Buffer
	if err := want.WriteText(&text); err != nil {
		t.Fatal(err)
	}
	enc := json.NewEncoder(&js)
	enc.SetIndent("", "  ")
	if err := enc.Encode(want); err != nil {
		t.Fatal(err)
	}
	args := []string{"plan", "--src", dir, "--nodes", "3", "--nodes-after", "4", "--cache-size", "4MiB", "--seed", "3", "--batch-size", "16", "--first-epoch", "1"}
	for _, tt := range []struct {
		name string
		args []string
		want string
	}{{"text", args, text.String()}, {"json", append(args, "--json"), js.String()}} {
		t.Run(tt.name, func(t *testing.T) {
			code, stdout, stderr := brand(t, tt.args...)
			if code != 0 {
				t.Fatalf("exit %d: %s", code, stderr)
			}
			if stdout != tt.want {
				t.Errorf("printed\n%s\nwant\n%s", stdout, tt.want)
			}
		})
	}
}
