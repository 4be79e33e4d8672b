package integration

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/brandgw/brand/api"
	"github.com/brandgw/brand/dataset"
	"github.com/brandgw/brand/internal/gen/synth"
	"github.com/brandgw/brand/internal/testsupport/cmdtest"
	"github.com/brandgw/brand/internal/testsupport/miniotest"
	"github.com/brandgw/brand/s3backend"
)

// scheduleCluster is three `brand serve` processes serving two datasets
// (web, code) packed into one MinIO.
type scheduleCluster struct {
	procs []*clusterProc
	bin   string
	env   []string
}

func startScheduleCluster(t *testing.T) scheduleCluster {
	t.Helper()
	ctx := context.Background()
	srv := miniotest.ForTest(t)
	if err := srv.MakeBucket(ctx, "train"); err != nil {
		t.Fatal(err)
	}
	names := []string{"web", "code"}
	for i, name := range names {
		src := filepath.Join(t.TempDir(), name)
		if err := (synth.Spec{Samples: 640, MeanBytes: 1 << 10, Classes: 10, Seed: uint64(41 + i)}).WriteTree(src); err != nil {
			t.Fatal(err)
		}
		store, err := s3backend.Open(ctx, "s3://train/"+name, srv.Config())
		if err != nil {
			t.Fatal(err)
		}
		if _, err := dataset.Pack(ctx, src, store, dataset.PackOptions{ChunkSize: 32 << 10, Shuffle: true, Seed: 11, Name: name}); err != nil {
			t.Fatal(err)
		}
	}
	const nodes = 3
	c := scheduleCluster{bin: cmdtest.Build(t, "brand"),
		env: append(os.Environ(), "AWS_ACCESS_KEY_ID="+srv.AccessKey, "AWS_SECRET_ACCESS_KEY="+srv.SecretKey, "AWS_REGION=us-east-1")}
	ports := freePorts(t, nodes)
	urls := make([]string, nodes)
	for k, port := range ports {
		urls[k] = fmt.Sprintf("http://127.0.0.1:%d", port)
	}
	dir := t.TempDir()
	for k := range nodes {
		args := []string{"serve", "--listen", fmt.Sprintf("127.0.0.1:%d", ports[k]), "--s3-endpoint", srv.URL(),
			"--cache-size", "32MiB", "--cache-prefault=false", "--peers", strings.Join(urls, ","), "--self", strconv.Itoa(k),
			"--log-format", "json", "--shutdown-timeout", "10s", "--index-poll", "0"}
		for _, name := range names {
			args = append(args, "--dataset", name+"=s3://train/"+name)
		}
		c.procs = append(c.procs, &clusterProc{k: k, url: urls[k], logPath: filepath.Join(dir, fmt.Sprintf("node%d.log", k)), args: args})
	}
	startProcs(t, c.procs, c.bin, c.env, "")
	return c
}

func (c scheduleCluster) urls() []string {
	var u []string
	for _, p := range c.procs {
		u = append(u, p.url)
	}
	return u
}

