package transport

// The internal protocol, both sides: what a node sends and how it reads
// the reply (the client half, methods of Client, each sent through its
// one call path) and the wire both halves share: the paths, the bodies
// (lists of IDs, a reply's head, a state, a member list) and the
// parameters a request is sent with. What a request's parameters mean to
// the node that serves it — read through its table of parameters, in an
// index version it holds, as a stream it lays out — is the serving side's
// (internal/cluster/peerreq, which the gateway's handlers call): this
// package imports nothing of the batch's stages or the job's rooms, and
// carries bytes and wire types of its own. Version 2: version 1 nodes answer 404 to
// these paths, and a node that cannot probe a peer takes it for down, so
// nodes of two releases never exchange samples.
//
// Transformed samples are a compatible extension of version 2's sample
// request, not a version of their own: a request names a pipeline and
// its fingerprint (transform=, transform_fp=) only when it wants tensors,
// and only then is the reply's head followed by each sample's length and
// CRC32C; a request without them, and its reply, are byte for byte what
// they were. A node of an earlier release refuses the unknown parameters
// with 400, which the asker takes as a refusal (ErrRefused) and reads the
// samples elsewhere, ending with itself; its state names no pipelines, so
// askers that probed it ask it for samples as stored.

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"net/http"
	neturl "net/url"
	"strconv"

	"github.com/brandgw/brand/api"
	"github.com/brandgw/brand/chunkindex"
	"github.com/brandgw/brand/cluster"
	"github.com/brandgw/brand/internal/cluster/nodestate"
	"github.com/brandgw/brand/internal/errkind"
	"github.com/brandgw/brand/internal/quote"
)

// Paths of the internal endpoints.
const (
	SamplesPath  = "/internal/v2/samples"
	StatePath    = "/internal/v2/state"
	MembersPath  = "/internal/v2/members"     // ?members=VERSION: a membership's member list
	FeedbackPath = "/internal/v2/importance/" // + job ?dataset&index&epoch&seal: GET collects the node's part for a seal, POST [&sealed=VERSION] tells it how the seal ended
	StepsPath    = "/internal/v2/steps/"      // + job ?from=STEP: the latest step of the job's stored schedule the node has served
	ChunkPath    = "/internal/v2/chunk"       // ?dataset&index&chunk: a chunk's bytes from the node's cache, 404 if not held
	NeededPath   = "/internal/v2/needed"      // ?dataset&index&ahead[&held=true|&keep=true], chunk IDs in the body: those the node's followed streams need soon (or its cache holds; or those the asker will ask it for)
	ReplyType    = "application/octet-stream" // a samples reply
)

// The internal requests' own parameters, beside the public ones they
// share (api.Param*). Each is the name the serving node's table of
// parameters reads it by (internal/job/query: ParamEpoch, ParamPos, …),
// which internal/cluster/peerreq's round trips hold it to.
const (
	paramEpoch                = "epoch"
	paramPos                  = "pos"
	paramEdit                 = "edit"
	paramClips                = "clips"
	paramTransformFingerprint = "transform_fp"
	paramSeal                 = "seal"
	paramSealed               = "sealed"
	paramChunk                = "chunk"
	paramThrough              = "through"
	paramAhead                = "ahead"
	paramHeld                 = "held"
	paramKeep                 = "keep"
	paramGiven                = "given"
)

// ErrBadRequest marks a peer's request this package cannot read (400): a
// list of IDs that is not one, a question for steps served that does not
// say what it asks. A request whose parameters the serving node's table
// refuses wraps that table's query.ErrBadRequest instead.
var ErrBadRequest = errkind.New(errkind.Invalid, "bad peer request")

// Dataset is the version of a dataset a request is about, as the wire
// names it and the asker checks the answer by: the dataset's name, the
// fields a view of one served in place reads ("" for all;
// catalog.Dataset.Selected), and the version's index, whose ID names the
// version and whose entries bound and check what a reply carries
// (peerreq.Dataset makes one of a catalog's dataset).
type Dataset struct {
	Name   string
	Fields string
	Index  *chunkindex.Index
}

