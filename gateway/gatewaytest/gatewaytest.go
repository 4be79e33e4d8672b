// Package gatewaytest is test support for tests that run gateways in
// process: the gateway package's tests of its HTTP contract and
// gateway/clustertest's of several gateways as one cluster share it, so
// that a fixture is written once.
//
// A test packs a Fixture (an image-classification dataset in a local
// store, with every sample's bytes), serves it with Start or, as a
// cluster, with StartCluster, and reads it over HTTP (Get, Do, ReadRank,
// ReadTar), checking what it read against the fixture (Verify,
// ExactlyOnce) and the nodes' /metrics (Metric).
package gatewaytest

import (
	"archive/tar"
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/brandgw/brand/chunkindex"
	"github.com/brandgw/brand/gateway"
	"github.com/brandgw/brand/internal/testsupport/catalogtest"
	"github.com/brandgw/brand/internal/testsupport/promtest"
	"github.com/brandgw/brand/planner"
	"github.com/brandgw/brand/s3backend"
)

// Fixture is a small dataset written as chunks into a local store, with
// the source bytes of every sample kept for comparison.
type Fixture struct {
	Dir     string
	Store   *s3backend.Local
	Index   *chunkindex.Index
	Content map[string]map[string][]byte // key -> ext -> bytes
}

// NewFixture packs samples of varying sizes (300 to 2,700 bytes),
// perChunk samples per chunk.
func NewFixture(t testing.TB, chunks, perChunk int) *Fixture {
	t.Helper()
	return NewFixtureNamed(t, t.TempDir(), "", chunks, perChunk, 0)
}

// NewFixtureNamed is NewFixture in dir (replacing what is there, the
// index last, as a packer writes it) whose keys and class files start
// with prefix, so that datasets of one test hold distinct samples, and
// whose images are about size bytes (if size is not 0).
func NewFixtureNamed(t testing.TB, dir, prefix string, chunks, perChunk, size int) *Fixture {
	t.Helper()
	counts := make([]int, chunks)
	for c := range counts {
		counts[c] = perChunk
	}
	return NewFixtureCounts(t, dir, prefix, counts, size)
}

// NewFixtureCounts is NewFixtureNamed whose chunk c holds counts[c]
// samples (catalogtest.PackClasses).
func NewFixtureCounts(t testing.TB, dir, prefix string, counts []int, size int) *Fixture {
	t.Helper()
	store, err := s3backend.NewLocal(dir)
	if err != nil {
		t.Fatal(err)
	}
	f := &Fixture{Dir: dir, Store: store}
	f.Index, f.Content = catalogtest.PackClasses(t, store, prefix, counts, size)
	return f
}

// Repack overwrites f's store with another dataset, as `brand pack
// --overwrite` would, and returns the new one (whose content to check
// against).
func (f *Fixture) Repack(t testing.TB, chunks, perChunk int) *Fixture {
	t.Helper()
	return NewFixtureNamed(t, f.Dir, "", chunks, perChunk, 0)
}

// Verify checks every sample's files against the fixture's source and
// counts each key in seen.
func (f *Fixture) Verify(t testing.TB, samples []Sample, seen map[string]int) {
	t.Helper()
	for _, s := range samples {
		seen[s.Key]++
		for ext, want := range f.Content[s.Key] {
			if !bytes.Equal(s.Files[ext], want) {
				t.Fatalf("sample %s.%s differs from its source", s.Key, ext)
			}
		}
	}
}

// ExactlyOnce fails unless seen holds n keys, each counted once.
func ExactlyOnce(t testing.TB, seen map[string]int, n int, what string) {
	t.Helper()
	if len(seen) != n {
		t.Fatalf("%s: %d distinct samples, want %d", what, len(seen), n)
	}
	for k, c := range seen {
		if c != 1 {
			t.Fatalf("%s: sample %s served %d times", what, k, c)
		}
	}
}

