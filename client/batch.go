package client

import (
	"archive/tar"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"mime"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/brandgw/brand/api"
)

const tarType = "application/x-tar"

// Batch is one batch of one epoch for the client's rank, decoded.
type Batch struct {
	Epoch int // the epoch asked for
	Index int // the batch number within the epoch, from 0
	// ETag identifies the batch's bytes: the same parameters and index
	// always give the same ETag and the same samples.
	ETag string
	// Samples are in shuffle order. The slice is empty, not nil, when the
	// rank's share of the epoch's final batch is empty. In a mixture's
	// batch each sample's Dataset names its component. Their files are
	// slices of one buffer holding the whole response (see DecodeTar):
	// keeping any of them keeps the batch's memory; copy what must outlive
	// the batch. Release hands that memory back for later batches.
	Samples []Sample
	// EpochBatches is the number of batches in the epoch from Offset on;
	// every rank has this many, numbered 0..EpochBatches-1.
	EpochBatches int
	// EpochSamples is the number of samples in the whole epoch over all
	// ranks, whatever the offset.
	EpochSamples int
	// Offset is the epoch position, counted over all ranks, that batch 0
	// starts at: 0 except for batches read with EpochFrom.
	Offset  int
	Dataset string // the dataset's name; "" for a mixture
	// IndexID is the dataset index's content identity; for a mixture,
	// its components', comma-separated in the mixture's order
	// (Brand-Mix-Index).
	IndexID string
	// Mix is the mixture the batch is drawn from (Options.Job.Mix as
	// sent; Brand-Mix) and MixBlock its mixing block K (Brand-Mix-Block);
	// "" and 0 for one dataset.
	Mix      string
	MixBlock int
	// Missing is how many of the batch's samples the gateway left out
	// because their chunk is damaged at rest (a gateway run with
	// --on-damaged-chunk=skip), or their image cannot be transformed (a
	// gateway run with --on-bad-image=skip; Brand-Missing-Samples): 0 for
	// a whole batch. Samples holds only those sent.
	Missing int
	// Transform is the pipeline the samples' images went through
	// (Options.Job.Transform; Brand-Transform): each image member is a
	// .npy member, read in place with ParseNPY. "" for bytes as stored.
	Transform string
	// Node is the base URL of the gateway that served the batch: the
	// client's base URL, or with Options.Peers or Discover the node as the
	// peer list names it (the rank's home unless it failed over).
	Node string
	// Plan is the plan Epoch or EpochFrom read the batch under: of the
	// epoch, or of its rest from Offset. An edit that changes the epoch's
	// size (an append record, an exclusion list) has the loop ask for
	// the plan again (see EpochFrom), so Plan counts the epoch's samples
	// as the batch reports them, and ResumeOffset(b.Plan, b.Index+1) is
	// the offset to resume from once every rank has consumed batch b.
	// Batches read under one plan share it: read it, do not change it.
	// nil for a batch fetched alone (Client.Batch).
	Plan *EpochInfo

	buf  []byte   // the response body the samples' files point into
	bufs *buffers // where Release returns buf
}

// Release hands the batch's memory back to its client, which reuses it for
// a later batch instead of allocating (and later collecting) a new one. It
// sets Samples to nil. Call it only when done with every sample: the files
// of a released batch are overwritten by a later one, so copy first what
// must outlive the batch (an image decoded from a file is a copy already).
//
// Calling Release is optional: a batch never released is garbage collected
// as usual. Releasing a batch twice, or a nil batch, does nothing. Release
// must not be called concurrently with another use of the batch.
func (b *Batch) Release() {
	if b == nil || b.buf == nil {
		return
	}
	b.bufs.put(b.buf)
	b.buf, b.bufs, b.Samples = nil, nil, nil
}

