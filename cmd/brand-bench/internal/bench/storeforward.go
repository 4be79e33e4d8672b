package bench

import (
	"fmt"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync/atomic"

	"github.com/brandgw/brand/chunkindex"
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
//
// With verify set it is limit (a″): it also checks every sample's CRC32C as
// the chunk arrives, with the verifier Brand's loader uses — the least a
// gateway that caches and checks what it serves does.
type storeForward struct {
	store    *s3backend.S3
	verify   bool
	ix       *chunkindex.Index
	chunks   map[string]int // object key → chunk
	etags    []string
	bufs     [][]byte
	upstream atomic.Int64
}

// init allocates a buffer for every chunk of ix and faults it in.
func (s *storeForward) init(ix *chunkindex.Index) {
	n := ix.NumChunks()
	s.ix = ix
	s.chunks, s.etags, s.bufs = make(map[string]int, n), make([]string, n), make([][]byte, n)
	page := os.Getpagesize()
	for c := range n {
		ch := ix.Chunk(c)
		s.chunks[ch.Key], s.etags[c] = c, ch.ETag
		b := make([]byte, ch.Size)
		for i := 0; i < len(b); i += page {
			b[i] = 1 // fault the page in now, not while measured
		}
		s.bufs[c] = b
	}
}

// ServeHTTP reads the chunk into its buffer and writes it. Chunks are
// requested once per pass, so concurrent requests never share a buffer.
func (s *storeForward) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	key := strings.TrimPrefix(r.URL.Path, "/")
	c, ok := s.chunks[key]
	if !ok {
		http.NotFound(w, r)
		return
	}
	buf := s.bufs[c]
	var v *chunkindex.Verifier
	var progress func(start, end int)
	if s.verify {
		v = chunkindex.NewVerifier(s.ix, c, buf)
		progress = v.Progress
	}
	if err := s.store.ReadObject(r.Context(), key, s.etags[c], buf, progress); err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	if v != nil {
		if id, got := v.Finish(); id >= 0 {
			http.Error(w, fmt.Sprintf("sample %d has CRC32C %08x, not the index's", id, got), http.StatusBadGateway)
			return
		}
	}
	s.upstream.Add(int64(len(buf)))
	w.Header().Set("Content-Type", "application/x-tar")
	w.Header().Set("Content-Length", strconv.Itoa(len(buf)))
	_, _ = w.Write(buf)
}
