package integration

import (
	"bytes"
	"context"
	"net/http"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/brandgw/brand/api"
	"github.com/brandgw/brand/client"
	"github.com/brandgw/brand/gateway"
	"github.com/brandgw/brand/internal/gen/synth"
	"github.com/brandgw/brand/internal/testsupport/miniotest"
	"github.com/brandgw/brand/shuffle"
)

// countingTransport counts a client's batch requests, so that the retries
// the clients made are requests beyond the batches they received.
type countingTransport struct {
	next     http.RoundTripper
	requests atomic.Int64
	failed   atomic.Int64 // answers other than 200, and transport errors
}

func (c *countingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	batch := strings.Contains(r.URL.Path, "/batch/")
	if batch {
		c.requests.Add(1)
	}
	resp, err := c.next.RoundTrip(r)
	if batch && (err != nil || resp.StatusCode != http.StatusOK) {
		c.failed.Add(1)
	}
	return resp, err
}

// TestFaultSuite reads two epochs with concurrent clients through a
// gateway whose store sits behind a fault-injecting proxy, with MinIO
// killed and restarted midway: every batch must arrive whole and correct,
// every fault absorbed by the gateway or, at worst, by the clients' own
// retries. docs/benchmarks.md ("Fault suite") records its figures:
//
//	go test ./integration -run TestFaultSuite -v -count=1
func TestFaultSuite(t *testing.T) {
	spec := synth.Spec{Samples: 1600, MeanBytes: 6 << 10, Classes: 7, Seed: 9}
	p := packToMinIO(t, spec, 192<<10)
	keys := p.keys()
	proxy := newFaultProxy(p.server.URL(), 20261123, 3)
	t.Cleanup(proxy.Close)

	backend := p.server.Config()
	backend.Endpoint = proxy.URL
	backend.IdleTimeout = 300 * time.Millisecond
	backend.MaxRetries = 8
	backend.RetryBase = 50 * time.Millisecond
	backend.PartSize = 64 << 10 // several parts per chunk: resumes and parallel parts both see faults
	logs := keptLog(t)
	g, url := startGateway(t, gateway.Config{
		Logger:       zerolog.New(logs).Level(zerolog.InfoLevel),
		Datasets:     []gateway.DatasetSpec{{Name: "synthetic", URL: p.url}},
		Backend:      backend,
		CacheSize:    p.bytes / 3, // chunks are evicted and read again in the second epoch
		Defaults:     gateway.Defaults{BatchSize: 16, Window: 4, Seed: 5},
		IndexPoll:    -1,
		FetchTimeout: 60 * time.Second,
	})
	proxy.armed.Store(true)

	// MinIO is killed and restarted once the clients are well under way.
	restartable := os.Getenv(miniotest.EnvEndpoint) == ""
	restarted := make(chan struct{})
	go func() {
		defer close(restarted)
		if !restartable {
			return
		}
		for proxy.gets.Load() < 60 {
			time.Sleep(5 * time.Millisecond)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		srv, err := p.server.Restart(ctx)
		if err != nil {
			t.Errorf("restarting MinIO: %v", err)
			return
		}
		t.Cleanup(func() { _ = srv.Close() })
		proxy.setTarget(srv.URL())
	}()

	start := time.Now()
	const clients = 4
	ct := &countingTransport{next: &http.Transport{DisableCompression: true, MaxIdleConnsPerHost: 16}}
	hc := &http.Client{Transport: ct}
	var batches atomic.Int64
	for epoch := range 2 {
		var (
			wg   sync.WaitGroup
			mu   sync.Mutex
			seen = map[string]int{}
		)
		for rank := range clients {
			wg.Go(func() {
				c, err := client.New(url, client.Options{HTTPClient: hc, Ahead: 2, MaxRetries: 8, Backoff: 100 * time.Millisecond,
					MaxBackoff: 2 * time.Second, Job: api.Job{Params: shuffle.Params{Seed: 5, World: clients, Rank: rank}}})
				if err != nil {
					t.Error(err)
					return
				}
				for b, err := range c.Epoch(context.Background(), epoch) {
					if err != nil {
						t.Errorf("epoch %d rank %d: %v", epoch, rank, err)
						return
					}
					batches.Add(1)
					for _, s := range b.Samples {
						p.checkSample(t, s, keys)
						mu.Lock()
						seen[s.Key]++
						mu.Unlock()
					}
				}
			})
		}
		wg.Wait()
		if len(seen) != spec.Samples {
			t.Fatalf("epoch %d: %d distinct samples served, want %d", epoch, len(seen), spec.Samples)
		}
		for k, n := range seen {
			if n != 1 {
				t.Fatalf("epoch %d: %s served %d times", epoch, k, n)
			}
		}
	}
	<-restarted
	wall := time.Since(start)

	injected, refused := proxy.counts()
	kinds := make([]string, 0, len(injected))
	total := 0
	for k, n := range injected {
		kinds = append(kinds, k)
		total += n
	}
	sort.Strings(kinds)
	var b strings.Builder
	for _, k := range kinds {
		b.WriteString(" " + k + "=" + itoa(injected[k]))
	}
	rereads := gatheredCounter(t, g, "brand_chunk_rereads_total")
	clientRetries := ct.requests.Load() - batches.Load()
	t.Logf("fault suite: %d chunk GETs, %d faults injected:%s; %d requests refused while MinIO restarted (restarted: %t)",
		proxy.gets.Load(), total, b.String(), refused, restartable)
	t.Logf("fault suite: %d batches whole and correct, %.0f chunk re-reads, %d client retries (%d failed answers), wall %s",
		batches.Load(), rereads, clientRetries, ct.failed.Load(), wall.Round(10*time.Millisecond))
	// The pacer (no budget: it learns a bound from the store's refusals)
	// is a figure: a bound learned in MinIO's restart holds the reads at
	// its floor at worst, and its waits are not idle time.
	t.Logf("fault suite: the store throttled %.0f GETs, %.0f waited for the pacer (%.1f s), its bound now %.0f GETs a second (0: none)",
		gatheredValue(t, g, "brand_store_throttled_total"), gatheredValue(t, g, "brand_store_paced_waits_total"),
		gatheredValue(t, g, "brand_store_paced_wait_seconds_total"), gatheredValue(t, g, "brand_store_rate_gets"))
	for k := faultSlowDown; k < numFaultKinds; k++ {
		if injected[k.String()] == 0 {
			t.Errorf("no %s fault was injected: the run is too short to test it", k)
		}
	}
	if injected[faultFlip.String()] > 0 && rereads == 0 {
		t.Error("bytes were flipped but no chunk was re-read")
	}
}

func itoa(n int) string { return strconv.Itoa(n) }

// lockedBuffer is a log an in-process gateway writes from many
// goroutines.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// keptLog is the log of an in-process gateway of t, shown if t fails:
// its answers with a status of 500 or more (each line names the error
// behind it), then its last warnings and errors.
func keptLog(t *testing.T) *lockedBuffer {
	t.Helper()
	logs := &lockedBuffer{}
	t.Cleanup(func() {
		if !t.Failed() {
			return
		}
		var failed []string
		for _, line := range strings.Split(logs.String(), "\n") {
			if strings.Contains(line, `"status":5`) && len(failed) < 40 {
				failed = append(failed, line)
			}
		}
		t.Logf("the gateway's answers of 500 or more:\n%s\nits last warnings and errors:\n%s",
			strings.Join(failed, "\n"), warningLines(logs.String(), 40))
	})
	return logs
}

// gatheredCounter reads an unlabelled counter from the gateway's registry.
func gatheredCounter(t *testing.T, g *gateway.Gateway, name string) float64 {
	t.Helper()
	return gatheredValue(t, g, name)
}

// gatheredValue reads an unlabelled counter or gauge from the gateway's
// registry.
func gatheredValue(t *testing.T, g *gateway.Gateway, name string) float64 {
	t.Helper()
	mfs, err := g.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name && len(mf.GetMetric()) == 1 {
			m := mf.GetMetric()[0]
			if m.GetGauge() != nil {
				return m.GetGauge().GetValue()
			}
			return m.GetCounter().GetValue()
		}
	}
	t.Fatalf("no counter or gauge %s", name)
	return 0
}