// ID is the version's: its index's.
func (d Dataset) ID() string { return d.Index.ID() }

// Origin is the job stream and epoch position samples are read for, so
// that the owner's schedule and prefetch follow streams whose ranks live
// on other nodes.
type Origin struct {
	Stream Stream
	Epoch  uint64
	Pos    int
	Weight float64 // the job's cache weight; 0 means 1
	// Transform names the pipeline the job's batches go through: the
	// samples are asked for transformed, by the node that reads them,
	// where its pipeline of that name has the same fingerprint (zero: the
	// bytes as stored).
	Transform Transform
}

// Transform names a pipeline and its fingerprint (transform.Pipeline):
// a node transforms samples for another only with a pipeline of the same
// fingerprint, so that a sample's tensor is the same whichever node made
// it.
type Transform struct{ Name, Fingerprint string }

// On reports whether a pipeline is named.
func (t Transform) On() bool { return t.Name != "" }

// Stream is the job stream samples are read for, as a request names it:
// what of the asker's stream (jobstream.Stream) fixes the order on another
// node — its seed and window, its importance job and snapshot, a clip
// job's clips, its chain's edit — and the job's name. Its dataset is the
// request's; its mixture and pace are the asker's alone.
type Stream struct {
	Seed   uint64
	Window int
	Name   string
	Imp    Importance
	Clips  string
	Edit   string
}

// Importance names a stream's importance job and the snapshot its epoch
// is drawn from (jobstream.Importance); zero for the uniform shuffle.
type Importance struct {
	Job, Version string
	Hot          int
}

// Request asks a chunk's owner for samples: their IDs (distinct, at most
// a batch's worth) in one version of a dataset's index.
type Request struct {
	DS     Dataset
	IDs    []int
	Origin *Origin // nil: not for a job's batch (a single sample)
	// Info are the IDs' index entries, not sent: the asker checks the
	// reply against them, the owner reads with them. The asker's are
	// read from its index if nil; the owner's reads its own
	// (peerreq.DecodeSamples).
	Info []chunkindex.Sample
}

// Reply is the owner's answer: per requested ID, its bytes, checked
// against the index's CRC32C; nil where the owner left the sample out
// because its chunk is damaged at rest (Missing lists those positions).
type Reply struct {
	Data    [][]byte
	Missing []int
}

// values encodes r's parameters; the IDs go in the body.
func (r Request) values() neturl.Values {
	v := neturl.Values{}
	v.Set(api.ParamDataset, r.DS.Name)
	v.Set(api.ParamIndex, r.DS.ID())
	setView(v, r.DS.Fields)
	if o := r.Origin; o != nil {
		v.Set(api.ParamSeed, strconv.FormatUint(o.Stream.Seed, 10))
		v.Set(api.ParamWindow, strconv.Itoa(o.Stream.Window))
		v.Set(paramEpoch, strconv.FormatUint(o.Epoch, 10))
		v.Set(paramPos, strconv.Itoa(o.Pos))
		if o.Stream.Name != "" {
			v.Set(api.ParamJob, o.Stream.Name)
		}
		if o.Stream.Edit != "" {
			v.Set(paramEdit, o.Stream.Edit)
		}
		if o.Weight != 0 {
			v.Set(api.ParamWeight, strconv.FormatFloat(o.Weight, 'g', -1, 64))
		}
		if imp := o.Stream.Imp; imp.Job != "" {
			v.Set(api.ParamSampling, api.SamplingImportance)
			v.Set(api.ParamJob, imp.Job)
			if imp.Version != "" {
				v.Set(api.ParamImportance, imp.Version)
				v.Set(api.ParamHot, strconv.Itoa(imp.Hot))
			}
		}
		if t := o.Transform; t.On() {
			v.Set(api.ParamTransform, t.Name)
			v.Set(paramTransformFingerprint, t.Fingerprint)
		}
		if o.Stream.Clips != "" {
			v.Set(paramClips, o.Stream.Clips)
		}
	}
	return v
}

// body encodes the IDs: little-endian uint32s.
func (r Request) body() []byte { return uint32s(r.IDs) }

