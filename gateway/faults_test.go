package gateway_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/brandgw/brand/api"
	"github.com/brandgw/brand/client"
	"github.com/brandgw/brand/gateway"
	"github.com/brandgw/brand/gateway/gatewaytest"
)

// metric is gatewaytest.Metric.
func metric(t *testing.T, base, series string) float64 {
	t.Helper()
	return gatewaytest.Metric(t, base, series)
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

// wantPartialETag is the ETag docs/http-api.md gives a batch served
// without the samples at batch positions missing (ascending): one rule
// for a dataset's batch and a mixture's (internal/batch/layout's TestWithout).
func wantPartialETag(full string, missing []int) string {
	s := "brand-partial-v2|" + full
	for _, pos := range missing {
		s += "|" + strconv.Itoa(pos)
	}
	h := sha256.Sum256([]byte(s))
	return `"` + hex.EncodeToString(h[:16]) + `"`
}

// TestPartialBatches: the HTTP contract of a batch that reads a chunk
// damaged at rest (chunk 1 of dataset a). In fail mode it is a 502 whose
// body names the checksum and not where the data is stored (here with
// re-reads off, ChecksumRereads < 0: none counted); with
// --on-damaged-chunk=skip it goes out without that chunk's samples — one
// dataset's batch, one assembled in parts, a mixture's — the rest the
// sources' bytes, with Brand-Missing-Samples and Brand-Missing-Keys
// naming what it lacks in batch order, Brand-Batch-Samples and
// Content-Length what it holds, the partial ETag over the positions left
// out, and Cache-Control: no-store; a batch that lacks nothing keeps its
// full ETag. /metrics, /manifest and the Go client say the same. Which
// samples are left out, however the batch is read, is internal/batch/reader's
// TestReadBatch; the partial ETag's rule internal/batch/layout's TestWithout;
// the re-reads, and what they tell at rest from in transit, internal/
// catalog's TestLoaderRereads; each outcome's status internal/server/httperr's
// TestStatusAndPublic.
// The reproductions: a batch assembled in parts answered 502 and set no
// missing headers; a mixture's batch sent the count alone, and built its
// ETag by a rule of its own.
func TestPartialBatches(t *testing.T) {
	for _, tc := range []struct {
		name                   string
		mode                   string
		chunks, perChunk, size int
		mix                    bool  // a mixture of a and b, half each
		cache                  int64 // in largest chunks; 0: 64 MiB
		batch, batches         int
	}{
		{"fail", gateway.OnDamagedFail, 4, 3, 70000, false, 0, 12, 1},
		{"skip", gateway.OnDamagedSkip, 4, 3, 70000, false, 0, 12, 1},
		{"skip, assembled in parts", gateway.OnDamagedSkip, 8, 4, 40000, false, 3, 32, 1},
		{"skip, a mixture", gateway.OnDamagedSkip, 4, 3, 70000, true, 0, 6, 4},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sets := map[string]*fixture{}
			var specs []gateway.DatasetSpec
			var largest int64
			for _, name := range []string{"a", "b"}[:1+boolN(tc.mix)] {
				f := newFixtureNamed(t, t.TempDir(), name+"-", tc.chunks, tc.perChunk, tc.size)
				sets[name] = f
				specs = append(specs, gateway.DatasetSpec{Name: name, URL: "file:///" + name, Store: f.store})
				for c := range tc.chunks {
					largest = max(largest, f.index.Chunk(c).Size)
				}
			}
			_, srv := start(t, nil, func(c *gateway.Config) {
				c.Datasets = specs
				c.Defaults = gateway.Defaults{BatchSize: tc.batch, Window: tc.chunks, Seed: 5}
				c.OnDamagedChunk = tc.mode
				c.PrefetchConcurrency = -1
				if tc.mode == gateway.OnDamagedFail {
					c.ChecksumRereads = -1
				}
				if tc.cache > 0 {
					c.CacheSize = tc.cache * largest
				}
			})
			q := ""
			if tc.mix {
				q = "?mix=a:0.5,b:0.5"
			}
			batch := func(m int, manifest string) string {
				return fmt.Sprintf("%s/epoch/0/batch/%d%s%s", srv.URL, m, manifest, q)
			}
			fulls := make([]api.Manifest, tc.batches) // before the damage
			for m := range fulls {
				fulls[m] = manifestOf(t, batch(m, "/manifest"))
			}
			damageAtRest(t, sets["a"], 1)
			ix := sets["a"].index
			lo, n := ix.ChunkRange(1)
			var damaged []string
			for id := lo; id < lo+n; id++ {
				damaged = append(damaged, ix.SampleKey(id)) // keys carry their dataset's prefix
			}
			missingTotal := 0
			for m, full := range fulls {
				resp, body := get(t, batch(m, ""))
				if tc.mode == gateway.OnDamagedFail {
					// It names the dataset, the chunk by its key and the
					// cause (issue 53), never the store's directory.
					if b := string(body); resp.StatusCode != http.StatusBadGateway || !strings.Contains(b, "checksum") ||
						!strings.Contains(b, "chunk "+ix.Chunk(1).Key+" of dataset a") || strings.Contains(b, sets["a"].dir) {
						t.Fatalf("batch %d: %s (%s), want a 502 naming the dataset, the chunk and the checksum failure, not the store", m, resp.Status, body)
					}
					if got := metric(t, srv.URL, "brand_chunk_rereads_total"); got != 0 {
						t.Errorf("brand_chunk_rereads_total = %v with re-reads off", got)
					}
					return
				}
				if resp.StatusCode != http.StatusOK {
					t.Fatalf("batch %d: %s: %s", m, resp.Status, body)
				}
				var missing []int
				var keys []string
				for i, s := range full.Samples {
					if slices.Contains(damaged, s.Key) {
						missing, keys = append(missing, i), append(keys, s.Key)
					}
				}
				missingTotal += len(missing)
				samples := readTar(t, body)
				for _, s := range samples {
					if slices.Contains(damaged, s.key) {
						t.Fatalf("batch %d served %s of the damaged chunk", m, s.key)
					}
					if !bytes.Equal(s.files["jpg"], sets[s.key[:1]].content[s.key]["jpg"]) {
						t.Fatalf("batch %d: %s differs from its source", m, s.key)
					}
				}
				h := resp.Header
				if len(samples)+len(missing) != len(full.Samples) || h.Get(api.HeaderBatchSamples) != strconv.Itoa(len(samples)) ||
					h.Get("Content-Length") != strconv.Itoa(len(body)) {
					t.Errorf("batch %d: %d samples (%s says %s, Content-Length %s of %d bytes), %d missing, of %d",
						m, len(samples), api.HeaderBatchSamples, h.Get(api.HeaderBatchSamples), h.Get("Content-Length"), len(body), len(missing), len(full.Samples))
				}
				if tc.mix && len(strings.Split(h.Get(api.HeaderMixComponents), ",")) != len(samples) {
					t.Errorf("batch %d: %s %q for %d samples", m, api.HeaderMixComponents, h.Get(api.HeaderMixComponents), len(samples))
				}
				if len(missing) == 0 {
					if h.Get(api.HeaderMissingKeys) != "" || h.Get("ETag") != full.ETag {
						t.Errorf("batch %d lacks nothing but says %q, ETag %s (full %s)", m, h.Get(api.HeaderMissingKeys), h.Get("ETag"), full.ETag)
					}
					continue
				}
				if got := h.Get(api.HeaderMissingSamples); got != strconv.Itoa(len(missing)) {
					t.Errorf("batch %d: %s = %q, want %d", m, api.HeaderMissingSamples, got, len(missing))
				}
				if got := h.Get(api.HeaderMissingKeys); got != strings.Join(keys, ",") {
					t.Errorf("batch %d: %s = %q, want %q", m, api.HeaderMissingKeys, got, strings.Join(keys, ","))
				}
				if got, want := h.Get("ETag"), wantPartialETag(full.ETag, missing); got != want {
					t.Errorf("batch %d: partial ETag %s, want %s (the full batch's %s without positions %v)", m, got, want, full.ETag, missing)
				}
				if h.Get("Cache-Control") != "no-store" {
					t.Errorf("batch %d: Cache-Control %q on a partial batch", m, h.Get("Cache-Control"))
				}
			}
			if missingTotal != n {
				t.Fatalf("%d samples named missing, want the damaged chunk's %d", missingTotal, n)
			}
			if got := metric(t, srv.URL, "brand_skipped_samples_total"); got != float64(n) {
				t.Errorf("brand_skipped_samples_total = %v, want %d", got, n)
			}
			if got := metric(t, srv.URL, "brand_batches_assembled_in_parts_total"); (got > 0) != (tc.cache > 0) {
				t.Errorf("brand_batches_assembled_in_parts_total = %v with a cache of %d chunks", got, tc.cache)
			}
			if tc.mix {
				return
			}
			c, err := client.New(srv.URL, client.Options{})
			if err != nil {
				t.Fatal(err)
			}
			cb, err := c.Batch(context.Background(), 0, 0)
			if err != nil {
				t.Fatalf("the Go client on a partial batch: %v", err)
			}
			if cb.Missing != n || len(cb.Samples) != len(fulls[0].Samples)-n {
				t.Errorf("the Go client sees %d missing, %d samples; want %d, %d", cb.Missing, len(cb.Samples), n, len(fulls[0].Samples)-n)
			}
			man := manifestOf(t, batch(0, "/manifest"))
			slices.Sort(man.Missing)
			slices.Sort(damaged)
			if !slices.Equal(man.Missing, damaged) {
				t.Errorf("manifest's missing = %v, want %v", man.Missing, damaged)
			}
		})
	}
}

func boolN(b bool) int {
	if b {
		return 1
	}
	return 0
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
