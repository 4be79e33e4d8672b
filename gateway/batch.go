package gateway

import (
	"context"
	"fmt"
	"net/http"
	"runtime/pprof"
	"strconv"
	"strings"

	"github.com/brandgw/brand/api"
	"github.com/brandgw/brand/chunkindex"
	"github.com/brandgw/brand/internal/batch/layout"
	"github.com/brandgw/brand/internal/batch/respond"
	"github.com/brandgw/brand/internal/cache/usetable"
)

// The endpoints of a job's epochs and batches, of one dataset or a
// mixture alike: each request is laid out by the jobs stage, served by
// their visit (internal/batch/visit) and answered here.

// handleEpoch serves /epoch/{epoch}: the epoch's extent under the job,
// and a mixture's components.
func (g *Gateway) handleEpoch(w http.ResponseWriter, r *http.Request) {
	j, err := epochOf(g.jobs, r)
	var info api.EpochInfo
	if err == nil {
		info, err = g.jobs.Orders().Info(j.Source, j.Query.Job, j.Epoch)
	}
	if err != nil {
		conflictHeader(w, err)
		writeError(r.Context(), w, err)
		return
	}
	setSourceHeaders(w.Header(), j.Source)
	if v := j.Query.Job.ScheduleVersion; v != "" {
		w.Header().Set(api.HeaderScheduleVersion, v)
		info.ScheduleVersion = v
	}
	writeJSON(w, http.StatusOK, info)
}

// handleManifest serves /epoch/{epoch}/batch/{batch}/manifest: the
// batch's samples without their data.
func (g *Gateway) handleManifest(w http.ResponseWriter, r *http.Request) {
	b, _, err := batchOf(g.jobs, r)
	if err != nil {
		conflictHeader(w, err)
		writeError(r.Context(), w, err)
		return
	}
	writeManifest(w, b)
}

// handleBatch serves GET and HEAD /epoch/{epoch}/batch/{batch}: the batch
// as a tar stream, or its manifest with format=json.
func (g *Gateway) handleBatch(w http.ResponseWriter, r *http.Request) {
	ctx := unansweredContext(r)
	b, q, err := batchOf(g.jobs, r)
	if err != nil {
		conflictHeader(w, err)
		writeError(ctx, w, err)
		return
	}
	conditional := notModified(r, b.ETag)
	switch {
	case q.Format == "json":
		writeManifest(w, b)
		return
	case conditional && !readsInPlace(b):
		g.batches.Follow(b)
		setBatchHeaders(w.Header(), b)
		w.WriteHeader(http.StatusNotModified)
		return
	case r.Method == http.MethodHead && !conditional:
		// Everything a HEAD answers is known from the index: read nothing.
		// A transformed batch's length is not (its tensors' sizes depend on
		// its images' headers), nor that of samples decoded in place (sized
		// when their chunk is decoded): their HEAD has no Content-Length.
		setBatchHeaders(w.Header(), b)
		w.Header().Set("Content-Type", "application/x-tar")
		if b.Job.Transform == "" && b.Sized() {
			w.Header().Set("Content-Length", strconv.FormatInt(b.Length(), 10))
		}
		w.WriteHeader(http.StatusOK)
		return
	}
	// Labels let a CPU profile be cut by epoch (go tool pprof -tagfocus
	// epoch=0 shows the cold one); the chunk loads this batch starts
	// inherit them.
	pprof.Do(ctx, usetable.EpochLabels(b.Name(), b.Epoch), func(ctx context.Context) {
		s, err := g.batches.Read(ctx, b)
		if err != nil {
			writeError(ctx, w, err)
			return
		}
		defer s.Release()
		setBatchHeaders(w.Header(), s.Batch)
		if conditional {
			// Read (readsInPlace), and the bytes are the ones the ETag
			// names.
			w.WriteHeader(http.StatusNotModified)
			return
		}
		if _, err := g.out.Write(w, r, "application/x-tar", respond.Payload{Parts: append(s.Parts, chunkindex.EndOfArchive[:]),
			N: s.Bytes + int64(len(chunkindex.EndOfArchive)), Relieve: s.Relieve}); err != nil {
			g.log.Debug().Err(err).Msg("batch not completed")
			return
		}
		g.metrics.samplesServed.Add(float64(s.Batch.Len()))
		g.stats.Balanced(s.Batch.Balanced)
	})
}

// writeManifest answers a batch's manifest: its samples without their
// data, and those a GET in skip mode would leave out as far as the
// gateway knows without reading (the samples of chunks whose last read
// found them damaged at rest).
func writeManifest(w http.ResponseWriter, b *layout.Batch) {
	m := api.Manifest{Dataset: b.Name(), Epoch: int(b.Epoch), Batch: int(b.Batch), Rank: b.Job.Rank,
		World: b.Job.World, BatchSize: b.Job.BatchSize, Offset: b.Job.Offset, Batches: b.Batches, ETag: b.ETag, Bytes: b.Length(),
		Samples: make([]api.ManifestSample, b.Reads()), Transform: b.Job.Transform}
	if b.Job.Transform != "" || !b.Sized() {
		m.Bytes = 0 // known once the images' headers are read, or the chunks decoded
	}
	if b.DS != nil {
		m.IndexID = b.DS.ID()
	}
	if bl := b.Balanced; bl != nil {
		m.Balance, m.RankCosts = bl.Kind, bl.Costs
	}
	for i := range m.Samples {
		ds, id, s := b.Sample(i)
		m.Samples[i] = api.ManifestSample{ID: id, Key: s.Key, Chunk: ds.Index.Chunk(s.Chunk).Key, Offset: s.Offset, Length: s.Length, CRC32C: s.CRC}
		if ds.Index.Deferred() {
			m.Samples[i].Offset = 0 // sized and placed when its chunk is decoded
		}
		if b.Composite() != nil {
			m.Samples[i].Dataset = ds.Name
		}
		if ds.IsDamaged(s.Chunk) {
			m.Missing = append(m.Missing, s.Key)
		}
	}
	setSourceHeaders(w.Header(), b.Source)
	writeJSON(w, http.StatusOK, m)
}

