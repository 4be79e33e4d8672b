package bench

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// The concurrency benchmark's cluster: three nodes over the same
// dataset, each with a cache that holds it, warmed by an epoch; the ranks
// of one job spread over the nodes (rank r asks node r mod 3), one
// request in flight each; halfway through (once every rank has been
// answered), one node is killed (SIGKILL), and each rank reads on for
// the other half and until it has been answered after the kill.
// A rank whose node does not answer (a refused or broken connection)
// asks the next node for the same batch and stays with it, as a client
// that fails over does; that retry is counted, and the batch's latency
// runs from its first request to its answer. What the figures say: how
// long the kill stalls a rank, and whether any request fails beyond
// being retried.

// ConcurrencyCluster is the cluster's run.
type ConcurrencyCluster struct {
	Nodes   int `json:"nodes"`
	Streams int `json:"streams"`
	// KilledAfterS is when the node was killed, from the start of the
	// reads; Before and After the figures of the batches answered before
	// and after.
	KilledAfterS float64         `json:"killed_after_s"`
	Before       ClusterInterval `json:"before"`
	After        ClusterInterval `json:"after"`
	// FailedOver are the requests a rank sent again to another node
	// because its own did not answer; Refused the answers 503 (retried
	// on the same node after Retry-After); Errors the rest.
	FailedOver int64  `json:"failed_over"`
	Refused    int64  `json:"refused"`
	Errors     int64  `json:"errors"`
	FirstError string `json:"first_error,omitempty"`
	// PeakRSS is the largest of the nodes' peak resident sets.
	PeakRSS int64 `json:"peak_rss"`
}

// ClusterInterval is the batches answered in a part of the cluster's
// run.
type ClusterInterval struct {
	Batches       int64   `json:"batches"`
	BatchesPerSec float64 `json:"batches_per_sec"`
	P50Ms         float64 `json:"p50_ms"`
	P99Ms         float64 `json:"p99_ms"`
	MaxMs         float64 `json:"max_ms"`
}