// uint32s encodes v as little-endian uint32s: a request's sample IDs, a
// question's or an answer's chunks.
func uint32s(v []int) []byte {
	b := make([]byte, 0, 4*len(v))
	for _, x := range v {
		b = binary.LittleEndian.AppendUint32(b, uint32(x))
	}
	return b
}

// DecodeList reads a request's body of little-endian uint32s (a sample
// request's IDs, a question's chunks): at most max of them, each below n.
// what names them in an error ("sample", "chunk"). Its errors wrap
// ErrBadRequest.
func DecodeList(body io.Reader, max, n int, what string) ([]int, error) {
	b, err := io.ReadAll(io.LimitReader(body, 4*int64(max)+1))
	if err != nil {
		return nil, fmt.Errorf("%w: reading the %s list: %w", ErrBadRequest, what, err)
	}
	switch {
	case len(b)%4 != 0:
		return nil, fmt.Errorf("%w: the %s list is little-endian uint32 IDs; got %d bytes", ErrBadRequest, what, len(b))
	case len(b)/4 > max:
		return nil, fmt.Errorf("%w: more than %d %ss", ErrBadRequest, max, what)
	}
	list := make([]int, len(b)/4)
	for i := range list {
		if list[i] = int(binary.LittleEndian.Uint32(b[4*i:])); list[i] >= n {
			return nil, fmt.Errorf("%w: %s %d is not in [0, %d)", ErrBadRequest, what, list[i], n)
		}
	}
	return list, nil
}

// ReplyHead is the start of a reply's body: the number of samples left
// out, then their positions in the request, as little-endian uint32s. The
// samples' bytes follow, back to back, in the request's order.
func ReplyHead(missing []int) []byte {
	b := binary.LittleEndian.AppendUint32(make([]byte, 0, 4+4*len(missing)), uint32(len(missing)))
	for _, i := range missing {
		b = binary.LittleEndian.AppendUint32(b, uint32(i))
	}
	return b
}

// SizedInReply reports whether the reply to a request for samples of the
// version whose index is ix, for origin, says each sample's length and
// CRC32C (TransformedReplyHead): for samples transformed by their owner,
// and for samples of a dataset served in place, whose ranges are in their
// decoded chunks, not in the index.
func SizedInReply(origin *Origin, ix *chunkindex.Index) bool {
	return origin != nil && origin.Transform.On() || ix.Deferred()
}

// TransformedReplyHead is the start of a reply whose samples are sized in
// it (SizedInReply: transformed samples, samples decoded in place): ReplyHead, then each sample's
// length and CRC32C (Castagnoli), two little-endian uint32s per sample
// not left out, in the request's order — samples is their bytes, to which
// the index's CRCs no longer apply. A sample the owner could not
// transform is sent as stored; the asker's own stage meets its image.
func TransformedReplyHead(missing []int, samples [][]byte) []byte {
	b := ReplyHead(missing)
	for _, s := range samples {
		b = binary.LittleEndian.AppendUint32(b, uint32(len(s)))
		b = binary.LittleEndian.AppendUint32(b, crc32.Checksum(s, castagnoli))
	}
	return b
}

// Samples asks the node for samples and reads its reply, checking every
// sample against the index's CRC32C (or, transformed, against the CRC32C
// its reply gives). The error wraps ErrDown, ErrRefused or ErrVersion.
func (c Client) Samples(ctx context.Context, req Request) (Reply, error) {
	var rep Reply
	err := c.call(ctx, request{method: http.MethodPost, path: SamplesPath, query: req.values(), body: req.body()},
		func(resp *http.Response) (err error) { rep, err = c.readSamples(resp, req); return err })
	return rep, err
}

