package integration

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/brandgw/brand/api"
	"github.com/brandgw/brand/format/hostiletest"
)

// TestBombsBounded is the second defect through `brand index`
// and `brand serve`: a 66 KB Parquet file whose ZSTD page states 1.6 MB,
// in a frame with no content size that inflates to 2 GiB, took a node
// under --memory-limit 1GiB to 6 GB on its first batch, and `brand index
// --tokens` of the same bomb in a token column to 7.7 GB before refusing
// it. Now indexing the token bomb is refused with the process's peak
// resident memory (its rusage) under 256 MB, and a gateway under
// --memory-limit 1GiB serving a dataset of each of hostiletest's bombs —
// every codec arrow-go, klauspost/compress and pierrec/lz4 read, ZSTD
// with and without a content size, and MDS shards of ZSTD (2 GiB), gzip
// and bzip2 — answers each batch with a 502 naming the chunk, its peak
// resident memory (VmHWM) under 512 MB through them all.
func TestBombsBounded(t *testing.T) {
	if _, err := os.Stat("/proc/self/status"); err != nil {
		t.Skip("VmHWM is Linux's")
	}
	bin := buildBrand(t)
	env := os.Environ()
	work := t.TempDir()
	write := func(dir string, objs map[string][]byte) string {
		for k, b := range objs {
			p := filepath.Join(work, dir, k)
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(p, b, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		return filepath.Join(work, dir)
	}

	// Index time: the token column's bomb.
	tokens := write("tokens", map[string][]byte{"data/t.parquet": hostiletest.ParquetBomb(hostiletest.Tokens, hostiletest.ZSTDNoSize, 1_600_000, 2<<30)})
	cmd := exec.Command(bin, "index", "--src", "file://"+tokens, "--tokens", "input_ids")
	cmd.Env = env
	out, err := runBounded(cmd, 3*time.Minute)
	if err == nil || !strings.Contains(string(out), "does not decompress") {
		t.Fatalf("brand index --tokens of a bomb: %v\n%s", err, out)
	}
	peak := cmd.ProcessState.SysUsage().(*syscall.Rusage).Maxrss >> 10 // kB → MB
	t.Logf("brand index --tokens of a %d-byte bomb: refused, peak %d MB", len(hostiletest.ParquetBomb(hostiletest.Tokens, hostiletest.ZSTDNoSize, 1_600_000, 2<<30)), peak)
	if peak > 256 {
		t.Errorf("brand index --tokens of a bomb peaked at %d MB", peak)
	}

	// Serve time: a dataset of each bomb, beside a page of its codec that
	// is not one, so that the dataset indexes as any other.
	corpus := hostiletest.ParquetBombs()
	var datasets, names []string
	for _, c := range hostiletest.ParquetCodecs {
		name := "pq-" + c
		dir := write(name, map[string][]byte{
			"data/a.parquet": hostiletest.Parquet(hostiletest.Honest(hostiletest.Image, c, 100)),
			"data/b.parquet": corpus[c+"-bomb"],
		})
		datasets, names = append(datasets, "--dataset", name+"=file://"+dir), append(names, name)
	}
	for _, c := range []string{hostiletest.ZSTD, hostiletest.ZSTDNoSize, hostiletest.Gzip, hostiletest.BZ2} {
		name := "mds-" + c
		shards := []hostiletest.MDSShard{{Codec: c, Samples: 40, Hostile: "bomb"}}
		if c != hostiletest.BZ2 { // no honest bzip2 shard (Go has no writer)
			shards = append([]hostiletest.MDSShard{{Codec: c, Samples: 40}}, shards...)
		}
		dir := write(name, hostiletest.MDS(shards...))
		datasets, names = append(datasets, "--dataset", name+"=file://"+dir), append(names, name)
	}
	for i := 1; i < len(datasets); i += 2 {
		dir := strings.TrimPrefix(datasets[i][strings.IndexByte(datasets[i], '=')+1:], "file://")
		runBrand(t, bin, env, "index", "--src", "file://"+dir)
	}
	gw := serveProc(t, bin, env, "http://127.0.0.1:1", append([]string{"--memory-limit", "1GiB", "--cache-size", "64MiB",
		"--prefetch-concurrency", "0"}, datasets...)...)
	for _, name := range names {
		resp, err := http.Get(fmt.Sprintf("%s/epoch/0/batch/0?dataset=%s&batch_size=200&seed=1", gw.url, name))
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		var e api.Error
		if json.Unmarshal(body, &e) != nil || resp.StatusCode != http.StatusBadGateway || !strings.Contains(e.Error, "damaged at rest") ||
			!strings.Contains(e.Error, "dataset "+name) {
			t.Errorf("%s: %s %.300s; want a 502 naming the damaged chunk", name, resp.Status, body)
		}
	}
	hwm := procHWM(t, gw.cmd.Process.Pid)
	t.Logf("brand serve --memory-limit 1GiB through %d bombs: peak %d MB", len(names), hwm)
	if hwm > 512 {
		t.Errorf("brand serve --memory-limit 1GiB peaked at %d MB through %v", hwm, names)
	}
}

// procHWM is a running process's peak resident memory in MB (VmHWM).
func procHWM(t *testing.T, pid int) int64 {
	t.Helper()
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "VmHWM:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return kb >> 10
		}
	}
	t.Fatalf("no VmHWM for process %d", pid)
	return 0
}
