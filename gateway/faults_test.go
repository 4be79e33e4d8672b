package gateway_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/brandgw/brand/api"
	"github.com/brandgw/brand/client"
	"github.com/brandgw/brand/cluster"
	"github.com/brandgw/brand/gateway"
	"github.com/brandgw/brand/s3backend"
)

// flipStore damages reads of one chunk the way a bad link would: the first
// flips reads each have one byte flipped; with moving set, a different
// byte each time, so that no two reads fail alike.
type flipStore struct {
	s3backend.Store
	key    string
	at     int64 // offset of the byte flipped
	moving bool

	mu    sync.Mutex
	flips int // reads still to damage; -1: all
	reads int
}

func (f *flipStore) ReadRange(ctx context.Context, key, etag string, off int64, p []byte) error {
	if err := f.Store.ReadRange(ctx, key, etag, off, p); err != nil || key != f.key {
		return err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.reads++
	if f.flips == 0 {
		return nil
	}
	if f.flips > 0 {
		f.flips--
	}
	at := f.at - off
	if f.moving {
		at += int64(f.reads)
	}
	if at >= 0 && at < int64(len(p)) {
		p[at] ^= 0x20
	}
	return nil
}

// metric reads one unlabelled counter from /metrics.
func metric(t *testing.T, base, name string) float64 {
	t.Helper()
	resp, err := http.Get(base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), name+" "); ok {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				t.Fatal(err)
			}
			return f
		}
	}
	t.Fatalf("no metric %s", name)
	return 0
}

// TestChecksumRereads: the status each outcome of the loader's re-reads
// answers (package catalog's TestLoaderRereads tests the re-reads
// themselves), with ChecksumRereads' default (2) and negative (none).
func TestChecksumRereads(t *testing.T) {
	tests := []struct {
		name        string
		flips       int // damaged reads; -1: every one
		moving      bool
		rereads     int // Config.ChecksumRereads
		wantStatus  int
		wantReads   int
		wantRereads float64
	}{
		{"one damaged read is re-read", 1, false, 0, http.StatusOK, 2, 1},
		{"damaged at rest fails alike every time", -1, false, 0, http.StatusBadGateway, 3, 2},
		{"damaged differently every time is transient", -1, true, 0, http.StatusServiceUnavailable, 3, 2},
		{"re-reads disabled", 1, false, -1, http.StatusBadGateway, 1, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, 2, 3)
			fs := &flipStore{Store: f.store, key: f.index.Chunk(0).Key, at: 600, moving: tc.moving, flips: tc.flips}
			_, srv := start(t, fs, func(c *gateway.Config) {
				c.Defaults.Window, c.Defaults.BatchSize = 2, 6
				c.ChecksumRereads = tc.rereads
				c.PrefetchConcurrency = -1
			})
			resp, body := get(t, srv.URL+"/epoch/0/batch/0")
			if resp.StatusCode != tc.wantStatus {
				t.Fatalf("status %d (%s), want %d", resp.StatusCode, body, tc.wantStatus)
			}
			if tc.wantStatus == http.StatusServiceUnavailable && resp.Header.Get("Retry-After") == "" {
				t.Error("a 503 without Retry-After")
			}
			if tc.wantStatus == http.StatusOK {
				for _, s := range readTar(t, body) {
					if !bytes.Equal(s.files["jpg"], f.content[s.key]["jpg"]) {
						t.Fatalf("sample %s served with damaged bytes", s.key)
					}
				}
			}
			fs.mu.Lock()
			reads := fs.reads
			fs.mu.Unlock()
			if reads != tc.wantReads {
				t.Errorf("chunk read %d times, want %d", reads, tc.wantReads)
			}
			if got := metric(t, srv.URL, "brand_chunk_rereads_total"); got != tc.wantRereads {
				t.Errorf("brand_chunk_rereads_total = %v, want %v", got, tc.wantRereads)
			}
		})
	}
}

// damageAtRest flips a byte of chunk c on disk without changing its ETag:
// same size, the byte in the middle of a chunk larger than the two 64 KiB
// blocks a local ETag hashes (the fixture's samples must make it so).
func damageAtRest(t *testing.T, f *fixture, c int) {
	t.Helper()
	path := filepath.Join(f.dir, "chunks", fmt.Sprintf("%06d.tar", c))
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(b) <= 2<<16 {
		t.Fatalf("chunk %d is %d bytes: too small to damage without changing its ETag", c, len(b))
	}
	b[len(b)/2] ^= 0xff // inside a sample's data
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(path, st.ModTime(), st.ModTime()); err != nil {
		t.Fatal(err)
	}
}

