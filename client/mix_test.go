package client_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/brandgw/brand/api"
	"github.com/brandgw/brand/client"
	"github.com/brandgw/brand/dataset"
	"github.com/brandgw/brand/gateway"
	"github.com/brandgw/brand/internal/gen/synth"
	"github.com/brandgw/brand/s3backend"
	"github.com/brandgw/brand/shuffle"
)

// testMix is the mixture of the tests: at batch 8 × world 4 (K = 32) an
// epoch of 300 + 120 + 20 = 440 samples rounded up to 448, books (20
// samples for a share of about 90) repeating four and a half times.
var testMix = api.Mix{{Dataset: "web", Weight: "0.5"}, {Dataset: "code", Weight: "0.3"}, {Dataset: "books", Weight: "0.2"}}

// mixGateway is a real gateway, in process, over three datasets packed
// as `brand pack` packs them (see startServeCluster): web, code and books,
// synthetic datasets of 300, 120 and 20 samples. synth numbers each
// dataset's samples from 0, so their keys repeat across datasets (with
// other bytes): a sample is known by its dataset and key. Its defaults
// are batch size 8, window 2, seed 5, world 1.
type mixGateway struct {
	URL   string
	gw    *gateway.Gateway
	specs map[string]synth.Spec
	ids   map[string]int // a key's sample number in every dataset

	mu   sync.Mutex
	log  []string                                          // RequestURI of each request
	hook func(w http.ResponseWriter, r *http.Request) bool // true: handled
}

func startMixGateway(t *testing.T) *mixGateway {
	t.Helper()
	m := &mixGateway{specs: map[string]synth.Spec{}, ids: map[string]int{}}
	var specs []gateway.DatasetSpec
	for i, d := range []struct {
		name    string
		samples int
	}{{"web", 300}, {"code", 120}, {"books", 20}} {
		spec := synth.Spec{Samples: d.samples, MeanBytes: 256, Classes: 3, Seed: uint64(10 + i)}
		src, dir := filepath.Join(t.TempDir(), "src"), t.TempDir()
		if err := spec.WriteTree(src); err != nil {
			t.Fatal(err)
		}
		store, err := s3backend.NewLocal(dir)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := dataset.Pack(context.Background(), src, store, dataset.PackOptions{ChunkSize: 8 << 10, Shuffle: true, Seed: 11, Name: d.name}); err != nil {
			t.Fatal(err)
		}
		m.specs[d.name] = spec
		for j := range d.samples {
			m.ids[spec.Sample(j).Key] = j
		}
		specs = append(specs, gateway.DatasetSpec{Name: d.name, URL: "file://" + dir, Store: store})
	}
	g := newGateway(t, specs)
	m.gw = g
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		m.mu.Lock()
		m.log = append(m.log, r.URL.RequestURI())
		hook := m.hook
		m.mu.Unlock()
		if hook == nil || !hook(w, r) {
			g.ServeHTTP(w, r)
		}
	}))
	t.Cleanup(srv.Close)
	m.URL = srv.URL
	return m
}

// newGateway is a loaded gateway, in process, over specs, its defaults
// batch size 8, window 2, seed 5, world 1, closed when the test ends.
func newGateway(t *testing.T, specs []gateway.DatasetSpec) *gateway.Gateway {
	t.Helper()
	return loadedGateway(t, gateway.Config{Datasets: specs, CacheSize: 64 << 20, NoPrefault: true, IndexPoll: -1,
		Defaults: gateway.Defaults{BatchSize: 8, Window: 2, Seed: 5}})
}

// reset forgets the requests so far and removes the hook, for the next
// subtest.
func (m *mixGateway) reset() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.log, m.hook = nil, nil
}

func (m *mixGateway) requests() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.log)
}

// rewrite answers the requests match selects with the gateway's answer
// passed through edit, which may change its headers and returns its body.
func (m *mixGateway) rewrite(match func(r *http.Request) bool, edit func(h http.Header, body []byte) []byte) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.hook = func(w http.ResponseWriter, r *http.Request) bool {
		if !match(r) {
			return false
		}
		rec := httptest.NewRecorder()
		m.gw.ServeHTTP(rec, r)
		body := edit(rec.Header(), rec.Body.Bytes())
		for k, v := range rec.Header() {
			w.Header()[k] = v
		}
		w.Header().Set("Content-Length", strconv.Itoa(len(body)))
		w.WriteHeader(rec.Code)
		w.Write(body)
		return true
	}
}

