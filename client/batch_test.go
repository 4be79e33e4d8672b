package client_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/brandgw/brand/api"
	"github.com/brandgw/brand/client"
	"github.com/brandgw/brand/shuffle"
)

// checkSamples compares decoded samples with what the fake holds for keys.
func checkSamples(t *testing.T, d *fakeDataset, got []client.Sample, want []string) {
	t.Helper()
	if fmt.Sprint(keys(got)) != fmt.Sprint(want) {
		t.Fatalf("keys %q; want %q", keys(got), want)
	}
	for _, s := range got {
		i := slices.IndexFunc(d.samples, func(fs fakeSample) bool { return fs.key == s.Key })
		fs := d.samples[i]
		if len(s.Files) != len(fs.members) {
			t.Errorf("%s: %d files; want %d", s.Key, len(s.Files), len(fs.members))
		}
		for _, m := range fs.members {
			if !bytes.Equal(s.Files[m.ext], m.data) {
				t.Errorf("%s.%s: contents differ", s.Key, m.ext)
			}
		}
	}
}

func TestBatch(t *testing.T) {
	g := newFakeGateway(t)
	tests := []struct {
		name         string
		opts         client.Options
		epoch, batch int
		dataset      string
		params       fakeParams
		epochBatches int
	}{
		{"defaults", client.Options{}, 0, 0, "toy", fakeParams{batchSize: 4, window: 2, world: 1}, 5},
		{"last partial batch", client.Options{Job: api.Job{Params: shuffle.Params{BatchSize: 6}}}, 3, 3, "toy", fakeParams{batchSize: 6, window: 2, world: 1}, 4},
		{"rank 1 of 3", client.Options{Job: api.Job{Params: shuffle.Params{World: 3, Rank: 1, BatchSize: 2, Seed: 9}}}, 2, 1, "toy",
			fakeParams{seed: 9, batchSize: 2, window: 2, world: 3, rank: 1}, 4},
		{"rank with an empty share of the last batch", client.Options{Job: api.Job{Params: shuffle.Params{World: 3, Rank: 2, BatchSize: 3}}}, 0, 2, "toy",
			fakeParams{batchSize: 3, window: 2, world: 3, rank: 2}, 3},
		{"drop_last and one window", client.Options{Job: api.Job{Params: shuffle.Params{DropLast: true, BatchSize: 3, Window: 5}}}, 7, 5, "toy",
			fakeParams{batchSize: 3, window: 5, world: 1, dropLast: true}, 6},
		{"dotted, escaped and PAX keys", client.Options{Job: api.Job{Dataset: "val", Params: shuffle.Params{BatchSize: 7, Window: 2}}}, 0, 0, "val",
			fakeParams{batchSize: 7, window: 2, world: 1}, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, _ := newClient(t, g, tt.opts)
			b, err := c.Batch(context.Background(), tt.epoch, tt.batch)
			if err != nil {
				t.Fatal(err)
			}
			d := g.datasets[tt.dataset]
			checkSamples(t, d, b.Samples, g.expectedKeys(tt.dataset, tt.params, tt.epoch, tt.batch))
			if b.Samples == nil {
				t.Error("Samples is nil; want an empty slice")
			}
			if b.Epoch != tt.epoch || b.Index != tt.batch || b.EpochBatches != tt.epochBatches ||
				b.EpochSamples != len(d.samples) || b.Dataset != tt.dataset || b.IndexID != d.index {
				t.Errorf("batch header %+v", *b)
			}
			if !strings.HasPrefix(b.ETag, `"`) {
				t.Errorf("ETag %q is not a strong ETag", b.ETag)
			}
			again, err := c.Batch(context.Background(), tt.epoch, tt.batch)
			if err != nil || again.ETag != b.ETag {
				t.Errorf("ETag changed between identical requests: %q, %q (%v)", b.ETag, again.ETag, err)
			}
		})
	}
}

// TestShuffleDependsOnParameters guards the fake itself: if it ignored a
// parameter, the query tests above would prove nothing.
func TestShuffleDependsOnParameters(t *testing.T) {
	g := newFakeGateway(t)
	base := client.Options{Job: api.Job{Params: shuffle.Params{Seed: 1, BatchSize: 20, Window: 2}}}
	first := func(o client.Options, epoch int) string {
		c, _ := newClient(t, g, o)
		b, err := c.Batch(context.Background(), epoch, 0)
		if err != nil {
			t.Fatal(err)
		}
		return fmt.Sprint(keys(b.Samples))
	}
	ref := first(base, 0)
	if first(base, 0) != ref {
		t.Fatal("the same request gave a different order")
	}
	seed := base
	seed.Job.Seed = 2
	window := base
	window.Job.Window = 5
	for name, got := range map[string]string{"seed": first(seed, 0), "epoch": first(base, 1), "window": first(window, 0)} {
		if got == ref {
			t.Errorf("changing the %s did not change the order", name)
		}
	}
}

