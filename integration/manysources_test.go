package integration

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/brandgw/brand/dataset"
	"github.com/brandgw/brand/gateway"
	"github.com/brandgw/brand/internal/gen/synth"
	"github.com/brandgw/brand/internal/testsupport/miniotest"
	"github.com/brandgw/brand/s3backend"
)

// settledGoroutines is the process's goroutine count once it stops
// changing (goroutines that end with a request or a connection take a
// moment to go), bounded by a few seconds.
func settledGoroutines() int {
	deadline := time.Now().Add(5 * time.Second)
	n := runtime.NumGoroutine()
	for prev := -1; n != prev && time.Now().Before(deadline); {
		prev = n
		time.Sleep(50 * time.Millisecond)
		n = runtime.NumGoroutine()
	}
	return n
}

// TestManySourcesOverS3ConstantGoroutines: a gateway over 100 datasets in
// one MinIO holds the goroutines of one over 2, when ready and after an
// epoch of a two-phase schedule over all of them: its stores share one
// pool of connections to the endpoint. (internal/batch/visit's
// TestManySourcesConstantCost measures memory over local stores, which
// keep no connections.) Before the stores shared a transport, each kept
// the keep-alive connection its index was read on: 100 sources held 200
// goroutines more than 2, already at ready (issue 43's bench: 220
// goroutines at 100 sources, 24 at 2).
func TestManySourcesOverS3ConstantGoroutines(t *testing.T) {
	ctx := context.Background()
	srv := miniotest.ForTest(t)
	if err := srv.MakeBucket(ctx, "many"); err != nil {
		t.Fatal(err)
	}
	const sources = 100
	// The packing's stores share one pool, closed before the gateways
	// are measured.
	pack, closeIdle := srv.Config().SharedTransport()
	names := make([]string, sources)
	for i := range names {
		names[i] = fmt.Sprintf("s%03d", i)
		src := filepath.Join(t.TempDir(), names[i])
		if err := (synth.Spec{Samples: 16, MeanBytes: 1 << 10, Classes: 2, Seed: uint64(100 + i)}).WriteTree(src); err != nil {
			t.Fatal(err)
		}
		store, err := s3backend.Open(ctx, "s3://many/"+names[i], pack)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := dataset.Pack(ctx, src, store, dataset.PackOptions{ChunkSize: 8 << 10, Seed: 1, Name: names[i]}); err != nil {
			t.Fatal(err)
		}
	}
	closeIdle()
	type cost struct {
		ready, after     int
		loaded, liveHeap uint64 // live heap bytes at ready and after the epoch
	}
	liveHeap := func() uint64 {
		var ms runtime.MemStats
		for range 3 {
			runtime.GC()
		}
		runtime.ReadMemStats(&ms)
		return ms.HeapAlloc
	}
	measure := func(t *testing.T, n int) cost {
		var specs []gateway.DatasetSpec
		var w0, w1 []string
		for i, name := range names[:n] {
			specs = append(specs, gateway.DatasetSpec{Name: name, URL: "s3://many/" + name})
			w0 = append(w0, fmt.Sprintf("%s:%d", name, 1+i%3))
			w1 = append(w1, fmt.Sprintf("%s:%d", name, 1+(i+1)%4))
		}
		g, err := gateway.New(gateway.Config{Datasets: specs, Backend: srv.Config(), CacheSize: 4 << 20,
			Defaults: gateway.Defaults{BatchSize: 8, Window: 2, Seed: 5}})
		if err != nil {
			t.Fatal(err)
		}
		defer g.Close()
		if err := g.Load(ctx); err != nil {
			t.Fatal(err)
		}
		hs := httptest.NewServer(g)
		defer hs.Close()
		var c cost
		c.ready = settledGoroutines()
		c.loaded = liveHeap()
		// An epoch of 320 samples whatever n, 40 batches of 8; the
		// weights change at the 20th.
		q := "mix_samples=320&mix_schedule=" + url.QueryEscape("0:"+strings.Join(w0, ",")+";20:"+strings.Join(w1, ","))
		for b := range 40 {
			resp, err := http.Get(fmt.Sprintf("%s/epoch/0/batch/%d?%s", hs.URL, b, q))
			if err != nil {
				t.Fatal(err)
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("%d sources, batch %d: %s", n, b, resp.Status)
			}
		}
		http.DefaultClient.CloseIdleConnections()
		c.after = settledGoroutines()
		c.liveHeap = liveHeap()
		return c
	}
	c2 := measure(t, 2)
	c100 := measure(t, sources)
	t.Logf("goroutines at ready and after an epoch: %d and %d at 2 sources, %d and %d at %d", c2.ready, c2.after, c100.ready, c100.after, sources)
	// The pool's idle connections are as many as the reads ever ran at
	// once (a batch of 8 reads at most 8 chunks, prefetch beside it):
	// allow a dozen, not one a source.
	if c100.ready > c2.ready+8 {
		t.Errorf("at ready, %d sources hold %d goroutines against 2 sources' %d: something is kept per source", sources, c100.ready, c2.ready)
	}
	if c100.after > c2.after+24 {
		t.Errorf("after an epoch, %d sources hold %d goroutines against 2 sources' %d: something is kept per source", sources, c100.after, c2.after)
	}
	// Memory: what the sources' indexes cost is the live heap loading
	// them added (at ready, 100 sources against 2); serving the epoch may
	// add on top of that the chunks the cache keeps (all 100 sources'
	// data is 1.6 MiB, under its 4 MiB: allow 2 MiB) and connection
	// buffers (a dozen idle connections' ~128 KiB, as above: 1.5 MiB),
	// not anything a source (measured: 1.2 MiB beyond the indexes). The bound is the live heap after a forced
	// collection: garbage and the heap the runtime keeps idle are not
	// structures kept (see docs/benchmarks.md, Schedules).
	t.Logf("live heap at ready and after an epoch: %d and %d KiB at 2 sources, %d and %d KiB at %d", c2.loaded>>10, c2.liveHeap>>10, c100.loaded>>10, c100.liveHeap>>10, sources)
	index := int64(c100.loaded) - int64(c2.loaded)
	if grew := int64(c100.liveHeap) - int64(c2.liveHeap); grew > index+2<<20+3<<19 {
		t.Errorf("after an epoch, %d sources hold %d KiB more live heap than 2 sources, beyond their indexes' %d KiB, 2 MiB of chunks and 1.5 MiB of connections: something is kept per source",
			sources, grew>>10, index>>10)
	}
}