// TestSkipDamagedChunk: with OnDamagedChunk "skip" a batch goes out without
// the samples of a chunk damaged at rest, says which, and is never taken
// for the full batch.
func TestSkipDamagedChunk(t *testing.T) {
	tests := []struct {
		mode       string
		wantStatus int
	}{
		{gateway.OnDamagedFail, http.StatusBadGateway},
		{gateway.OnDamagedSkip, http.StatusOK},
	}
	for _, tc := range tests {
		t.Run(tc.mode, func(t *testing.T) {
			f := newFixtureSized(t, 4, 3, 70000)
			_, srv := start(t, f.store, func(c *gateway.Config) {
				c.Defaults.Window, c.Defaults.BatchSize = 4, 12 // one batch: the whole epoch
				c.OnDamagedChunk = tc.mode
				c.PrefetchConcurrency = -1
			})
			url := srv.URL + "/epoch/0/batch/0"
			head, err := http.Head(url)
			if err != nil {
				t.Fatal(err)
			}
			head.Body.Close()
			damageAtRest(t, f, 1)
			resp, body := get(t, url)
			if resp.StatusCode != tc.wantStatus {
				t.Fatalf("status %d (%s), want %d", resp.StatusCode, body, tc.wantStatus)
			}
			if tc.mode == gateway.OnDamagedFail {
				return
			}
			lo, n := f.index.ChunkRange(1)
			var damaged []string
			for id := lo; id < lo+n; id++ {
				damaged = append(damaged, f.index.SampleKey(id))
			}
			samples := readTar(t, body)
			if len(samples) != 12-n {
				t.Fatalf("%d samples served, want %d", len(samples), 12-n)
			}
			for _, s := range samples {
				if !bytes.Equal(s.files["jpg"], f.content[s.key]["jpg"]) {
					t.Fatalf("sample %s has wrong bytes", s.key)
				}
				for _, d := range damaged {
					if s.key == d {
						t.Fatalf("sample %s of the damaged chunk was served", d)
					}
				}
			}
			h := resp.Header
			if got := h.Get(api.HeaderBatchSamples); got != strconv.Itoa(len(samples)) {
				t.Errorf("%s = %s, %d served", api.HeaderBatchSamples, got, len(samples))
			}
			if got := h.Get("Content-Length"); got != strconv.Itoa(len(body)) {
				t.Errorf("Content-Length %s, body %d bytes", got, len(body))
			}
			if got := h.Get(api.HeaderMissingSamples); got != strconv.Itoa(n) {
				t.Errorf("%s = %q, want %d", api.HeaderMissingSamples, got, n)
			}
			for _, d := range damaged {
				if !strings.Contains(h.Get(api.HeaderMissingKeys), d) {
					t.Errorf("%s = %q does not name %s", api.HeaderMissingKeys, h.Get(api.HeaderMissingKeys), d)
				}
			}
			var missing []int // the batch positions of the damaged chunk's samples
			man := manifestOf(t, srv.URL+"/epoch/0/batch/0/manifest")
			for i, s := range man.Samples {
				if slices.Contains(damaged, s.Key) {
					missing = append(missing, i)
				}
			}
			if got, want := h.Get("ETag"), wantPartialETag(head.Header.Get("ETag"), missing); got != want {
				t.Errorf("the partial batch's ETag is %s, want %s (the full batch's %s without positions %v)", got, want, head.Header.Get("ETag"), missing)
			}
			if h.Get("Cache-Control") != "no-store" {
				t.Errorf("Cache-Control %q on a partial batch", h.Get("Cache-Control"))
			}
			if got := metric(t, srv.URL, "brand_skipped_samples_total"); got != float64(n) {
				t.Errorf("brand_skipped_samples_total = %v, want %d", got, n)
			}
			c, err := client.New(srv.URL, client.Options{})
			if err != nil {
				t.Fatal(err)
			}
			cb, err := c.Batch(context.Background(), 0, 0)
			if err != nil {
				t.Fatalf("the Go client on a partial batch: %v", err)
			}
			if cb.Missing != n || len(cb.Samples) != len(samples) {
				t.Errorf("the Go client sees %d missing, %d samples; want %d, %d", cb.Missing, len(cb.Samples), n, len(samples))
			}
			_, mb := get(t, url+"/manifest")
			var m api.Manifest
			if err := json.Unmarshal(mb, &m); err != nil {
				t.Fatal(err)
			}
			slices.Sort(m.Missing)
			if !slices.Equal(m.Missing, damaged) {
				t.Errorf("manifest's missing = %v, want %v", m.Missing, damaged)
			}
		})
	}
}

// TestSkipDamagedChunkInParts: skip mode holds for batches assembled in
// parts. The reproduction: with a cache of three chunks, a batch of eight
// answered 502 for a chunk damaged at rest, and its missing-sample headers
// were never set.
func TestSkipDamagedChunkInParts(t *testing.T) {
	f := newFixtureSized(t, 8, 4, 40000)
	var largest int64
	for c := range 8 {
		largest = max(largest, f.index.Chunk(c).Size)
	}
	_, srv := start(t, f.store, func(c *gateway.Config) {
		c.CacheSize = 3 * largest
		c.Defaults.Window, c.Defaults.BatchSize = 8, 32 // one batch: the whole epoch
		c.OnDamagedChunk = gateway.OnDamagedSkip
		c.PrefetchConcurrency = -1
	})
	damageAtRest(t, f, 1)
	resp, body := get(t, srv.URL+"/epoch/0/batch/0")
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("%s: %s", resp.Status, body)
	}
	checkPartial(t, f, resp, body, 1)
	if m := scrape(t, srv.URL); !strings.Contains(m, "\nbrand_batches_assembled_in_parts_total 1\n") {
		t.Errorf("the batch was not assembled in parts:\n%s", grepLines(m, "assembled"))
	}
}

