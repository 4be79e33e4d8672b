package integration

import (
	"archive/tar"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/brandgw/brand/api"
	"github.com/brandgw/brand/internal/testsupport/cmdtest"
)

// The memory lane's node: a budget of 1 GiB with a 64 MiB cache, so
// that copies and decodes share 704 MiB, and samples larger than a 64th
// of it in chunks of 136 MiB, larger than the whole cache.
const (
	laneLimit       = 1 << 30
	laneSamples     = 40
	laneSampleBytes = 17 << 20 // over laneLimit/64
	laneAsks        = 32       // requests at once
	lanePrompts     = 400_000  // a task plan of 22 MiB
	laneTaskJobs    = 100
)

// TestReadPathsWithinTheMemoryLimit is issue 98's memory lane: every
// read path that carries samples — batches, /samples, a task lease's
// samples — asked 32 times at once for samples of 17 MiB (over a 64th
// of the limit) from chunks of 136 MiB, larger than the 64 MiB cache,
// and then 100 task jobs over 200,000 prompts, each made and asked for,
// through `brand serve --memory-limit 1GiB` as a process of its own (one
// for each path, so each peak is the path's own). Every request is
// answered 200, or 503 with Retry-After; and the process's peak
// resident memory (VmHWM) stays under the limit itself, no slack.
//
// Before a chunk larger than the cache was read through within the
// decodes share (item 8), the read paths peaked at 905–985 MiB here
// (after: 543–544), and with chunks of 272 MiB at 1,126–1,221 MiB (after:
// 965–1,090, still over: the collector's lag behind chunks read through
// into buffers made to their size — issue 98's item 8 is open for
// them); before task plans were counted (item 9), these 100 jobs took
// 1,583 MiB (after: 249–282). Run by scripts/test.sh's lane three (BRAND_MEMORY_LANE=1),
// alone: it writes 700 MB of samples and 200 MB of prompts, and its
// figures are a process's peak.
func TestReadPathsWithinTheMemoryLimit(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("reads /proc/PID/status")
	}
	if os.Getenv("BRAND_MEMORY_LANE") == "" {
		t.Skip("the memory lane's test: scripts/test.sh runs it with BRAND_MEMORY_LANE=1")
	}
	dir := t.TempDir()
	bin := filepath.Join(dir, "brand")
	cmdtest.Go(t, "build", "-o", bin, "github.com/brandgw/brand/cmd/brand")
	big := filepath.Join(dir, "big")
	src := filepath.Join(dir, "src", "big")
	if err := os.MkdirAll(src, 0o755); err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewChaCha8([32]byte{98}))
	sample := make([]byte, laneSampleBytes)
	for i := range laneSamples {
		for j := 0; j < len(sample); j += 8 {
			v := rng.Uint64()
			for k := range 8 {
				sample[j+k] = byte(v >> (8 * k))
			}
		}
		if err := os.WriteFile(filepath.Join(src, fmt.Sprintf("s%02d.bin", i)), sample, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	laneRun(t, bin, "pack", "--src", filepath.Dir(src), "--dst", big, "--chunk-size", "128MiB")
	if err := os.RemoveAll(filepath.Dir(src)); err != nil {
		t.Fatal(err)
	}
	prompts := filepath.Join(dir, "prompts")
	writePromptShards(t, prompts, lanePrompts, 4)
	laneRun(t, bin, "index", "--src", prompts)

	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "GOMEMLIMIT=") && !strings.HasPrefix(kv, "GOGC=") {
			env = append(env, kv)
		}
	}
	hc := &http.Client{Timeout: 4 * time.Minute}
	key := func(i int) string { return fmt.Sprintf("big/s%02d", i%laneSamples) }
	paths := []struct {
		name string
		// asks are the requests made at once, from what the node answers
		// before them.
		asks func(t *testing.T, url string) []string
		// seq, if set, runs the path's requests one after another instead.
		seq func(t *testing.T, url string)
	}{
		{name: "batches", asks: func(t *testing.T, url string) []string {
			var us []string
			for i := range laneAsks {
				us = append(us, fmt.Sprintf("%s/epoch/0/batch/%d?dataset=big&batch_size=1", url, i))
			}
			return us
		}},
		{name: "samples", asks: func(t *testing.T, url string) []string {
			var us []string
			for i := range laneAsks {
				us = append(us, fmt.Sprintf("%s/samples/%s?dataset=big", url, key(i)))
			}
			return us
		}},
		{name: "task-lease samples", asks: func(t *testing.T, url string) []string {
			laneAsk(t, hc, http.MethodPut, url+"/tasks/lane?dataset=big", `{"step": 8, "ahead": 8}`, http.StatusCreated)
			var us []string
			for i := range laneAsks {
				var l api.TaskLease
				body := laneAsk(t, hc, http.MethodPost, url+"/tasks/lane/leases?dataset=big", fmt.Sprintf(`{"generator": "g%d", "prompts": 1}`, i), http.StatusCreated)
				if err := json.Unmarshal(body, &l); err != nil || len(l.Prompts) != 1 {
					t.Fatalf("lease %d: %v %s", i, err, body)
				}
				us = append(us, fmt.Sprintf("%s/tasks/lane/leases/%s/samples?dataset=big", url, l.Lease))
			}
			return us
		}},
		{name: "task plans", seq: func(t *testing.T, url string) {
			for i := range laneTaskJobs {
				laneAsk(t, hc, http.MethodPut, fmt.Sprintf("%s/tasks/job%d?dataset=prompts", url, i), `{"step": 64, "ahead": 4}`, http.StatusCreated)
				laneAsk(t, hc, http.MethodGet, fmt.Sprintf("%s/tasks/job%d?dataset=prompts", url, i), "", http.StatusOK)
			}
		}},
	}
	for _, p := range paths {
		t.Run(p.name, func(t *testing.T) {
			port := freePorts(t, 1)[0]
			url := fmt.Sprintf("http://127.0.0.1:%d", port)
			proc := &clusterProc{url: url, logPath: filepath.Join(dir, strings.ReplaceAll(p.name, " ", "-")+".log"),
				args: []string{"serve", "--listen", fmt.Sprintf("127.0.0.1:%d", port), "--dataset", "big=" + big, "--dataset", "prompts=" + prompts,
					"--cache-size", "64MiB", "--memory-limit", strconv.Itoa(laneLimit), "--log-format", "json", "--index-poll", "0"}}
			proc.start(t, bin, env)
			defer proc.stop(t)
			served, busy := 0, 0
			if p.seq != nil {
				p.seq(t, url)
			} else {
				us := p.asks(t, url)
				statuses := make([]int, len(us))
				retry := make([]string, len(us))
				errs := make([]error, len(us))
				var wg sync.WaitGroup
				for i, u := range us {
					wg.Go(func() {
						resp, err := hc.Get(u)
						if err != nil {
							errs[i] = err
							return
						}
						defer resp.Body.Close()
						n, err := io.Copy(io.Discard, resp.Body)
						errs[i], statuses[i], retry[i] = err, resp.StatusCode, resp.Header.Get("Retry-After")
						if err == nil && resp.StatusCode == http.StatusOK && n < laneSampleBytes {
							errs[i] = fmt.Errorf("%d bytes, less than its sample", n)
						}
					})
				}
				wg.Wait()
				for i := range us {
					switch {
					case errs[i] != nil:
						t.Errorf("request %d: %v", i, errs[i])
					case statuses[i] == http.StatusOK:
						served++
					case statuses[i] == http.StatusServiceUnavailable && retry[i] != "":
						busy++
					default:
						t.Errorf("request %d: status %d (Retry-After %q), want 200, or 503 with Retry-After", i, statuses[i], retry[i])
					}
				}
				if served == 0 {
					t.Error("no request served")
				}
			}
			peak := procKB(t, proc.cmd.Process.Pid, "VmHWM")
			t.Logf("%s: %d served, %d busy; peak resident %.0f MiB of the limit's %d MiB", p.name, served, busy, float64(peak)/(1<<20), laneLimit>>20)
			if peak > laneLimit {
				t.Errorf("%s: the gateway's peak resident memory is %.0f MiB, over its --memory-limit of %d MiB", p.name, float64(peak)/(1<<20), laneLimit>>20)
			}
		})
	}
}