// Start runs a loaded gateway over store behind an httptest server:
// dataset "test", a 64 MiB cache, batch size 8, window 2, seed 42,
// before mutate (if not nil) changes the configuration.
func Start(t testing.TB, store s3backend.Store, mutate func(*gateway.Config)) (*gateway.Gateway, *httptest.Server) {
	t.Helper()
	cfg := gateway.Config{
		Datasets:  []gateway.DatasetSpec{{Name: "test", URL: "file:///fixture", Store: store}},
		CacheSize: 64 << 20,
		Defaults:  gateway.Defaults{BatchSize: 8, Window: 2, Seed: 42},
		Planner:   planner.ForGateway{},
	}
	if mutate != nil {
		mutate(&cfg)
	}
	g, err := gateway.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(g.Close)
	if err := g.Load(context.Background()); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(g)
	t.Cleanup(srv.Close)
	return g, srv
}

// Sample is one sample of a batch: its key and its members' bytes by
// extension.
type Sample struct {
	Key   string
	Files map[string][]byte
}

// ReadTar decodes a batch body into samples, grouping members by key.
func ReadTar(t testing.TB, body []byte) []Sample { return decodeTar(t, body, false) }

// ReadTarSplit is ReadTar that also starts a new sample where a key
// repeats with an extension the sample already has: a mixture's small
// component can serve one sample at the end of a pass and again at the
// start of the next, adjacent in the tar (docs/http-api.md, Mixtures),
// which ReadTar merges into one (client's TestMixtureTensorsOfOneKey
// reads such a batch).
func ReadTarSplit(t testing.TB, body []byte) []Sample { return decodeTar(t, body, true) }

func decodeTar(t testing.TB, body []byte, splitRepeats bool) []Sample {
	t.Helper()
	tr := tar.NewReader(bytes.NewReader(body))
	var out []Sample
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("batch is not a valid tar: %v", err)
		}
		data, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		key, ext := chunkindex.SplitKey(h.Name)
		if len(out) == 0 || out[len(out)-1].Key != key || splitRepeats && out[len(out)-1].Files[ext] != nil {
			out = append(out, Sample{Key: key, Files: map[string][]byte{}})
		}
		out[len(out)-1].Files[ext] = data
	}
	return out
}

// Get sends a GET with the headers hdr (name, value, ...) and returns
// the response and its body, read whole.
func Get(t testing.TB, url string, hdr ...string) (*http.Response, []byte) {
	t.Helper()
	return Do(t, http.MethodGet, url, nil, hdr...)
}

// Post sends body to url as contentType and returns the response and
// its body.
func Post(t testing.TB, url, contentType string, body []byte) (*http.Response, []byte) {
	t.Helper()
	return Do(t, http.MethodPost, url, body, "Content-Type", contentType)
}

// Do sends a request with body (nil for none) and the headers hdr (name,
// value, ...) and returns the response and its body, read whole.
func Do(t testing.TB, method, url string, body []byte, hdr ...string) (*http.Response, []byte) {
	t.Helper()
	var r io.Reader
	if body != nil {
		r = bytes.NewReader(body)
	}
	req, err := http.NewRequest(method, url, r)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, b
}

// ReadRank reads every batch of an epoch for one rank from base and
// returns the bodies.
func ReadRank(t testing.TB, base string, q string, epoch, batches int) [][]byte {
	t.Helper()
	var out [][]byte
	for m := range batches {
		resp, body := Get(t, fmt.Sprintf("%s/epoch/%d/batch/%d?%s", base, epoch, m, q))
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("epoch %d batch %d (%s) from %s: %s: %s", epoch, m, q, base, resp.Status, body)
		}
		out = append(out, body)
	}
	return out
}

// ScrapeMetrics reads base's /metrics.
func ScrapeMetrics(t testing.TB, base string) promtest.Scrape {
	t.Helper()
	resp, body := Get(t, base+"/metrics")
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("/metrics: %s", resp.Status)
	}
	s, err := promtest.Read(bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// Metric reads one series from /metrics, named as the exposition names
// it (`brand_locality_bytes_total{source="home"}`).
func Metric(t testing.TB, base, series string) float64 {
	t.Helper()
	v, ok := ScrapeMetrics(t, base)[series]
	if !ok {
		t.Fatalf("no metric %s", series)
	}
	return v
}

// MetricSum adds up every series of a metric on /metrics.
func MetricSum(t testing.TB, base, name string) float64 {
	t.Helper()
	return ScrapeMetrics(t, base).Sum(name)
}

// WaitFor polls cond until it holds or d passes.
func WaitFor(t testing.TB, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("after %s: %s", d, what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
