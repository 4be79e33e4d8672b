package gateway

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"

	"github.com/go-chi/chi/v5"
	"github.com/rs/zerolog"

	"github.com/brandgw/brand/api"
	gcluster "github.com/brandgw/brand/cluster"
	"github.com/brandgw/brand/internal/batch/layout"
	"github.com/brandgw/brand/internal/batch/respond"
	"github.com/brandgw/brand/internal/batch/tensorize"
	"github.com/brandgw/brand/internal/batch/visit"
	"github.com/brandgw/brand/internal/cache/chunkcache"
	"github.com/brandgw/brand/internal/cluster/nodestate"
	"github.com/brandgw/brand/internal/cluster/peercred"
	"github.com/brandgw/brand/internal/cluster/peerreq"
	"github.com/brandgw/brand/internal/cluster/storepath"
	"github.com/brandgw/brand/internal/cluster/transport"
	"github.com/brandgw/brand/internal/job/catalog"
	"github.com/brandgw/brand/internal/job/feedback"
	"github.com/brandgw/brand/internal/job/query"
	"github.com/brandgw/brand/internal/job/resolve"
	"github.com/brandgw/brand/internal/server/reqbody"
)

// peerAPI serves the peers' internal endpoints (internal/cluster/transport
// holds the wire, both sides; internal/cluster/peerreq reads a request
// through this node's table, catalog and layout): a node's request for
// samples of the chunks this node is the source of, its probe of this
// node's state, and its collection of this node's part of an epoch's
// importance feedback.
//
// They exist only on a node of a cluster of several (routes): a single
// gateway has no peers, and endpoints that serve samples by ID to
// anyone would let a client without a token read the whole dataset. On a
// cluster they take a peer's credential and nothing else (a client's
// token is never one); a cluster whose clients need tokens must have a
// peer secret (Config.fill), so they never ask less than a token.
type peerAPI struct {
	// edited reports whether version is an edit of job's chain over ds,
	// registered for its layout (resolve.Editor.PeerEdit).
	edited   func(ctx context.Context, ds *catalog.Dataset, job, version string) bool
	creds    *peercred.Verifier
	nodes    peerNodes
	members  peerMembership
	store    interface{ Down() bool } // whether this node reaches the store (storepath.Watch)
	catalog  *catalog.Catalog
	batches  *visit.Batches
	out      *respond.Writer
	feedback *feedback.State
	limits   query.Limits
	ready    func() error
	// transforms is the transform stage, whose pipelines and load the
	// state probe tells the peers (tensorize.Stage).
	transforms interface {
		Fingerprints() map[string]string
		Load() tensorize.Load
	}
	// chunks is the cache, whose chunks this node hands to their next
	// owners in a membership change (chunkcache.Cache.Resident); soon the
	// schedule, which says which chunks the streams it follows need soon.
	chunks interface {
		Resident(k chunkcache.Key) ([]byte, func(), bool)
		Contains(k chunkcache.Key) bool
		Acquire(ctx context.Context, reqs []chunkcache.Request) (*chunkcache.Lease, error)
	}
	soon interface {
		Soon(ds *catalog.Dataset, chunks []int, ahead int) []int
	}
	// kept is what this node keeps for the nodes that will ask it for
	// chunks they gained (handover.Kept).
	kept interface {
		Keep(url string, ds *catalog.Dataset, chunks []int)
		Taken(url string, ds *catalog.Dataset, c int)
	}
	// take takes, of chunks of ds that the node at url says its cache
	// holds (given=true), those this node owns and lacks, and returns
	// them (giveBack.take).
	take func(url string, ds *catalog.Dataset, chunks []int) []int
	// served answers what this node has served of a job, asked by a
	// node taking an edit of it (resolve.Editor.Answer).
	served func(ctx context.Context, q resolve.Question) (resolve.Answer, error)
	log    zerolog.Logger
}

// peerNodes is what the peers' endpoints ask of the other nodes
// (transport.Nodes): an authenticated asker's slot, that it was heard from and
// served, and the nodes this node sees down (its state says so).
type peerNodes interface {
	Slot(url string) int
	Heard(k int)
	Served(k int, n int64)
	Down() []string
}

