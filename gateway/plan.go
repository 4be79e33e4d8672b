package gateway

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"

	"github.com/dustin/go-humanize"

	"github.com/brandgw/brand/planner"
)

// handlePlan simulates the job's schedule for a cache size: what hit ratio
// and backend traffic LRU and the optimal policy reach, the cache that never
// stalls at a bandwidth, and the window's shuffle quality.
func (g *Gateway) handlePlan(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	extra := url.Values{}
	for _, k := range []string{"cache_size", "epochs", "first_epoch", "bandwidth", "consume", "prefetch_windows"} {
		if v, ok := q[k]; ok {
			extra[k] = v
			q.Del(k)
		}
	}
	job, err := parseJob(q, g.cfg.Defaults, g.cfg.Limits, g.cfg.DefaultDataset)
	if err != nil {
		writeError(w, err)
		return
	}
	ds, err := g.dataset(job.Dataset)
	if err != nil {
		writeError(w, err)
		return
	}
	in := planner.PlanInput{
		Dataset:            planner.DatasetOf(ds.index),
		Job:                planner.Job{Seed: job.Seed, Window: job.Window, BatchSize: job.BatchSize, World: job.World, DropLast: job.DropLast, Epochs: 3},
		CacheBytes:         g.cfg.CacheSize,
		BackendBytesPerSec: 1 << 30,
		PrefetchWindows:    g.cfg.PrefetchWindows,
	}
	if v := extra.Get("cache_size"); v != "" {
		n, err := humanize.ParseBytes(v)
		if err != nil || n > 1<<62 {
			writeError(w, fmt.Errorf("%w: cache_size must be a size such as 2GiB, got %q", ErrBadRequest, v))
			return
		}
		in.CacheBytes = int64(n)
	}
	ints := []struct {
		name     string
		dst      *int
		min, max int
	}{{"epochs", &in.Job.Epochs, 2, 20}, {"first_epoch", &in.Job.FirstEpoch, 0, 1 << 30}, {"prefetch_windows", &in.PrefetchWindows, 0, 64}}
	for _, p := range ints {
		if v := extra.Get(p.name); v != "" {
			n, err := strconv.Atoi(v)
			if err != nil || n < p.min || n > p.max {
				writeError(w, fmt.Errorf("%w: %s must be an integer from %d to %d, got %q", ErrBadRequest, p.name, p.min, p.max, v))
				return
			}
			*p.dst = n
		}
	}
	rates := []struct {
		name string
		dst  *float64
	}{{"bandwidth", &in.BackendBytesPerSec}, {"consume", &in.ConsumeBytesPerSec}}
	for _, p := range rates {
		if v := extra.Get(p.name); v != "" {
			n, err := humanize.ParseBytes(v)
			if err != nil || n == 0 {
				writeError(w, fmt.Errorf("%w: %s must be a positive rate in bytes per second such as 500MiB, got %q", ErrBadRequest, p.name, v))
				return
			}
			*p.dst = float64(n)
		}
	}
	// Plans cost up to seconds of CPU on large datasets: one at a time.
	select {
	case g.planning <- struct{}{}:
		defer func() { <-g.planning }()
	case <-r.Context().Done():
		writeError(w, r.Context().Err())
		return
	}
	plan, err := planner.MakePlanContext(r.Context(), in)
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		writeError(w, err)
		return
	}
	if err != nil {
		writeError(w, fmt.Errorf("%w: %w", ErrBadRequest, err))
		return
	}
	writeJSON(w, http.StatusOK, plan)
}