// laneAsk makes one request and wants its status; it returns the body.
func laneAsk(t *testing.T, hc *http.Client, method, url, body string, want int) []byte {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != want {
		t.Fatalf("%s %s: %d %v %.300s; want %d", method, url, resp.StatusCode, err, b, want)
	}
	return b
}

// laneRun runs the brand binary with args, failing the test with its output.
func laneRun(t *testing.T, bin string, args ...string) {
	t.Helper()
	if out, err := exec.Command(bin, args...).CombinedOutput(); err != nil {
		t.Fatalf("brand %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

// writePromptShards writes n prompts (promptText) in shards WebDataset
// tar shards under dir, for `brand index` to serve in place.
func writePromptShards(t *testing.T, dir string, n, shards int) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	per := (n + shards - 1) / shards
	for s := range shards {
		var buf bytes.Buffer
		tw := tar.NewWriter(&buf)
		for i := s * per; i < min(n, (s+1)*per); i++ {
			text := promptText(i)
			if err := tw.WriteHeader(&tar.Header{Name: fmt.Sprintf("prompt/%07d.txt", i), Mode: 0o644, Size: int64(len(text)), Typeflag: tar.TypeReg}); err != nil {
				t.Fatal(err)
			}
			if _, err := tw.Write(text); err != nil {
				t.Fatal(err)
			}
		}
		if err := tw.Close(); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("prompts-%04d.tar", s)), buf.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