// Canary asks the node whose state st is for no samples of the first
// dataset it names, through the path a fetch takes: a node held down
// after a failed fetch is taken back only once this answers (Nodes'
// probe loop), since a node may answer its probes and drop its fetches.
// Its bound is a fetch's.
func (c Client) Canary(ctx context.Context, st nodestate.State) error {
	if len(st.Datasets) == 0 {
		return nil // a node serving nothing has no data path to test
	}
	d := st.Datasets[0]
	v := neturl.Values{api.ParamDataset: {d.Name}, api.ParamIndex: {d.Current}}
	err := c.call(ctx, request{method: http.MethodPost, path: SamplesPath, query: v, body: []byte{}}, func(resp *http.Response) error {
		var head [4]byte
		if _, err := io.ReadFull(resp.Body, head[:]); err != nil {
			return fmt.Errorf("%w: reading from %s: %w", ErrDown, c.url, err)
		}
		return nil
	})
	if err != nil && !errors.Is(err, ErrDown) {
		return nil // it answered, if not with samples: its data path works
	}
	return err
}

// readSamples reads a samples reply (ReplyHead, then for transformed
// samples their lengths and CRC32Cs, then the samples back to back).
func (c Client) readSamples(resp *http.Response, req Request) (Reply, error) {
	peer := c.url
	info := req.Info
	if info == nil {
		var err error
		if info, err = req.DS.Index.Samples(resp.Request.Context(), req.IDs); err != nil {
			return Reply{}, fmt.Errorf("%w: %w", ErrRefused, err)
		}
	}
	lengths := make([]int64, len(req.IDs))
	crcs := make([]uint32, len(req.IDs))
	var want int64
	for i, in := range info {
		lengths[i], crcs[i] = in.Length, in.CRC
		want += lengths[i]
	}
	transformed := SizedInReply(req.Origin, req.DS.Index)
	var head [4]byte
	if _, err := io.ReadFull(resp.Body, head[:]); err != nil {
		return Reply{}, fmt.Errorf("%w: reading from %s: %w", ErrDown, peer, err)
	}
	m := int(binary.LittleEndian.Uint32(head[:]))
	if m > len(req.IDs) {
		return Reply{}, fmt.Errorf("%w: %s says %d of %d samples are missing", ErrDown, peer, m, len(req.IDs))
	}
	pos := make([]byte, 4*m)
	if _, err := io.ReadFull(resp.Body, pos); err != nil {
		return Reply{}, fmt.Errorf("%w: reading from %s: %w", ErrDown, peer, err)
	}
	rep := Reply{Data: make([][]byte, len(req.IDs)), Missing: make([]int, m)}
	for j := range m {
		i := int(binary.LittleEndian.Uint32(pos[4*j:]))
		if i >= len(req.IDs) || j > 0 && i <= rep.Missing[j-1] {
			return Reply{}, fmt.Errorf("%w: %s sent a malformed list of missing samples", ErrDown, peer)
		}
		rep.Missing[j] = i
		want -= lengths[i]
	}
	headLen := int64(4 + 4*m)
	if transformed {
		var err error
		if want, err = readTable(resp.Body, rep.Missing, lengths, crcs, c.t.maxReply); err != nil {
			return Reply{}, fmt.Errorf("%w: %s: %w", ErrDown, peer, err)
		}
		headLen += 8 * int64(len(req.IDs)-m)
	}
	if resp.ContentLength != headLen+want {
		return Reply{}, fmt.Errorf("%w: %s sent %d bytes, want %d", ErrDown, peer, resp.ContentLength, headLen+want)
	}
	buf := make([]byte, want)
	if _, err := io.ReadFull(resp.Body, buf); err != nil {
		return Reply{}, fmt.Errorf("%w: reading from %s: %w", ErrDown, peer, err)
	}
	var off int64
	next := 0 // into rep.Missing
	for i, in := range info {
		if next < m && rep.Missing[next] == i {
			next++
			continue
		}
		b := buf[off : off+lengths[i] : off+lengths[i]]
		off += lengths[i]
		if got := crc32.Checksum(b, castagnoli); got != crcs[i] {
			say := "the index says"
			if transformed {
				say = "its reply says"
			}
			return Reply{}, fmt.Errorf("%w: sample %q from %s has CRC32C %08x, %s %08x",
				ErrDown, in.Key, peer, got, say, crcs[i])
		}
		rep.Data[i] = b
	}
	return rep, nil
}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// readTable reads a transformed reply's lengths and CRC32Cs into lengths
// and crcs (the samples not missing) and returns the bytes they add up
// to, each length within the asker's bound.
func readTable(r io.Reader, missing []int, lengths []int64, crcs []uint32, maxReply int64) (int64, error) {
	table := make([]byte, 8*(len(lengths)-len(missing)))
	if _, err := io.ReadFull(r, table); err != nil {
		return 0, fmt.Errorf("reading the samples' lengths: %w", err)
	}
	var want int64
	j, next := 0, 0
	for i := range lengths {
		if next < len(missing) && missing[next] == i {
			next++
			continue
		}
		lengths[i] = int64(binary.LittleEndian.Uint32(table[8*j:]))
		crcs[i] = binary.LittleEndian.Uint32(table[8*j+4:])
		j++
		if want += lengths[i]; want > maxReply {
			return 0, fmt.Errorf("transformed samples of over %d bytes (this node's --max-batch-bytes)", maxReply)
		}
	}
	return want, nil
}