// checkSample compares a served sample with the files synth wrote for it
// in its dataset.
func (m *mixGateway) checkSample(t *testing.T, s client.Sample) {
	t.Helper()
	spec, ok := m.specs[s.Dataset]
	if !ok {
		t.Fatalf("sample %s of dataset %q, not a component", s.Key, s.Dataset)
	}
	i, ok := m.ids[s.Key]
	if !ok || i >= spec.Samples {
		t.Fatalf("sample %s is not one of %s's", s.Key, s.Dataset)
	}
	want := spec.Sample(i)
	if !bytes.Equal(s.Files["jpg"], want.Image) || !bytes.Equal(s.Files["cls"], want.Label()) {
		t.Fatalf("sample %s differs from %s's source files", s.Key, s.Dataset)
	}
}

// mixOpts is the mixture job at batch size 8 of rank of world, with the
// mixing block block (0: the client's default).
func mixOpts(world, rank, block int) client.Options {
	return client.Options{Job: api.Job{Mix: testMix, MixBlock: block,
		Params: shuffle.Params{Seed: 5, BatchSize: 8, World: world, Rank: rank}}}
}

// mixKey names a sample of a mixture.
type mixKey struct{ dataset, key string }

func mixKeys(samples []client.Sample) []mixKey {
	out := make([]mixKey, len(samples))
	for i, s := range samples {
		out[i] = mixKey{s.Dataset, s.Key}
	}
	return out
}

// loadedGateway is a gateway of cfg with its datasets loaded, closed
// when the test ends.
func loadedGateway(t *testing.T, cfg gateway.Config) *gateway.Gateway {
	t.Helper()
	g, err := gateway.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(g.Close)
	if err := g.Load(context.Background()); err != nil {
		t.Fatal(err)
	}
	return g
}