// BatchHeader is what a batch response's headers say about it; BatchRaw
// returns it for a body it does not decode.
type BatchHeader struct {
	Epoch, Index int
	ETag         string
	EpochBatches int   // batches from Offset on (Brand-Epoch-Batches)
	EpochSamples int   // samples in the whole epoch (Brand-Epoch-Samples)
	Samples      int   // samples in this batch (Brand-Batch-Samples)
	Offset       int   // epoch position of batch 0 (Brand-Offset, absent for 0)
	Missing      int   // samples left out, their chunk damaged (Brand-Missing-Samples, absent for 0)
	Size         int64 // body bytes (Content-Length), -1 if the response had none
	Dataset      string
	IndexID      string // for a mixture, its components' (see Batch.IndexID)
	Mix          string // the mixture (Brand-Mix), "" for one dataset
	MixBlock     int    // the mixture's block K (Brand-Mix-Block)
	Node         string // the gateway that served it (see Batch.Node)
	Transform    string // the pipeline the images went through (Brand-Transform), "" for none
}

// parseBatchHeader reads and checks the headers of a batch response. The
// Brand-* counts are required: Epoch relies on them to know when an epoch
// ends and that every batch came from the same plan. Brand-Offset is sent
// only for an offset other than 0, so its absence means 0. A mixture's
// batch names its components' index versions instead of the dataset's.
func parseBatchHeader(resp *http.Response, epoch, batch int) (BatchHeader, error) {
	if err := checkContentType(resp, tarType); err != nil {
		return BatchHeader{}, err
	}
	h := BatchHeader{
		Epoch:     epoch,
		Index:     batch,
		ETag:      resp.Header.Get("ETag"),
		Size:      resp.ContentLength,
		Dataset:   resp.Header.Get(api.HeaderDataset),
		IndexID:   resp.Header.Get(api.HeaderIndex),
		Mix:       resp.Header.Get(api.HeaderMix),
		Transform: resp.Header.Get(api.HeaderTransform),
	}
	if h.Mix != "" {
		h.IndexID = resp.Header.Get(api.HeaderMixIndex)
	}
	for _, f := range []struct {
		name     string
		dst      *int
		optional bool
	}{
		{api.HeaderEpochBatches, &h.EpochBatches, false},
		{api.HeaderEpochSamples, &h.EpochSamples, false},
		{api.HeaderBatchSamples, &h.Samples, false},
		{api.HeaderOffset, &h.Offset, true},
		{api.HeaderMissingSamples, &h.Missing, true},
		{api.HeaderMixBlock, &h.MixBlock, h.Mix == ""},
	} {
		v := resp.Header.Get(f.name)
		if v == "" && f.optional {
			continue
		}
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			return BatchHeader{}, fmt.Errorf("%w: header %s is %q; want a non-negative integer", ErrBadResponse, f.name, v)
		}
		*f.dst = n
	}
	return h, nil
}

// checkOffset rejects a batch cut from another position than the one asked
// for: a gateway that ignored offset would serve samples the job has
// already trained on.
func checkOffset(h BatchHeader, want int) error {
	if h.Offset != want {
		return fmt.Errorf("%w: asked for offset %d, %s says %d", ErrBadResponse, want, api.HeaderOffset, h.Offset)
	}
	return nil
}

// checkMix rejects a batch of another mixture than the job's (or of one
// dataset when the job reads a mixture, or the reverse), which would be
// another order, and returns the component of each of its samples,
// Brand-Mix-Components (nil for one dataset).
func checkMix(h BatchHeader, hdr http.Header, mix api.Mix) ([]int, error) {
	if want := mix.String(); h.Mix != want {
		return nil, fmt.Errorf("%w: asked for mixture %q, %s says %q", ErrBadResponse, want, api.HeaderMix, h.Mix)
	}
	if len(mix) == 0 {
		return nil, nil
	}
	if h.MixBlock < 0 {
		return nil, fmt.Errorf("%w: header %s is %d; want a non-negative integer", ErrBadResponse, api.HeaderMixBlock, h.MixBlock)
	}
	comps := make([]int, 0, h.Samples)
	if v := hdr.Get(api.HeaderMixComponents); v != "" {
		for s := range strings.SplitSeq(v, ",") {
			k, err := strconv.Atoi(s)
			if err != nil || k < 0 || k >= len(mix) {
				return nil, fmt.Errorf("%w: %s names component %q of a mixture of %d", ErrBadResponse, api.HeaderMixComponents, s, len(mix))
			}
			comps = append(comps, k)
		}
	}
	if len(comps) != h.Samples {
		return nil, fmt.Errorf("%w: %s names %d components for %d samples", ErrBadResponse, api.HeaderMixComponents, len(comps), h.Samples)
	}
	return comps, nil
}

