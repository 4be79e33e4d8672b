package gateway_test

import (
	"archive/tar"
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/brandgw/brand/chunkindex"
	"github.com/brandgw/brand/gateway"
	"github.com/brandgw/brand/internal/testsupport/catalogtest"
	"github.com/brandgw/brand/planner"
	"github.com/brandgw/brand/s3backend"
)

// fixture is a small dataset written as chunks into a local store, with
// the source bytes of every sample kept for comparison.
type fixture struct {
	dir     string
	store   *s3backend.Local
	index   *chunkindex.Index
	content map[string]map[string][]byte // key -> ext -> bytes
}

// newFixture packs samples of varying sizes (300 to 2,700 bytes),
// perChunk samples per chunk.
func newFixture(t testing.TB, chunks, perChunk int) *fixture {
	t.Helper()
	return newFixtureNamed(t, t.TempDir(), "", chunks, perChunk, 0)
}

// newFixtureNamed is newFixture in dir (replacing what is there, the
// index last, as a packer writes it) whose keys and class files start
// with prefix, so that datasets of one test hold distinct samples, and
// whose images are about size bytes (if size is not 0).
func newFixtureNamed(t testing.TB, dir, prefix string, chunks, perChunk, size int) *fixture {
	t.Helper()
	counts := make([]int, chunks)
	for c := range counts {
		counts[c] = perChunk
	}
	return newFixtureCounts(t, dir, prefix, counts, size)
}

// newFixtureCounts is newFixtureNamed whose chunk c holds counts[c]
// samples (catalogtest.PackClasses).
func newFixtureCounts(t testing.TB, dir, prefix string, counts []int, size int) *fixture {
	t.Helper()
	store, err := s3backend.NewLocal(dir)
	if err != nil {
		t.Fatal(err)
	}
	f := &fixture{dir: dir, store: store}
	f.index, f.content = catalogtest.PackClasses(t, store, prefix, counts, size)
	return f
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

// start runs a loaded gateway over store behind an httptest server.
func start(t testing.TB, store s3backend.Store, mutate func(*gateway.Config)) (*gateway.Gateway, *httptest.Server) {
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

type sample struct {
	key   string
	files map[string][]byte
}

// readTar decodes a batch body into samples, grouping members by key.
func readTar(t testing.TB, body []byte) []sample { return decodeTar(t, body, false) }

// readTarSplit is readTar that also starts a new sample where a key
// repeats with an extension the sample already has: a mixture's small
// component can serve one sample at the end of a pass and again at the
// start of the next, adjacent in the tar (docs/http-api.md, Mixtures),
// which readTar merges into one (client's TestMixtureTensorsOfOneKey
// reads such a batch).
func readTarSplit(t testing.TB, body []byte) []sample { return decodeTar(t, body, true) }

func decodeTar(t testing.TB, body []byte, splitRepeats bool) []sample {
	t.Helper()
	tr := tar.NewReader(bytes.NewReader(body))
	var out []sample
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
		if len(out) == 0 || out[len(out)-1].key != key || splitRepeats && out[len(out)-1].files[ext] != nil {
			out = append(out, sample{key: key, files: map[string][]byte{}})
		}
		out[len(out)-1].files[ext] = data
	}
	return out
}

func get(t testing.TB, url string, hdr ...string) (*http.Response, []byte) {
	t.Helper()
	return do(t, http.MethodGet, url, nil, hdr...)
}

// do sends a request with body (nil for none) and the headers hdr (name,
// value, ...) and returns the response and its body, read whole.
func do(t testing.TB, method, url string, body []byte, hdr ...string) (*http.Response, []byte) {
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

// verify checks every sample's files against the fixture's source and
// counts each key in seen.
func (f *fixture) verify(t testing.TB, samples []sample, seen map[string]int) {
	t.Helper()
	for _, s := range samples {
		seen[s.key]++
		for ext, want := range f.content[s.key] {
			if !bytes.Equal(s.files[ext], want) {
				t.Fatalf("sample %s.%s differs from its source", s.key, ext)
			}
		}
	}
}

// exactlyOnce fails unless seen holds n keys, each counted once.
func exactlyOnce(t testing.TB, seen map[string]int, n int, what string) {
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
