package gateway

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"

	"github.com/go-chi/chi/v5"
	lru "github.com/hashicorp/golang-lru/v2"
	"golang.org/x/sync/singleflight"

	"github.com/brandgw/brand/api"
	"github.com/brandgw/brand/dataset"
	"github.com/brandgw/brand/importance"
	"github.com/brandgw/brand/s3backend"
)

// Importance sampling (docs/importance.md) keeps no state a replica could
// lose that training needs: feedback accumulates in memory until the job
// seals an epoch, and the sealed snapshot is an immutable object in the
// dataset's store, named by the hash of its bytes. Any replica, a
// restarted one included, computes an importance epoch from the version a
// request names, reading the snapshot from the store when it does not
// hold it. A lost feedback request, or a node lost before the seal, loses
// importance data, never training data.

// snapshotKey names a loaded snapshot.
type snapshotKey struct {
	dataset, index, job, version string
}

// snapshots holds the importance snapshots requests name, read from the
// store once each (4 bytes a sample).
type snapshots struct {
	memo   *lru.Cache[snapshotKey, *importance.Snapshot]
	flight singleflight.Group
}

// maxSnapshots bounds the snapshots held: a job's epochs each name one.
const maxSnapshots = 8

func newSnapshots() *snapshots {
	m, _ := lru.New[snapshotKey, *importance.Snapshot](maxSnapshots)
	return &snapshots{memo: m}
}

func snapKey(ds *loadedDataset, job, version string) snapshotKey {
	return snapshotKey{ds.name, ds.index.ID(), job, version}
}

// get returns a loaded snapshot without touching the store (the orders
// call it under the schedule's lock).
func (s *snapshots) get(ds *loadedDataset, job, version string) (*importance.Snapshot, bool) {
	if s == nil {
		return nil, false
	}
	return s.memo.Get(snapKey(ds, job, version))
}

// load returns a snapshot, reading and checking it from the store if it is
// not held. An unknown version is ErrNotFound.
func (s *snapshots) load(ctx context.Context, ds *loadedDataset, job, version string) (*importance.Snapshot, error) {
	k := snapKey(ds, job, version)
	if snap, ok := s.memo.Get(k); ok {
		return snap, nil
	}
	v, err, _ := s.flight.Do(fmt.Sprint(k), func() (any, error) {
		snap, err := dataset.ReadSnapshot(ctx, ds.store, ds.index, job, version)
		switch {
		case errors.Is(err, s3backend.ErrNotFound):
			return nil, fmt.Errorf("%w: no importance snapshot %s for job %s of dataset %s (seal an epoch to make one)", ErrNotFound, version, job, ds.name)
		case errors.Is(err, importance.ErrCorrupt):
			return nil, fmt.Errorf("%w: %w", ErrCorrupt, err)
		case err != nil:
			return nil, err
		}
		s.memo.Add(k, snap)
		return snap, nil
	})
	if err != nil {
		return nil, err
	}
	return v.(*importance.Snapshot), nil
}

// add holds a snapshot this gateway has just sealed.
func (s *snapshots) add(ds *loadedDataset, snap *importance.Snapshot) {
	s.memo.Add(snapKey(ds, snap.Job(), snap.Version()), snap)
}

// accKey names an epoch's feedback.
type accKey struct {
	dataset, index, job string
	epoch               uint64
}

// accumulators holds the feedback of the epochs being trained, at most
// maxAccumulators of them; the oldest goes first (its feedback is lost,
// which loses importance data, never training data).
type accumulators struct {
	mu    sync.Mutex
	byKey map[accKey]*importance.Accumulator
	fifo  []accKey
}

const maxAccumulators = 16

func newAccumulators() *accumulators {
	return &accumulators{byKey: map[accKey]*importance.Accumulator{}}
}

// get returns an epoch's accumulator, created if create is set; nil if
// there is none.
func (a *accumulators) get(ds *loadedDataset, job string, epoch uint64, create bool) (*importance.Accumulator, error) {
	k := accKey{ds.name, ds.index.ID(), job, epoch}
	a.mu.Lock()
	defer a.mu.Unlock()
	if acc, ok := a.byKey[k]; ok || !create {
		return acc, nil
	}
	acc, err := importance.NewAccumulator(ds.index, job, epoch)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrBadRequest, err)
	}
	a.byKey[k] = acc
	a.fifo = append(a.fifo, k)
	for len(a.fifo) > maxAccumulators {
		delete(a.byKey, a.fifo[0])
		a.fifo = a.fifo[1:]
	}
	return acc, nil
}

