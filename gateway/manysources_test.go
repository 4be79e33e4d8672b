package gateway_test

import (
	"os"
	"runtime/pprof"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/brandgw/brand/gateway"
)

// manySourcesCache is the cache of TestManySourcesConstantCost's
// gateways: the chunks it holds are memory that the bytes read decide,
// bounded by it, whatever the sources.
const manySourcesCache = 2 << 20

// sourcesCost starts a gateway serving n small datasets of 1,200
// samples in all, reads an epoch of a two-phase schedule over all of them
// (75 batches, whatever n), and returns the goroutines
// and live heap bytes it holds afterwards, and the heap before the
// epoch (the datasets loaded).
func sourcesCost(t *testing.T, n int) (goroutines int, heap, loaded uint64) {
	t.Helper()
	var specs []gateway.DatasetSpec
	var w0, w1 []string
	for i := range n {
		name := fmt.Sprintf("s%03d", i)
		f := newFixtureNamed(t, t.TempDir(), name+"-", 200/n, 6, 256)
		specs = append(specs, gateway.DatasetSpec{Name: name, URL: "file:///" + name, Store: f.store})
		w0 = append(w0, fmt.Sprintf("%s:%d", name, 1+i%3))
		w1 = append(w1, fmt.Sprintf("%s:%d", name, 1+(i+1)%4))
	}
	_, srv := start(t, nil, func(c *gateway.Config) {
		c.Datasets = specs
		c.Defaults = gateway.Defaults{BatchSize: 16, Window: 2, Seed: 5}
		c.CacheSize = manySourcesCache
	})
	settle := func() uint64 {
		var ms runtime.MemStats
		for range 3 {
			runtime.GC()
		}
		runtime.ReadMemStats(&ms)
		return ms.HeapAlloc
	}
	loaded = settle()
	// 16 samples a batch; a phase change halfway through the epoch.
	steps := 1200 / 16
	q := "mix_schedule=" + url.QueryEscape("0:"+strings.Join(w0, ",")+fmt.Sprintf(";%d:", steps/2)+strings.Join(w1, ","))
	for b := range steps {
		resp, err := http.Get(fmt.Sprintf("%s/epoch/0/batch/%d?%s", srv.URL, b, q))
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("batch %d: %d", b, resp.StatusCode)
		}
	}
	http.DefaultClient.CloseIdleConnections()
	// Goroutines that end with a request (its connection's) take a moment
	// to go: count once they have.
	deadline := time.Now().Add(5 * time.Second)
	goroutines = runtime.NumGoroutine()
	for prev := -1; goroutines != prev && time.Now().Before(deadline); {
		prev = goroutines
		time.Sleep(50 * time.Millisecond)
		goroutines = runtime.NumGoroutine()
	}
	return goroutines, settle(), loaded
}

// TestManySourcesConstantCost: a schedule over 100 sources costs the
// gateway the goroutines of one over 2, and, for the same samples read,
// memory beyond the sources' indexes (loaded before the epoch) and the
// cache's chunks (at most its size) of the same order: no per-source
// readers, pools or buffers.
func TestManySourcesConstantCost(t *testing.T) {
	type cost struct {
		goroutines   int
		heap, loaded uint64
	}
	var costs []cost
	for _, n := range []int{2, 100} {
		// Each in a subtest of its own, so that its gateway is closed
		// before the next is measured.
		t.Run(fmt.Sprintf("%d sources", n), func(t *testing.T) {
			g, h, l := sourcesCost(t, n)
			costs = append(costs, cost{g, h, l})
		})
	}
	if len(costs) != 2 {
		t.Fatal("a measurement failed")
	}
	c2, c100 := costs[0], costs[1]
	t.Logf("2 sources: %d goroutines, heap %d KiB loaded, %d KiB after an epoch; 100 sources: %d goroutines, %d KiB loaded, %d KiB after",
		c2.goroutines, c2.loaded>>10, c2.heap>>10, c100.goroutines, c100.loaded>>10, c100.heap>>10)
	if c100.goroutines > c2.goroutines+8 {
		t.Errorf("100 sources hold %d goroutines against 2 sources' %d: something runs per source", c100.goroutines, c2.goroutines)
	}
	grew2, grew100 := int64(c2.heap)-int64(c2.loaded), int64(c100.heap)-int64(c100.loaded)
	if grew100 > grew2+manySourcesCache+(1<<20) {
		t.Errorf("serving an epoch grew the heap %d KiB with 100 sources, %d KiB with 2", grew100>>10, grew2>>10)
	}
}

