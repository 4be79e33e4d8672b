package gateway

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"runtime/pprof"
	"strconv"
	"strings"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/brandgw/brand/api"
	"github.com/brandgw/brand/chunkindex"
	"github.com/brandgw/brand/internal/catalog"
	"github.com/brandgw/brand/internal/livestats"
	"github.com/brandgw/brand/internal/order"
	"github.com/brandgw/brand/internal/peer"
	"github.com/brandgw/brand/internal/query"
	"github.com/brandgw/brand/internal/reader"
	"github.com/brandgw/brand/internal/respond"
	"github.com/brandgw/brand/internal/schedule"
)

// handleBatch serves GET and HEAD /epoch/{epoch}/batch/{batch}: the batch
// as a tar stream, or its manifest with format=json.
func (g *Gateway) handleBatch(w http.ResponseWriter, r *http.Request) {
	if isMix(r) {
		g.handleMixBatch(w, r)
		return
	}
	ctx := r.Context()
	l, q, err := g.layoutRequest(r)
	if err != nil {
		writeError(ctx, w, err)
		return
	}
	if q.Format == "json" {
		writeManifest(w, l)
		return
	}
	if notModified(r, l.ETag) {
		g.follow(l.Stream, l.Epoch, l.End)
		setBatchHeaders(w.Header(), l)
		w.WriteHeader(http.StatusNotModified)
		return
	}
	if r.Method == http.MethodHead {
		// Everything a HEAD answers is known from the index: read nothing.
		setBatchHeaders(w.Header(), l)
		w.Header().Set("Content-Type", "application/x-tar")
		w.Header().Set("Content-Length", strconv.FormatInt(l.Length(), 10))
		w.WriteHeader(http.StatusOK)
		return
	}
	// Until its chunks are pinned, this batch's position is what "now"
	// means to the schedule, however far ahead other requests have gone.
	tok, err := g.sched.Begin(l.Stream, l.Epoch, l.Start, l.Job.BatchSize*l.Job.World, l.Job.Weight)
	if err != nil {
		writeError(ctx, w, err)
		return
	}
	g.follow(l.Stream, l.Epoch, l.End)
	g.fetchNextAhead(l)
	// Labels let a CPU profile be cut by epoch (go tool pprof -tagfocus
	// epoch=0 shows the cold one); the chunk loads this batch starts
	// inherit them.
	pprof.Do(ctx, schedule.EpochLabels(l.DS.Name, l.Epoch), func(ctx context.Context) {
		// When the jobs' windows do not fit in the cache together, the
		// batch waits for its job's turn (internal/schedule/turn.go).
		waitFrom := time.Now()
		if err := g.sched.Turn(ctx, tok); err != nil {
			g.sched.Finish(tok)
			writeError(ctx, w, err)
			return
		}
		res, err := g.reader.Read(ctx, reader.Request{Samples: l.Samples, AheadKey: l.ETag,
			Origin: &peer.Origin{Stream: l.Stream, Epoch: l.Epoch, Pos: l.Start, Weight: l.Job.Weight}})
		g.sched.Finish(tok)
		if err != nil {
			writeError(ctx, w, err)
			return
		}
		defer res.Release()
		served := l.Without(res.Missing)
		g.stats.Batch(livestats.Served{Stream: l.Stream, Epoch: l.Epoch, EpochSamples: l.EpochSamples, Samples: len(served.IDs),
			Chunks: res.Chunks, Loads: res.Loads, LoadedBytes: res.LoadedBytes, DiskBytes: res.DiskBytes, Wait: time.Since(waitFrom)})
		setBatchHeaders(w.Header(), served)
		if _, err := g.out.Write(w, r, "application/x-tar", respond.Payload{Parts: append(res.Parts, chunkindex.EndOfArchive[:]), N: served.Length(), Relieve: res.Relieve}); err != nil {
			g.log.Debug().Err(err).Msg("batch not completed")
			return
		}
		g.metrics.samplesServed.Add(float64(len(served.IDs)))
	})
}

// layoutRequest parses a batch request and lays the batch out.
func (g *Gateway) layoutRequest(r *http.Request) (*order.Layout, query.Query, error) {
	q, ds, epoch, err := g.parseEpochRequest(r)
	if err != nil {
		return nil, q, err
	}
	m, err := query.ParseNumber("batch", chi.URLParam(r, "batch"), 1<<62)
	if err != nil {
		return nil, q, err
	}
	l, err := g.orders.Layout(r.Context(), ds, q.Job, epoch, m)
	return l, q, err
}

// follow moves a stream forward to epoch position end and queues the
// chunks it will need next.
func (g *Gateway) follow(s order.Stream, epoch uint64, end int) {
	g.prefetch.Enqueue(g.sched.Advance(s, epoch, end, g.cfg.PrefetchWindows))
}

// fetchNextAhead starts fetching from peers the samples of the rank's
// next batch (nothing on a single gateway).
func (g *Gateway) fetchNextAhead(l *order.Layout) {
	next := l.Batch + 1
	if next >= uint64(l.Batches) {
		return
	}
	g.cluster.FetchAhead(order.BatchETag(l.DS, l.Job, l.Epoch, next, g.orders.Nodes()), func() (order.Samples, *peer.Origin, error) {
		// The fetch ahead outlives the request: its table loads, if the
		// index holds only this node's chunks, are bounded by their own
		// timeout.
		nl, err := g.orders.Layout(context.Background(), l.DS, l.Job, l.Epoch, next)
		if err != nil {
			return order.Samples{}, nil, err
		}
		return nl.Samples, &peer.Origin{Stream: nl.Stream, Epoch: nl.Epoch, Pos: nl.Start, Weight: nl.Job.Weight}, nil
	})
}