func newMixClient(t *testing.T, url string, opts client.Options) *client.Client {
	t.Helper()
	c, err := client.New(url, opts)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// readMixEpoch reads epoch from offset on every rank of world, at most
// stop batches each (-1: all), checking every sample's bytes, and returns
// the samples in epoch order: global batch by global batch, each rank's
// share in rank order, as the gateway cuts the epoch's positions.
func (m *mixGateway) readMixEpoch(t *testing.T, world, block, epoch, offset, stop int) []mixKey {
	t.Helper()
	ranks := make([][][]mixKey, world)
	for rank := range world {
		c := newMixClient(t, m.URL, mixOpts(world, rank, block))
		for b, err := range c.EpochFrom(context.Background(), epoch, offset) {
			if err != nil {
				t.Fatalf("world %d rank %d: %v", world, rank, err)
			}
			if b.Index != len(ranks[rank]) || b.Offset != offset || b.Mix != testMix.String() {
				t.Fatalf("world %d rank %d: batch %d from %d of %q; want batch %d from %d of %q",
					world, rank, b.Index, b.Offset, b.Mix, len(ranks[rank]), offset, testMix)
			}
			for _, s := range b.Samples {
				m.checkSample(t, s)
			}
			ranks[rank] = append(ranks[rank], mixKeys(b.Samples))
			b.Release()
			if len(ranks[rank]) == stop {
				break
			}
		}
	}
	var out []mixKey
	for b := range ranks[0] {
		for rank := range world {
			out = append(out, ranks[rank][b]...)
		}
	}
	return out
}

// TestMixEpoch reads an epoch of a mixture on every rank of 4: each
// sample comes with its component dataset and that dataset's bytes, in
// the order of the gateway's manifests; every component gives the epoch
// its share; the client fixes the block at New, pins the components'
// index versions from the first answer, and never sends dataset= or
// index=.
func TestMixEpoch(t *testing.T) {
	const world, epoch = 4, 1
	g := startMixGateway(t)
	ctx := context.Background()
	counts := map[string]int{}
	var plan *client.EpochInfo
	var clients []*client.Client
	for rank := range world {
		c := newMixClient(t, g.URL, mixOpts(world, rank, 0))
		clients = append(clients, c)
		if c.MixBlock() != 32 {
			t.Fatalf("MixBlock() = %d before any request; want 8 × 4", c.MixBlock())
		}
		var err error
		if plan, err = c.EpochInfo(ctx, epoch); err != nil {
			t.Fatal(err)
		}
		if plan.Dataset != testMix.String() || plan.Mix == nil || plan.Mix.Block != 32 || plan.Samples != 448 || plan.Batches != 14 {
			t.Fatalf("plan %+v", plan)
		}
		n := 0
		for b, err := range c.Epoch(ctx, epoch) {
			if err != nil {
				t.Fatal(err)
			}
			n++
			if b.Mix != testMix.String() || b.MixBlock != 32 || b.Dataset != "" || b.IndexID != c.Index() {
				t.Fatalf("rank %d batch %d: mixture %q block %d dataset %q index %q; want %q, 32, none, %q",
					rank, b.Index, b.Mix, b.MixBlock, b.Dataset, b.IndexID, testMix, c.Index())
			}
			man, err := c.Manifest(ctx, epoch, b.Index)
			if err != nil {
				t.Fatal(err)
			}
			if len(man.Samples) != len(b.Samples) {
				t.Fatalf("rank %d batch %d: %d samples, the manifest %d", rank, b.Index, len(b.Samples), len(man.Samples))
			}
			for i, s := range b.Samples {
				g.checkSample(t, s)
				if ms := man.Samples[i]; ms.Dataset != s.Dataset || ms.Key != s.Key {
					t.Fatalf("rank %d batch %d sample %d is %s of %s; the manifest says %s of %s", rank, b.Index, i, s.Key, s.Dataset, ms.Key, ms.Dataset)
				}
				counts[s.Dataset]++
			}
			b.Release()
		}
		if n != 14 {
			t.Fatalf("rank %d read %d batches; want 14", rank, n)
		}
	}
	for _, comp := range plan.Mix.Components {
		if counts[comp.Dataset] != comp.EpochSamples {
			t.Errorf("the epoch served %d samples of %s; its plan gives it %d", counts[comp.Dataset], comp.Dataset, comp.EpochSamples)
		}
	}

	// The index pinned is the components', in the mixture's order.
	ds, err := clients[0].Datasets(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, comp := range testMix {
		i := slices.IndexFunc(ds, func(d client.DatasetInfo) bool { return d.Name == comp.Dataset })
		ids = append(ids, ds[i].IndexID)
	}
	if want := strings.Join(ids, ","); clients[0].Index() != want {
		t.Errorf("Index() = %q; want the components' %q", clients[0].Index(), want)
	}
	for _, r := range g.requests() {
		if !strings.HasPrefix(r, "/epoch/") {
			continue
		}
		q := query(t, r)
		if q.Has("dataset") || q.Has("index") || q.Get("mix") != testMix.String() || q.Get("mix_block") != "32" {
			t.Errorf("request %s; want mix= and mix_block=32, no dataset= or index=", r)
		}
	}

	// BatchRaw says the same of a batch as Batch.
	var buf bytes.Buffer
	_, h, err := clients[1].BatchRaw(ctx, epoch, 3, &buf)
	if err != nil {
		t.Fatal(err)
	}
	b, err := clients[1].Batch(ctx, epoch, 3)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := client.DecodeTar(buf.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	if h.Mix != b.Mix || h.MixBlock != b.MixBlock || h.IndexID != b.IndexID || h.Samples != len(raw) || !slices.Equal(keys(raw), keys(b.Samples)) {
		t.Errorf("BatchRaw: %+v, samples %q; Batch: %q block %d index %s, samples %q", h, keys(raw), b.Mix, b.MixBlock, b.IndexID, keys(b.Samples))
	}
}

// TestMixEpochFromResume: a mixture job of 4 ranks consumes 5 batches of
// an epoch and stops; resumed from ResumeOffset at world 3, 8 and 1 with
// the block it began with (Client.MixBlock, from its checkpoint), its
// ranks read the rest of the very order: what was read before and after
// the stop is the uninterrupted epoch, sample for sample.
func TestMixEpochFromResume(t *testing.T) {
	const epoch, consumed = 3, 5
	g := startMixGateway(t)
	whole := g.readMixEpoch(t, 4, 0, epoch, 0, -1)
	if len(whole) != 448 {
		t.Fatalf("the epoch has %d samples; want 448", len(whole))
	}
	c := newMixClient(t, g.URL, mixOpts(4, 0, 0))
	plan, err := c.EpochInfo(context.Background(), epoch)
	if err != nil {
		t.Fatal(err)
	}
	offset, block := client.ResumeOffset(plan, consumed), c.MixBlock()
	head := g.readMixEpoch(t, 4, 0, epoch, 0, consumed)
	if offset != consumed*8*4 || block != 32 || len(head) != offset {
		t.Fatalf("offset %d block %d after %d samples; want offset %d, block 32", offset, block, len(head), consumed*8*4)
	}
	for _, world := range []int{3, 8, 1} {
		t.Run(fmt.Sprintf("world 4 to %d", world), func(t *testing.T) {
			got := append(slices.Clone(head), g.readMixEpoch(t, world, block, epoch, offset, -1)...)
			if !slices.Equal(got, whole) {
				t.Errorf("resumed at world %d: %d samples that differ from the uninterrupted epoch's %d", world, len(got), len(whole))
			}
		})
	}
	// Without the block it began with, the job would read another order:
	// K = 8 × 3 by default.
	if rest := g.readMixEpoch(t, 3, 0, epoch, offset, -1); slices.Equal(rest, whole[offset:]) {
		t.Error("resumed at world 3 without its block, the job read the rest of the same order")
	}
}

// TestMixBlockFromFirstAnswer: a job that leaves the batch size or the
// world to the gateway learns its block from the first answer, and names
// it from then on.
func TestMixBlockFromFirstAnswer(t *testing.T) {
	tests := []struct {
		name   string
		params shuffle.Params
		plan   bool // the first request is a plan (else a batch)
		block  int
	}{
		{"the gateway's batch size and world, from a batch", shuffle.Params{Seed: 5}, false, 8},
		{"the gateway's world, from a batch", shuffle.Params{Seed: 5, BatchSize: 6}, false, 6},
		{"the gateway's batch size, from a plan", shuffle.Params{Seed: 5, World: 2}, true, 16},
	}
	g := startMixGateway(t)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g.reset()
			c := newMixClient(t, g.URL, client.Options{Job: api.Job{Mix: testMix, Params: tt.params}})
			if c.MixBlock() != 0 {
				t.Fatalf("MixBlock() = %d before any answer; want 0", c.MixBlock())
			}
			ctx := context.Background()
			if tt.plan {
				for b, err := range c.Epoch(ctx, 0) {
					if err != nil {
						t.Fatal(err)
					}
					b.Release()
				}
			} else {
				for i := range 2 {
					if _, err := c.Batch(ctx, 0, i); err != nil {
						t.Fatal(err)
					}
				}
			}
			if c.MixBlock() != tt.block {
				t.Fatalf("MixBlock() = %d; want %d", c.MixBlock(), tt.block)
			}
			reqs := g.requests()
			if query(t, reqs[0]).Has("mix_block") {
				t.Errorf("first request %s names a block", reqs[0])
			}
			for _, r := range reqs[1:] {
				if query(t, r).Get("mix_block") != strconv.Itoa(tt.block) {
					t.Errorf("request %s after the first answer; want mix_block=%d", r, tt.block)
				}
			}
		})
	}
}

