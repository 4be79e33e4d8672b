package bench

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/brandgw/brand/client"
	"github.com/brandgw/brand/dataset"
	"github.com/brandgw/brand/gateway"
	"github.com/brandgw/brand/internal/gen/synth"
	"github.com/brandgw/brand/s3backend"
	"github.com/brandgw/brand/shuffle"
)

// discardResponse is an http.ResponseWriter that throws the body away, so a
// benchmark measures the gateway's handler and nothing downstream of it.
type discardResponse struct {
	h    http.Header
	code int
	n    int64
}

func (d *discardResponse) Header() http.Header  { return d.h }
func (d *discardResponse) WriteHeader(code int) { d.code = code }
func (d *discardResponse) Write(p []byte) (int, error) {
	if d.code == 0 {
		d.code = http.StatusOK
	}
	d.n += int64(len(p))
	return len(p), nil
}

// warmGateway packs a dataset of 2048 samples of mean 100 KiB into a local
// store, serves it from a gateway whose cache holds all of it, and reads
// epoch 0 through it so that every chunk is resident. It returns the
// gateway, the number of batches of an epoch and the bytes of epoch 1.
func warmGateway(b *testing.B) (g *gateway.Gateway, batches int, epochBytes int64) {
	b.Helper()
	const samples = 2048
	ctx := context.Background()
	dir := b.TempDir()
	src := filepath.Join(dir, "src")
	if err := (synth.Spec{Samples: samples, MeanBytes: 100 << 10, Classes: 10, Seed: 1}).WriteTree(src); err != nil {
		b.Fatal(err)
	}
	store, err := s3backend.NewLocal(filepath.Join(dir, "store"))
	if err != nil {
		b.Fatal(err)
	}
	res, err := dataset.Pack(ctx, src, store, dataset.PackOptions{ChunkSize: 8 << 20, Shuffle: true, Seed: 1})
	if err != nil {
		b.Fatal(err)
	}
	g, err = gateway.New(gateway.Config{
		Datasets:            []gateway.DatasetSpec{{Name: "bench", Store: store}},
		CacheSize:           2 * res.Index.TotalBytes(),
		PrefetchConcurrency: -1,
		Defaults:            gateway.Defaults{Seed: 1, BatchSize: benchBatch, Window: 4},
	})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(g.Close)
	if err := g.Load(ctx); err != nil {
		b.Fatal(err)
	}
	batches = shuffle.NumBatches(res.Index.NumSamples(), benchBatch, 1, false)
	// Epoch 0 loads every chunk; the benchmarks serve epoch 1, whose
	// batches draw from the same, now resident, chunks.
	for m := range batches {
		serveDiscard(b, g, 0, m)
	}
	for m := range batches {
		epochBytes += serveDiscard(b, g, 1, m)
	}
	if misses := g.Cache().Stats().Misses; misses != int64(res.Index.NumChunks()) {
		b.Fatalf("%d cache misses warming up, want one per chunk (%d)", misses, res.Index.NumChunks())
	}
	return g, batches, epochBytes
}

const benchBatch = 256

func serveDiscard(b *testing.B, g *gateway.Gateway, epoch, m int) int64 {
	w := &discardResponse{h: http.Header{}}
	g.ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/epoch/"+strconv.Itoa(epoch)+"/batch/"+strconv.Itoa(m), nil))
	if w.code != http.StatusOK {
		b.Fatalf("epoch %d batch %d: status %d", epoch, m, w.code)
	}
	return w.n
}

// BenchmarkServeBatch measures the gateway's warm path: a batch of 256
// samples of mean 100 KiB planned, pinned from a cache holding the whole
// dataset, and written from the cached chunks through the full handler
// (routing, metrics, headers) to a writer that discards it. MB/s is batch
// body bytes; since nothing is copied, it is the handler's per-batch cost
// expressed as a rate, an upper bound that BenchmarkServeBatchLoopback
// brings down to earth.
func BenchmarkServeBatch(b *testing.B) {
	g, batches, epochBytes := warmGateway(b)
	misses := g.Cache().Stats().Misses
	b.SetBytes(epochBytes / int64(batches))
	b.ReportAllocs()
	m := 0
	for b.Loop() {
		serveDiscard(b, g, 1, m)
		m = (m + 1) % batches
	}
	if got := g.Cache().Stats().Misses; got != misses {
		b.Errorf("%d cache misses while serving warm batches, want none", got-misses)
	}
	b.ReportMetric(float64(b.N)*benchBatch/b.Elapsed().Seconds(), "samples/s")
}