func TestBatchRaw(t *testing.T) {
	g := newFakeGateway(t)
	c, _ := newClient(t, g, client.Options{Job: api.Job{Params: shuffle.Params{BatchSize: 5}}})
	var buf bytes.Buffer
	n, h, err := c.BatchRaw(context.Background(), 2, 1, &buf)
	if err != nil {
		t.Fatal(err)
	}
	p := fakeParams{batchSize: 5, window: 2, world: 1}
	var want []byte
	for _, k := range g.expectedKeys("toy", p, 2, 1) {
		i := slices.IndexFunc(g.datasets["toy"].samples, func(s fakeSample) bool { return s.key == k })
		want = append(want, g.datasets["toy"].samples[i].tar...)
	}
	want = append(want, make([]byte, 1024)...)
	if !bytes.Equal(buf.Bytes(), want) || n != int64(len(want)) {
		t.Fatalf("BatchRaw wrote %d bytes (n=%d); want the %d bytes of the samples' tar ranges and end-of-archive", buf.Len(), n, len(want))
	}
	if h.Epoch != 2 || h.Index != 1 || h.Samples != 5 || h.Size != n || h.EpochBatches != 4 || h.EpochSamples != 20 ||
		h.Dataset != "toy" || h.IndexID != g.datasets["toy"].index || h.ETag == "" {
		t.Errorf("header %+v", h)
	}
	decoded, err := client.DecodeSamples(&buf)
	if err != nil {
		t.Fatal(err)
	}
	b, err := c.Batch(context.Background(), 2, 1)
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(decoded) != fmt.Sprint(b.Samples) || h.ETag != b.ETag {
		t.Error("BatchRaw and Batch disagree")
	}
}

func TestBatchRawRetriesOnlyBeforeWriting(t *testing.T) {
	g := newFakeGateway(t)
	g.setHook(script(answer{status: 503}))
	c, w := newClient(t, g, client.Options{})
	var buf bytes.Buffer
	if _, _, err := c.BatchRaw(context.Background(), 0, 0, &buf); err != nil {
		t.Fatalf("BatchRaw after a 503: %v", err)
	}
	if len(w.get()) != 1 {
		t.Errorf("%d waits; want 1", len(w.get()))
	}

	g.setHook(truncate(g, 1))
	buf.Reset()
	n, h, err := c.BatchRaw(context.Background(), 0, 0, &buf)
	if !errors.Is(err, client.ErrShortBody) {
		t.Fatalf("error %v; want ErrShortBody", err)
	}
	if n == 0 || n != int64(buf.Len()) || n >= h.Size {
		t.Errorf("n = %d, wrote %d, size %d; want the partial count", n, buf.Len(), h.Size)
	}
	if want := 2 + 1; len(g.requests()) != want {
		t.Errorf("%d requests; a partly written batch must not be retried", len(g.requests()))
	}
}

type failingWriter struct{}

func (failingWriter) Write([]byte) (int, error) { return 0, errors.New("disk full") }

func TestBatchRawWriterError(t *testing.T) {
	g := newFakeGateway(t)
	c, w := newClient(t, g, client.Options{})
	_, _, err := c.BatchRaw(context.Background(), 0, 0, failingWriter{})
	if err == nil || !strings.Contains(err.Error(), "disk full") || errors.Is(err, client.ErrShortBody) {
		t.Errorf("error %v; want the writer's error", err)
	}
	if len(w.get()) != 0 {
		t.Error("a writer error was retried")
	}
}

// TestBadResponses checks that complete answers breaking the contract are
// reported as ErrBadResponse and not retried.
func TestBadResponses(t *testing.T) {
	tests := []struct {
		name   string
		mangle func(h http.Header, body []byte) []byte
	}{
		{"wrong content type", func(h http.Header, b []byte) []byte { h.Set("Content-Type", "text/html"); return b }},
		{"missing Brand-Epoch-Batches", func(h http.Header, b []byte) []byte { h.Del("Brand-Epoch-Batches"); return b }},
		{"non-numeric Brand-Batch-Samples", func(h http.Header, b []byte) []byte { h.Set("Brand-Batch-Samples", "four"); return b }},
		{"sample count disagrees", func(h http.Header, b []byte) []byte { h.Set("Brand-Batch-Samples", "3"); return b }},
		{"garbage body", func(h http.Header, b []byte) []byte { return bytes.Repeat([]byte("x"), len(b)) }},
		{"member cut inside the tar", func(h http.Header, b []byte) []byte { return b[:700] }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := newFakeGateway(t)
			g.setHook(func(w http.ResponseWriter, r *http.Request) bool {
				rec := g.render(r)
				h := rec.Header().Clone()
				body := tt.mangle(h, rec.Body.Bytes())
				h.Set("Content-Length", strconv.Itoa(len(body)))
				for k, v := range h {
					w.Header()[k] = v
				}
				w.Write(body)
				return true
			})
			c, w := newClient(t, g, client.Options{})
			_, err := c.Batch(context.Background(), 0, 0)
			if !errors.Is(err, client.ErrBadResponse) {
				t.Fatalf("error %v; want ErrBadResponse", err)
			}
			if len(w.get()) != 0 {
				t.Error("a bad response was retried")
			}
		})
	}
}