// TestMixOptions: New refuses what the gateway would refuse with 400, and
// fixes the block when the job gives batch size and world.
func TestMixOptions(t *testing.T) {
	job := func(mutate func(j *api.Job)) client.Options {
		j := api.Job{Mix: testMix, Params: shuffle.Params{BatchSize: 8, World: 4}}
		mutate(&j)
		return client.Options{Job: j}
	}
	tests := []struct {
		name    string
		opts    client.Options
		message string // "": valid
		block   int
	}{
		{"the default block", job(func(j *api.Job) {}), "", 32},
		{"a block of its own", job(func(j *api.Job) { j.MixBlock = 48 }), "", 48},
		{"no world", job(func(j *api.Job) { j.World = 0 }), "", 0},
		{"no batch size", job(func(j *api.Job) { j.BatchSize = 0 }), "", 0},
		{"with a length", job(func(j *api.Job) { j.MixSamples = 1000 }), "", 32},
		{"one component", job(func(j *api.Job) { j.Mix = api.Mix{{Dataset: "web", Weight: "1"}} }), "", 32},
		{"and a dataset", job(func(j *api.Job) { j.Dataset = "web" }), "a job reads one source", 0},
		{"and an index", job(func(j *api.Job) { j.Index = "0123456789abcdef" }), "index= pins one dataset's version", 0},
		{"and importance", job(func(j *api.Job) { j.Importance = api.Importance{Job: "j"} }), "sampling=importance is per dataset", 0},
		{"and an importance version", job(func(j *api.Job) { j.Importance.Version = "v1" }), "importance and hot apply only with sampling=importance", 0},
		{"block without a mixture", job(func(j *api.Job) { j.Mix, j.MixBlock = nil, 32 }), "apply only to a mixture", 0},
		{"length without a mixture", job(func(j *api.Job) { j.Mix, j.MixSamples = nil, 100 }), "apply only to a mixture", 0},
		{"negative block", job(func(j *api.Job) { j.MixBlock = -1 }), "MixBlock is -1", 0},
		{"negative length", job(func(j *api.Job) { j.MixSamples = -1 }), "MixSamples is -1", 0},
		{"a dataset twice", job(func(j *api.Job) { j.Mix = api.Mix{{Dataset: "web", Weight: "1"}, {Dataset: "web", Weight: "2"}} }), "named twice", 0},
		{"a zero weight", job(func(j *api.Job) { j.Mix = api.Mix{{Dataset: "web", Weight: "0"}} }), "positive decimal", 0},
		{"a weight in exponent form", job(func(j *api.Job) { j.Mix = api.Mix{{Dataset: "web", Weight: "1e3"}} }), "plain positive decimal", 0},
		{"an empty name", job(func(j *api.Job) { j.Mix = api.Mix{{Dataset: "", Weight: "1"}} }), "dataset:weight", 0},
		{"a comma in a name", job(func(j *api.Job) { j.Mix = api.Mix{{Dataset: "a,b", Weight: "1"}} }), `"a,b" holds ','`, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := client.New("http://h", tt.opts)
			if tt.message == "" {
				if err != nil {
					t.Fatalf("New: %v", err)
				}
				if c.MixBlock() != tt.block {
					t.Errorf("MixBlock() = %d; want %d", c.MixBlock(), tt.block)
				}
				return
			}
			if !errors.Is(err, client.ErrInvalid) || !strings.Contains(err.Error(), tt.message) {
				t.Fatalf("New: %v; want ErrInvalid saying %q", err, tt.message)
			}
		})
	}
}

