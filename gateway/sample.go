package gateway

import (
	"fmt"
	"net/http"

	"github.com/go-chi/chi/v5"

	"github.com/brandgw/brand/api"
	"github.com/brandgw/brand/chunkindex"
	"github.com/brandgw/brand/internal/batch/layout"
	"github.com/brandgw/brand/internal/batch/reader"
	"github.com/brandgw/brand/internal/batch/respond"
	"github.com/brandgw/brand/internal/job/catalog"
	"github.com/brandgw/brand/internal/job/query"
	"github.com/brandgw/brand/internal/quote"
)

// handleSample serves /samples/{key}: one sample, by key, as a tar of its
// members, read as every sample is (on a cluster, from its chunk's
// owner) and written as every response carrying samples is. Its length
// is the read's: a sample of a dataset served in place has none in its
// index (it is sized when its chunk is decoded), so its HEAD claims none.
func (g *Gateway) handleSample(w http.ResponseWriter, r *http.Request) {
	ctx := unansweredContext(r)
	q, err := query.Parse(r.URL.RawQuery, query.SampleParams, g.jobs.Defaults(), g.jobs.Limits())
	var ds *catalog.Dataset
	if err == nil {
		ds, err = g.jobs.Version(q.Job)
	}
	if err != nil {
		writeError(ctx, w, err)
		return
	}
	key := chi.URLParam(r, "*")
	id, ok, err := ds.Index.Lookup(ctx, key)
	if err == nil && !ok {
		err = fmt.Errorf("%w: no sample with key %s in dataset %q", catalog.ErrUnknown, quote.Input(key), ds.Name)
	}
	var smp layout.Samples
	if err == nil {
		smp, err = layout.NewSamples(ctx, ds, []int{id})
	}
	if err != nil {
		writeError(ctx, w, err)
		return
	}
	h := w.Header()
	h.Set(api.HeaderDataset, ds.Name)
	h.Set(api.HeaderIndex, ds.ID())
	if r.Method == http.MethodHead {
		// Everything a HEAD answers is known from the index: read nothing.
		h.Set("Content-Type", "application/x-tar")
		if !ds.Index.Deferred() {
			h.Set("Content-Length", fmt.Sprint(smp.Bytes+int64(len(chunkindex.EndOfArchive))))
		}
		w.WriteHeader(http.StatusOK)
		return
	}
	res, err := g.reader.Read(ctx, reader.Request{Samples: smp})
	if err == nil && len(res.MissingPos) > 0 {
		res.Release()
		err = fmt.Errorf("%w: sample %s is in a chunk damaged at rest", catalog.ErrCorrupt, quote.Input(key))
	}
	if err != nil {
		writeError(ctx, w, err)
		return
	}
	defer res.Release()
	n := res.Bytes + int64(len(chunkindex.EndOfArchive))
	if _, err := g.out.Write(w, r, "application/x-tar", respond.Payload{Parts: append(res.Parts, chunkindex.EndOfArchive[:]), N: n, Relieve: res.Relieve}); err != nil {
		g.log.Debug().Err(err).Msg("sample not completed")
		return
	}
	g.metrics.samplesServed.Inc()
}