// batchGarbage starts a gateway serving n small datasets of 1,200
// samples in all and returns the bytes the process allocated per batch
// (runtime.MemStats.TotalAlloc) over an epoch of a two-phase schedule
// over all of them (75 batches of 16, whatever n), after a first epoch
// that warmed it (its figures at their bounds, its memo tables filled).
func batchGarbage(t *testing.T, n int) uint64 {
	t.Helper()
	var specs []gateway.DatasetSpec
	var w0, w1 []string
	for i := range n {
		name := fmt.Sprintf("s%03d", i)
		f := newFixtureNamed(t, t.TempDir(), name+"-", 200/n, 6, 256)
		specs = append(specs, gateway.DatasetSpec{Name: name, URL: "file:///" + name, Store: f.store})
		w0 = append(w0, fmt.Sprintf("%s:%d", name, 1+i%3))
		w1 = append(w1, fmt.Sprintf("%s:%d", name, 1+(i+1)%4))
	}
	_, srv := start(t, nil, func(c *gateway.Config) {
		c.Datasets = specs
		c.Defaults = gateway.Defaults{BatchSize: 16, Window: 2, Seed: 5}
		c.CacheSize = manySourcesCache
	})
	steps := 1200 / 16
	q := "mix_schedule=" + url.QueryEscape("0:"+strings.Join(w0, ",")+fmt.Sprintf(";%d:", steps/2)+strings.Join(w1, ","))
	epoch := func(e int) {
		for b := range steps {
			resp, err := http.Get(fmt.Sprintf("%s/epoch/%d/batch/%d?%s", srv.URL, e, b, q))
			if err != nil {
				t.Fatal(err)
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("epoch %d batch %d: %d", e, b, resp.StatusCode)
			}
		}
	}
	epoch(0)
	var before, after runtime.MemStats
	profile(t, n, "before")
	runtime.ReadMemStats(&before)
	epoch(1)
	runtime.ReadMemStats(&after)
	profile(t, n, "after")
	return (after.TotalAlloc - before.TotalAlloc) / uint64(steps)
}

// TestManySourcesGarbagePerBatch: a batch of a schedule over 100
// sources makes about the garbage of one over 2. A batch of 16 over 100
// sources reads up to 16 parts (one a component it takes samples from)
// where one over 2 reads 2 or 3, so what each part costs to read and
// answer grows with them; what the sources alone cost must not. Before,
// a batch over 100 sources allocated 5-6 times what one over 2 did: the
// live statistics made room for one component stream at nearly every
// part (100 streams through 16 kept), the mixture's parts and the
// schedule's use table were built anew for every batch.
func TestManySourcesGarbagePerBatch(t *testing.T) {
	var per []uint64
	for _, n := range []int{2, 100} {
		t.Run(fmt.Sprintf("%d sources", n), func(t *testing.T) {
			per = append(per, batchGarbage(t, n))
		})
	}
	if len(per) != 2 {
		t.Fatal("a measurement failed")
	}
	t.Logf("bytes allocated a batch: %d KiB at 2 sources, %d KiB at 100", per[0]>>10, per[1]>>10)
}

func profile(t *testing.T, n int, name string) {
	dir := os.Getenv("GARBAGE_PROFILE")
	if dir == "" {
		return
	}
	f, _ := os.Create(fmt.Sprintf("%s/%d-%s.heap", dir, n, name))
	defer f.Close()
	_ = pprof.Lookup("allocs").WriteTo(f, 0)
}
