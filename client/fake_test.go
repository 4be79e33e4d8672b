package client_test

import (
	"archive/tar"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"hash/crc32"
	"maps"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/brandgw/brand/api"
	"github.com/brandgw/brand/cluster"
	"github.com/brandgw/brand/shuffle"
)

// fakeGateway implements the Brand HTTP API over small in-memory datasets.
// It is real where the client can tell: batches are tar streams built from
// per-sample tar byte ranges, the shuffle is seeded and windowed, every job
// parameter changes the answer, unknown parameters are rejected, and errors
// are the gateway's JSON with its status codes. Tests inject faults with a
// hook that runs before the real handler.
type fakeGateway struct {
	URL string

	srv         *httptest.Server
	mux         *http.ServeMux
	datasets    map[string]*fakeDataset
	defaultName string
	defaults    fakeParams

	mu      sync.Mutex
	hook    func(w http.ResponseWriter, r *http.Request) bool // true: handled
	log     []string                                          // RequestURI of each request
	cluster *api.Cluster                                      // nil: a gateway from before clusters (404)
}

// fakeParams are the job parameters of one request.
type fakeParams struct {
	seed                     uint64
	batchSize, window, world int
	rank                     int
	dropLast                 bool
	offset                   int
}

type fakeDataset struct {
	name    string
	index   string  // content identity, like chunkindex.Index.ID
	chunks  [][]int // global sample IDs of each chunk
	samples []fakeSample
	bytes   int64
}

type fakeSample struct {
	key     string
	members []fakeMember
	tar     []byte // the sample's byte range within its chunk
	chunk   int
	offset  int64
}

type fakeMember struct {
	ext  string
	data []byte
}

// newFakeDataset packs samples into chunks of the given sizes with a real
// tar writer and records each sample's byte range, as `brand pack` would.
func newFakeDataset(name string, chunkSizes []int, gen func(id, chunk int) fakeSample) *fakeDataset {
	d := &fakeDataset{name: name}
	idHash := sha256.New()
	for c, size := range chunkSizes {
		var buf bytes.Buffer
		tw := tar.NewWriter(&buf)
		var ids []int
		for range size {
			id := len(d.samples)
			s := gen(id, c)
			s.chunk, s.offset = c, int64(buf.Len())
			for _, m := range s.members {
				name := s.key + "." + m.ext
				if m.ext == "" {
					name = s.key
				}
				hdr := &tar.Header{Name: name, Mode: 0o644, Size: int64(len(m.data)), Typeflag: tar.TypeReg}
				if err := tw.WriteHeader(hdr); err != nil {
					panic(err)
				}
				if _, err := tw.Write(m.data); err != nil {
					panic(err)
				}
			}
			if err := tw.Flush(); err != nil {
				panic(err)
			}
			s.tar = slices.Clone(buf.Bytes()[s.offset:])
			fmt.Fprintf(idHash, "%s\x00%x\x00", s.key, s.tar)
			d.samples = append(d.samples, s)
			ids = append(ids, id)
		}
		if err := tw.Close(); err != nil {
			panic(err)
		}
		d.bytes += int64(buf.Len())
		d.chunks = append(d.chunks, ids)
	}
	d.index = hex.EncodeToString(idHash.Sum(nil))[:16]
	return d
}

// toySample is the generator of the default dataset: image-like samples
// under class directories, every third one with an extra JSON member.
func toySample(id, chunk int) fakeSample {
	s := fakeSample{key: fmt.Sprintf("train/n%02d/img%03d", chunk, id)}
	jpg := bytes.Repeat([]byte(fmt.Sprintf("jpeg:%d;", id)), 20+id*7%50)
	s.members = append(s.members,
		fakeMember{"jpg", jpg},
		fakeMember{"cls", []byte(strconv.Itoa(id % 10))})
	if id%3 == 0 {
		s.members = append(s.members, fakeMember{"meta.json", []byte(fmt.Sprintf(`{"id":%d}`, id))})
	}
	return s
}

