package gateway

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"golang.org/x/sync/errgroup"

	"github.com/brandgw/brand/api"
	"github.com/brandgw/brand/chunkcache"
	"github.com/brandgw/brand/chunkindex"
	"github.com/brandgw/brand/importance"
)

// The internal endpoint through which a node asks a chunk's owner for some
// of its samples. Only sample bytes cross nodes, never whole chunks: a
// batch takes a few samples of each chunk, and the owner's cache holds the
// chunk for every node.
const (
	peerSamplesPath = "/internal/v1/samples"
	headerPeer      = "Brand-Peer" // the asking node's number, for metrics
	maxPeerSamples  = 1 << 20      // samples one peer request may ask for
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// errPeer marks a fetch from a peer that failed: refused, timed out, a bad
// status, short, or failing a checksum. The samples are then read from the
// next node of their chunks' rankings, or from the store.
var errPeer = errors.New("peer fetch failed")

// peerFetch is one request to one node: samples of a batch, at positions
// pos of the batch, in order.
type peerFetch struct {
	node int
	pos  []int
}

// fetchFromPeers fills data[i] for the batch positions whose chunk's
// source is another node, and returns the positions it could not fetch,
// with the nodes that failed added to skip. Each node gets one request.
func (g *Gateway) fetchFromPeers(ctx context.Context, b *batchLayout, src []int, data [][]byte, skip map[int]bool) (failed []int) {
	var byNode []peerFetch
	at := map[int]int{}
	for i := range b.ids {
		k := src[b.slot[i]]
		if k == g.peers.self || data[i] != nil {
			continue // read here, or fetched already
		}
		j, ok := at[k]
		if !ok {
			j = len(byNode)
			at[k] = j
			byNode = append(byNode, peerFetch{node: k})
		}
		byNode[j].pos = append(byNode[j].pos, i)
	}
	errs := make([]error, len(byNode))
	var eg errgroup.Group
	for j, f := range byNode {
		eg.Go(func() error {
			errs[j] = g.fetchSamples(ctx, b, f, data)
			return nil
		})
	}
	_ = eg.Wait()
	for j, f := range byNode {
		if errs[j] == nil {
			continue
		}
		if ctx.Err() == nil {
			g.log.Warn().Err(errs[j]).Str("peer", g.peers.urls[f.node]).Int("samples", len(f.pos)).
				Msg("fetching samples from a peer failed; reading them elsewhere")
			g.peers.metrics.failures.WithLabelValues(g.peers.urls[f.node]).Inc()
			g.peers.markDown(f.node)
		}
		skip[f.node] = true
		failed = append(failed, f.pos...)
	}
	return failed
}

// fetchSamples asks node f.node for the samples at batch positions f.pos
// and checks each against its CRC32C before storing it in data.
func (g *Gateway) fetchSamples(ctx context.Context, b *batchLayout, f peerFetch, data [][]byte) error {
	ds := b.js.ds
	ids := make([]byte, 0, 8*len(f.pos))
	var want int64
	for n, i := range f.pos {
		if n > 0 {
			ids = append(ids, ',')
		}
		ids = strconv.AppendInt(ids, int64(b.ids[i]), 10)
		_, _, length, _ := ds.index.SampleRange(b.ids[i])
		want += length
	}
	q := url.Values{}
	q.Set(api.ParamDataset, ds.name)
	q.Set("index", ds.index.ID())
	q.Set(api.ParamSeed, strconv.FormatUint(b.js.seed, 10))
	q.Set(api.ParamWindow, strconv.Itoa(b.js.window))
	q.Set("epoch", strconv.FormatUint(b.epoch, 10))
	q.Set("pos", strconv.Itoa(b.start))
	if imp := b.js.imp; imp.job != "" {
		q.Set(api.ParamJob, imp.job)
		if imp.version != "" {
			q.Set(api.ParamImportance, imp.version)
			q.Set(api.ParamHot, strconv.Itoa(imp.hot))
		}
	}
	ctx, cancel := context.WithTimeout(ctx, g.peers.timeout)
	defer cancel()
	peer := g.peers.urls[f.node]
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, peer+peerSamplesPath+"?"+q.Encode(), bytes.NewReader(ids))
	if err != nil {
		return fmt.Errorf("%w: %w", errPeer, err)
	}
	req.Header.Set("Content-Type", "text/plain")
	req.Header.Set(headerPeer, strconv.Itoa(g.peers.self))
	if g.peers.token != "" {
		req.Header.Set("Authorization", "Bearer "+g.peers.token)
	}
	resp, err := g.peers.client.Do(req)
	if err != nil {
		return fmt.Errorf("%w: %s: %w", errPeer, peer, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return fmt.Errorf("%w: %s answered %s: %s", errPeer, peer, resp.Status, strings.TrimSpace(string(msg)))
	}
	if resp.ContentLength != want {
		return fmt.Errorf("%w: %s sent %d bytes, want %d", errPeer, peer, resp.ContentLength, want)
	}
	buf := make([]byte, want)
	if _, err := io.ReadFull(resp.Body, buf); err != nil {
		return fmt.Errorf("%w: reading from %s: %w", errPeer, peer, err)
	}
	var off int64
	for _, i := range f.pos {
		_, _, length, crc := ds.index.SampleRange(b.ids[i])
		s := buf[off : off+length : off+length]
		if got := crc32.Checksum(s, castagnoli); got != crc {
			return fmt.Errorf("%w: sample %q from %s has CRC32C %08x, the index says %08x",
				errPeer, ds.index.SampleKey(b.ids[i]), peer, got, crc)
		}
		data[i] = s
		off += length
	}
	g.peers.metrics.fetched.WithLabelValues(peer).Add(float64(want))
	g.peers.fetched(f.node)
	return nil
}

// handlePeerSamples serves POST /internal/v1/samples: the bytes of the
// samples a peer names, back to back, read through this node's cache. The
// request carries the job stream and position it is for, so that this
// node's schedule and prefetch follow streams whose ranks live elsewhere.
func (g *Gateway) handlePeerSamples(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	if g.peers == nil {
		writeError(ctx, w, fmt.Errorf("%w: this gateway is not part of a cluster", ErrNotFound))
		return
	}
	k, err := strconv.Atoi(r.Header.Get(headerPeer))
	if err != nil || k < 0 || k >= g.peers.nodes() {
		k = -1
	}
	g.peers.heard(k)
	q := r.URL.Query()
	ds, err := g.catalog.get(q.Get(api.ParamDataset))
	if err != nil {
		writeError(ctx, w, err)
		return
	}
	if id := q.Get("index"); id != ds.index.ID() {
		writeError(ctx, w, fmt.Errorf("%w: index %s asked for, this node serves %s of dataset %s", ErrConflict, id, ds.index.ID(), ds.name))
		return
	}
	seed, err1 := strconv.ParseUint(q.Get(api.ParamSeed), 10, 64)
	window, err2 := strconv.Atoi(q.Get(api.ParamWindow))
	epoch, err3 := strconv.ParseUint(q.Get("epoch"), 10, 64)
	pos, err4 := strconv.Atoi(q.Get("pos"))
	if err := errors.Join(err1, err2, err3, err4); err != nil || window < 1 || window > g.cfg.Limits.MaxWindow ||
		epoch > g.cfg.Limits.MaxEpoch || pos < 0 || pos > ds.index.NumSamples() {
		writeError(ctx, w, fmt.Errorf("%w: seed, window, epoch and pos must be in range", ErrBadRequest))
		return
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, 12*maxPeerSamples))
	if err != nil {
		writeError(ctx, w, fmt.Errorf("%w: reading the sample list: %w", ErrBadRequest, err))
		return
	}
	ids := make([]int, 0, bytes.Count(body, []byte{','})+1)
	for f := range strings.SplitSeq(string(body), ",") {
		id, err := strconv.Atoi(f)
		if err != nil || id < 0 || id >= ds.index.NumSamples() {
			writeError(ctx, w, fmt.Errorf("%w: sample ID %q is not in [0, %d)", ErrBadRequest, f, ds.index.NumSamples()))
			return
		}
		ids = append(ids, id)
	}
	if len(ids) > maxPeerSamples {
		writeError(ctx, w, fmt.Errorf("%w: more than %d samples", ErrBadRequest, maxPeerSamples))
		return
	}
	js := jobStream{ds: ds, seed: seed, window: window}
	if job := q.Get(api.ParamJob); job != "" {
		if err := importance.ValidJobName(job); err != nil {
			writeError(ctx, w, fmt.Errorf("%w: %w", ErrBadRequest, err))
			return
		}
		js.imp.job = job
		if v := q.Get(api.ParamImportance); v != "" {
			hot, _ := strconv.Atoi(q.Get(api.ParamHot))
			if _, err := g.snaps.load(ctx, ds, job, v); err != nil {
				writeError(ctx, w, err)
				return
			}
			js.imp.version, js.imp.hot = v, max(hot, 0)
		}
	}
	if st, moved := g.sched.advance(js, epoch, pos); moved && g.prefetch != nil {
		g.prefetch.enqueue(js, g.ownedUses(js, g.sched.upcoming(st, g.cfg.PrefetchWindows)))
	}
	b := layoutSamples(js, epoch, ids)
	size := b.length - int64(len(chunkindex.EndOfArchive))
	out := &batchBody{parts: make(net.Buffers, 0, len(ids)), pool: g.coalesce}
	// As a batch is: straight from the pinned chunks, or, when they do
	// not fit in the cache together, assembled a group at a time.
	lease, err := g.cache.Acquire(ctx, b.reqs)
	switch {
	case errors.Is(err, chunkcache.ErrTooLarge):
		var copied []byte
		if copied, _, _, err = g.assemble(ctx, b); err == nil {
			out.parts = append(out.parts, copied[:size])
		}
	case err == nil:
		defer lease.Release()
		for i, id := range b.ids {
			_, off, length, _ := ds.index.SampleRange(id)
			out.parts = append(out.parts, lease.Bytes(b.slot[i])[off:off+length])
		}
		defer g.copyOutUnderPressure(out, lease, size)()
	}
	if err != nil {
		writeError(ctx, w, err)
		return
	}
	g.setWriteDeadline(w, size)
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("Content-Length", strconv.FormatInt(size, 10))
	w.WriteHeader(http.StatusOK)
	n, _ := writeParts(w, out)
	if k >= 0 {
		g.peers.metrics.served.WithLabelValues(g.peers.urls[k]).Add(float64(n))
	}
}

// ownedUses keeps the uses of chunks this node reads from the store
// itself: in a cluster a node prefetches only what it owns (or stands in
// for while the owner is down); other nodes' chunks come from them.
func (g *Gateway) ownedUses(js jobStream, uses []chunkUse) []chunkUse {
	if g.peers == nil {
		return uses
	}
	out := uses[:0]
	for _, u := range uses {
		if g.peers.source(js.ds, u.chunk, nil) == g.peers.self {
			out = append(out, u)
		}
	}
	return out
}