// checkPartial checks a batch served without the samples of damaged chunk
// c: the others byte-correct, the damaged one's named in the headers.
func checkPartial(t *testing.T, f *fixture, resp *http.Response, body []byte, c int) {
	t.Helper()
	lo, n := f.index.ChunkRange(c)
	damaged := map[string]bool{}
	for id := lo; id < lo+n; id++ {
		damaged[f.index.SampleKey(id)] = true
	}
	samples := readTar(t, body)
	for _, s := range samples {
		if damaged[s.key] {
			t.Fatalf("sample %s of the damaged chunk was served", s.key)
		}
		if !bytes.Equal(s.files["jpg"], f.content[s.key]["jpg"]) {
			t.Fatalf("sample %s has wrong bytes", s.key)
		}
	}
	h := resp.Header
	if got := h.Get(api.HeaderMissingSamples); got != strconv.Itoa(n) {
		t.Errorf("%s = %q, want %d", api.HeaderMissingSamples, got, n)
	}
	for d := range damaged {
		if !strings.Contains(h.Get(api.HeaderMissingKeys), d) {
			t.Errorf("%s = %q does not name %s", api.HeaderMissingKeys, h.Get(api.HeaderMissingKeys), d)
		}
	}
	if got := h.Get(api.HeaderBatchSamples); got != strconv.Itoa(len(samples)) {
		t.Errorf("%s = %s, %d served", api.HeaderBatchSamples, got, len(samples))
	}
}

// TestSkipDamagedChunkOnACluster: on a cluster, the owner of a chunk
// damaged at rest answers its peers without that chunk's samples, and
// they serve their batches without them (skip mode) or fail them (fail
// mode); either way the owner is not taken for down. The reproduction: a
// node asking the owner got a 502, held the owner down and read its chunks
// itself.
func TestSkipDamagedChunkOnACluster(t *testing.T) {
	for _, mode := range []string{gateway.OnDamagedSkip, gateway.OnDamagedFail} {
		t.Run(mode, func(t *testing.T) {
			f := newFixtureSized(t, 32, 16, 10000)
			cl := startCluster(t, f, 3, nil, func(c *gateway.Config) { c.OnDamagedChunk = mode })
			const bad = 5
			damageAtRest(t, f, bad)
			lo, n := f.index.ChunkRange(bad)
			seen := map[string]int{}
			missing, failed := 0, 0
			for r := range 3 {
				q := fmt.Sprintf("seed=1&window=4&batch_size=16&world=3&rank=%d", r)
				for m := range (512 + 47) / 48 {
					resp, body := get(t, fmt.Sprintf("%s/epoch/0/batch/%d?%s", cl[cluster.Home(r, 3, 3)].srv.URL, m, q))
					if resp.StatusCode == http.StatusBadGateway && mode == gateway.OnDamagedFail {
						failed++
						continue
					}
					if resp.StatusCode != http.StatusOK {
						t.Fatalf("rank %d batch %d: %s: %s", r, m, resp.Status, body)
					}
					k, _ := strconv.Atoi(resp.Header.Get(api.HeaderMissingSamples))
					missing += k
					f.verify(t, readTar(t, body), seen)
				}
			}
			for id := lo; id < lo+n; id++ {
				if seen[f.index.SampleKey(id)] != 0 {
					t.Fatalf("a sample of the damaged chunk was served")
				}
			}
			switch mode {
			case gateway.OnDamagedSkip:
				if missing != n || len(seen) != 512-n {
					t.Errorf("%d samples named missing, %d served; want %d and %d", missing, len(seen), n, 512-n)
				}
			case gateway.OnDamagedFail:
				if failed == 0 || missing != 0 {
					t.Errorf("%d batches failed, %d samples missing; want failures and none missing", failed, missing)
				}
			}
			for k, node := range cl {
				if up := metricSum(t, node.srv.URL, "brand_peer_up"); up != 3 {
					t.Errorf("node %d sees %v nodes up after a damaged chunk, want 3", k, up)
				}
				if down := metricSum(t, node.srv.URL, `brand_peer_fetch_failures_total{kind="down"`); down != 0 {
					t.Errorf("node %d counts %v fetches failed for a down peer", k, down)
				}
			}
		})
	}
}

// manifestOf reads a batch's manifest.
func manifestOf(t *testing.T, url string) api.Manifest {
	t.Helper()
	resp, body := get(t, url)
	var m api.Manifest
	if err := json.Unmarshal(body, &m); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("%s: %d %v %s", url, resp.StatusCode, err, body)
	}
	return m
}