// TestMixIndexPin: the components' index versions the first answer names
// are the client's; an answer from others (a component re-packed under
// the job) fails with ErrIndexChanged, for a batch and in an epoch, and
// the versions are never sent.
func TestMixIndexPin(t *testing.T) {
	const other = "0123456789abcdef,0123456789abcdef,0123456789abcdef"
	repacked := func(from int) (func(r *http.Request) bool, func(h http.Header, body []byte) []byte) {
		return func(r *http.Request) bool {
				_, b, ok := strings.Cut(r.URL.Path, "/batch/")
				n, err := strconv.Atoi(b)
				return ok && err == nil && n >= from
			}, func(h http.Header, body []byte) []byte {
				h.Set(api.HeaderMixIndex, other)
				return body
			}
	}
	g := startMixGateway(t)
	t.Run("batch", func(t *testing.T) {
		g.reset()
		c := newMixClient(t, g.URL, mixOpts(2, 1, 0))
		ctx := context.Background()
		b, err := c.Batch(ctx, 0, 0)
		if err != nil {
			t.Fatal(err)
		}
		if pin := c.Index(); pin == "" || pin == other || b.IndexID != pin || strings.Count(pin, ",") != 2 {
			t.Fatalf("Index() = %q after a batch of index %q; want the three components'", pin, b.IndexID)
		}
		g.rewrite(repacked(1))
		if _, err := c.Batch(ctx, 0, 1); !errors.Is(err, client.ErrIndexChanged) {
			t.Errorf("Batch after a repack: %v; want ErrIndexChanged", err)
		}
		if _, _, err := c.BatchRaw(ctx, 0, 2, io.Discard); !errors.Is(err, client.ErrIndexChanged) {
			t.Errorf("BatchRaw after a repack: %v; want ErrIndexChanged", err)
		}
		for _, r := range g.requests() {
			if query(t, r).Has("index") {
				t.Errorf("request %s names an index", r)
			}
		}
	})
	t.Run("epoch", func(t *testing.T) {
		g.reset()
		g.rewrite(repacked(2))
		c := newMixClient(t, g.URL, mixOpts(4, 0, 0))
		var got []int
		var errs []error
		for b, err := range c.Epoch(context.Background(), 0) {
			if err != nil {
				errs = append(errs, err)
				continue
			}
			got = append(got, b.Index)
		}
		if fmt.Sprint(got) != "[0 1]" || len(errs) != 1 || !errors.Is(errs[0], client.ErrIndexChanged) {
			t.Errorf("batches %v, errors %v; want batches 0 and 1, then ErrIndexChanged", got, errs)
		}
	})
}