// peerMembership is what they ask of the membership
// (membership.Tracker): the versions this node keeps, and what its state
// tells of its place in the cluster. (Their credentials ask whether the
// asker is a member: peercred.Members.)
type peerMembership interface {
	Known(version string) (*gcluster.Membership, bool)
	Describe(st *nodestate.State)
}

// peerKey carries the authenticated asker's slot (transport.Nodes.Slot) in a
// request's context.
type peerKey struct{}

// authenticate refuses internal requests without a peer's credential
// for them (peercred.Verifier), with 401, none of their body read and
// their connection closed (reqbody.Refuse). A client's bearer token is
// never one. A credential of a node that is not a member this node knows
// says so (peercred.HeaderNotMember): the asker has just joined, and this
// node is up. One signed for an earlier boot of this node names this
// one (peercred.HeaderPeerBoot), for the asker to sign again.
func (a *peerAPI) authenticate(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u, err := a.creds.Verify(r)
		if err != nil {
			if errors.Is(err, peercred.ErrNotMember) {
				w.Header().Set(peercred.HeaderNotMember, "true")
			}
			if errors.Is(err, peercred.ErrOtherBoot) {
				// A peer that has not learned of this node's restart signs
				// again for this boot; a replay learns nothing it can sign.
				w.Header().Set(peercred.HeaderPeerBoot, a.creds.Boot())
			}
			reqbody.Refuse(w, r)
			writeError(r.Context(), w, err)
			return
		}
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), peerKey{}, a.nodes.Slot(u))))
	})
}

// asker is the authenticated node a request comes from; -1 if unknown.
func asker(r *http.Request) int {
	if k, ok := r.Context().Value(peerKey{}).(int); ok {
		return k
	}
	return -1
}

// heard tells the node's view of its peers that r's asker, a peer,
// asked this node for something: it is up, if it says it serves
// (transport.AskerServes). A node starting asks its peers before it can
// serve; taken for up then, it would be taken for down by the next probe
// of it, and its chunks read by its peers once a job starts.
func (a *peerAPI) heard(r *http.Request) {
	if transport.AskerServes(r) {
		a.nodes.Heard(asker(r))
	}
}

// handleSamples serves POST transport.SamplesPath: the samples a node names,
// read through this node's cache under the same bounds as a batch (size,
// assembly, the job stream's requests in flight), back to back after the
// reply's head (transport.ReplyHead), which names the samples left out because
// their chunk is damaged at rest.
func (a *peerAPI) handleSamples(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	req, err := peerreq.DecodeSamples(r, a.catalog, a.limits)
	if err == nil && req.Origin != nil {
		if imp := req.Origin.Stream.Imp; imp.Version != "" {
			_, err = a.feedback.Snapshot(ctx, req.DS, imp.Job, imp.Version)
		}
		if s := req.Origin.Stream; s.Edit != "" && (a.edited == nil || !a.edited(ctx, req.DS, s.Name, s.Edit)) {
			// The asker's positions are of an order this node cannot
			// lay out yet (it has not read the job's edit): the samples
			// are read, and the stream is not followed.
			req.Origin, req.Stream = nil, layout.Stream{}
		}
	}
	if err != nil {
		writeError(ctx, w, err)
		return
	}
	k := asker(r)
	a.heard(r)
	res, err := a.batches.ReadFor(ctx, layout.SamplesOf(req.DS, req.IDs, req.Info), req.Origin, req.Stream)
	if err != nil {
		if errors.Is(err, storepath.ErrUnreachable) {
			// Cut off from the store: the asker reads these elsewhere
			// and keeps asking this node for what its cache holds.
			w.Header().Set(transport.HeaderStoreUnreachable, "true")
		}
		writeError(ctx, w, err)
		return
	}
	defer res.Release()
	head := transport.ReplyHead(res.MissingPos)
	if req.SizedInReply() {
		head = transport.TransformedReplyHead(res.MissingPos, res.Parts)
	}
	n, err := a.out.Write(w, r, transport.ReplyType, respond.Payload{Parts: append(net.Buffers{head}, res.Parts...),
		N: int64(len(head)) + res.Bytes, Relieve: res.Relieve})
	if err != nil {
		a.log.Debug().Err(err).Msg("peer's samples not completed")
	}
	a.nodes.Served(k, max(n-int64(len(head)), 0))
}