// setBatchHeaders sets a batch's headers: its identity, and with missing
// samples (skip mode) which ones.
func setBatchHeaders(h http.Header, l *order.Layout) {
	h.Set("ETag", l.ETag)
	h.Set("Cache-Control", "public, max-age=31536000, immutable")
	h.Set(api.HeaderDataset, l.DS.Name)
	h.Set(api.HeaderIndex, l.DS.ID())
	h.Set(api.HeaderEpoch, strconv.FormatUint(l.Epoch, 10))
	h.Set(api.HeaderBatch, strconv.FormatUint(l.Batch, 10))
	h.Set(api.HeaderEpochBatches, strconv.Itoa(l.Batches))
	h.Set(api.HeaderEpochSamples, strconv.Itoa(l.EpochSamples))
	h.Set(api.HeaderBatchSamples, strconv.Itoa(len(l.IDs)))
	if l.Job.Offset != 0 {
		h.Set(api.HeaderOffset, strconv.Itoa(l.Job.Offset))
	}
	setMissingHeaders(h, l)
}

// maxMissingKeysHeader bounds the Brand-Missing-Keys header: a batch may
// lose thousands of samples with one chunk, and proxies reject long
// headers. The count header and the log always have them all.
const maxMissingKeysHeader = 2048

// setMissingHeaders names the samples a partial batch lacks: their count,
// and their keys (query-escaped, comma-separated) up to
// maxMissingKeysHeader bytes, ending in "…" when cut. A partial batch must
// not be cached as if it were the batch.
func setMissingHeaders(h http.Header, l *order.Layout) {
	if len(l.Missing) == 0 {
		return
	}
	h.Set("Cache-Control", "no-store")
	h.Set(api.HeaderMissingSamples, strconv.Itoa(len(l.Missing)))
	var sb strings.Builder
	for i, key := range l.MissingKeys {
		k := escapeKey(key)
		if sb.Len()+len(k)+1 > maxMissingKeysHeader {
			sb.WriteString(",…")
			break
		}
		if i > 0 {
			sb.WriteByte(',')
		}
		sb.WriteString(k)
	}
	h.Set(api.HeaderMissingKeys, sb.String())
}

// escapeKey makes a sample key safe in a comma-separated header value:
// "%", "," and bytes outside printable ASCII become %XX, as in a URL; a
// plain key (class/name) stays as it is.
func escapeKey(k string) string {
	var sb strings.Builder
	for i := range len(k) {
		c := k[i]
		if c == '%' || c == ',' || c < 0x21 || c > 0x7e {
			fmt.Fprintf(&sb, "%%%02X", c)
			continue
		}
		sb.WriteByte(c)
	}
	return sb.String()
}

// notModified answers a matching If-None-Match without reading any chunk.
func notModified(r *http.Request, etag string) bool {
	for _, t := range strings.Split(r.Header.Get("If-None-Match"), ",") {
		if t = strings.TrimSpace(t); t == etag || t == "*" {
			return true
		}
	}
	return false
}

// parseEpochRequest parses the query and the {epoch} of a request about an
// epoch of a job, and finds the dataset version it reads.
func (g *Gateway) parseEpochRequest(r *http.Request) (query.Query, *catalog.Dataset, uint64, error) {
	epoch, err := query.ParseNumber("epoch", chi.URLParam(r, "epoch"), g.cfg.Limits.MaxEpoch)
	if err != nil {
		return query.Query{}, nil, 0, err
	}
	q, err := query.Parse(r.URL.RawQuery, query.JobParams, g.defaults, g.cfg.Limits)
	if err != nil {
		return q, nil, 0, err
	}
	if len(q.Job.Mix) > 0 {
		return q, nil, epoch, nil // the caller resolves the components (mixRequest)
	}
	ds, err := g.version(q.Job)
	if err == nil {
		if imp := q.Job.Importance; imp.Version != "" {
			// The order is drawn from the snapshot: have it in memory
			// before the order is computed (under the schedule's lock).
			_, err = g.feedback.Snapshot(r.Context(), ds, imp.Job, imp.Version)
		}
	}
	return q, ds, epoch, err
}

// version is the dataset version a job reads: the one it pins (index=),
// else the one the cluster agrees on (a single gateway: the one it
// serves). A node that does not hold it answers 409, naming the nodes
// that do: serving its own version instead would give this job's ranks
// another order than their siblings get elsewhere.
func (g *Gateway) version(job api.Job) (*catalog.Dataset, error) {
	name := job.Dataset
	id := job.Index
	pinned := id != ""
	if !pinned {
		if id = g.cluster.Agreed(name); id == "" {
			return g.catalog.Get(name)
		}
	}
	ds, err := g.catalog.Version(name, id)
	if !errors.Is(err, catalog.ErrVersion) {
		return ds, err
	}
	why := "the job pins it (index=)"
	if !pinned {
		why = "the cluster serves it"
	}
	if holders := g.cluster.Holders(name, id, false); len(holders) > 0 {
		return nil, fmt.Errorf("%w; %s; nodes that hold it: %s", err, why, strings.Join(holders, ", "))
	}
	return nil, fmt.Errorf("%w; %s, and no node known to this one holds it: the dataset was re-packed since; start the epoch again to read the new index", err, why)
}