// State asks the node for its state (the probe). slow is true when the
// node did not answer within the probe's bound (slow, as opposed to down).
func (c Client) State(ctx context.Context) (st nodestate.State, slow bool, err error) {
	err = c.call(ctx, request{method: http.MethodGet, path: StatePath, quick: true}, func(resp *http.Response) error {
		if err := json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&st); err != nil {
			return fmt.Errorf("%s: state: %w", c.url, err)
		}
		if st.URL != c.url {
			return fmt.Errorf("%s answers as %q: give each node its own URL as the members are listed (--advertise)", c.url, st.URL)
		}
		return nil
	})
	if err != nil {
		return nodestate.State{}, errors.Is(err, ErrTimeout), err
	}
	return st, false, nil
}

// MembersReply is the answer to a node's question for a membership
// version's member list (GET MembersPath?members=VERSION): 404 if the node
// does not keep it.
type MembersReply struct {
	Members []string `json:"members"`
}

// Members asks the node for the member list of a membership version and
// checks that it hashes to it.
func (c Client) Members(ctx context.Context, version string) (*cluster.Membership, error) {
	var rep MembersReply
	err := c.call(ctx, request{method: http.MethodGet, path: MembersPath, query: neturl.Values{api.ParamMembers: {version}}, quick: true},
		func(resp *http.Response) error { return json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&rep) })
	if err != nil {
		return nil, fmt.Errorf("%s: members: %w", c.url, err)
	}
	ms, err := cluster.NewMembership(rep.Members)
	if err != nil || ms.Version() != version {
		return nil, fmt.Errorf("%s answered membership %s with a list that is not it", c.url, version)
	}
	return ms, nil
}

// feedbackRecord is one (sample ID, loss) record of a node's feedback:
// little-endian uint32 and float32.
const feedbackRecord = 8

// Feedback collects the node's part of an epoch's importance feedback for
// a job, for the seal named seal: (uint32 ID, float32 loss) records, at
// most one per sample of ds. The node takes no feedback for the epoch
// until the seal tells it how it ended (Settle).
func (c Client) Feedback(ctx context.Context, ds Dataset, job string, epoch uint64, seal string) ([]byte, error) {
	v := neturl.Values{api.ParamDataset: {ds.Name}, api.ParamIndex: {ds.ID()}, paramEpoch: {strconv.FormatUint(epoch, 10)},
		paramSeal: {seal}}
	limit := int64(feedbackRecord * ds.Index.NumSamples())
	var b []byte
	err := c.call(ctx, request{method: http.MethodGet, path: FeedbackPath + neturl.PathEscape(job), query: v},
		func(resp *http.Response) (err error) {
			b, err = io.ReadAll(io.LimitReader(resp.Body, limit+1))
			return err
		})
	switch {
	case err != nil:
		return nil, err
	case int64(len(b)) > limit || len(b)%feedbackRecord != 0:
		return nil, fmt.Errorf("%s sent %d bytes of feedback: not whole records of a dataset of %d samples", c.url, len(b), ds.Index.NumSamples())
	}
	return b, nil
}