// valSample names samples under a dotted directory, gives one a key full of
// characters that need escaping in a URL, and the last one a key long
// enough to need a PAX header.
func valSample(id, chunk int) fakeSample {
	key := fmt.Sprintf("val/v1.0/s%02d", id)
	switch id {
	case 5:
		key = "val/v1.0/odd name#1?x=%41;ü"
	case 6:
		key = "val/v1.0/" + strings.Repeat("long-", 30) + "name"
	}
	return fakeSample{key: key, members: []fakeMember{{"txt", []byte("sample " + strconv.Itoa(id))}}}
}

// startFakeGateway starts a fake gateway serving "toy" (the default; 20
// samples in chunks of 4, 3, 5, 2 and 6) and "val" (7 samples), with
// defaults seed 1, batch size 4, window 2, world 1, drop_last false. Close
// it when done; tests use newFakeGateway, which does so.
func startFakeGateway() *fakeGateway {
	return startFakeGatewayWith(
		newFakeDataset("toy", []int{4, 3, 5, 2, 6}, toySample),
		newFakeDataset("val", []int{3, 4}, valSample))
}

// startFakeGatewayWith serves the given datasets, the first being the
// default.
func startFakeGatewayWith(datasets ...*fakeDataset) *fakeGateway {
	g := &fakeGateway{
		datasets:    map[string]*fakeDataset{},
		defaultName: datasets[0].name,
		defaults:    fakeParams{seed: 1, batchSize: 4, window: 2, world: 1},
		mux:         http.NewServeMux(),
	}
	for _, d := range datasets {
		g.datasets[d.name] = d
	}
	g.mux.HandleFunc("GET /epoch/{epoch}/batch/{batch}", g.serveBatch)
	g.mux.HandleFunc("GET /epoch/{epoch}", g.serveEpoch)
	g.mux.HandleFunc("GET /datasets", g.serveDatasets)
	g.mux.HandleFunc("GET /samples/{key...}", g.serveSample)
	g.mux.HandleFunc("GET /cluster", g.serveCluster)
	ok := func(w http.ResponseWriter, r *http.Request) { fmt.Fprintln(w, "ok") }
	g.mux.HandleFunc("GET /healthz", ok)
	g.mux.HandleFunc("GET /readyz", ok)
	g.mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		fakeError(w, http.StatusNotFound, "no route for "+r.Method+" "+r.URL.Path)
	})
	g.srv = httptest.NewServer(http.HandlerFunc(g.serve))
	g.URL = g.srv.URL
	return g
}

func newFakeGateway(t testing.TB) *fakeGateway {
	g := startFakeGateway()
	t.Cleanup(g.Close)
	return g
}

func (g *fakeGateway) Close() { g.srv.Close() }

// setHook installs a function that sees every request first and may answer
// it (returning true) instead of the real handler.
func (g *fakeGateway) setHook(h func(w http.ResponseWriter, r *http.Request) bool) {
	g.mu.Lock()
	g.hook = h
	g.mu.Unlock()
}

// requests returns the RequestURI of every request so far, in arrival order.
func (g *fakeGateway) requests() []string {
	g.mu.Lock()
	defer g.mu.Unlock()
	return slices.Clone(g.log)
}

func (g *fakeGateway) serve(w http.ResponseWriter, r *http.Request) {
	g.mu.Lock()
	g.log = append(g.log, r.URL.RequestURI())
	hook := g.hook
	g.mu.Unlock()
	if hook != nil && hook(w, r) {
		return
	}
	g.mux.ServeHTTP(w, r)
}

// render runs the real handler into a recorder, for hooks that distort a
// genuine response.
func (g *fakeGateway) render(r *http.Request) *httptest.ResponseRecorder {
	rec := httptest.NewRecorder()
	g.mux.ServeHTTP(rec, r)
	return rec
}

type fakeErr struct {
	status int
	msg    string
}

func fakeError(w http.ResponseWriter, status int, msg string) {
	b, _ := json.Marshal(api.Error{Error: msg, Status: status})
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(b)))
	w.WriteHeader(status)
	w.Write(b)
}