func TestManifest(t *testing.T) {
	g := newFakeGateway(t)
	c, _ := newClient(t, g, client.Options{Job: api.Job{Params: shuffle.Params{World: 2, Rank: 1, BatchSize: 3}}})
	m, err := c.Manifest(context.Background(), 4, 2)
	if err != nil {
		t.Fatal(err)
	}
	p := fakeParams{batchSize: 3, window: 2, world: 2, rank: 1}
	want := g.expectedKeys("toy", p, 4, 2)
	d := g.datasets["toy"]
	if m.Dataset != "toy" || m.IndexID != d.index || m.Epoch != 4 || m.Batch != 2 || m.Rank != 1 || m.World != 2 ||
		m.BatchSize != 3 || m.Batches != 4 || len(m.Samples) != len(want) {
		t.Fatalf("manifest %+v", m)
	}
	for i, s := range m.Samples {
		fs := d.samples[s.ID]
		if s.Key != want[i] || fs.key != s.Key || s.Offset != fs.offset || s.Length != int64(len(fs.tar)) ||
			s.Chunk != fmt.Sprintf("chunk-%06d.tar", fs.chunk) || s.CRC32C != crc32.Checksum(fs.tar, crc32.MakeTable(crc32.Castagnoli)) {
			t.Errorf("sample %d: %+v does not locate %q", i, s, want[i])
		}
	}
}

func TestEpochInfo(t *testing.T) {
	g := newFakeGateway(t)
	c, _ := newClient(t, g, client.Options{Job: api.Job{Dataset: "val", Params: shuffle.Params{Window: 1, BatchSize: 2, DropLast: true}}})
	info, err := c.EpochInfo(context.Background(), 3)
	if err != nil {
		t.Fatal(err)
	}
	want := client.EpochInfo{Dataset: "val", IndexID: g.datasets["val"].index, Epoch: 3, Samples: 7, Batches: 3,
		BatchSize: 2, World: 1, Rank: 0, Window: 1, Seed: 0, DropLast: true, Chunks: 2, Windows: 2, RankSamples: 6}
	if *info != want {
		t.Errorf("EpochInfo = %+v; want %+v", *info, want)
	}
}

func TestEpochInfoRejectsIncompletePlans(t *testing.T) {
	// plan is a valid answer to the zero Options, with fields replaced.
	plan := func(replace ...string) string {
		fields := map[string]string{"epoch": "0", "seed": "0", "samples": "4", "batches": "1", "batch_size": "4",
			"world": "1", "rank": "0", "window": "1", "drop_last": "false", "rank_samples": "4"}
		for i := 0; i < len(replace); i += 2 {
			fields[replace[i]] = replace[i+1]
		}
		var parts []string
		for _, k := range slices.Sorted(maps.Keys(fields)) {
			if fields[k] != "" {
				parts = append(parts, strconv.Quote(k)+":"+fields[k])
			}
		}
		return "{" + strings.Join(parts, ",") + "}"
	}
	tests := []struct {
		name string
		opts client.Options
		plan string
		want string // in the error; "" for a plan that is accepted
	}{
		{"valid", client.Options{}, plan(), ""},
		{"no seed", client.Options{}, plan("seed", ""), "no seed"},
		{"wrong epoch", client.Options{}, plan("epoch", "1"), "asked for epoch 0, got 1"},
		{"zero world", client.Options{}, plan("world", "0"), "world 0"},
		{"ignored batch_size", client.Options{Job: api.Job{Params: shuffle.Params{BatchSize: 8}}}, plan(), "asked for batch_size=8"},
		{"ignored seed", client.Options{Job: api.Job{Params: shuffle.Params{Seed: 3}}}, plan(), "asked for seed=3"},
		{"ignored drop_last", client.Options{Job: api.Job{Params: shuffle.Params{DropLast: true}}}, plan(), "asked for drop_last=true"},
		{"ignored dataset", client.Options{Job: api.Job{Dataset: "val"}}, plan("dataset", `"toy"`), "asked for dataset=val"},
		{"unasked offset", client.Options{}, plan("offset", "2"), "asked for offset=0, gateway planned offset=2"},
		{"batches disagree with the parameters", client.Options{}, plan("batches", "2"), "2 batches from offset 0 of 4 samples; the job's parameters give 1"},
		{"rank_samples disagree with the parameters", client.Options{}, plan("rank_samples", "3"), "rank_samples 3; the job's parameters give 4"},
		{"not JSON", client.Options{}, `<html>`, "decoding JSON"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := newFakeGateway(t)
			g.setHook(func(w http.ResponseWriter, r *http.Request) bool {
				w.Header().Set("Content-Type", "application/json")
				io.WriteString(w, tt.plan)
				return true
			})
			c, _ := newClient(t, g, tt.opts)
			_, err := c.EpochInfo(context.Background(), 0)
			switch {
			case tt.want == "" && err != nil:
				t.Errorf("plan %s rejected: %v", tt.plan, err)
			case tt.want == "":
			case !errors.Is(err, client.ErrBadResponse) || !strings.Contains(err.Error(), tt.want):
				t.Errorf("error %v; want ErrBadResponse saying %q", err, tt.want)
			}
		})
	}
}