func checkContentType(resp *http.Response, want string) error {
	ct := resp.Header.Get("Content-Type")
	if mt, _, err := mime.ParseMediaType(ct); err != nil || mt != want {
		return fmt.Errorf("%w: Content-Type is %q; want %s", ErrBadResponse, ct, want)
	}
	return nil
}

// maxInMemory is the largest body readSamples reads whole before decoding;
// a larger or unknown length is decoded as it streams, so that a wrong
// Content-Length cannot make the client allocate it up front.
const maxInMemory = 1 << 30

// readSamples decodes a tar body and checks that all of it arrived. A
// connection that fails mid-body is retryable; a complete body that is not
// a valid tar is not.
//
// A body of known length is read whole into one buffer, from bufs (nil:
// a new one), and decoded in place: one allocation and a few large reads
// per batch instead of an allocation and two or three small reads per
// member, which for small samples is most of the client's work. The buffer
// is returned with the samples, which point into it; it is nil for a body
// decoded as it streamed.
func readSamples(resp *http.Response, bufs *buffers) ([]Sample, []byte, error) {
	var g grouper
	buf, err := readInto(resp, bufs, &g)
	return g.out, buf, err
}

// readInto is readSamples into g, which may keep the members (g.keep).
func readInto(resp *http.Response, bufs *buffers, g *grouper) ([]byte, error) {
	if n := resp.ContentLength; n >= 0 && n <= maxInMemory {
		buf := bufs.get(int(n))
		cr := &countingReader{r: resp.Body}
		if _, err := io.ReadFull(cr, buf); err != nil {
			bufs.put(buf)
			return nil, retryable(shortBody(cr.n, n, err))
		}
		if err := g.decodeTar(buf); err != nil {
			bufs.put(buf)
			return nil, fmt.Errorf("%w: %w", ErrBadResponse, err)
		}
		if g.out == nil {
			g.out = []Sample{}
		}
		return buf, nil
	}
	cr := &countingReader{r: resp.Body}
	derr := g.decode(tar.NewReader(cr), func() int64 { return cr.n }, func(tr *tar.Reader, h *tar.Header) ([]byte, error) {
		return readMember(tr, h.Size)
	})
	if derr == nil {
		// The tar reader stops after the first end-of-archive block; read
		// the rest so a cut-off trailer is noticed and the connection can
		// be reused.
		_, _ = io.Copy(io.Discard, cr)
	}
	if cr.err != nil {
		return nil, retryable(shortBody(cr.n, resp.ContentLength, cr.err))
	}
	if derr != nil {
		return nil, fmt.Errorf("%w: %w", ErrBadResponse, derr)
	}
	if resp.ContentLength >= 0 && cr.n != resp.ContentLength {
		return nil, retryable(shortBody(cr.n, resp.ContentLength, io.ErrUnexpectedEOF))
	}
	if g.out == nil {
		g.out = []Sample{}
	}
	return nil, nil
}

// Batch fetches and decodes batch number batch of epoch for the client's
// rank. Broken connections, short bodies and 502/503/504 answers are
// retried; a 4xx answer is returned at once as an *APIError (wrapped).
func (c *Client) Batch(ctx context.Context, epoch, batch int) (*Batch, error) {
	if err := checkPosition(epoch, batch); err != nil {
		return nil, err
	}
	b, err := c.fetchBatch(ctx, epoch, batch, 0, c.pins.jobQuery())
	if err != nil {
		return nil, fmt.Errorf("client: epoch %d batch %d: %w", epoch, batch, err)
	}
	return b, nil
}

