// Package peerreq is the internal protocol (internal/cluster/transport) in
// this server's terms: the peers' requests read as this node serves them,
// and the dataset versions it serves named as the wire names them
// (Dataset).
//
// The transport carries bytes and wire types of its own and imports
// nothing of the batch's stages or the job's rooms. What a request means
// to the node that serves it is here: its parameters read through the one
// table of parameters (internal/job/query), which refuses unknown and
// repeated ones, the index version it names among those this node holds
// (internal/job/catalog: catalog.ErrVersion otherwise, which the asker
// reads elsewhere), and a sample request's job stream as this node's
// layout lays it out (layout.StreamOf). The gateway's handlers for the
// internal endpoints call the Decode functions; the bodies (lists of IDs,
// a reply's head) are the transport's, both halves.
//
// Every Decode function's error wraps query.ErrBadRequest (or the
// transport's ErrBadRequest, for a body that is not a list) when the
// request is malformed, and the Versions' error when it names a version
// this node does not hold.
package peerreq

import (
	"fmt"
	"net/http"

	"github.com/brandgw/brand/chunkindex"
	"github.com/brandgw/brand/internal/batch/layout"
	"github.com/brandgw/brand/internal/cluster/transport"
	"github.com/brandgw/brand/internal/job/catalog"
	"github.com/brandgw/brand/internal/job/jobstream"
	"github.com/brandgw/brand/internal/job/query"
)

// Dataset is ds as a request names it (transport.Dataset): its name, the
// fields of its view, its index.
func Dataset(ds *catalog.Dataset) transport.Dataset {
	return transport.Dataset{Name: ds.Name, Fields: ds.Selected(), Index: ds.Index}
}

// Stream is js as a request names it (transport.Stream): what fixes its
// order on another node, and its job's name.
func Stream(js jobstream.Stream) transport.Stream {
	return transport.Stream{Seed: js.Seed, Window: js.Window, Name: js.Name, Imp: transport.Importance(js.Imp), Clips: js.Space, Edit: js.Edit}
}

// Versions finds the index version a request names (catalog.Catalog).
type Versions interface {
	Version(name, id string) (*catalog.Dataset, error)
}

// SampleRequest is a node's request for samples (transport.SamplesPath),
// as this node serves it: their IDs (distinct, at most a batch's worth)
// in one version of a dataset's index, and their index entries, which
// this node reads them with.
type SampleRequest struct {
	DS   *catalog.Dataset
	IDs  []int
	Info []chunkindex.Sample
	// Origin is the job stream and position the samples are read for, as
	// the asker sent it; nil: not for a job's batch (a single sample).
	// Stream is its stream as this node lays it out (layout.StreamOf),
	// which this node's use table and prefetch follow; zero without an
	// Origin.
	Origin *transport.Origin
	Stream jobstream.Stream
}

// SizedInReply reports whether the reply says each sample's length and
// CRC32C (transport.SizedInReply).
func (req SampleRequest) SizedInReply() bool {
	return transport.SizedInReply(req.Origin, req.DS.Index)
}

// DecodeSamples reads a node's sample request through the parameter
// table, under a batch's bounds: at most l.MaxBatchSize distinct IDs of
// at most l.MaxBatchBytes in all, in an index version this node holds.
func DecodeSamples(r *http.Request, v Versions, l query.Limits) (SampleRequest, error) {
	q, ds, err := decodeVersioned(r, v, query.PeerSampleParams, l, nil, "a sample request names its dataset and index")
	if err != nil {
		return SampleRequest{}, err
	}
	req := SampleRequest{DS: ds}
	switch stream := q.Job.Window > 0; {
	case stream && q.EpochSet && q.PosSet:
		// A stream of items of their own (a clip job's clips:
		// jobstream.Stream.Space) is bounded by its order, not the
		// dataset's samples.
		if q.Job.Space() == "" && q.Pos > ds.Index.NumSamples() {
			return SampleRequest{}, fmt.Errorf("%w: pos %d is past the epoch's %d samples", query.ErrBadRequest, q.Pos, ds.Index.NumSamples())
		}
		if (q.Job.Transform == "") != (q.Job.TransformFingerprint == "") {
			return SampleRequest{}, fmt.Errorf("%w: a sample request for transformed samples names the pipeline and its fingerprint together", query.ErrBadRequest)
		}
		req.Stream = layout.StreamOf(ds, q.Job)
		req.Origin = &transport.Origin{Stream: Stream(req.Stream), Epoch: q.Epoch, Pos: q.Pos, Weight: q.Job.Weight,
			Transform: transport.Transform{Name: q.Job.Transform, Fingerprint: q.Job.TransformFingerprint}}
	case stream || q.EpochSet || q.PosSet || q.Job.Name != "" || q.Job.Edit != "" || q.Job.Weight != 0 || q.Job.Transform != "" || q.Job.TransformFingerprint != "":
		return SampleRequest{}, fmt.Errorf("%w: a sample request for a batch names window, epoch and pos together", query.ErrBadRequest)
	}
	if req.IDs, err = transport.DecodeList(r.Body, l.MaxBatchSize, ds.Index.NumSamples(), "sample"); err != nil {
		return SampleRequest{}, err
	}
	seen := make(map[int]struct{}, len(req.IDs))
	for _, id := range req.IDs {
		if _, dup := seen[id]; dup {
			return SampleRequest{}, fmt.Errorf("%w: sample ID %d asked for twice; a request names each sample once", query.ErrBadRequest, id)
		}
		seen[id] = struct{}{}
	}
	// A node asked for samples it does not own (their owner is down)
	// reads their chunks' tables here, once each.
	if req.Info, err = ds.Index.Samples(r.Context(), req.IDs); err != nil {
		return SampleRequest{}, err
	}
	var bytes int64
	for _, in := range req.Info {
		if bytes += in.Length; bytes > l.MaxBatchBytes {
			return SampleRequest{}, fmt.Errorf("%w: the samples asked for are over %d bytes (the server's --max-batch-bytes)", query.ErrBadRequest, l.MaxBatchBytes)
		}
	}
	return req, nil
}