// Settle tells the node how the seal named seal, which collected its
// part of an epoch's feedback (Feedback), ended: sealed as version, or
// "" for nothing sealed.
func (c Client) Settle(ctx context.Context, ds Dataset, job string, epoch uint64, seal, version string) error {
	v := neturl.Values{api.ParamDataset: {ds.Name}, api.ParamIndex: {ds.ID()}, paramEpoch: {strconv.FormatUint(epoch, 10)},
		paramSeal: {seal}}
	if version != "" {
		v.Set(paramSealed, version)
	}
	return c.call(ctx, request{method: http.MethodPost, path: FeedbackPath + neturl.PathEscape(job), query: v, quick: true},
		func(*http.Response) error { return nil })
}

// setView names, in a request's parameters, the fields a dataset served
// in place is read with (Dataset.Fields), if not all of them.
func setView(v neturl.Values, fields string) {
	if fields != "" {
		v.Set(api.ParamColumns, fields)
	}
}

// Chunk fills buf with chunk c of ds from the node's cache, in a
// membership change (internal/cluster/handover): the node never reads the store
// for it, and answers ErrNotHeld if its cache does not hold the chunk.
// The caller verifies the bytes (against the index's CRCs) as it verifies
// the store's. A failure says nothing of the node's liveness: the asker
// reads the store instead.
func (c Client) Chunk(ctx context.Context, ds Dataset, chunk int, buf []byte) error {
	return c.chunk(ctx, ds, chunk, buf, false)
}

// ChunkThrough fills buf with chunk c of ds as Chunk does, but has the
// node read it from the store through its cache if its cache does not
// hold it: the asker cannot reach the store (storepath.Through). The
// caller verifies the bytes.
func (c Client) ChunkThrough(ctx context.Context, ds Dataset, chunk int, buf []byte) error {
	return c.chunk(ctx, ds, chunk, buf, true)
}

func (c Client) chunk(ctx context.Context, ds Dataset, chunk int, buf []byte, through bool) error {
	v := neturl.Values{api.ParamDataset: {ds.Name}, api.ParamIndex: {ds.ID()}, paramChunk: {strconv.Itoa(chunk)}}
	if through {
		v.Set(paramThrough, "true")
	}
	setView(v, ds.Fields)
	return c.call(ctx, request{method: http.MethodGet, path: ChunkPath, query: v}, func(resp *http.Response) error {
		if resp.ContentLength != int64(len(buf)) {
			return fmt.Errorf("%s sent %d bytes for chunk %d of %s, want %d", c.url, resp.ContentLength, chunk, ds.Name, len(buf))
		}
		if _, err := io.ReadFull(resp.Body, buf); err != nil {
			return fmt.Errorf("reading chunk %d of %s from %s: %w", chunk, ds.Name, c.url, err)
		}
		return nil
	})
}

// HeaderStoreUnreachable is set to "true" on a sample request's 503
// when the node could not read the samples because it cannot reach the
// store now (storepath): the asker reads them elsewhere, and the node
// stays up for the samples its cache holds.
const HeaderStoreUnreachable = "Brand-Store-Unreachable"

// HeaderNotServing is set to "true" on every request of a node that
// cannot serve yet (its indexes still loading: Config.Serving): the node
// asked does not take the asker for up on that request's word (Heard,
// AskerServes), since its own probe of the asker would find it not ready
// and take it for down again. A node that starts asks its peers before it
// serves, and a peer that took it up so, then down on its probe's answer,
// read its chunks from the store in its stead once a job started. Absent,
// the asker serves (a node of a release without the header).
const HeaderNotServing = "Brand-Peer-Not-Serving"

// AskerServes reports whether a peer's request r says its asker serves
// (HeaderNotServing).
func AskerServes(r *http.Request) bool { return r.Header.Get(HeaderNotServing) != "true" }

// HeaderHeld is set to "false" on a chunk request's 404 when the node
// does not hold the chunk, telling it apart from a node of a release
// without the endpoint.
const HeaderHeld = "Brand-Chunk-Held"