func TestDatasets(t *testing.T) {
	g := newFakeGateway(t)
	c, _ := newClient(t, g, client.Options{Job: api.Job{Dataset: "val"}})
	list, err := c.Datasets(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 2 || list[0].Name != "toy" || !list[0].Default || list[0].Samples != 20 || list[0].Chunks != 5 ||
		list[0].IndexID != g.datasets["toy"].index || list[0].Bytes != g.datasets["toy"].bytes || list[0].URL != "mem://toy" ||
		list[1].Name != "val" || list[1].Default || list[1].Samples != 7 {
		t.Errorf("Datasets = %+v", list)
	}
	if q := query(t, g.requests()[0]); len(q) != 0 {
		t.Errorf("Datasets sent query %v; want none", q)
	}
}

func TestSample(t *testing.T) {
	g := newFakeGateway(t)
	tests := []struct {
		dataset string
		id      int
	}{
		{"", 0},
		{"toy", 19},
		{"val", 1},
		{"val", 5}, // a key that needs escaping
		{"val", 6}, // a PAX-length key
	}
	for _, tt := range tests {
		ds := tt.dataset
		if ds == "" {
			ds = "toy"
		}
		want := g.datasets[ds].samples[tt.id]
		t.Run(want.key, func(t *testing.T) {
			c, _ := newClient(t, g, client.Options{Job: api.Job{Dataset: tt.dataset, Params: shuffle.Params{BatchSize: 3}}})
			s, err := c.Sample(context.Background(), want.key)
			if err != nil {
				t.Fatal(err)
			}
			checkSamples(t, g.datasets[ds], []client.Sample{*s}, []string{want.key})
			reqs := g.requests()
			q := query(t, reqs[len(reqs)-1])
			if q.Get("dataset") != tt.dataset || len(q) > 1 {
				t.Errorf("Sample sent query %v; want only the dataset", q)
			}
		})
	}
}

func TestSampleErrors(t *testing.T) {
	g := newFakeGateway(t)
	c, _ := newClient(t, g, client.Options{})
	for _, key := range []string{"", "/abs", "a//b", "a/./b", "a/../b", "trailing/"} {
		if _, err := c.Sample(context.Background(), key); !errors.Is(err, client.ErrInvalid) {
			t.Errorf("Sample(%q) = %v; want ErrInvalid", key, err)
		}
	}
	if n := len(g.requests()); n != 0 {
		t.Errorf("%d requests for invalid keys", n)
	}
	_, err := c.Sample(context.Background(), "train/n00/none")
	var apiErr *client.APIError
	if !errors.As(err, &apiErr) || apiErr.StatusCode != 404 {
		t.Errorf("missing sample: %v; want a 404 APIError", err)
	}
	// A gateway answering with another sample must not be believed.
	g.setHook(func(w http.ResponseWriter, r *http.Request) bool {
		other := r.Clone(r.Context())
		other.URL.Path, other.URL.RawPath = "/samples/train/n00/img001", ""
		rec := g.render(other)
		for k, v := range rec.Header() {
			w.Header()[k] = v
		}
		w.Write(rec.Body.Bytes())
		return true
	})
	if _, err := c.Sample(context.Background(), "train/n00/img000"); !errors.Is(err, client.ErrBadResponse) {
		t.Errorf("wrong sample: %v; want ErrBadResponse", err)
	}
}
