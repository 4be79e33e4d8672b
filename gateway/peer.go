package gateway

import (
	"context"
	"net"
	"net/http"
	"strconv"

	"github.com/go-chi/chi/v5"

	"github.com/brandgw/brand/api"
	"github.com/brandgw/brand/internal/order"
	"github.com/brandgw/brand/internal/peer"
	"github.com/brandgw/brand/internal/respond"
)

// The peers' internal endpoints (package peer holds the protocol, both
// sides): a node's request for samples of the chunks this node is the
// source of, its probe of this node's state, and its collection of this
// node's part of an epoch's importance feedback.

// peerKey carries the authenticated asker's position in a request's
// context.
type peerKey struct{}

// authenticatePeer refuses internal requests without a peer's credential
// (peer.Credentials), with 401. A client's bearer token is never one.
func (g *Gateway) authenticatePeer(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		k, err := g.peerCred.Verify(r, g.cluster.Nodes())
		if err != nil {
			writeError(r.Context(), w, err)
			return
		}
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), peerKey{}, k)))
	})
}

// asker is the authenticated node a request comes from; -1 if unknown.
func asker(r *http.Request) int {
	if k, ok := r.Context().Value(peerKey{}).(int); ok {
		return k
	}
	return -1
}

// handlePeerSamples serves POST peer.SamplesPath: the samples a node
// names, read through this node's cache under the same bounds as a batch
// (size, assembly, the job stream's requests in flight), back to back
// after the reply's head (peer.ReplyHead), which names the samples left
// out because their chunk is damaged at rest.
func (g *Gateway) handlePeerSamples(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	req, err := peer.DecodeRequest(r, g.catalog, g.cfg.Limits)
	if err == nil && req.Origin != nil {
		if imp := req.Origin.Stream.Imp; imp.Version != "" {
			_, err = g.feedback.Snapshot(ctx, req.DS, imp.Job, imp.Version)
		}
	}
	if err != nil {
		writeError(ctx, w, err)
		return
	}
	k := asker(r)
	g.cluster.Heard(k)
	res, err := g.pipe.ReadFor(ctx, order.SamplesOf(req.DS, req.IDs, req.Info), req.Origin)
	if err != nil {
		writeError(ctx, w, err)
		return
	}
	defer res.Release()
	head := peer.ReplyHead(res.MissingPos)
	n, _ := g.out.Write(w, r, peer.ReplyType, respond.Payload{Parts: append(net.Buffers{head}, res.Parts...), N: int64(len(head)) + res.Bytes, Relieve: res.Relieve})
	g.cluster.Served(k, max(n-int64(len(head)), 0))
}

// handleState serves GET peer.StatePath: whether this node is ready and
// which index versions of each dataset it holds. A peer's probe.
func (g *Gateway) handleState(w http.ResponseWriter, r *http.Request) {
	if err := g.notReady(); err != nil {
		writeError(r.Context(), w, err)
		return
	}
	g.cluster.Heard(asker(r))
	st := peer.State{Self: g.cluster.Self(), Ready: true}
	for _, name := range g.catalog.Names() {
		held, err := g.catalog.Held(name)
		if err != nil {
			writeError(r.Context(), w, err)
			return
		}
		d := peer.DatasetState{Name: name, Current: held[0].ID()}
		for _, ds := range held {
			d.Held = append(d.Held, ds.ID())
		}
		st.Datasets = append(st.Datasets, d)
	}
	writeJSON(w, http.StatusOK, st)
}

// handlePeerFeedback serves GET peer.FeedbackPath{job}: this node's part
// of an epoch's importance feedback, (uint32 ID, float32 loss) records.
func (g *Gateway) handlePeerFeedback(w http.ResponseWriter, r *http.Request) {
	job, err := jobName(chi.URLParam(r, "job"))
	if err != nil {
		writeError(r.Context(), w, err)
		return
	}
	ds, epoch, err := peer.DecodeFeedback(r, g.catalog, g.cfg.Limits)
	if err != nil {
		writeError(r.Context(), w, err)
		return
	}
	g.cluster.Heard(asker(r))
	out := g.feedback.Reports(ds, job, epoch)
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("Content-Length", strconv.Itoa(len(out)))
	w.Header().Set(api.HeaderIndex, ds.ID())
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(out)
}
