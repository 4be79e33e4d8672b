package integration

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/brandgw/brand/api"
)

// TestLongTextWithinTheMemoryLimit is issue 80, case 3's gateway half: a
// Parquet file written by DuckDB (image BLOB, caption VARCHAR,
// conversations STRUCT("from", "value")[], zstd) of 8 small image-text
// rows and one whose conversation holds a 100 MB turn, indexed with
// `brand index --tokenizer` (which faults that row unread) and served in
// place by `brand serve --memory-limit 1GiB`. Vision batches over it and
// a plain batch of every row are served, but for the batch of the long
// row, which is refused with 422 naming the sample, its field and bytes
// and --max-text-bytes; the process's peak resident memory (VmHWM) stays
// under the limit, as its chunk's load decodes none of the text.
//
// The reproduction: the gateway decoded the chunk whole whenever a job
// read one of its rows — the text, then its JSON, in a resident form
// bounded at 600 MiB — and served the long row (200, 100 MB): a peak of
// 1,111 MB under the 1 GiB limit, measured by hand (1.85 GB with other
// work beside).
func TestLongTextWithinTheMemoryLimit(t *testing.T) {
	if _, err := os.Stat("/proc/self/status"); err != nil {
		t.Skip("VmHWM is Linux's")
	}
	if testing.Short() {
		t.Skip("writes and serves a 100 MB text")
	}
	const tokenizer = "../tokenize/testdata/hf-golden-tokenizer.json"
	const rows, long = 8, 3
	node, nodeEnv := duckDB(t)
	bin := buildBrand(t)
	work := t.TempDir()
	if err := errors.Join(os.MkdirAll(filepath.Join(work, "images"), 0o755), os.MkdirAll(filepath.Join(work, "d"), 0o755)); err != nil {
		t.Fatal(err)
	}
	var manifest bytes.Buffer
	for i := range rows {
		file := filepath.Join(work, "images", fmt.Sprintf("%02d.png", i))
		if err := os.WriteFile(file, imageOf(32, 32, i), 0o644); err != nil {
			t.Fatal(err)
		}
		q := fmt.Sprintf("<image>\nWhat is in picture %d?", i)
		if i == long {
			q = "<image>\n" + strings.Repeat("the quick brown fox jumps over the lazy dog ", (100<<20)/44)
		}
		line := map[string]any{"part": 0, "row": i, "file": file, "caption": nil,
			"conversations": []map[string]string{{"from": "human", "value": q}, {"from": "gpt", "value": "A square."}}}
		b, err := json.Marshal(line)
		if err != nil {
			t.Fatal(err)
		}
		manifest.Write(append(b, '\n'))
	}
	mf := filepath.Join(work, "manifest.jsonl")
	if err := os.WriteFile(mf, manifest.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	manifest = bytes.Buffer{}
	runDuckDB(t, node, nodeEnv, "vision", mf, work, "1")
	if err := os.Remove(mf); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(work, "d")
	if out := runBrand(t, bin, os.Environ(), "index", "--src", "file://"+dir, "--tokenizer", tokenizer); !strings.Contains(out, "(1 at fault") {
		t.Fatalf("brand index --tokenizer said %q; want the long row at fault", out)
	}
	var env []string // the server's memory limit is --memory-limit's alone
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "GOMEMLIMIT=") && !strings.HasPrefix(kv, "GOGC=") {
			env = append(env, kv)
		}
	}
	const limitMB = 1024
	gw := serveProc(t, bin, env, "http://127.0.0.1:1", "--memory-limit", "1GiB", "--cache-size", "64MiB", "--copy-bytes", "64MiB",
		"--prefetch-concurrency", "0", "--on-bad-image", "skip", "--dataset", "conv=file://"+dir)
	get := func(path string) (int, []byte) {
		t.Helper()
		resp, err := http.Get(gw.url + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		return resp.StatusCode, b
	}
	for b := range 3 {
		if status, body := get(fmt.Sprintf("/epoch/0/batch/%d?seq=2048&batch_size=1&seed=1&vision=size:448x448,patch:14,image:1", b)); status != http.StatusOK {
			t.Errorf("vision batch %d: %d %.300s", b, status, body)
		}
	}
	refused := 0
	for b := range rows {
		status, body := get(fmt.Sprintf("/epoch/0/batch/%d?batch_size=1&seed=1", b))
		switch {
		case status == http.StatusOK && len(body) < 1<<20:
		case status == http.StatusUnprocessableEntity:
			refused++
			var e api.Error
			if err := json.Unmarshal(body, &e); err != nil || !strings.Contains(e.Error, fmt.Sprintf("/%d\"", long)) ||
				!strings.Contains(e.Error, "field conversations holds a text of 104857") || !strings.Contains(e.Error, "--max-text-bytes") {
				t.Errorf("batch %d: 422 %.300s; want the long row named, its field, its bytes and the bound", b, body)
			}
		default:
			t.Errorf("batch %d: %d, %d bytes %.200q; want a small sample, or 422 for the long row", b, status, len(body), body)
		}
	}
	if refused != 1 {
		t.Errorf("%d batches refused; want the long row's alone", refused)
	}
	hwm := procHWM(t, gw.cmd.Process.Pid)
	t.Logf("brand serve --memory-limit 1GiB over a 100 MB text: peak %d MB", hwm)
	if hwm >= limitMB {
		t.Errorf("brand serve --memory-limit 1GiB peaked at %d MB serving a chunk that holds a 100 MB text", hwm)
	}
}
