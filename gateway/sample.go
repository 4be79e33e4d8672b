package gateway

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"

	"github.com/go-chi/chi/v5"

	"github.com/brandgw/brand/api"
	"github.com/brandgw/brand/chunkcache"
	"github.com/brandgw/brand/chunkindex"
)

// handleSample serves /samples/{key}: one sample, by key, as a tar of its
// members.
func (g *Gateway) handleSample(w http.ResponseWriter, r *http.Request) {
	_, ds, err := g.parseRequest(r, sampleParams, g.defaults)
	if err != nil {
		writeError(r.Context(), w, err)
		return
	}
	key := chi.URLParam(r, "*")
	id, ok := ds.index.Lookup(key)
	if !ok {
		writeError(r.Context(), w, fmt.Errorf("%w: no sample with key %q in dataset %q", ErrNotFound, key, ds.name))
		return
	}
	c, off, length, _ := ds.index.SampleRange(id)
	h := w.Header()
	h.Set(api.HeaderDataset, ds.name)
	h.Set(api.HeaderIndex, ds.index.ID())
	setLength := func() {
		h.Set("Content-Type", "application/x-tar")
		h.Set("Content-Length", strconv.FormatInt(length+int64(len(chunkindex.EndOfArchive)), 10))
	}
	if r.Method == http.MethodHead {
		// Everything a HEAD answers is known from the index: read nothing.
		setLength()
		w.WriteHeader(http.StatusOK)
		return
	}
	lease, err := g.cache.Acquire(r.Context(), []chunkcache.Request{ds.chunkRequest(c)})
	if err != nil {
		writeError(r.Context(), w, err)
		return
	}
	defer lease.Release()
	setLength()
	w.WriteHeader(http.StatusOK)
	n, err := w.Write(lease.Bytes(0)[off : off+length])
	if err == nil {
		var m int
		m, err = w.Write(chunkindex.EndOfArchive[:])
		n += m
	}
	g.metrics.bytesServed.Add(float64(n))
	if err != nil && !errors.Is(err, io.ErrClosedPipe) {
		g.log.Debug().Err(err).Msg("sample not completed")
	}
}