// FeedbackRequest is a node's request about this node's part of an
// epoch's feedback (transport.FeedbackPath): the dataset version, the
// epoch and the seal; in a settlement, the version the seal sealed ("":
// none).
type FeedbackRequest struct {
	DS     *catalog.Dataset
	Epoch  uint64
	Seal   string
	Sealed string
}

// DecodeFeedback reads a node's request for this node's part of an
// epoch's feedback (GET) or its settlement (POST).
func DecodeFeedback(r *http.Request, v Versions, l query.Limits) (FeedbackRequest, error) {
	accepted := query.PeerFeedbackParams
	if r.Method == http.MethodPost {
		accepted = query.PeerSettleParams
	}
	q, ds, err := decodeVersioned(r, v, accepted, l, func(q query.Query) bool { return q.EpochSet && q.Seal != "" },
		"a feedback request names its dataset, index, epoch and seal")
	return FeedbackRequest{DS: ds, Epoch: q.Epoch, Seal: q.Seal, Sealed: q.Sealed}, err
}

// DecodeMembers reads a node's question for a membership version's
// member list (transport.MembersPath): the version.
func DecodeMembers(r *http.Request, l query.Limits) (string, error) {
	q, err := query.Parse(r.URL.RawQuery, query.PeerMembersParams, query.Query{}, l)
	if err != nil {
		return "", err
	}
	if q.Job.Members == "" {
		return "", fmt.Errorf("%w: a members request names its version (members=)", query.ErrBadRequest)
	}
	return q.Job.Members, nil
}

// DecodeChunk reads a node's request for a chunk's bytes
// (transport.ChunkPath): the dataset version, held by this node, the
// chunk, and whether the node is to read it from the store if its cache
// does not hold it (through).
func DecodeChunk(r *http.Request, v Versions, l query.Limits) (ds *catalog.Dataset, c int, through bool, err error) {
	q, ds, err := decodeVersioned(r, v, query.PeerChunkParams, l, func(q query.Query) bool { return q.ChunkSet },
		"a chunk request names its dataset, index and chunk")
	if err != nil {
		return nil, 0, false, err
	}
	if q.Chunk >= ds.Index.NumChunks() {
		return nil, 0, false, fmt.Errorf("%w: chunk %d is not in [0, %d)", query.ErrBadRequest, q.Chunk, ds.Index.NumChunks())
	}
	return ds, q.Chunk, q.Through, nil
}

// ChunksQuestion is a node's question about chunks
// (transport.NeededPath): which of Chunks of DS the followed streams need
// within PrefetchWindows windows past their current one, or, with Held,
// which of them the node's cache holds; with Keep, it says instead that
// the asker will ask for them (transport.Client.Keep); with Given, that
// the asker's cache holds them (transport.Client.Give).
type ChunksQuestion struct {
	DS              *catalog.Dataset
	Chunks          []int
	PrefetchWindows int
	Held            bool
	Keep            bool
	Given           bool
}

// DecodeNeeded reads a node's question about chunks: the dataset version,
// how many windows ahead or held, and the chunks (little-endian uint32
// IDs, at most the dataset's chunks).
func DecodeNeeded(r *http.Request, v Versions, l query.Limits) (ChunksQuestion, error) {
	q, ds, err := decodeVersioned(r, v, query.PeerNeededParams, l, nil, "a question about needed chunks names its dataset and index")
	if err != nil {
		return ChunksQuestion{}, err
	}
	n := ds.Index.NumChunks()
	chunks, err := transport.DecodeList(r.Body, n, n, "chunk")
	if err != nil {
		return ChunksQuestion{}, err
	}
	if n := btoi(q.Held) + btoi(q.Keep) + btoi(q.Given); n > 1 {
		return ChunksQuestion{}, fmt.Errorf("%w: held, keep and given are three questions: ask one", query.ErrBadRequest)
	}
	return ChunksQuestion{DS: ds, Chunks: chunks, PrefetchWindows: q.PrefetchWindows, Held: q.Held, Keep: q.Keep, Given: q.Given}, nil
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// decodeVersioned reads a node's request about a version of a dataset
// through the parameter table accepted, and finds the version, which
// this node must hold (catalog.ErrVersion otherwise). A request without
// its dataset, index or what has checks is a 400 saying what.
func decodeVersioned(r *http.Request, v Versions, accepted []string, l query.Limits, has func(query.Query) bool, what string) (query.Query, *catalog.Dataset, error) {
	q, err := query.Parse(r.URL.RawQuery, accepted, query.Query{}, l)
	if err != nil {
		return q, nil, err
	}
	if q.Job.Dataset == "" || q.Job.Index == "" || has != nil && !has(q) {
		return q, nil, fmt.Errorf("%w: %s", query.ErrBadRequest, what)
	}
	ds, err := v.Version(q.Job.Dataset, q.Job.Index)
	if err == nil {
		// A view of a dataset served in place reading some fields: the
		// asker's samples and chunks are that view's.
		ds, err = ds.Select(q.Job.Columns)
	}
	return q, ds, err
}