// handleState serves GET transport.StatePath: whether this node is ready,
// which index versions of each dataset it holds, and which of the nodes
// it probes it does not see up. A peer's probe.
func (a *peerAPI) handleState(w http.ResponseWriter, r *http.Request) {
	if err := a.ready(); err != nil {
		writeError(r.Context(), w, err)
		return
	}
	a.heard(r)
	load := nodestate.Load(a.transforms.Load())
	st := nodestate.State{Ready: true, Transforms: a.transforms.Fingerprints(), Load: &load, Down: a.nodes.Down(), StoreUnreachable: a.store.Down()}
	a.members.Describe(&st)
	for _, name := range a.catalog.Names() {
		held := a.catalog.HeldIDs(name)
		if len(held) == 0 {
			writeError(r.Context(), w, catalog.ErrNotReady)
			return
		}
		st.Datasets = append(st.Datasets, nodestate.DatasetState{Name: name, Current: held[0], Held: held})
	}
	writeJSON(w, http.StatusOK, st)
}

// handleChunk serves GET transport.ChunkPath: a chunk's bytes from this node's
// cache, for the node that gains the chunk in a membership change; 404
// (with transport.HeaderHeld: false) if the cache does not hold it. It never
// reads the store for another node: the asker does, once.
func (a *peerAPI) handleChunk(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	ds, c, through, err := peerreq.DecodeChunk(r, a.catalog, a.limits)
	if err != nil {
		writeError(ctx, w, err)
		return
	}
	k := asker(r)
	a.heard(r)
	a.kept.Taken(r.Header.Get(peercred.HeaderPeer), ds, c) // given or not, it is not asked for again
	data, release, ok := a.chunks.Resident(ds.ChunkKey(c))
	if !ok && through {
		// The asker cannot reach the store: this node reads the chunk
		// for it, through its cache, as for a batch.
		lease, err := a.chunks.Acquire(ctx, []chunkcache.Request{ds.ChunkRequest(c)})
		if err != nil {
			if errors.Is(err, storepath.ErrUnreachable) {
				w.Header().Set(transport.HeaderStoreUnreachable, "true")
			}
			writeError(ctx, w, err)
			return
		}
		data, release, ok = lease.Bytes(0), lease.Release, true
	}
	if !ok {
		w.Header().Set(transport.HeaderHeld, "false")
		writeError(ctx, w, fmt.Errorf("%w: chunk %d of %s is not in this node's cache", query.ErrOutOfRange, c, ds.Name))
		return
	}
	defer release()
	n, err := a.out.Write(w, r, transport.ReplyType, respond.Payload{Parts: net.Buffers{data}, N: int64(len(data))})
	if err != nil {
		a.log.Debug().Err(err).Msg("a chunk handed over not completed")
	}
	a.nodes.Served(k, n)
}

// handleNeeded serves POST transport.NeededPath: of the chunks a node names,
// those the job streams this node follows need within their current
// window and the next ones asked about (usetable.Table.Soon), or with
// held=true those this node's cache holds; with keep=true it takes them
// as the chunks the node (transport.HeaderPeer: authenticated with a peer
// secret, else as it says) will ask this one for, and answers none.
func (a *peerAPI) handleNeeded(w http.ResponseWriter, r *http.Request) {
	q, err := peerreq.DecodeNeeded(r, a.catalog, a.limits)
	if err != nil {
		writeError(r.Context(), w, err)
		return
	}
	a.heard(r)
	var answer []int
	switch {
	case q.Keep:
		a.kept.Keep(r.Header.Get(peercred.HeaderPeer), q.DS, q.Chunks)
	case q.Given:
		if url := r.Header.Get(peercred.HeaderPeer); url != "" {
			answer = a.take(url, q.DS, q.Chunks)
		}
	case q.Held:
		for _, c := range q.Chunks {
			if a.chunks.Contains(q.DS.ChunkKey(c)) {
				answer = append(answer, c)
			}
		}
	default:
		answer = a.soon.Soon(q.DS, q.Chunks, q.PrefetchWindows)
	}
	out := transport.EncodeChunks(answer)
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("Content-Length", strconv.Itoa(len(out)))
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(out)
}

