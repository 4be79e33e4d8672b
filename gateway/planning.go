package gateway

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"

	"github.com/brandgw/brand/api"
	"github.com/brandgw/brand/chunkindex"
	"github.com/brandgw/brand/importance"
)

// Planner simulates cache policies over a job's schedule: the /plan
// endpoint's answer and the optimal policy's figures for epochs the gateway
// served. It speaks only in types of the packages below the gateway, so the
// gateway does not link a planner: `brand serve` passes planner.ForGateway.
// Its methods may be called concurrently and must honour ctx.
type Planner interface {
	// Plan returns the plan of job over the dataset ix indexes, as a value
	// that encodes to JSON. snap is the importance snapshot job.Importance
	// names, which the gateway loads from the dataset's store, so that the
	// plan adds the importance epochs' figures; nil for the uniform
	// shuffle.
	Plan(ctx context.Context, ix *chunkindex.Index, job api.Job, o api.PlanOptions, snap *importance.Snapshot) (any, error)
	optimizer
}

// handlePlan serves /plan: the job's schedule simulated for a cache size,
// what hit ratio and backend traffic LRU and the optimal policy reach, the
// cache that never stalls at a bandwidth, and the window's shuffle quality;
// with sampling=importance&job=J&importance=V&hot=H, the same for epochs
// drawn from snapshot V besides; or, with nodes=N (a cluster's default),
// the prediction for N nodes each with a cache of cache_size.
func (g *Gateway) handlePlan(w http.ResponseWriter, r *http.Request) {
	if g.cfg.Planner == nil {
		writeError(r.Context(), w, fmt.Errorf("%w: this gateway was built without a planner", ErrNotImplemented))
		return
	}
	nodes := 0 // a single gateway's plan
	if n := len(g.cfg.Cluster.Peers); n > 1 {
		nodes = n
	}
	r, nodes, err := planNodes(r, nodes)
	if err != nil {
		writeError(r.Context(), w, err)
		return
	}
	base := g.defaults
	base.plan = api.PlanOptions{CacheBytes: g.cfg.CacheSize, Epochs: 3, BackendBytesPerSec: 1 << 30, PrefetchWindows: g.cfg.PrefetchWindows, Nodes: nodes}
	q, ds, err := g.parseRequest(r, planParams, base)
	if err != nil {
		writeError(r.Context(), w, err)
		return
	}
	var snap *importance.Snapshot // nil: the uniform shuffle only
	if imp := q.job.Importance; imp.On() && imp.Version != "" {
		if snap, err = g.snaps.load(r.Context(), ds, imp.Job, imp.Version); err != nil {
			writeError(r.Context(), w, err)
			return
		}
	}
	// Plans cost up to seconds of CPU on large datasets: one at a time.
	select {
	case g.planning <- struct{}{}:
		defer func() { <-g.planning }()
	case <-r.Context().Done():
		writeError(r.Context(), w, r.Context().Err())
		return
	}
	plan, err := g.cfg.Planner.Plan(r.Context(), ds.index, q.job, q.plan, snap)
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		writeError(r.Context(), w, err)
		return
	}
	if err != nil {
		writeError(r.Context(), w, fmt.Errorf("%w: %w", ErrBadRequest, err))
		return
	}
	writeJSON(w, http.StatusOK, plan)
}

// planNodes reads /plan's nodes parameter, which only /plan takes, and
// returns the request without it for the shared query parser. def is the
// count when the request gives none. A query that does not parse is left
// whole for the parser to report.
func planNodes(r *http.Request, def int) (*http.Request, int, error) {
	values, err := url.ParseQuery(r.URL.RawQuery)
	if err != nil || !values.Has(api.ParamNodes) {
		return r, def, nil
	}
	v := values.Get(api.ParamNodes)
	values.Del(api.ParamNodes)
	r = r.Clone(r.Context())
	r.URL.RawQuery = values.Encode()
	if v == "" { // the default, as for every parameter
		return r, def, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 || n > api.MaxPlanNodes {
		return r, 0, fmt.Errorf("%w: %s must be an integer between 1 and %d, got %q", ErrBadRequest, api.ParamNodes, api.MaxPlanNodes, v)
	}
	return r, n, nil
}
