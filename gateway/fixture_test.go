package gateway_test

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/brandgw/brand/chunkindex"
	"github.com/brandgw/brand/gateway"
	"github.com/brandgw/brand/gateway/gatewaytest"
	"github.com/brandgw/brand/internal/testsupport/catalogtest"
	"github.com/brandgw/brand/s3backend"
)

// fixture is a gatewaytest.Fixture under the names this package's tests
// use: a small dataset written as chunks into a local store, with the
// source bytes of every sample kept for comparison.
type fixture struct {
	dir     string
	store   *s3backend.Local
	index   *chunkindex.Index
	content map[string]map[string][]byte // key -> ext -> bytes
}

func fixtureOf(f *gatewaytest.Fixture) *fixture {
	return &fixture{dir: f.Dir, store: f.Store, index: f.Index, content: f.Content}
}

// shared is f as a gatewaytest.Fixture.
func (f *fixture) shared() *gatewaytest.Fixture {
	return &gatewaytest.Fixture{Dir: f.dir, Store: f.store, Index: f.index, Content: f.content}
}

// newFixture is gatewaytest.NewFixture.
func newFixture(t testing.TB, chunks, perChunk int) *fixture {
	t.Helper()
	return fixtureOf(gatewaytest.NewFixture(t, chunks, perChunk))
}

// newFixtureNamed is gatewaytest.NewFixtureNamed.
func newFixtureNamed(t testing.TB, dir, prefix string, chunks, perChunk, size int) *fixture {
	t.Helper()
	return fixtureOf(gatewaytest.NewFixtureNamed(t, dir, prefix, chunks, perChunk, size))
}

// newFixtureCounts is gatewaytest.NewFixtureCounts.
func newFixtureCounts(t testing.TB, dir, prefix string, counts []int, size int) *fixture {
	t.Helper()
	return fixtureOf(gatewaytest.NewFixtureCounts(t, dir, prefix, counts, size))
}

// sampleFile is one member of a test sample: its extension and bytes.
type sampleFile struct {
	ext  string
	data []byte
}

// packSamples writes chunks chunks of perChunk samples each to store,
// sample id (in chunk c) being sample(id, c)'s key and members, in tar
// order, and the index over them; it returns the index.
func packSamples(t testing.TB, store *s3backend.Local, chunks, perChunk int, sample func(id, c int) (string, []sampleFile)) *chunkindex.Index {
	t.Helper()
	counts := make([]int, chunks)
	for c := range counts {
		counts[c] = perChunk
	}
	return packChunks(t, store, counts, sample)
}

// packChunks is packSamples whose chunk c holds counts[c] samples
// (catalogtest.Pack).
func packChunks(t testing.TB, store *s3backend.Local, counts []int, sample func(id, c int) (string, []sampleFile)) *chunkindex.Index {
	t.Helper()
	return catalogtest.Pack(t, store, counts, func(id, c int) (string, []catalogtest.File) {
		key, files := sample(id, c)
		out := make([]catalogtest.File, len(files))
		for i, f := range files {
			out[i] = catalogtest.File{Ext: f.ext, Data: f.data}
		}
		return key, out
	})
}

// start is gatewaytest.Start.
func start(t testing.TB, store s3backend.Store, mutate func(*gateway.Config)) (*gateway.Gateway, *httptest.Server) {
	t.Helper()
	return gatewaytest.Start(t, store, mutate)
}

// sample is a gatewaytest.Sample: a batch's sample, its members by
// extension.
type sample struct {
	key   string
	files map[string][]byte
}

// readTar is gatewaytest.ReadTar.
func readTar(t testing.TB, body []byte) []sample { return samplesOf(gatewaytest.ReadTar(t, body)) }

// readTarSplit is gatewaytest.ReadTarSplit.
func readTarSplit(t testing.TB, body []byte) []sample {
	return samplesOf(gatewaytest.ReadTarSplit(t, body))
}

func samplesOf(ss []gatewaytest.Sample) []sample {
	out := make([]sample, len(ss))
	for i, s := range ss {
		out[i] = sample{key: s.Key, files: s.Files}
	}
	return out
}

// get is gatewaytest.Get.
func get(t testing.TB, url string, hdr ...string) (*http.Response, []byte) {
	t.Helper()
	return gatewaytest.Get(t, url, hdr...)
}

// do is gatewaytest.Do.
func do(t testing.TB, method, url string, body []byte, hdr ...string) (*http.Response, []byte) {
	t.Helper()
	return gatewaytest.Do(t, method, url, body, hdr...)
}

// verify is gatewaytest.Fixture.Verify.
func (f *fixture) verify(t testing.TB, samples []sample, seen map[string]int) {
	t.Helper()
	ss := make([]gatewaytest.Sample, len(samples))
	for i, s := range samples {
		ss[i] = gatewaytest.Sample{Key: s.key, Files: s.files}
	}
	f.shared().Verify(t, ss, seen)
}

// exactlyOnce is gatewaytest.ExactlyOnce.
func exactlyOnce(t testing.TB, seen map[string]int, n int, what string) {
	t.Helper()
	gatewaytest.ExactlyOnce(t, seen, n, what)
}