// TestMixBadResponses: a batch or plan that does not answer for the
// job's mixture, or whose Brand-Mix-Components does not name each of its
// samples' components, is ErrBadResponse; BatchRaw writes none of it.
func TestMixBadResponses(t *testing.T) {
	header := func(name string, edit func(v string) string) func(h http.Header, body []byte) []byte {
		return func(h http.Header, body []byte) []byte {
			if v := edit(h.Get(name)); v == "" {
				h.Del(name)
			} else {
				h.Set(name, v)
			}
			return body
		}
	}
	editPlan := func(edit func(p *client.EpochInfo)) func(h http.Header, body []byte) []byte {
		return func(h http.Header, body []byte) []byte {
			var p client.EpochInfo
			if err := json.Unmarshal(body, &p); err != nil {
				panic(err)
			}
			edit(&p)
			b, _ := json.Marshal(p)
			return b
		}
	}
	tests := []struct {
		name    string
		plan    bool // edit the plan (else the batches)
		edit    func(h http.Header, body []byte) []byte
		message string
	}{
		{"a component short", false, header(api.HeaderMixComponents, func(v string) string { return v[:strings.LastIndexByte(v, ',')] }),
			"names 7 components for 8 samples"},
		{"a component more", false, header(api.HeaderMixComponents, func(v string) string { return v + ",0" }),
			"names 9 components for 8 samples"},
		{"no components", false, header(api.HeaderMixComponents, func(string) string { return "" }),
			"names 0 components for 8 samples"},
		{"a component outside the mixture", false, header(api.HeaderMixComponents, func(v string) string { return "3" + v[1:] }),
			`names component "3" of a mixture of 3`},
		{"another mixture", false, header(api.HeaderMix, func(string) string { return "web:1" }),
			`Brand-Mix says "web:1"`},
		{"one dataset", false, header(api.HeaderMix, func(string) string { return "" }),
			`Brand-Mix says ""`},
		{"another block", false, header(api.HeaderMixBlock, func(string) string { return "16" }),
			"mix_block=32, a gateway answered with 16"},
		{"no block", false, header(api.HeaderMixBlock, func(string) string { return "" }),
			"Brand-Mix-Block"},
		{"a plan of another block", true, editPlan(func(p *client.EpochInfo) { p.Mix.Block = 16 }),
			"asked for mix_block=32, gateway planned mix_block=16"},
		{"a plan of one dataset", true, editPlan(func(p *client.EpochInfo) { p.Mix = nil }),
			"gateway planned no mixture"},
		{"a plan of other components", true, editPlan(func(p *client.EpochInfo) { p.Mix.Components[0].Dataset = "code" }),
			`component 0 is "code"; the mixture's is "web"`},
		{"a plan of another mixture", true, editPlan(func(p *client.EpochInfo) { p.Dataset = "web:1" }),
			"gateway planned mix=web:1"},
	}
	g := startMixGateway(t)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g.reset()
			g.rewrite(func(r *http.Request) bool { return strings.Contains(r.URL.Path, "/batch/") != tt.plan }, tt.edit)
			c := newMixClient(t, g.URL, mixOpts(4, 2, 0))
			ctx := context.Background()
			var errs []error
			if tt.plan {
				_, err := c.EpochInfo(ctx, 0)
				errs = append(errs, err)
			} else {
				_, err := c.Batch(ctx, 0, 1)
				var buf bytes.Buffer
				n, _, rerr := c.BatchRaw(ctx, 0, 2, &buf)
				if n != 0 || buf.Len() != 0 {
					t.Errorf("BatchRaw wrote %d bytes of a bad batch", buf.Len())
				}
				errs = append(errs, err, rerr)
			}
			for _, err := range errs {
				if !errors.Is(err, client.ErrBadResponse) || !strings.Contains(err.Error(), tt.message) {
					t.Errorf("error %v; want ErrBadResponse saying %q", err, tt.message)
				}
			}
		})
	}
}