// handleMembers serves GET transport.MembersPath: the member list of a
// membership version this node keeps, 404 if it keeps none (the asker
// tries its other peers).
func (a *peerAPI) handleMembers(w http.ResponseWriter, r *http.Request) {
	version, err := peerreq.DecodeMembers(r, a.limits)
	if err != nil {
		writeError(r.Context(), w, err)
		return
	}
	a.heard(r)
	ms, ok := a.members.Known(version)
	if !ok {
		writeError(r.Context(), w, fmt.Errorf("%w: membership version %s is not kept here", query.ErrOutOfRange, version))
		return
	}
	writeJSON(w, http.StatusOK, transport.MembersReply{Members: ms.Members()})
}

// handleSteps serves GET transport.StepsPath{job}: what this node has
// served of the job (transport.StepsReply) — the latest step of its
// stored schedule, the furthest position of its chain over a dataset —
// asked by a node taking an edit of it, whose later steps and positions
// it holds while the edit is made.
func (a *peerAPI) handleSteps(w http.ResponseWriter, r *http.Request) {
	job, err := jobName(chi.URLParam(r, "job"))
	if err != nil {
		writeError(r.Context(), w, err)
		return
	}
	q, err := transport.DecodeSteps(r)
	if err != nil {
		writeError(r.Context(), w, err)
		return
	}
	a.heard(r)
	ans, err := a.served(r.Context(), resolve.Question{Edit: q.Edit, Job: job, Step: q.From, Dataset: q.Dataset, Epoch: q.Epoch, Pos: q.Pos, Release: q.Release})
	if err != nil {
		writeError(r.Context(), w, err)
		return
	}
	writeJSON(w, http.StatusOK, transport.StepsReply{Job: job, Served: ans.StepServed, Latest: ans.Step,
		PosServed: ans.PosServed, Epoch: ans.Epoch, End: ans.End})
}

// handleFeedback serves GET transport.FeedbackPath{job}: this node's part of
// an epoch's importance feedback, (uint32 ID, float32 loss) records,
// collected for a seal (feedback.State.Collect).
func (a *peerAPI) handleFeedback(w http.ResponseWriter, r *http.Request) {
	job, err := jobName(chi.URLParam(r, "job"))
	if err != nil {
		writeError(r.Context(), w, err)
		return
	}
	fr, err := peerreq.DecodeFeedback(r, a.catalog, a.limits)
	if err != nil {
		writeError(r.Context(), w, err)
		return
	}
	a.heard(r)
	ds := fr.DS
	out := a.feedback.Collect(ds, job, fr.Epoch, fr.Seal)
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("Content-Length", strconv.Itoa(len(out)))
	w.Header().Set(api.HeaderIndex, ds.ID())
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(out)
}

// handleSettle serves POST transport.FeedbackPath{job}: how a seal that
// collected this node's part of an epoch's feedback ended
// (feedback.State.Settle).
func (a *peerAPI) handleSettle(w http.ResponseWriter, r *http.Request) {
	job, err := jobName(chi.URLParam(r, "job"))
	if err != nil {
		writeError(r.Context(), w, err)
		return
	}
	fr, err := peerreq.DecodeFeedback(r, a.catalog, a.limits)
	if err != nil {
		writeError(r.Context(), w, err)
		return
	}
	a.heard(r)
	a.feedback.Settle(fr.DS, job, fr.Epoch, fr.Seal, fr.Sealed)
	w.WriteHeader(http.StatusOK)
}