// BenchmarkMemoryBatchLoopback is BenchmarkServeBatchLoopback with the
// gateway replaced by a plain HTTP server that writes each batch's bytes,
// captured from the gateway beforehand, from memory in one write: the
// warm-path ceiling of benchmark limit (b), batch for batch, so that the
// two benchmarks differ only in the server.
func BenchmarkMemoryBatchLoopback(b *testing.B) {
	g, batches, epochBytes := warmGateway(b)
	bodies := make([][]byte, batches)
	for m := range bodies {
		w := &captureResponse{discardResponse: discardResponse{h: http.Header{}}}
		g.ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/epoch/1/batch/"+strconv.Itoa(m), nil))
		bodies[m] = w.body
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		m, err := strconv.Atoi(r.URL.Path[strings.LastIndexByte(r.URL.Path, '/')+1:])
		if err != nil || m < 0 || m >= len(bodies) {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Length", strconv.Itoa(len(bodies[m])))
		_, _ = w.Write(bodies[m])
	}))
	defer srv.Close()
	loopback(b, srv.URL, batches, epochBytes)
}

// captureResponse keeps the body it is written.
type captureResponse struct {
	discardResponse
	body []byte
}

func (c *captureResponse) Write(p []byte) (int, error) {
	c.body = append(c.body, p...)
	return c.discardResponse.Write(p)
}

// loopback GETs the batches of epoch 1 from base in turn over one
// connection, reading each body to the end.
func loopback(b *testing.B, base string, batches int, epochBytes int64) {
	hc := &http.Client{Transport: newTransport(1)}
	defer hc.CloseIdleConnections()
	b.SetBytes(epochBytes / int64(batches))
	m := 0
	for b.Loop() {
		resp, err := hc.Get(base + "/epoch/1/batch/" + strconv.Itoa(m))
		if err != nil {
			b.Fatal(err)
		}
		if _, err := io.Copy(io.Discard, resp.Body); err != nil {
			b.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			b.Fatalf("batch %d: %s", m, resp.Status)
		}
		m = (m + 1) % batches
	}
	b.ReportMetric(float64(b.N)*benchBatch/b.Elapsed().Seconds(), "samples/s")
}

// BenchmarkServeBatchLoopback is BenchmarkServeBatch over a real loopback
// HTTP connection to a client that reads each body and discards it: the
// warm path with the socket copies a deployment pays, and without the
// client's tar decoding.
func BenchmarkServeBatchLoopback(b *testing.B) {
	g, batches, epochBytes := warmGateway(b)
	srv := httptest.NewServer(g)
	defer srv.Close()
	loopback(b, srv.URL, batches, epochBytes)
}

// BenchmarkDecodeBatch decodes one warm batch body (256 samples of mean
// 100 KiB): in place, as the Go client and the harness's limits and
// baselines do (client.DecodeTar, after one read of the whole body), and
// streaming member by member (client.DecodeSamples), which copies each
// member into its own buffer.
func BenchmarkDecodeBatch(b *testing.B) {
	g, _, _ := warmGateway(b)
	w := &captureResponse{discardResponse: discardResponse{h: http.Header{}}}
	g.ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/epoch/1/batch/0", nil))
	body := w.body
	b.Run("in-place", func(b *testing.B) {
		b.SetBytes(int64(len(body)))
		for b.Loop() {
			if _, err := client.DecodeTar(body); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("streaming", func(b *testing.B) {
		b.SetBytes(int64(len(body)))
		for b.Loop() {
			if _, err := client.DecodeSamples(bytes.NewReader(body)); err != nil {
				b.Fatal(err)
			}
		}
	})
}
