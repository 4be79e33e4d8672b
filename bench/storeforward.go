package bench

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync/atomic"

	"github.com/brandgw/brand/s3backend"
)

// storeForward is limit (a′): the least work a gateway that caches can do.
// It reads each requested chunk whole from the store into a buffer it keeps
// — as a chunk cache does — then writes the buffer to the client in one
// write. It reads with the same call as Brand's chunk loader (ReadObject:
// one plain GET per chunk). It neither shuffles, verifies nor evicts, and
// its buffers are allocated and touched before it is measured, as
// `brand serve` preallocates its cache.
// Against (a), which streams each body through one small buffer, it
// measures what keeping the bytes costs; against Brand, what Brand's own
// work costs.
type storeForward struct {
	store    *s3backend.S3
	chunks   map[string]int // object key → chunk
	etags    []string
	bufs     [][]byte
	upstream atomic.Int64
}

func newStoreForward(store *s3backend.S3, keys []string, sizes []int64, etags []string) *storeForward {
	s := &storeForward{store: store, chunks: make(map[string]int, len(keys)), etags: etags, bufs: make([][]byte, len(keys))}
	page := os.Getpagesize()
	for c, k := range keys {
		s.chunks[k] = c
		b := make([]byte, sizes[c])
		for i := 0; i < len(b); i += page {
			b[i] = 1 // fault the page in now, not while measured
		}
		s.bufs[c] = b
	}
	return s
}

func (s *storeForward) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	key := strings.TrimPrefix(r.URL.Path, "/")
	c, ok := s.chunks[key]
	if !ok {
		http.NotFound(w, r)
		return
	}
	buf := s.bufs[c]
	if err := s.store.ReadObject(r.Context(), key, s.etags[c], buf, nil); err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	s.upstream.Add(int64(len(buf)))
	w.Header().Set("Content-Type", "application/x-tar")
	w.Header().Set("Content-Length", strconv.Itoa(len(buf)))
	_, _ = w.Write(buf)
}

// runStoreForward measures (a′) at its best client concurrency. Chunks are
// requested once per pass, so concurrent requests never share a buffer.
func (r *runner) runStoreForward(ctx context.Context, hc *http.Client, keys []string, order []int) error {
	ix := r.tb.index
	sizes, etags := make([]int64, len(keys)), make([]string, len(keys))
	for c := range keys {
		sizes[c], etags[c] = ix.Chunk(c).Size, ix.Chunk(c).ETag
	}
	r.logf("limit (a'): store-and-forward, allocating %d chunk buffers", len(keys))
	sf := newStoreForward(r.tb.store, keys, sizes, etags)
	base, stop, err := serveLoopback(sf)
	if err != nil {
		return err
	}
	defer stop()
	r.logf("limit (a'): store-and-forward of whole chunks, concurrency %v", r.cfg.StreamReaders)
	err = r.sweepRow(ctx, ConfigStoreForward, GroupLimits, "(a') limit: store-and-forward, whole chunks", r.cfg.StreamReaders,
		r.streamThrough(hc, base, keys, order, &sf.upstream))
	if err != nil {
		return fmt.Errorf("limit (a'): %w", err)
	}
	return nil
}