// Needed asks the node which of chunks (of ds) the job streams it
// follows need within their current window and the ahead windows after
// it (usetable.Table.Soon): the chunks a node gaining them in a
// membership change loads first.
func (c Client) Needed(ctx context.Context, ds Dataset, chunks []int, ahead int) ([]int, error) {
	return c.askChunks(ctx, ds, chunks, neturl.Values{paramAhead: {strconv.Itoa(ahead)}})
}

// Held asks the node which of chunks (of ds) its cache holds: the chunks
// a node gaining them in a membership change may copy from it rather
// than read from the store later.
func (c Client) Held(ctx context.Context, ds Dataset, chunks []int) ([]int, error) {
	return c.askChunks(ctx, ds, chunks, neturl.Values{paramHeld: {"true"}})
}

// Keep tells the node which of its chunks (of ds) this node gained in a
// membership change and left to the batches, to ask it for when a batch
// first needs one: the node keeps its copies until then
// (handover.Kept). It replaces what this node told it before of ds; an
// empty list withdraws it.
func (c Client) Keep(ctx context.Context, ds Dataset, chunks []int) error {
	_, err := c.askChunks(ctx, ds, chunks, neturl.Values{paramKeep: {"true"}})
	return err
}

// Give tells the node which of its chunks (of ds) this node's cache
// holds: chunks of the node's own that this node read from the store
// while it held the node down, told as it takes the node back up. The
// node answers those it lacks, which it reads from this node before the
// store (storepath.Returned.Given), so that a healed fault costs the
// store no second read of them.
func (c Client) Give(ctx context.Context, ds Dataset, chunks []int) ([]int, error) {
	return c.askChunks(ctx, ds, chunks, neturl.Values{paramGiven: {"true"}})
}

// askChunks asks the node a question about chunks (NeededPath, with the
// parameters of v) and checks that the answer names only them.
func (c Client) askChunks(ctx context.Context, ds Dataset, chunks []int, v neturl.Values) ([]int, error) {
	v.Set(api.ParamDataset, ds.Name)
	v.Set(api.ParamIndex, ds.ID())
	body := uint32s(chunks)
	asked := make(map[int]bool, len(chunks))
	for _, ch := range chunks {
		asked[ch] = true
	}
	var out []int
	err := c.call(ctx, request{method: http.MethodPost, path: NeededPath, query: v, body: body}, func(resp *http.Response) error {
		b, err := io.ReadAll(io.LimitReader(resp.Body, int64(len(body))+1))
		if err != nil {
			return err
		}
		if len(b) > len(body) || len(b)%4 != 0 {
			return fmt.Errorf("%s answered %d bytes to a question about %d chunks", c.url, len(b), len(chunks))
		}
		out = make([]int, 0, len(b)/4)
		for i := 0; i < len(b); i += 4 {
			ch := int(binary.LittleEndian.Uint32(b[i:]))
			if !asked[ch] {
				return fmt.Errorf("%s named chunk %d, which it was not asked about", c.url, ch)
			}
			out = append(out, ch)
		}
		return nil
	})
	return out, err
}

// EncodeChunks is the body of an answer about needed chunks.
func EncodeChunks(chunks []int) []byte { return uint32s(chunks) }

// A StepsQuestion is what a node taking an edit of a job asks another
// (GET StepsPath{job}?from=STEP[&dataset=D&epoch=E&pos=P]): the latest
// step of the job's stored schedule it has served, the schedule's edit
// starting at STEP; and, for an edit of the job's chain of exclusions and
// appends over dataset D from position P of epoch E, the furthest
// position of it the node has served. The node holds the job's steps
// from STEP and its positions from P while the edit is made
// (resolve.Editor.Answer). With &release=true the question's node
// says the edit is made or refused: the holds end.
type StepsQuestion struct {
	Edit    string // the edit's ID, the same in its question and release (edit=)
	Job     string
	From    uint64
	Dataset string // "" for a schedule's edit
	Epoch   uint64
	Pos     int
	Release bool
}

// StepsReply is a node's answer to a StepsQuestion: Served false if it
// has served no step of the job's schedule; PosServed false if it has
// served no position of the job's chain over the question's dataset.
type StepsReply struct {
	Job       string `json:"job"`
	Served    bool   `json:"served"`
	Latest    uint64 `json:"latest_step"`
	PosServed bool   `json:"position_served,omitempty"`
	Epoch     uint64 `json:"epoch,omitempty"`
	End       int    `json:"end,omitempty"`
}