// params reads the job parameters of r the way the gateway does: defaults
// for what is missing, 400 for what is malformed or unknown, 404 for an
// unknown dataset or a rank outside the world.
func (g *fakeGateway) params(r *http.Request) (*fakeDataset, fakeParams, *fakeErr) {
	q := r.URL.Query()
	for k := range q {
		if !slices.Contains(api.JobParams, k) && k != api.ParamFormat {
			return nil, fakeParams{}, &fakeErr{400, fmt.Sprintf("unknown query parameter %q", k)}
		}
	}
	name := g.defaultName
	if v := q.Get("dataset"); v != "" {
		name = v
	}
	d, ok := g.datasets[name]
	if !ok {
		return nil, fakeParams{}, &fakeErr{404, fmt.Sprintf("unknown dataset %q (known: %s)", name,
			strings.Join(slices.Sorted(maps.Keys(g.datasets)), ", "))}
	}
	p := g.defaults
	if v := q.Get("seed"); v != "" {
		s, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			return nil, p, &fakeErr{400, "seed must be an unsigned 64-bit integer, got " + strconv.Quote(v)}
		}
		p.seed = s
	}
	for _, f := range []struct {
		name string
		dst  *int
		min  int
	}{{"batch_size", &p.batchSize, 1}, {"window", &p.window, 1}, {"world", &p.world, 1}, {"rank", &p.rank, 0}, {"offset", &p.offset, 0}} {
		v := q.Get(f.name)
		if v == "" {
			continue
		}
		n, err := strconv.Atoi(v)
		if err != nil || n < f.min {
			return nil, p, &fakeErr{400, fmt.Sprintf("%s must be an integer >= %d, got %q", f.name, f.min, v)}
		}
		*f.dst = n
	}
	if p.rank >= p.world {
		return nil, p, &fakeErr{404, fmt.Sprintf("rank %d out of range: with world=%d, rank must be 0..%d", p.rank, p.world, p.world-1)}
	}
	if v := q.Get("drop_last"); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return nil, p, &fakeErr{400, "drop_last must be true or false, got " + strconv.Quote(v)}
		}
		p.dropLast = b
	}
	if f := q.Get("format"); f != "" && f != "json" {
		return nil, p, &fakeErr{400, "format must be json, got " + strconv.Quote(f)}
	}
	return d, p, nil
}

func pathNumber(r *http.Request, name string) (int, *fakeErr) {
	n, err := strconv.Atoi(r.PathValue(name))
	if err != nil || n < 0 {
		return 0, &fakeErr{400, fmt.Sprintf("%s must be a non-negative integer, got %q", name, r.PathValue(name))}
	}
	return n, nil
}

// splitMix is the fake's deterministic generator (SplitMix64), so that the
// examples' output does not depend on math/rand's streams.
type splitMix uint64

func (s *splitMix) next() uint64 {
	*s += 0x9e3779b97f4a7c15
	z := uint64(*s)
	z = (z ^ z>>30) * 0xbf58476d1ce4e5b9
	z = (z ^ z>>27) * 0x94d049bb133111eb
	return z ^ z>>31
}

func (s *splitMix) shuffle(a []int) {
	for i := len(a) - 1; i > 0; i-- {
		j := int(s.next() % uint64(i+1))
		a[i], a[j] = a[j], a[i]
	}
}

// order is the epoch's sample order: chunks shuffled, then the samples of
// each window of p.window consecutive chunks shuffled together.
func (d *fakeDataset) order(p fakeParams, epoch int) []int {
	rng := splitMix(p.seed ^ uint64(epoch+1)*0xd1b54a32d192ed03)
	chunks := make([]int, len(d.chunks))
	for i := range chunks {
		chunks[i] = i
	}
	rng.shuffle(chunks)
	out := make([]int, 0, len(d.samples))
	for w := 0; w < len(chunks); w += p.window {
		start := len(out)
		for _, c := range chunks[w:min(w+p.window, len(chunks))] {
			out = append(out, d.chunks[c]...)
		}
		rng.shuffle(out[start:])
	}
	return out
}

// cut is how the gateway cuts the epoch order into batches: the fake
// shuffles its own way but cuts with the shuffle package, offset included,
// so that the client is tested against the gateway's batch arithmetic.
func (p fakeParams) cut() shuffle.Params {
	return shuffle.Params{Seed: p.seed, Window: p.window, BatchSize: p.batchSize, World: p.world,
		Rank: p.rank, DropLast: p.dropLast, Offset: p.offset}
}

