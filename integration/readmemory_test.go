package integration

import (
	"archive/tar"
	"bytes"
	"encoding/json"
	"fmt"
	"image"
	"image/jpeg"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
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
	// Images of laneImageSide², each scaled up into a bucket of
	// laneBucketSide² (a tensor of 48 MiB), or resized to a tensor of
	// laneTensorSide² (18.75 MiB).
	laneImageSide   = 2048
	laneBucketSide  = 4096
	laneBucketBytes = 3 * laneBucketSide * laneBucketSide
	laneTensorSide  = 2560
	laneTensorBytes = 3 * laneTensorSide * laneTensorSide
)

// TestReadPathsWithinTheMemoryLimit is issue 98's memory lane: every
// read path that carries samples — batches, /samples, a task lease's
// samples — asked 32 times at once for samples of 17 MiB (over a 64th
// of the limit) from chunks of 136 MiB, larger than the 64 MiB cache;
// the paths that decode images — a bucket job's batches (buckets=, each
// image of 2048² scaled up into a bucket of 4096², a tensor of 48 MiB)
// and tensor batches (transform=, each image resized to a tensor of
// 2560², 18.75 MiB) — asked 32 times at once; and then 100 task jobs
// over 400,000 prompts, each made and asked for; through `brand serve
// --memory-limit 1GiB` as a process of its own (one for each path, so
// each peak is the path's own). Every request is answered 200, or 503
// with Retry-After; and the process's peak resident memory (VmHWM)
// stays under the limit itself, no slack.
//
// Before a chunk larger than the cache was read through within the
// decodes share (item 8), the read paths peaked at 905–985 MiB here
// (after: 543–544), and with chunks of 272 MiB at 1,126–1,221 MiB (after:
// 965–1,090, still over: the collector's lag behind chunks read through
// into buffers made to their size — issue 98's item 8 is open for
// them); before task plans were counted (item 9), these 100 jobs took
// 1,583 MiB (after: 249–282). Ten runs of the lane (25–40 s each)
// peaked at: batches 510–668 MiB, /samples 509–544, task-lease samples
// 510–646, buckets 788–921, tensors 670–801, task plans 254–285. The
// buckets' peak is the collector's room under Go's limit (960 MiB, the
// budget less brand serve's outsideGo), not bytes outside the budget:
// the live heap is 405–496 MB after each collection and grows to
// 810–888 MB before the next (GODEBUG=gctrace=1, goal 922 MB).
// Issue 98's reproduction of the buckets — images scaled up into a
// bucket of 8192² — is refused 422 under this limit before it decodes
// (each image's decode, 380 MB, is more than the whole decodes share,
// 352 MiB), as documented. Run by scripts/test.sh's lane three
// (BRAND_MEMORY_LANE=1), alone: it writes 700 MB of samples and 200 MB
// of prompts, and its figures are a process's peak.
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
	data := laneData{dir: dir, bin: bin, made: map[string]string{}}
	hc := &http.Client{Timeout: 4 * time.Minute}
	key := func(i int) string { return fmt.Sprintf("big/s%02d", i%laneSamples) }
	paths := []struct {
		name string
		// datasets are the lane's datasets the node serves (laneData).
		datasets []string
		// args are more flags of the node's.
		args []string
		// asks are the requests made at once, from what the node answers
		// before them.
		asks func(t *testing.T, url string) []string
		// least is the fewest bytes a request answered 200 carries.
		least int64
		// seq, if set, runs the path's requests one after another instead.
		seq func(t *testing.T, url string)
	}{
		{name: "batches", datasets: []string{"big"}, least: laneSampleBytes, asks: func(t *testing.T, url string) []string {
			var us []string
			for i := range laneAsks {
				us = append(us, fmt.Sprintf("%s/epoch/0/batch/%d?dataset=big&batch_size=1", url, i))
			}
			return us
		}},
		{name: "samples", datasets: []string{"big"}, least: laneSampleBytes, asks: func(t *testing.T, url string) []string {
			var us []string
			for i := range laneAsks {
				us = append(us, fmt.Sprintf("%s/samples/%s?dataset=big", url, key(i)))
			}
			return us
		}},
		{name: "task-lease samples", datasets: []string{"big"}, least: laneSampleBytes, asks: func(t *testing.T, url string) []string {
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
		{name: "buckets", datasets: []string{"photos"}, least: laneBucketBytes, asks: func(t *testing.T, url string) []string {
			var us []string
			for i := range laneAsks {
				us = append(us, fmt.Sprintf("%s/epoch/0/batch/%d?dataset=photos&seed=1&buckets=%dx%d&budget=%d",
					url, i, laneBucketSide, laneBucketSide, laneBucketSide*laneBucketSide))
			}
			return us
		}},
		{name: "tensors", datasets: []string{"photos"}, least: laneTensorBytes, args: []string{"--transform-config", data.pipelines(t)},
			asks: func(t *testing.T, url string) []string {
				var us []string
				for i := range laneAsks {
					us = append(us, fmt.Sprintf("%s/epoch/0/batch/%d?dataset=photos&batch_size=1&transform=lane", url, i))
				}
				return us
			}},
		{name: "task plans", datasets: []string{"prompts"}, seq: func(t *testing.T, url string) {
			for i := range laneTaskJobs {
				laneAsk(t, hc, http.MethodPut, fmt.Sprintf("%s/tasks/job%d?dataset=prompts", url, i), `{"step": 64, "ahead": 4}`, http.StatusCreated)
				laneAsk(t, hc, http.MethodGet, fmt.Sprintf("%s/tasks/job%d?dataset=prompts", url, i), "", http.StatusOK)
			}
		}},
	}
	for _, p := range paths {
		t.Run(p.name, func(t *testing.T) {
			args := []string{"--cache-size", "64MiB", "--memory-limit", strconv.Itoa(laneLimit), "--index-poll", "0"}
			for _, d := range p.datasets {
				args = append(args, "--dataset", d+"="+data.dataset(t, d))
			}
			node := startLimited(t, bin, filepath.Join(dir, strings.ReplaceAll(p.name, " ", "-")+".log"), append(args, p.args...)...)
			served, busy := 0, 0
			if p.seq != nil {
				p.seq(t, node.url)
			} else {
				served, busy = getAtOnce(t, hc, p.asks(t, node.url), p.least)
				if served == 0 {
					t.Error("no request served")
				}
			}
			peak := procKB(t, node.cmd.Process.Pid, "VmHWM")
			t.Logf("%s: %d served, %d busy; peak resident %.0f MiB of the limit's %d MiB", p.name, served, busy, float64(peak)/(1<<20), laneLimit>>20)
			if peak > laneLimit {
				t.Errorf("%s: the gateway's peak resident memory is %.0f MiB, over its --memory-limit of %d MiB", p.name, float64(peak)/(1<<20), laneLimit>>20)
			}
		})
	}
}

// laneData makes the lane's datasets as a path first asks for them, so
// that a run of one path (-run .../buckets) writes only its own.
type laneData struct {
	dir, bin string
	made     map[string]string // dataset name → its store
}

// dataset returns the store of the lane's dataset name, made once: big
// (laneSamples random samples of laneSampleBytes in chunks of 136 MiB),
// prompts (lanePrompts prompts in shards served in place) or photos
// (laneAsks JPEGs of laneImageSide², packed with their sizes).
func (d *laneData) dataset(t *testing.T, name string) string {
	t.Helper()
	if store, ok := d.made[name]; ok {
		return store
	}
	store := filepath.Join(d.dir, name)
	src := filepath.Join(d.dir, "src", name)
	if err := os.MkdirAll(src, 0o755); err != nil {
		t.Fatal(err)
	}
	switch name {
	case "big":
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
		laneRun(t, d.bin, "pack", "--src", filepath.Dir(src), "--dst", store, "--chunk-size", "128MiB")
	case "photos":
		img := laneJPEG(t, laneImageSide)
		for i := range laneAsks {
			if err := os.WriteFile(filepath.Join(src, fmt.Sprintf("p%02d.jpg", i)), img, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		laneRun(t, d.bin, "pack", "--src", filepath.Dir(src), "--dst", store, "--sizes")
	case "prompts":
		writePromptShards(t, store, lanePrompts, 4)
		laneRun(t, d.bin, "index", "--src", store)
	default:
		t.Fatalf("no lane dataset %q", name)
	}
	if err := os.RemoveAll(filepath.Dir(src)); err != nil {
		t.Fatal(err)
	}
	d.made[name] = store
	return store
}

// pipelines writes the lane's --transform-config: "lane" resizes an
// image to laneTensorSide², a tensor over a 64th of the limit.
func (d *laneData) pipelines(t *testing.T) string {
	t.Helper()
	path := filepath.Join(d.dir, "pipelines.json")
	spec := fmt.Sprintf(`{"pipelines": {"lane": {"ops": [{"op": "resize", "size": %d}]}}}`, laneTensorSide)
	if err := os.WriteFile(path, []byte(spec), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// laneJPEG encodes a baseline 4:2:0 JPEG of side², a smooth pattern (a
// few hundred KB: its decode, not its bytes, is what the lane weighs).
func laneJPEG(t *testing.T, side int) []byte {
	t.Helper()
	img := image.NewYCbCr(image.Rect(0, 0, side, side), image.YCbCrSubsampleRatio420)
	for y := range side {
		for x := range side {
			img.Y[y*img.YStride+x] = uint8((x ^ y) >> 4)
		}
	}
	for i := range img.Cb {
		img.Cb[i], img.Cr[i] = uint8(i>>10), uint8(i>>12)
	}
	var buf bytes.Buffer
	if err := jpeg.Encode(&buf, img, &jpeg.Options{Quality: 90}); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
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