// importanceRequest parses what every importance endpoint names: the job
// in the path, the dataset and the epoch (in the path, or else a required
// epoch parameter), through the gateway's one parameter table.
func (g *Gateway) importanceRequest(r *http.Request, accepted []string) (query, *loadedDataset, string, uint64, error) {
	job := chi.URLParam(r, "job")
	if err := importance.ValidJobName(job); err != nil {
		return query{}, nil, "", 0, fmt.Errorf("%w: %w", ErrBadRequest, err)
	}
	q, ds, err := g.parseRequest(r, accepted, g.defaults)
	if err != nil {
		return q, nil, "", 0, err
	}
	epoch := q.epoch
	switch arg := chi.URLParam(r, "epoch"); {
	case arg != "":
		epoch, err = parseNumber("epoch", arg, g.cfg.Limits.MaxEpoch)
	case !q.epochSet:
		err = fmt.Errorf("%w: epoch=E is required: the epoch the feedback is for", ErrBadRequest)
	}
	return q, ds, job, epoch, err
}

// maxFeedbackBytes bounds a feedback body: a million samples in the
// binary form.
const maxFeedbackBytes = 8 << 20

// feedbackBody is the JSON form of feedback: sample keys or IDs, and a
// loss for each.
type feedbackBody struct {
	Keys   []string  `json:"keys"`
	IDs    []int     `json:"ids"`
	Losses []float64 `json:"losses"`
}

// handleFeedback serves POST /importance/{job}/feedback?dataset=&epoch=:
// per-sample losses of a batch, as JSON ({"keys"|"ids", "losses"}) or as
// application/octet-stream records of (uint32 sample ID, float32 loss),
// little-endian.
func (g *Gateway) handleFeedback(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	_, ds, job, epoch, err := g.importanceRequest(r, feedbackParams)
	if err != nil {
		writeError(ctx, w, err)
		return
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, maxFeedbackBytes+1))
	if err != nil {
		writeError(ctx, w, fmt.Errorf("%w: reading feedback: %w", ErrBadRequest, err))
		return
	}
	if len(body) > maxFeedbackBytes {
		writeError(ctx, w, fmt.Errorf("%w: feedback over %d bytes; send it in parts", ErrBadRequest, maxFeedbackBytes))
		return
	}
	ids, losses, err := parseFeedback(r.Header.Get("Content-Type"), body, ds)
	if err != nil {
		writeError(ctx, w, err)
		return
	}
	acc, err := g.accs.get(ds, job, epoch, true)
	if err == nil {
		err = acc.Add(ids, losses)
	}
	if err != nil {
		writeError(ctx, w, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]int{"accepted": len(ids)})
}

// parseFeedback decodes a feedback body of either form.
func parseFeedback(contentType string, body []byte, ds *loadedDataset) ([]int, []float32, error) {
	if strings.HasPrefix(contentType, "application/octet-stream") {
		if len(body)%8 != 0 {
			return nil, nil, fmt.Errorf("%w: binary feedback is 8-byte records (uint32 ID, float32 loss); got %d bytes", importance.ErrBadFeedback, len(body))
		}
		n := len(body) / 8
		ids, losses := make([]int, n), make([]float32, n)
		for i := range n {
			ids[i] = int(binary.LittleEndian.Uint32(body[8*i:]))
			losses[i] = math.Float32frombits(binary.LittleEndian.Uint32(body[8*i+4:]))
		}
		return ids, losses, nil
	}
	var fb feedbackBody
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&fb); err != nil {
		return nil, nil, fmt.Errorf("%w: feedback is JSON {\"keys\" or \"ids\": [...], \"losses\": [...]} or application/octet-stream: %v", importance.ErrBadFeedback, err)
	}
	if (fb.Keys == nil) == (fb.IDs == nil) {
		return nil, nil, fmt.Errorf("%w: give either keys or ids", importance.ErrBadFeedback)
	}
	ids := fb.IDs
	if fb.Keys != nil {
		ids = make([]int, len(fb.Keys))
		for i, k := range fb.Keys {
			id, ok := ds.index.Lookup(k)
			if !ok {
				return nil, nil, fmt.Errorf("%w: unknown sample key %q in dataset %s", importance.ErrBadFeedback, k, ds.name)
			}
			ids[i] = id
		}
	}
	losses := make([]float32, len(fb.Losses))
	for i, l := range fb.Losses {
		losses[i] = float32(l)
	}
	return ids, losses, nil
}

// sealResult is the answer to a seal.
type sealResult struct {
	Version  string `json:"version"`
	Epoch    uint64 `json:"epoch"`
	Reported int    `json:"reported"` // samples with feedback this epoch, over every node reached
	Object   string `json:"object"`   // the snapshot's key under the dataset's root
	Parts    int    `json:"parts"`    // nodes whose feedback was merged
}