// numBatches is the number of global batches from p.offset on.
func (p fakeParams) numBatches(n int) int { return p.cut().NumBatches(n) }

// batchRange is the epoch positions of p.rank's share of batch m of the
// cut; the caller has checked that m is in range.
func (p fakeParams) batchRange(n, m int) (start, end int) {
	start, end, err := p.cut().BatchRange(n, m)
	if err != nil {
		panic(err)
	}
	return start, end
}

// pastEnd is the fake's answer to an offset beyond the epoch, or nil.
func (p fakeParams) pastEnd(n int) *fakeErr {
	if p.offset > n {
		return &fakeErr{404, fmt.Sprintf("offset %d past the end of the epoch: it has %d samples", p.offset, n)}
	}
	return nil
}

func (g *fakeGateway) serveBatch(w http.ResponseWriter, r *http.Request) {
	d, p, ferr := g.params(r)
	epoch, eerr := pathNumber(r, "epoch")
	batch, berr := pathNumber(r, "batch")
	for _, e := range []*fakeErr{ferr, eerr, berr} {
		if e != nil {
			fakeError(w, e.status, e.msg)
			return
		}
	}
	total := len(d.samples)
	if e := p.pastEnd(total); e != nil {
		fakeError(w, e.status, e.msg)
		return
	}
	nb := p.numBatches(total)
	if batch >= nb {
		fakeError(w, 404, fmt.Sprintf("batch %d out of range: epoch %d has batches 0..%d", batch, epoch, nb-1))
		return
	}
	start, end := p.batchRange(total, batch)
	ids := d.order(p, epoch)[start:end]

	if r.URL.Query().Get("format") == "json" {
		samples := []api.ManifestSample{}
		for _, id := range ids {
			s := &d.samples[id]
			samples = append(samples, api.ManifestSample{ID: id, Key: s.key, Chunk: fmt.Sprintf("chunk-%06d.tar", s.chunk),
				Offset: s.offset, Length: int64(len(s.tar)), CRC32C: crc32.Checksum(s.tar, crc32.MakeTable(crc32.Castagnoli))})
		}
		writeJSON(w, api.Manifest{Dataset: d.name, IndexID: d.index, Epoch: epoch, Batch: batch, Rank: p.rank,
			World: p.world, BatchSize: p.batchSize, Offset: p.offset, Batches: nb, Samples: samples})
		return
	}

	var body []byte
	for _, id := range ids {
		body = append(body, d.samples[id].tar...)
	}
	body = append(body, make([]byte, 1024)...)
	sum := sha256.Sum256(fmt.Appendf(nil, "%s|%d|%d|%d|%d|%d|%d|%d|%t|%d", d.index, epoch, batch,
		p.seed, p.batchSize, p.window, p.world, p.rank, p.dropLast, p.offset))
	etag := `"` + hex.EncodeToString(sum[:12]) + `"`
	h := w.Header()
	h.Set("ETag", etag)
	if inm := r.Header.Get("If-None-Match"); inm == etag || inm == "*" {
		w.WriteHeader(http.StatusNotModified)
		return
	}
	h.Set("Content-Type", "application/x-tar")
	h.Set("Content-Length", strconv.Itoa(len(body)))
	h.Set(api.HeaderEpochBatches, strconv.Itoa(nb))
	h.Set(api.HeaderEpochSamples, strconv.Itoa(total))
	h.Set(api.HeaderBatchSamples, strconv.Itoa(len(ids)))
	h.Set(api.HeaderIndex, d.index)
	h.Set(api.HeaderDataset, d.name)
	if p.offset != 0 {
		h.Set(api.HeaderOffset, strconv.Itoa(p.offset))
	}
	w.Write(body)
}

func (g *fakeGateway) serveEpoch(w http.ResponseWriter, r *http.Request) {
	d, p, ferr := g.params(r)
	epoch, eerr := pathNumber(r, "epoch")
	for _, e := range []*fakeErr{ferr, eerr} {
		if e != nil {
			fakeError(w, e.status, e.msg)
			return
		}
	}
	n := len(d.samples)
	if e := p.pastEnd(n); e != nil {
		fakeError(w, e.status, e.msg)
		return
	}
	writeJSON(w, api.EpochInfo{Dataset: d.name, IndexID: d.index, Epoch: epoch, Samples: n,
		Batches: p.numBatches(n), BatchSize: p.batchSize, World: p.world, Rank: p.rank, Window: p.window,
		Seed: p.seed, DropLast: p.dropLast, Offset: p.offset, Chunks: len(d.chunks),
		Windows: (len(d.chunks) + p.window - 1) / p.window, RankSamples: p.cut().RankSamples(n)})
}