// scheduleEditAt PUTs (base "") or POSTs a schedule edit of job to the
// node at base URL u, and returns the status, the version answered and the
// body.
func scheduleEditAt(t *testing.T, u, job, sched string, from uint64, base string) (int, string, string) {
	t.Helper()
	method := http.MethodPost
	if base == "" {
		method = http.MethodPut
	}
	body, _ := json.Marshal(map[string]any{"schedule": sched, "from_step": from, "base": base})
	req, err := http.NewRequest(method, u+"/jobs/"+job+"/schedule", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var v struct {
		Version string `json:"version"`
	}
	if resp.StatusCode < 300 {
		if err := json.Unmarshal(b, &v); err != nil {
			t.Fatal(err)
		}
	}
	return resp.StatusCode, v.Version, string(b)
}

// scheduleWorld and scheduleBatch make a global step one global batch of
// 16 samples: 80 steps an epoch of the 1,280 samples.
const scheduleWorld, scheduleBatch = 2, 8

// steps reads steps [from, to) of epoch 0 through the node at u under q,
// both ranks, and returns each step's bodies' hash and the schedule
// version each names.
func scheduleSteps(t *testing.T, u, q string, from, to int) ([]string, []string) {
	t.Helper()
	var sums, versions []string
	for s := from; s < to; s++ {
		h := sha256.New()
		for r := range scheduleWorld {
			g := fmt.Sprintf("%s/epoch/0/batch/%d?%s&seed=3&window=4&batch_size=%d&world=%d&rank=%d", u, s, q, scheduleBatch, scheduleWorld, r)
			resp, err := http.Get(g)
			if err != nil {
				t.Fatal(err)
			}
			b, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			if err != nil || resp.StatusCode != http.StatusOK {
				t.Fatalf("%s: %d %v %s", g, resp.StatusCode, err, b)
			}
			h.Write(b)
			versions = append(versions, resp.Header.Get(api.HeaderScheduleVersion))
		}
		sums = append(sums, fmt.Sprintf("%x", h.Sum(nil)[:8]))
	}
	return sums, versions
}

// TestScheduleEditsOnACluster: an edit of a stored schedule taken by one
// node of a three-node cluster of `brand serve` processes is checked
// against the steps every member has served. Ranks read through node B
// to step 5: an edit POSTed to node A from step 5 is refused (409 naming
// step 5, which only B served), one from step 6 is accepted, and both
// nodes then serve the edited schedule from step 6 and the same bytes as
// before for steps 0–5. A node killed and started again after serving a
// job refuses an edit from a step it served (its reservation in the
// store: every step below 64). With a member down, an edit fails 503 and
// the schedule stays as it was.
func TestScheduleEditsOnACluster(t *testing.T) {
	c := startScheduleCluster(t)
	u := c.urls()
	a, b, cn := u[0], u[1], u[2]
	first := "0:web:0.5,code:0.5"
	st, v1, body := scheduleEditAt(t, a, "run", first, 0, "")
	if st != http.StatusCreated {
		t.Fatalf("PUT at node A: %d %s", st, body)
	}
	const k = 5
	job := "job=run&schedule=latest"
	before, vs := scheduleSteps(t, b, job, 0, k+1)
	if vs[0] != v1 {
		t.Fatalf("node B's batches name version %q, want %s", vs[0], v1)
	}
	// Node A has served nothing: only B's answer refuses this.
	if st, _, body := scheduleEditAt(t, a, "run", fmt.Sprintf("%d:web:0.1,code:0.9", k), k, v1); st != http.StatusConflict || !strings.Contains(body, fmt.Sprintf("step %d", k)) {
		t.Fatalf("an edit at node A from step %d, read through node B: %d %s; want 409 naming step %d", k, st, body, k)
	}
	edit := fmt.Sprintf("%d:web:0.1,code:0.9", k+1)
	st, v2, body := scheduleEditAt(t, a, "run", edit, k+1, v1)
	if st != http.StatusOK {
		t.Fatalf("an edit at node A from step %d: %d %s", k+1, st, body)
	}
	// Both nodes: steps before k+1 unchanged, from k+1 the edited
	// schedule's, the same on each.
	edited := url.QueryEscape(first + ";" + edit)
	wantNew, _ := scheduleSteps(t, cn, "mix_schedule="+edited, 0, k+4)
	wantOld, _ := scheduleSteps(t, cn, "mix_schedule="+url.QueryEscape(first), k+1, k+4)
	for _, node := range []string{a, b} {
		got, vs := scheduleSteps(t, node, job, 0, k+4)
		if strings.Join(got[:k+1], ",") != strings.Join(before, ",") {
			t.Fatalf("node %s: steps 0–%d changed after the edit", node, k)
		}
		if strings.Join(got, ",") != strings.Join(wantNew, ",") {
			t.Fatalf("node %s does not serve the edited schedule", node)
		}
		if got[k+1] == wantOld[0] {
			t.Fatalf("node %s: step %d is the old schedule's", node, k+1)
		}
		if vs[len(vs)-1] != v2 {
			t.Fatalf("node %s names version %s, want %s", node, vs[len(vs)-1], v2)
		}
	}

	// A second job, read through node C alone to step 3; C restarted
	// refuses an edit from a step it served, though no node remembers it.
	st, w1, body := scheduleEditAt(t, a, "other", first, 0, "")
	if st != http.StatusCreated {
		t.Fatalf("PUT other: %d %s", st, body)
	}
	scheduleSteps(t, cn, "job=other&schedule=latest", 0, 4)
	c.procs[2].kill()
	c.procs[2].start(t, c.bin, c.env)
	waitUp(t, u, 2)
	for _, at := range []string{cn, a} {
		if st, _, body := scheduleEditAt(t, at, "other", "3:web:1,code:1", 3, w1); st != http.StatusConflict || !strings.Contains(body, "step 63") {
			t.Fatalf("an edit at %s from step 3 after node C served it and restarted: %d %s; want 409 naming step 63 (C's reservation)", at, st, body)
		}
	}

	// A member down: the edit is not made.
	c.procs[1].kill()
	if st, _, body := scheduleEditAt(t, a, "run", "70:web:1,code:1", 70, v2); st != http.StatusServiceUnavailable || !strings.Contains(body, b) {
		t.Fatalf("an edit with node B down: %d %s; want 503 naming it", st, body)
	}
	resp, err := http.Get(a + "/jobs/run/schedule")
	if err != nil {
		t.Fatal(err)
	}
	cur, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(cur), v2) {
		t.Fatalf("the schedule after the refused edit: %s", cur)
	}
}
