package gateway_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"

	"github.com/brandgw/brand/gateway"
)

// discardWriter is a ResponseWriter that drops the body, so the benchmark
// times planning and writing a batch, not a network.
type discardWriter struct{ h http.Header }

func (d *discardWriter) Header() http.Header         { return d.h }
func (d *discardWriter) Write(p []byte) (int, error) { return io.Discard.Write(p) }
func (d *discardWriter) WriteHeader(int)             {}

// BenchmarkServeBatchWarm plans a batch and writes it from cached chunks:
// the gateway's whole warm path without HTTP framing. Bytes/s is the
// response body rate.
func BenchmarkServeBatchWarm(b *testing.B) {
	f := newFixture(b, 16, 64)
	g, _ := start(b, f.store, func(c *gateway.Config) {
		c.Defaults = gateway.Defaults{BatchSize: 64, Window: 4, Seed: 1}
		c.PrefetchConcurrency = -1
		c.Planner = nil // the optimum of a trace of one epoch's batches read over and over is not what is timed
	})
	serveWarm(b, g, func(m int) string { return "/epoch/0/batch/" + strconv.Itoa(m) })
}

// BenchmarkServeMixBatchWarm is BenchmarkServeBatchWarm over a mixture of
// two datasets, each half of that benchmark's dataset, at equal weights:
// what a mixture batch costs above one dataset's batch of the same size.
func BenchmarkServeMixBatchWarm(b *testing.B) {
	var specs []gateway.DatasetSpec
	for _, name := range []string{"a", "b"} {
		f := newFixtureNamed(b, b.TempDir(), name+"-", 8, 64, 0)
		specs = append(specs, gateway.DatasetSpec{Name: name, URL: "file:///" + name, Store: f.store})
	}
	g, _ := start(b, nil, func(c *gateway.Config) {
		c.Datasets = specs
		c.Defaults = gateway.Defaults{BatchSize: 64, Window: 4, Seed: 1}
		c.PrefetchConcurrency = -1
		c.Planner = nil
	})
	serveWarm(b, g, func(m int) string { return "/epoch/0/batch/" + strconv.Itoa(m) + "?mix=a:0.5,b:0.5" })
}

// serveWarm times g serving the first 16 batches of url over and over,
// after reading each once to warm the cache and size the bodies.
func serveWarm(b *testing.B, g *gateway.Gateway, url func(batch int) string) {
	w := &discardWriter{h: http.Header{}}
	var body int64
	for m := range 16 {
		rec := httptest.NewRecorder()
		g.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, url(m), nil))
		if rec.Code != 200 {
			b.Fatalf("batch %d: %d %s", m, rec.Code, rec.Body.String())
		}
		body += int64(rec.Body.Len())
	}
	b.SetBytes(body / 16)
	b.ReportAllocs()
	m := 0
	for b.Loop() {
		clear(w.h)
		g.ServeHTTP(w, httptest.NewRequest(http.MethodGet, url(m%16), nil))
		m++
	}
}