func (g *fakeGateway) serveDatasets(w http.ResponseWriter, r *http.Request) {
	var list api.DatasetList
	for _, name := range slices.Sorted(maps.Keys(g.datasets)) {
		d := g.datasets[name]
		list.Datasets = append(list.Datasets, api.DatasetInfo{Name: name, URL: "mem://" + name, IndexID: d.index,
			Chunks: len(d.chunks), Samples: len(d.samples), Bytes: d.bytes, Default: name == g.defaultName})
	}
	writeJSON(w, list)
}

func (g *fakeGateway) serveSample(w http.ResponseWriter, r *http.Request) {
	d, _, ferr := g.params(r)
	if ferr != nil {
		fakeError(w, ferr.status, ferr.msg)
		return
	}
	key := r.PathValue("key")
	for i := range d.samples {
		if d.samples[i].key == key {
			body := append(slices.Clone(d.samples[i].tar), make([]byte, 1024)...)
			w.Header().Set("Content-Type", "application/x-tar")
			w.Header().Set("Content-Length", strconv.Itoa(len(body)))
			w.Write(body)
			return
		}
	}
	fakeError(w, 404, fmt.Sprintf("no sample %q in dataset %q", key, d.name))
}

// setCluster makes the fake node self of a cluster of the given nodes.
func (g *fakeGateway) setCluster(nodes []string, self int) {
	cl := &api.Cluster{Self: self}
	for _, u := range nodes {
		cl.Nodes = append(cl.Nodes, api.ClusterNode{URL: u, Up: true})
	}
	g.mu.Lock()
	g.cluster = cl
	g.mu.Unlock()
}

// serveCluster answers GET /cluster as a node of a cluster does, with
// every rank's home for ?world=W, or 404 as a gateway from before
// clusters does.
func (g *fakeGateway) serveCluster(w http.ResponseWriter, r *http.Request) {
	g.mu.Lock()
	cl := g.cluster
	g.mu.Unlock()
	if cl == nil {
		fakeError(w, http.StatusNotFound, "no route for GET /cluster")
		return
	}
	out := *cl
	if v := r.URL.Query().Get("world"); v != "" {
		world, err := strconv.Atoi(v)
		if err != nil || world < 1 {
			fakeError(w, http.StatusBadRequest, "world must be an integer >= 1, got "+strconv.Quote(v))
			return
		}
		for rank := range world {
			out.Homes = append(out.Homes, cluster.Home(rank, world, len(cl.Nodes)))
		}
	}
	writeJSON(w, out)
}

func writeJSON(w http.ResponseWriter, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(b)))
	w.Write(b)
}

// expectedKeys returns the keys the fake serves for one batch, computed
// from the fake's own plan, for tests that check what the client decoded.
func (g *fakeGateway) expectedKeys(dataset string, p fakeParams, epoch, batch int) []string {
	d := g.datasets[dataset]
	start, end := p.batchRange(len(d.samples), batch)
	var keys []string
	for _, id := range d.order(p, epoch)[start:end] {
		keys = append(keys, d.samples[id].key)
	}
	return keys
}

// query parses a logged RequestURI's query, for tests that check it.
func query(t testing.TB, requestURI string) url.Values {
	t.Helper()
	u, err := url.Parse(requestURI)
	if err != nil {
		t.Fatalf("bad request URI %q: %v", requestURI, err)
	}
	return u.Query()
}

// released returns a channel closed when the test ends, for hooks that
// block until a request is cancelled: if the client under test fails to
// cancel, the hook still returns and httptest.Server.Close (which waits for
// handlers) cannot deadlock the failing test. Call it after newFakeGateway
// so that its cleanup runs first.
func released(t testing.TB) <-chan struct{} {
	ch := make(chan struct{})
	t.Cleanup(func() { close(ch) })
	return ch
}