// fetchBatch fetches batch number batch of epoch with the job query q,
// which asks for offset.
//
// A mixture's batch whose grouping by key is ambiguous (see ambiguous) is
// cut again by its manifest, fetched with the same query: the one case
// that costs a second request.
func (c *Client) fetchBatch(ctx context.Context, epoch, batch, offset int, q url.Values) (*Batch, error) {
	b, err := c.fetchBatchOnce(ctx, epoch, batch, offset, q)
	var apiErr *APIError
	if err != nil && q.Get(api.ParamScheduleVersion) != "" && errors.As(err, &apiErr) && apiErr.ScheduleVersion != "" {
		// The job's stored schedule was edited from a step this batch
		// reads, after every step any rank had read: the current version
		// reads the same as the pinned one before it, so the epoch goes on
		// under it.
		v := apiErr.ScheduleVersion
		c.pins.schedVersion.Store(&v)
		q = maps.Clone(q)
		q.Set(api.ParamScheduleVersion, v)
		return c.fetchBatchOnce(ctx, epoch, batch, offset, q)
	}
	return b, err
}

func (c *Client) fetchBatchOnce(ctx context.Context, epoch, batch, offset int, q url.Values) (*Batch, error) {
	var (
		b       *Batch
		h       BatchHeader
		comps   []int
		members []member // kept only when the grouping is ambiguous
	)
	node, err := c.t.get(ctx, batchPath(epoch, batch), q, tarType, func(resp *http.Response) error {
		var err error
		h, err = parseBatchHeader(resp, epoch, batch)
		if err != nil {
			return err
		}
		if err := checkOffset(h, offset); err != nil {
			return err
		}
		// A job that names no pipeline may have its batches go through
		// one its kind chooses: a bucket job's, its bucket's
		// (transform.BucketName: "bucket:HxW…").
		if h.Transform != c.opts.Job.Transform && !(c.opts.Job.Transform == "" && strings.HasPrefix(h.Transform, "bucket:")) {
			return fmt.Errorf("%w: the batch's images went through pipeline %q (Brand-Transform), the job names %q", ErrBadResponse, h.Transform, c.opts.Job.Transform)
		}
		mix := c.pins.current().Mix
		comps, err = checkMix(h, resp.Header, mix)
		if err != nil {
			return err
		}
		g := grouper{keep: len(mix) > 0}
		buf, err := readInto(resp, &c.bufs, &g)
		if err != nil {
			return err
		}
		samples := g.out
		members = nil
		switch {
		case g.keep && ambiguous(samples, h.Samples) && !(h.Transform != "" && len(samples) == h.Samples):
			// A transformed batch's manifest gives the stored samples'
			// lengths, not its tensors': there the grouping stands when
			// it counts the samples the headers do, since it splits only
			// at true boundaries (a sample's members have distinct
			// extensions) and so can only have merged some.
			members = g.kept // samples are cut again below
		case len(samples) != h.Samples:
			c.bufs.put(buf)
			return fmt.Errorf("%w: Brand-Batch-Samples says %d samples but the body has %d", ErrBadResponse, h.Samples, len(samples))
		default:
			for i, k := range comps {
				samples[i].Dataset = mix[k].Dataset
			}
		}
		b = &Batch{
			Epoch:        epoch,
			Index:        batch,
			ETag:         h.ETag,
			Samples:      samples,
			EpochBatches: h.EpochBatches,
			EpochSamples: h.EpochSamples,
			Offset:       h.Offset,
			Dataset:      h.Dataset,
			IndexID:      h.IndexID,
			Mix:          h.Mix,
			MixBlock:     h.MixBlock,
			Missing:      h.Missing,
			Transform:    h.Transform,
			buf:          buf,
			bufs:         &c.bufs,
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	b.Node = node
	if members != nil {
		if err := splitBatch(ctx, c, b, h, comps, members, q); err != nil {
			b.Release()
			return nil, err
		}
	}
	return b, nil
}

// splitBatch replaces the samples of b, a mixture's batch with headers h
// whose grouping by key is ambiguous, by its members cut as its manifest
// says (splitByManifest). (A function, not a method: Client's methods are
// its API.)
func splitBatch(ctx context.Context, c *Client, b *Batch, h BatchHeader, comps []int, members []member, q url.Values) error {
	if h.Transform != "" {
		return fmt.Errorf("%w: the batch's samples cannot be told apart by key or extension, and its manifest gives the stored samples' lengths, not those of their tensors (pipeline %q)", ErrBadResponse, h.Transform)
	}
	m, err := mixManifest(ctx, c, b.Epoch, b.Index, b.Offset, q)
	if err != nil {
		return err
	}
	mix := c.pins.current().Mix
	samples, err := splitByManifest(members, m, h, comps, mix)
	if err != nil {
		return err
	}
	for i, k := range comps {
		samples[i].Dataset = mix[k].Dataset
	}
	b.Samples = samples
	return nil
}

// BatchRaw streams batch number batch of epoch to w exactly as the gateway
// sent it (the samples' tar members followed by the end-of-archive), for
// callers that store or forward batches rather than decode them. It returns
// the bytes written to w and the response's header.
//
// The body's length is checked against Content-Length; its tar structure is
// not. Failures before the first byte reaches w are retried as in Batch.
// After that the client cannot take back what w holds, so a broken
// connection is returned (wrapping ErrShortBody) and n says how many bytes
// of w are a partial batch; the caller can discard them and call again.
func (c *Client) BatchRaw(ctx context.Context, epoch, batch int, w io.Writer) (n int64, h BatchHeader, err error) {
	if err := checkPosition(epoch, batch); err != nil {
		return 0, BatchHeader{}, err
	}
	var node string
	node, err = c.t.get(ctx, batchPath(epoch, batch), c.pins.jobQuery(), tarType, func(resp *http.Response) error {
		hh, err := parseBatchHeader(resp, epoch, batch)
		if err != nil {
			return err
		}
		if err := checkOffset(hh, 0); err != nil {
			return err
		}
		if _, err := checkMix(hh, resp.Header, c.pins.current().Mix); err != nil {
			return err
		}
		h = hh
		cr := &countingReader{r: resp.Body}
		written, werr := io.Copy(w, cr)
		n = written
		var short error
		switch {
		case cr.err != nil:
			short = shortBody(cr.n, h.Size, cr.err)
		case werr != nil:
			return fmt.Errorf("writing batch: %w", werr)
		case h.Size >= 0 && cr.n != h.Size:
			short = shortBody(cr.n, h.Size, io.ErrUnexpectedEOF)
		default:
			return nil
		}
		if written == 0 {
			return retryable(short)
		}
		return short
	})
	if err != nil {
		return n, h, fmt.Errorf("client: epoch %d batch %d: %w", epoch, batch, err)
	}
	h.Node = node
	return n, h, nil
}

// Manifest is the JSON description of a batch: which samples it holds and
// where each one lives, without their bytes.
type Manifest = api.Manifest

// ManifestSample locates one sample of a manifest in its chunk.
type ManifestSample = api.ManifestSample

// Manifest fetches the manifest of batch number batch of epoch for the
// client's rank.
func (c *Client) Manifest(ctx context.Context, epoch, batch int) (*Manifest, error) {
	if err := checkPosition(epoch, batch); err != nil {
		return nil, err
	}
	q := c.pins.jobQuery()
	q.Set(api.ParamFormat, "json")
	m, err := getJSON[Manifest](ctx, c.t, batchPath(epoch, batch), q)
	if err == nil && (m.Epoch != epoch || m.Batch != batch || m.Offset != 0) {
		err = fmt.Errorf("%w: asked for epoch %d batch %d from offset 0, manifest is for epoch %d batch %d from offset %d",
			ErrBadResponse, epoch, batch, m.Epoch, m.Batch, m.Offset)
	}
	if err != nil {
		return nil, fmt.Errorf("client: manifest of epoch %d batch %d: %w", epoch, batch, err)
	}
	return m, nil
}
