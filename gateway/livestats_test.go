package gateway_test

import (
	"fmt"
	"io"
	"runtime"
	"strings"
	"testing"

	"github.com/brandgw/brand/gateway"
)

// TestStatsBounded serves 1,000 short epochs, and a flood of seeds, and
// checks that the per-epoch figures and their metric series stay bounded,
// and so does the heap.
func TestStatsBounded(t *testing.T) {
	f := newFixture(t, 4, 4) // 16 samples: one batch an epoch
	g, srv := start(t, f.store, func(c *gateway.Config) {
		c.Defaults = gateway.Defaults{BatchSize: 16, Window: 2, Seed: 1}
	})
	heap := func() uint64 {
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		return ms.HeapAlloc
	}
	client := srv.Client()
	serve := func(from, to int, seed func(int) int) {
		for e := from; e < to; e++ {
			resp, err := client.Get(fmt.Sprintf("%s/epoch/%d/batch/0?seed=%d", srv.URL, e, seed(e)))
			if err != nil {
				t.Fatal(err)
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 200 {
				t.Fatalf("epoch %d: %d", e, resp.StatusCode)
			}
		}
	}
	serve(0, 100, func(int) int { return 1 })
	before := heap()
	serve(100, 1000, func(int) int { return 1 })
	if st := g.EpochStats(); len(st) != 16 || st[0].Epoch != 984 || st[15].Epoch != 999 {
		t.Errorf("after 1,000 epochs of one job: %d epochs kept, from %d; want its 16 highest, 984..999", len(st), st[0].Epoch)
	}
	serve(0, 500, func(e int) int { return 1000 + e }) // 500 distinct seeds
	after := heap()
	if n := len(g.EpochStats()); n > 16*16 {
		t.Errorf("%d epochs kept in the statistics, want at most 256 (16 jobs × 16 epochs)", n)
	}
	if n := len(g.JobStats()); n != 16 {
		t.Errorf("%d jobs kept in the statistics, want the 16 served last", n)
	}
	metrics := scrape(t, srv.URL)
	series := strings.Count(metrics, "\nbrand_epoch_")
	if series > 3*16*16 {
		t.Errorf("/metrics has %d per-epoch series, want at most %d", series, 3*16*16)
	}
	if jobSeries := strings.Count(metrics, "\nbrand_job_"); jobSeries > 3*16 {
		t.Errorf("/metrics has %d per-job series, want at most %d", jobSeries, 3*16)
	}
	t.Logf("heap %d → %d bytes; %d epoch stats; %d per-epoch series", before, after, len(g.EpochStats()), series)
	if after > before+8<<20 {
		t.Errorf("heap grew from %d to %d bytes over 1,400 more epochs", before, after)
	}
}

func scrape(t *testing.T, url string) string {
	t.Helper()
	_, body := get(t, url+"/metrics")
	return string(body)
}

func grepLines(s, substr string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, substr) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
