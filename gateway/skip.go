package gateway

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"github.com/brandgw/brand/api"
	"github.com/brandgw/brand/chunkcache"
)

// maxMissingKeysHeader bounds the Brand-Missing-Keys header: a batch may
// lose thousands of samples with one chunk, and proxies reject long
// headers. The count header and the log always have them all.
const maxMissingKeysHeader = 2048

// acquire pins the batch's chunks. With OnDamagedChunk "skip", a chunk
// damaged at rest is dropped from the batch (see without) and the rest
// acquired again, until every remaining chunk is pinned; each round drops
// a chunk, so it ends. It returns the layout actually pinned.
func (g *Gateway) acquire(ctx context.Context, b *batchLayout) (*chunkcache.Lease, *batchLayout, error) {
	for {
		lease, err := g.cache.Acquire(ctx, b.reqs)
		var dce *damagedChunkError
		if err == nil || g.cfg.OnDamagedChunk != OnDamagedSkip || !errors.As(err, &dce) {
			return lease, b, err
		}
		nb, dropped := b.without(dce.key)
		if len(dropped) == 0 {
			return nil, b, err // not this batch's chunk: nothing to skip
		}
		keys := make([]string, len(dropped))
		for i, id := range dropped {
			keys[i] = b.js.ds.index.SampleKey(id)
		}
		g.metrics.skipped.Add(float64(len(dropped)))
		g.log.Warn().Str("dataset", b.js.ds.name).Str("chunk", dce.key.Object).Uint64("epoch", b.epoch).
			Uint64("batch", b.batch).Int("rank", b.job.Rank).Strs("skipped_samples", keys).
			Msg("serving a batch without the samples of a damaged chunk")
		b = nb
	}
}

// without returns a copy of b without the samples of the chunk k names,
// and those samples. The copy's ETag differs from every full batch's, and
// from the same batch missing other samples.
func (b *batchLayout) without(k chunkcache.Key) (*batchLayout, []int) {
	drop := -1
	for i, r := range b.reqs {
		if r.Key == k {
			drop = i
		}
	}
	if drop < 0 {
		return b, nil
	}
	nb := *b
	nb.ids = make([]int, 0, len(b.ids))
	nb.slot = make([]int, 0, len(b.ids))
	nb.reqs = append(append([]chunkcache.Request(nil), b.reqs[:drop]...), b.reqs[drop+1:]...)
	nb.chunks = append(append([]int(nil), b.chunks[:drop]...), b.chunks[drop+1:]...)
	nb.missing = append([]int(nil), b.missing...)
	var dropped []int
	ix := b.js.ds.index
	for i, id := range b.ids {
		s := b.slot[i]
		if s == drop {
			dropped = append(dropped, id)
			nb.missing = append(nb.missing, id)
			_, _, length, _ := ix.SampleRange(id)
			nb.length -= length
			continue
		}
		if s > drop {
			s--
		}
		nb.ids = append(nb.ids, id)
		nb.slot = append(nb.slot, s)
	}
	nb.full = b.full
	if nb.full == "" {
		nb.full = b.etag
	}
	nb.etag = partialETag(nb.full, nb.missing)
	return &nb, dropped
}

// partialETag names a batch served without the samples missing.
func partialETag(full string, missing []int) string {
	s := []byte("brand-partial-v1|" + full)
	for _, id := range missing {
		s = strconv.AppendInt(append(s, '|'), int64(id), 10)
	}
	h := sha256.Sum256(s)
	return `"` + hex.EncodeToString(h[:16]) + `"`
}

// setMissingHeaders names the samples a partial batch lacks: their count,
// and their keys (query-escaped, comma-separated) up to
// maxMissingKeysHeader bytes, ending in "…" when cut. A partial batch must
// not be cached as if it were the batch.
func (b *batchLayout) setMissingHeaders(h http.Header) {
	if len(b.missing) == 0 {
		return
	}
	h.Set("Cache-Control", "no-store")
	h.Set(api.HeaderMissingSamples, strconv.Itoa(len(b.missing)))
	var sb strings.Builder
	for i, id := range b.missing {
		k := escapeKey(b.js.ds.index.SampleKey(id))
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

// knownMissing returns the keys of the batch's samples whose chunks the
// last read found damaged at rest: what a GET in skip mode would leave
// out, as far as the gateway knows without reading.
func (b *batchLayout) knownMissing() []string {
	var out []string
	for i, id := range b.ids {
		if b.js.ds.isDamaged(b.chunks[b.slot[i]]) {
			out = append(out, b.js.ds.index.SampleKey(id))
		}
	}
	return out
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