// Steps asks the node q, before an edit, under the probe's bound. A node
// of an earlier release answers 404 to the path: ErrDown, as a node that
// does not answer.
func (c Client) Steps(ctx context.Context, q StepsQuestion) (StepsReply, error) {
	var rep StepsReply
	v := neturl.Values{stepsFrom: {strconv.FormatUint(q.From, 10)}}
	if q.Dataset != "" {
		v.Set(api.ParamDataset, q.Dataset)
		v.Set(paramEpoch, strconv.FormatUint(q.Epoch, 10))
		v.Set(paramPos, strconv.Itoa(q.Pos))
	}
	if q.Release {
		v.Set(stepsRelease, "true")
	}
	if q.Edit != "" {
		v.Set(stepsEdit, q.Edit)
	}
	err := c.call(ctx, request{method: http.MethodGet, path: StepsPath + neturl.PathEscape(q.Job), query: v, quick: true},
		func(resp *http.Response) error { return json.NewDecoder(io.LimitReader(resp.Body, 1<<16)).Decode(&rep) })
	if err == nil && rep.Job != q.Job {
		err = fmt.Errorf("%w: answered for job %q, not %q", ErrRefused, rep.Job, q.Job)
	}
	if err != nil {
		return StepsReply{}, fmt.Errorf("%s: steps served of job %s: %w", c.url, q.Job, err)
	}
	return rep, nil
}

// stepsFrom is the question's first parameter: the schedule edit's first
// step.
const stepsFrom = "from"

// stepsRelease ends the holds of an earlier question: the edit is made
// or refused.
const stepsRelease = "release"

// stepsEdit is the edit's ID, the same in its question and its release.
const stepsEdit = "edit"

// DecodeSteps reads a node's question for what it has served of a job
// (StepsQuestion, its Job the caller's to fill from the path): from=, a
// decimal number, and for a chain's edit dataset=, epoch= and pos=
// together; release=true to end the holds of the same question.
func DecodeSteps(r *http.Request) (StepsQuestion, error) {
	v, err := neturl.ParseQuery(r.URL.RawQuery)
	bad := func() (StepsQuestion, error) {
		return StepsQuestion{}, fmt.Errorf("%w: a question for what a node has served of a job names the edit's first step (from=), and for an edit of its chain the dataset, epoch and position (dataset=, epoch=, pos=) together; release=true ends its holds", ErrBadRequest)
	}
	if err != nil || len(v[stepsFrom]) != 1 {
		return bad()
	}
	var q StepsQuestion
	if rel, ok := v[stepsRelease]; ok {
		if len(rel) != 1 || rel[0] != "true" {
			return bad()
		}
		q.Release = true
		v.Del(stepsRelease)
	}
	if e, ok := v[stepsEdit]; ok {
		if len(e) != 1 || e[0] == "" || len(e[0]) > 64 {
			return bad()
		}
		q.Edit = e[0]
		v.Del(stepsEdit)
	}
	for k, vs := range v {
		if len(vs) != 1 || k != stepsFrom && k != api.ParamDataset && k != paramEpoch && k != paramPos {
			return bad()
		}
	}
	if q.From, err = strconv.ParseUint(v.Get(stepsFrom), 10, 64); err != nil {
		return StepsQuestion{}, fmt.Errorf("%w: from=%s is not a step (a whole number)", ErrBadRequest, quote.Input(v.Get(stepsFrom)))
	}
	switch n := len(v); {
	case n == 1:
		return q, nil
	case n != 4:
		return bad()
	}
	q.Dataset = v.Get(api.ParamDataset)
	if q.Epoch, err = strconv.ParseUint(v.Get(paramEpoch), 10, 64); err != nil {
		return bad()
	}
	if q.Pos, err = strconv.Atoi(v.Get(paramPos)); err != nil || q.Pos < 0 || q.Dataset == "" {
		return bad()
	}
	return q, nil
}