// handleSeal serves POST /importance/{job}/seal?dataset=&epoch=E[&prev=V]:
// the epoch's feedback, merged over the cluster's nodes, sealed onto the
// previous snapshot and written to the store. Sealing the same feedback
// again writes the same object and answers the same version.
func (g *Gateway) handleSeal(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	q, ds, job, epoch, err := g.importanceRequest(r, sealParams)
	var prev *importance.Snapshot
	if err == nil && q.prev != "" {
		prev, err = g.snaps.load(ctx, ds, job, q.prev)
	}
	var acc *importance.Accumulator
	if err == nil {
		acc, err = importance.NewAccumulator(ds.index, job, epoch)
	}
	if err != nil {
		writeError(ctx, w, err)
		return
	}
	parts := 1
	if mine, _ := g.accs.get(ds, job, epoch, false); mine != nil {
		if err := acc.Merge(mine); err != nil {
			writeError(ctx, w, err)
			return
		}
	}
	if g.peers != nil {
		parts += g.mergePeerFeedback(ctx, ds, job, epoch, acc)
	}
	snap, err := importance.Seal(prev, acc)
	if err != nil {
		writeError(ctx, w, fmt.Errorf("%w: %w", ErrBadRequest, err))
		return
	}
	key := importance.ObjectKey(job, snap.Version())
	if err := dataset.WriteSnapshot(ctx, ds.store, snap); err != nil {
		writeError(ctx, w, err)
		return
	}
	g.snaps.add(ds, snap)
	g.log.Info().Str("dataset", ds.name).Str("job", job).Uint64("epoch", epoch).Str("version", snap.Version()).
		Int("reported", acc.Reported()).Int("parts", parts).Msg("importance sealed")
	writeJSON(w, http.StatusOK, sealResult{Version: snap.Version(), Epoch: epoch, Reported: acc.Reported(), Object: key, Parts: parts})
}

// handleSealed serves GET /importance/{job}/epochs/{epoch}?dataset=: the
// version sealed for the epoch, so that every rank of a job finds the
// snapshot its rank 0 sealed. 404 until it is sealed.
func (g *Gateway) handleSealed(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	_, ds, job, epoch, err := g.importanceRequest(r, sealedParams)
	if err != nil {
		writeError(ctx, w, err)
		return
	}
	v, err := dataset.ReadSealed(ctx, ds.store, job, epoch)
	switch {
	case errors.Is(err, s3backend.ErrNotFound):
		err = fmt.Errorf("%w: epoch %d of job %s is not sealed", ErrNotFound, epoch, job)
	case errors.Is(err, importance.ErrCorrupt):
		err = fmt.Errorf("%w: %w", ErrCorrupt, err)
	}
	if err != nil {
		writeError(ctx, w, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"version": v, "epoch": epoch})
}

// peerFeedbackPath is where a node hands its part of an epoch's feedback
// to the node sealing it.
const peerFeedbackPath = "/internal/v1/importance/{job}"

// handlePeerFeedback serves GET /internal/v1/importance/{job}?dataset=&index=&epoch=:
// this node's feedback for the epoch as (uint32 ID, float32 loss) records.
func (g *Gateway) handlePeerFeedback(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	q, ds, job, epoch, err := g.importanceRequest(r, peerFeedbackParams)
	if err == nil && q.index != ds.index.ID() {
		err = fmt.Errorf("%w: index %s asked for, this node serves %s", ErrConflict, q.index, ds.index.ID())
	}
	if err != nil {
		writeError(ctx, w, err)
		return
	}
	acc, _ := g.accs.get(ds, job, epoch, false)
	var out []byte
	if acc != nil {
		for id, loss := range acc.Reports() {
			out = binary.LittleEndian.AppendUint32(out, uint32(id))
			out = binary.LittleEndian.AppendUint32(out, math.Float32bits(loss))
		}
	}
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("Content-Length", strconv.Itoa(len(out)))
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(out)
}

// mergePeerFeedback adds every live peer's part of the epoch's feedback to
// acc and returns how many parts it merged. A peer that cannot be reached
// loses its part, with a warning.
func (g *Gateway) mergePeerFeedback(ctx context.Context, ds *loadedDataset, job string, epoch uint64, acc *importance.Accumulator) int {
	merged := 0
	for k, u := range g.peers.urls {
		if k == g.peers.self {
			continue
		}
		q := url.Values{api.ParamDataset: {ds.name}, "index": {ds.index.ID()}, "epoch": {strconv.FormatUint(epoch, 10)}}
		b, err := g.peers.get(ctx, u+"/internal/v1/importance/"+url.PathEscape(job)+"?"+q.Encode())
		if err == nil && len(b)%8 != 0 {
			err = fmt.Errorf("%d bytes is not whole records", len(b))
		}
		if err == nil {
			ids, losses, _ := parseFeedback("application/octet-stream", b, ds)
			err = acc.Add(ids, losses)
		}
		if err != nil {
			g.log.Warn().Err(err).Str("peer", u).Str("job", job).Uint64("epoch", epoch).
				Msg("sealing without a peer's feedback: its part is lost")
			continue
		}
		merged++
	}
	return merged
}