// cluster runs the cluster part over the dataset in dir.
func (c ConcurrencyConfig) cluster(ctx context.Context, dir string) (*ConcurrencyCluster, error) {
	const nodes, victim = 3, 2
	out := &ConcurrencyCluster{Nodes: nodes, Streams: c.ClusterStreams}
	ports, err := loopbackPorts(nodes)
	if err != nil {
		return nil, err
	}
	urls := make([]string, nodes)
	for k, port := range ports {
		urls[k] = fmt.Sprintf("http://127.0.0.1:%d", port)
	}
	peers := filepath.Join(c.WorkDir, "concurrency-cluster.peers")
	if err := writeMembers(peers, urls, []int{0, 1, 2}); err != nil {
		return nil, err
	}
	secret := filepath.Join(c.WorkDir, "concurrency-peer-secret")
	if err := os.WriteFile(secret, []byte("peer secret of the concurrency benchmark\n"), 0o600); err != nil {
		return nil, fmt.Errorf("bench: %w", err)
	}
	procs := make([]*gatewayProc, nodes)
	defer func() {
		for _, p := range procs {
			if p != nil {
				p.kill()
			}
		}
	}()
	errs := make([]error, nodes)
	var wg sync.WaitGroup
	for k := range nodes {
		args := append([]string{"serve", "--listen", fmt.Sprintf("127.0.0.1:%d", ports[k]), "--dataset", "d=" + dir,
			"--cache-size", strconv.FormatInt(c.CacheSize, 10), "--memory-limit", strconv.FormatInt(c.MemoryLimit, 10),
			"--peers-file", peers, "--advertise", urls[k], "--peer-secret-file", secret,
			"--log-format", "json", "--log-level", "info", "--shutdown-timeout", "10s"}, c.GatewayArgs...)
		wg.Go(func() {
			procs[k], errs[k] = startGateway(ctx, c.GatewayBinary, args, gatewayEnv("", ""), filepath.Join(c.WorkDir, fmt.Sprintf("concurrency-node%d.log", k)))
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	hc := &http.Client{Transport: newTransport(c.ClusterStreams + 8)}
	defer hc.CloseIdleConnections()
	if err := waitMembers(ctx, hc, urls, map[int]bool{0: true, 1: true, 2: true}, []int{0, 1, 2}); err != nil {
		return nil, err
	}
	if err := c.warm(ctx, procs[0]); err != nil {
		return nil, err
	}

	n := c.ClusterStreams
	q := func(r int) string {
		return fmt.Sprintf("job=cluster&batch_size=%d&window=%d&world=%d&rank=%d", c.BatchSize, c.Window, n, r)
	}
	var info struct {
		Batches int `json:"batches"`
	}
	if err := getJSON(ctx, hc, urls[0]+"/epoch/0?"+q(0), &info); err != nil {
		return nil, err
	}
	if info.Batches < 1 {
		return nil, fmt.Errorf("bench: the cluster's job has an epoch of no batches")
	}
	var (
		failedOver, refused, errCount atomic.Int64
		firstErr                      atomic.Pointer[string]
		// ready counts the ranks answered before the kill; killed is
		// set once the node is gone.
		ready  atomic.Int64
		killed atomic.Bool
	)
	before := make([][]time.Duration, n)
	after := make([][]time.Duration, n)
	began := time.Now()
	var killedAt time.Time
	kill := make(chan struct{})
	go func() {
		// Halfway, once every rank has been answered: each rank then has
		// batches on both sides of the kill, however slow the machine.
		defer close(kill)
		for time.Since(began) < c.ClusterDuration/2 || ready.Load() < int64(n) {
			select {
			case <-ctx.Done():
				return
			case <-time.After(10 * time.Millisecond):
			}
		}
		killedAt = time.Now()
		procs[victim].kill()
		killed.Store(true)
	}()
	for r := range n {
		wg.Go(func() {
			node, query := r%nodes, q(r)
			start := time.Now()
			// Until the run's second half is over and this rank has been
			// answered after the kill.
			for e, m := 0, 0; len(after[r]) == 0 || !killed.Load() || time.Since(killedAt) < c.ClusterDuration/2; {
				status, retry, err := getBatch(ctx, hc, urls[node]+fmt.Sprintf("/epoch/%d/batch/%d?", e, m)+query)
				switch {
				case ctx.Err() != nil:
					return
				case status == http.StatusServiceUnavailable:
					refused.Add(1)
					time.Sleep(retry)
					continue
				case err != nil && (status == 0 || status == http.StatusOK):
					// No answer, or one cut short: the next node.
					failedOver.Add(1)
					node = (node + 1) % nodes
					continue
				case err != nil:
					errCount.Add(1)
					s := err.Error()
					firstErr.CompareAndSwap(nil, &s)
				case killed.Load():
					after[r] = append(after[r], time.Since(start))
				default:
					if before[r] = append(before[r], time.Since(start)); len(before[r]) == 1 {
						ready.Add(1)
					}
				}
				if m++; m == info.Batches {
					e, m = e+1, 0
				}
				start = time.Now()
			}
		})
	}
	wg.Wait()
	end := time.Now()
	<-kill
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("bench: the cluster's run: %w", err)
	}
	out.KilledAfterS = killedAt.Sub(began).Seconds()
	interval := func(per [][]time.Duration, d time.Duration) ClusterInterval {
		var ds []time.Duration
		for _, l := range per {
			ds = append(ds, l...)
		}
		slices.Sort(ds)
		return ClusterInterval{Batches: int64(len(ds)), BatchesPerSec: float64(len(ds)) / d.Seconds(),
			P50Ms: ms(percentile(ds, 50)), P99Ms: ms(percentile(ds, 99)), MaxMs: ms(percentile(ds, 100))}
	}
	out.Before, out.After = interval(before, killedAt.Sub(began)), interval(after, end.Sub(killedAt))
	out.FailedOver, out.Refused, out.Errors = failedOver.Load(), refused.Load(), errCount.Load()
	if s := firstErr.Load(); s != nil {
		out.FirstError = *s
	}
	for k, p := range procs {
		if k != victim {
			out.PeakRSS = max(out.PeakRSS, p.peakRSS())
		}
	}
	for k, p := range procs {
		if k == victim {
			continue
		}
		if err := p.stop(10 * time.Second); err != nil {
			return nil, err
		}
		procs[k] = nil
	}
	return out, nil
}