// A unit's content's wire form beyond a batch's own headers is asked of
// the unit, each where the gateway writes it:
//
//   - sourceHeaded: what a job of it reads, in place of Brand-Index (a
//     mixture: its text, block, components' versions and schedule);
//   - batchHeaded: what a batch of it serves beside Brand-Dataset (a
//     mixture: each sample's component; a bucket job: its images'
//     geometry).
type (
	sourceHeaded interface{ SourceHeaders(h http.Header) }
	batchHeaded  interface {
		BatchHeaders(h http.Header, b *layout.Batch)
	}
)

// setSourceHeaders names what a job reads: the dataset's index version,
// or its unit's own (a mixture's); and on a cluster the membership
// version its batches are laid out under, which the clients pin for the
// epoch.
func setSourceHeaders(h http.Header, src layout.Source) {
	if src.Members != nil {
		h.Set(api.HeaderMembers, src.Members.Version())
	}
	if u, ok := src.Unit.(sourceHeaded); ok {
		u.SourceHeaders(h)
		return
	}
	h.Set(api.HeaderIndex, src.IndexID())
}

// setBatchHeaders sets a batch's headers: its identity, and with missing
// samples (skip mode) which ones.
func setBatchHeaders(h http.Header, b *layout.Batch) {
	h.Set("ETag", b.ETag)
	h.Set("Cache-Control", "public, max-age=31536000, immutable")
	setSourceHeaders(h, b.Source)
	if v := b.Job.ScheduleVersion; v != "" {
		h.Set(api.HeaderScheduleVersion, v)
	}
	if b.Composite() == nil {
		h.Set(api.HeaderDataset, b.DS.Name)
	}
	if u, ok := b.Unit.(batchHeaded); ok {
		u.BatchHeaders(h, b)
	}
	h.Set(api.HeaderEpoch, strconv.FormatUint(b.Epoch, 10))
	h.Set(api.HeaderBatch, strconv.FormatUint(b.Batch, 10))
	h.Set(api.HeaderEpochBatches, strconv.Itoa(b.Batches))
	h.Set(api.HeaderEpochSamples, strconv.Itoa(b.EpochSamples))
	h.Set(api.HeaderBatchSamples, strconv.Itoa(b.Len()))
	if b.Job.Offset != 0 {
		h.Set(api.HeaderOffset, strconv.Itoa(b.Job.Offset))
	}
	if b.Job.Transform != "" {
		h.Set(api.HeaderTransform, b.Job.Transform)
	}
	if bl := b.Balanced; bl != nil {
		h.Set(api.HeaderBalance, bl.Kind)
		h.Set(api.HeaderRankCosts, bl.FormatCosts())
	}
	setMissingHeaders(h, b)
}

// maxMissingKeysHeader bounds the Brand-Missing-Keys header: a batch may
// lose thousands of samples with one chunk, and proxies reject long
// headers. The count header and the log always have them all.
const maxMissingKeysHeader = 2048

// setMissingHeaders names the samples a partial batch lacks: their count,
// and their keys (query-escaped, comma-separated) up to
// maxMissingKeysHeader bytes, ending in "…" when cut. A partial batch must
// not be cached as if it were the batch.
func setMissingHeaders(h http.Header, b *layout.Batch) {
	if len(b.Missing) == 0 {
		return
	}
	h.Set("Cache-Control", "no-store")
	h.Set(api.HeaderMissingSamples, strconv.Itoa(len(b.Missing)))
	var sb strings.Builder
	for i, key := range b.MissingKeys {
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

// readsInPlace reports whether batch b reads a dataset served in place.
// Its conditional request is answered once the batch is read, not from
// the index alone as a tar dataset's is: a tar dataset's index holds
// every sample's CRC32C, which its ETag names and every load checks, but
// a dataset served in place has its bytes checked only when its chunks
// are read — pinned to a local file's identity, or against the index's
// checksums — so a 304 from the index alone could vouch for a file
// edited since it was indexed, which a GET answers 502.
func readsInPlace(b *layout.Batch) bool {
	for _, p := range b.Parts {
		if p.Samples.DS.Index.Deferred() {
			return true
		}
	}
	return false
}

// notModified reports whether the request's If-None-Match matches etag.
func notModified(r *http.Request, etag string) bool {
	for _, t := range strings.Split(r.Header.Get("If-None-Match"), ",") {
		if t = strings.TrimSpace(t); t == etag || t == "*" {
			return true
		}
	}
	return false
}
