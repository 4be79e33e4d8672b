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

// TestChecksumRereads: a chunk that fails its CRC32C is read again before
// anything is reported; what the reads agree on decides the answer.
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
		{"two damaged reads, within the bound", 2, false, 0, http.StatusOK, 3, 2},
		{"damaged at rest fails alike every time", -1, false, 0, http.StatusBadGateway, 3, 2},
		{"damaged differently every time is transient", -1, true, 0, http.StatusServiceUnavailable, 3, 2},
		{"re-reads disabled", 1, false, -1, http.StatusBadGateway, 1, 0},
		{"a larger bound", 4, false, 5, http.StatusOK, 5, 4},
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

// damageAtRest flips a byte of chunk c on disk without changing its ETag
// (same size and mtime).
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
	b[600] ^= 0xff // inside the first sample's data
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
			f := newFixture(t, 4, 3)
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
			if h.Get("ETag") == head.Header.Get("ETag") || h.Get("ETag") == "" {
				t.Errorf("the partial batch has the full batch's ETag %s", h.Get("ETag"))
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
