package gateway_test

import (
	"fmt"
	"io"
	"net/http"
	"net/url"
	"runtime"
	"strings"
	"testing"

	"github.com/brandgw/brand/api"
	"github.com/brandgw/brand/gateway"
)

// manySourcesCache is the cache of manySources' gateways: the chunks
// it holds are memory that the bytes read decide, bounded by it,
// whatever the sources. (What the stages of a node hold for many
// sources, goroutines and heap, is internal/batch/visit's
// TestManySourcesConstantCost.)
const manySourcesCache = 2 << 20

// batchGarbage starts a gateway serving n small datasets of 1,200
// samples in all and returns the bytes the process allocated per batch
// (runtime.MemStats.TotalAlloc) over an epoch of a two-phase schedule
// over all of them (75 batches of 16, whatever n), after a first epoch
// that warmed it (its figures at their bounds, its memo tables filled).
func batchGarbage(t *testing.T, n int) uint64 {
	t.Helper()
	epoch := manySources(t, n)
	epoch(0)
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	steps := epoch(1)
	runtime.ReadMemStats(&after)
	return (after.TotalAlloc - before.TotalAlloc) / uint64(steps)
}

// manySources starts a gateway serving n small datasets of 1,200
// samples in all and returns a function that reads epoch e of a
// two-phase schedule over all of them, 16 samples a batch with the phase
// change halfway (75 batches, whatever n), and returns its batches.
func manySources(t *testing.T, n int) func(e int) int {
	t.Helper()
	var specs []gateway.DatasetSpec
	for i := range n {
		name := fmt.Sprintf("s%03d", i)
		f := newFixtureNamed(t, t.TempDir(), name+"-", 200/n, 6, 256)
		specs = append(specs, gateway.DatasetSpec{Name: name, URL: "file:///" + name, Store: f.store})
	}
	_, srv := start(t, nil, func(c *gateway.Config) {
		c.Datasets = specs
		c.Defaults = gateway.Defaults{BatchSize: 16, Window: 2, Seed: 5}
		c.CacheSize = manySourcesCache
	})
	const steps = 1200 / 16
	q := "mix_schedule=" + url.QueryEscape(sourcesSchedule(n))
	return func(e int) int {
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
		return steps
	}
}

// TestManySourcesGarbagePerBatch: a batch of a schedule over 100
// sources makes the garbage of one over 20 and at most 1.5 KiB a source
// more, beyond what parsing its longer request costs (measured here, the
// request's text is the sources' names). A batch of 16 samples reads a
// part per component it draws from: 12 to 16 over either (2 or 3 over 2
// sources), so what each part costs to read and answer is in both; what
// is left grows with the sources named: the schedule's use table, rebuilt
// at nearly every batch of a mixture of many sources, has an entry per
// source, and the request's sources are resolved and named in the
// response's headers (measured: 0.65 KiB a source). Before, it was 2.9
// KiB a source (146 KiB a batch over 20 sources, 424 over 100; 41 over
// 2; parsing the request 13 and 59 KiB of it): the live statistics made room for one component stream at
// nearly every part (100 streams through 16 kept), the schedule
// followed at most 64 streams and made a component's anew at nearly
// every part, its table made a map per source, and the mixture's parts
// built their components' epochs and windows anew (the memo tables hold
// fewer than 100).
func TestManySourcesGarbagePerBatch(t *testing.T) {
	if raceEnabled {
		// Under the race detector sync.Pool drops what it holds at random
		// (to find misuse), so a batch's garbage is noise: 273-485 KiB a
		// batch over 20 sources from one run to the next, 100 sources
		// under 2 in one. scripts/test.sh runs it without, after the suite.
		t.Skip("what a batch allocates: run without the race detector, as scripts/test.sh does after the suite")
	}
	counts := []int{2, 20, 100}
	per := map[int]uint64{}
	for _, n := range counts {
		t.Run(fmt.Sprintf("%d sources", n), func(t *testing.T) {
			per[n] = batchGarbage(t, n)
		})
	}
	if len(per) != len(counts) {
		t.Fatal("a measurement failed")
	}
	parse := map[int]uint64{}
	for _, n := range counts {
		parse[n] = parseGarbage(t, n)
	}
	for _, n := range counts {
		t.Logf("%d sources: %d KiB allocated a batch, %d KiB of it parsing the request's schedule", n, per[n]>>10, parse[n]>>10)
	}
	request := parse[100] - parse[20]
	if bound := per[20] + request + 80*3<<9; per[100] > bound {
		t.Errorf("a batch over 100 sources allocated %d KiB, over 20 %d KiB: beyond the longer request's parse (%d KiB), %.1f KiB a source more (at most 1.5)",
			per[100]>>10, per[20]>>10, request>>10, float64(per[100]-per[20]-request)/80/1024)
	}
}

// sourcesSchedule is manySources' two phases over sources s000 on, the
// second from step 37 of 75: parseGarbage measures the same text.
func sourcesSchedule(n int) string {
	var w0, w1 []string
	for i := range n {
		w0 = append(w0, fmt.Sprintf("s%03d:%d", i, 1+i%3))
		w1 = append(w1, fmt.Sprintf("s%03d:%d", i, 1+(i+1)%4))
	}
	return "0:" + strings.Join(w0, ",") + ";37:" + strings.Join(w1, ",")
}

// parseGarbage is the bytes parsing manySources' schedule over n
// sources allocates.
func parseGarbage(t *testing.T, n int) uint64 {
	t.Helper()
	text := sourcesSchedule(n)
	const runs = 50
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for range runs {
		if _, err := api.ParseSchedule(text); err != nil {
			t.Fatal(err)
		}
	}
	runtime.ReadMemStats(&after)
	return (after.TotalAlloc - before.TotalAlloc) / runs
}
