package gateway

import (
	"context"
	"fmt"
	"math"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/go-json-experiment/json"

	"github.com/brandgw/brand/api"
	"github.com/brandgw/brand/internal/job/query"
	"github.com/brandgw/brand/internal/job/resolve"
	"github.com/brandgw/brand/internal/quote"
)

// maxPrewarmSteps bounds the steps one prewarm reads.
const maxPrewarmSteps = 4096

// prewarmParallel is how many ranks' batches a prewarm reads at once.
const prewarmParallel = 8

// prewarmAPI serves POST /prewarm over the gateway's own routes (next):
// a prewarm reads a job's batches as its ranks would.
type prewarmAPI struct {
	jobs *resolve.Resolver
	next http.Handler
}

// handle serves POST /prewarm?JOB[&epoch=E][&steps=K]: it reads
// the job's first K steps of epoch E (every rank's batch of each) into
// the caches — on a cluster, each chunk into its owner's — before the
// job starts, as the job's own requests would read them, and answers a
// JSON line as each step is read and a last one once the job is warm.
// K defaults to the steps of the job's first window of chunks. The
// batches' bytes are read and dropped: what stays is the chunks cached,
// and the job's stream known to the use table, so that its next chunks
// are prefetched and its first ones kept for it.
func (a prewarmAPI) handle(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	// Its own parameters beside the job's, each once, as query.Parse
	// holds the job's.
	v, err := query.Known(r.URL.RawQuery, append(slices.Clip(query.JobParams), "epoch", "steps"))
	epoch, steps := 0, 0
	if s := v.Get("epoch"); err == nil && s != "" {
		epoch, err = strconv.Atoi(s)
		if err != nil || epoch < 0 {
			err = fmt.Errorf("%w: epoch=%s: a whole number", query.ErrBadRequest, quote.Input(s))
		}
	}
	if s := v.Get("steps"); err == nil && s != "" {
		steps, err = strconv.Atoi(s)
		if err != nil || steps < 1 || steps > maxPrewarmSteps {
			err = fmt.Errorf("%w: steps=%s: 1 to %d", query.ErrBadRequest, quote.Input(s), maxPrewarmSteps)
		}
	}
	v.Del("epoch")
	v.Del("steps")
	var q query.Query
	if err == nil {
		q, err = query.Parse(v.Encode(), query.JobParams, a.jobs.Defaults(), a.jobs.Limits())
	}
	var info api.EpochInfo
	if err == nil {
		j, jerr := a.jobs.Epoch(ctx, v.Encode(), strconv.Itoa(epoch), "")
		if err = jerr; err == nil {
			info, err = a.jobs.Orders().Info(j.Source, j.Query.Job, j.Epoch)
		}
	}
	if err != nil {
		writeError(ctx, w, err)
		return
	}
	world := max(q.Job.World, 1)
	perRank := info.Batches // each rank's batches of the epoch
	if steps == 0 {
		steps = a.firstWindowSteps(q, world)
	}
	steps = min(steps, perRank)
	w.Header().Set("Content-Type", "application/jsonl")
	w.WriteHeader(http.StatusOK)
	flusher, _ := w.(http.Flusher)
	line := func(p api.PrewarmProgress) {
		b, _ := json.Marshal(p)
		_, _ = w.Write(append(b, '\n'))
		if flusher != nil {
			flusher.Flush()
		}
	}
	start := time.Now()
	p := api.PrewarmProgress{Of: steps}
	for s := range steps {
		n, bytes, status, msg := a.step(ctx, r, v, epoch, s, world)
		p.Steps, p.Batches, p.Bytes = s+1, p.Batches+n, p.Bytes+bytes
		if msg != "" {
			p.Error, p.Status = msg, status
			line(p)
			return
		}
		line(p)
	}
	p.Warm, p.Seconds = true, time.Since(start).Seconds()
	line(p)
}

// firstWindowSteps is about the steps that read a job's first window of
// chunks: the window's samples over a global batch.
func (a prewarmAPI) firstWindowSteps(q query.Query, world int) int {
	ds, err := a.jobs.Version(q.Job)
	if err != nil || ds.Index.NumChunks() == 0 {
		return 1
	}
	perChunk := float64(ds.Index.NumSamples()) / float64(ds.Index.NumChunks())
	global := float64(max(q.Job.BatchSize, 1) * world)
	return max(1, int(math.Ceil(float64(max(q.Job.Window, 1))*perChunk/global)))
}

// step reads every rank's batch s of the epoch through the
// gateway's own routes (with the asker's credentials), dropping the bytes.
func (a prewarmAPI) step(ctx context.Context, r *http.Request, v url.Values, epoch, s, world int) (n int, bytes int64, status int, msg string) {
	var mu sync.Mutex
	var wg sync.WaitGroup
	sem := make(chan struct{}, prewarmParallel)
	// Each batch is routed afresh, not as the prewarm's own request.
	ctx = context.WithValue(ctx, chi.RouteCtxKey, (*chi.Context)(nil))
	for rank := range world {
		if ctx.Err() != nil {
			break
		}
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			rv := url.Values{}
			for k, vs := range v {
				rv[k] = vs
			}
			rv.Set(api.ParamWorld, strconv.Itoa(world))
			rv.Set(api.ParamRank, strconv.Itoa(rank))
			req, _ := http.NewRequestWithContext(ctx, http.MethodGet, fmt.Sprintf("/epoch/%d/batch/%d?%s", epoch, s, rv.Encode()), nil)
			req.Header.Set("Authorization", r.Header.Get("Authorization"))
			req.RemoteAddr = r.RemoteAddr
			rec := &dropWriter{header: http.Header{}}
			a.next.ServeHTTP(rec, req)
			mu.Lock()
			defer mu.Unlock()
			n++
			bytes += rec.n
			if rec.status >= 300 && msg == "" {
				status, msg = rec.status, fmt.Sprintf("step %d, rank %d: %d %s", s, rank, rec.status, rec.body)
			}
		})
	}
	wg.Wait()
	if msg == "" && ctx.Err() != nil {
		status, msg = 499, ctx.Err().Error()
	}
	return n, bytes, status, msg
}

// dropWriter is a ResponseWriter that counts a body's bytes and keeps
// the first KiB of a refusal.
type dropWriter struct {
	header http.Header
	status int
	n      int64
	body   []byte
}

func (d *dropWriter) Header() http.Header { return d.header }
func (d *dropWriter) WriteHeader(s int) {
	if d.status == 0 {
		d.status = s
	}
}
func (d *dropWriter) Write(p []byte) (int, error) {
	if d.status == 0 {
		d.status = http.StatusOK
	}
	d.n += int64(len(p))
	if d.status >= 300 && len(d.body) < 1024 {
		d.body = append(d.body, p[:min(len(p), 1024-len(d.body))]...)
	}
	return len(p), nil
}
