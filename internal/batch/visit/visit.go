// Package visit serves a batch — of one dataset or a mixture, from any
// offset, a single gateway's or a cluster node's — through one sequence
// of stages, the same for every batch:
//
//	layout     internal/batch/layout      which samples, in which parts, under which ETag
//	visit      the use table       begin, follow and prefetch, fetch the next batch, turn
//	read       internal/batch/reader     the parts' samples, complete and verified
//	transform  internal/batch/tensorize    a job's pipeline, when it names one: images become tensors
//	respond    the gateway         headers, the partial ETag, the body (internal/batch/respond)
//
// Batches owns the visit: the calls into the use table a batch makes,
// in an order nothing else has to keep — Begin before the chunks are
// pinned (so that they keep counting as needed now), the stream moved
// and its next windows queued for prefetch, the next batch's samples
// fetched from peers before its request, the job's turn awaited (when the jobs' windows
// do not fit in the cache together), Finish once the read holds its
// chunks. It also counts what each part cost (internal/job/livestats). It
// knows nothing of HTTP: the gateway lays a batch out, calls Read and
// writes what it returns.
//
// A peer's request for samples of this node's chunks is a visit too, on
// behalf of a stream whose ranks live elsewhere (ReadFor): it moves the
// stream here, so that this node's use table and prefetch follow it, and
// counts against its requests in flight, but takes no turn and is counted
// by the asker. When the asker's job names a pipeline, the samples are
// transformed here, where their chunk is.
//
// A job that names a pipeline has its next batch premade: once a
// rank's batch is transformed, the next one is visited, read and
// transformed in the background (makeNext), claimed before the request
// ends, so that the rank's next request finds its tensors made, or waits
// for them, rather than making them again.
package visit

import (
	"context"
	"time"

	"github.com/rs/zerolog"

	"github.com/brandgw/brand/api"
	"github.com/brandgw/brand/internal/batch/layout"
	"github.com/brandgw/brand/internal/batch/premade"
	"github.com/brandgw/brand/internal/batch/reader"
	"github.com/brandgw/brand/internal/cache/usetable"
	"github.com/brandgw/brand/internal/cluster/route"
	"github.com/brandgw/brand/internal/cluster/transport"
	"github.com/brandgw/brand/internal/job/livestats"
	"github.com/brandgw/brand/internal/server/stopper"
)

// UseTable is what a visit needs of the use table (usetable.Table).
type UseTable interface {
	Begin(js layout.Stream, epoch uint64, start, drawn, global int, weight float64, who usetable.Rank) (usetable.Inflight, error)
	Advance(js layout.Stream, epoch uint64, end int, windows int) []usetable.Use
	Turn(ctx context.Context, f usetable.Inflight) error
	Finish(f usetable.Inflight)
	// Coalesce runs f, a batch's calls for its parts, with the
	// use table's work for them done once (usetable.Table.Coalesce).
	Coalesce(f func())
}

// Peers fetches from other nodes, in the background, the samples of a
// batch before it is asked for (route.Router; route.Solo fetches nothing).
// Nodes is the cluster's member count now: with one, nothing is fetched.
type Peers interface {
	Nodes() int
	FetchNext(key string, next func(ctx context.Context) ([]route.Fetch, error))
}

// Layouts lays batches out (layout.Orders).
type Layouts interface {
	Layout(ctx context.Context, src layout.Source, job api.Job, epoch, m uint64) (*layout.Batch, error)
	ETag(src layout.Source, job api.Job, epoch, m uint64) string
}

// Reader reads a batch's samples (reader.Reader).
type Reader interface {
	ReadBatch(ctx context.Context, b *layout.Batch) (*reader.Result, error)
	Read(ctx context.Context, req reader.Request) (*reader.Result, error)
}

// Config configures Batches.
type Config struct {
	UseTable UseTable
	// Prefetch reads what the use table says a moved stream needs
	// next, Windows windows beyond its current one.
	Prefetch usetable.Prefetch
	Windows  int
	Orders   Layouts
	Peers    Peers
	Reader   Reader
	Stats    *livestats.Stats
	// Stage transforms the samples of a job that names a pipeline; nil:
	// such a job is refused (transform.ErrUnknownPipeline). SkipBadImages
	// leaves out a sample whose image the pipeline cannot transform,
	// named as a damaged chunk's are, instead of failing the batch. A
	// unit whose content is made by a stage of its own brings it (Maker).
	Stage         Stage
	SkipBadImages bool
	// Group runs the premade batches (the next ones, made before their
	// requests), and ends them when it stops (nil: a part of their own,
	// stopped by Close); Limit bounds those made at once, and may be
	// shared with other parts' background work (nil: one). PremadeBytes
	// bounds the batches so held (0: none is premade).
	Group        *stopper.Group
	Limit        *stopper.Limit
	PremadeBytes int64
	Log          zerolog.Logger
}

// Batches serves batches: each one's visit, read, transform and figures.
// Safe for concurrent use.
type Batches struct {
	sched        UseTable
	prefetch     usetable.Prefetch
	windows      int
	orders       Layouts
	peers        Peers
	reader       Reader
	stats        *livestats.Stats
	stage        Stage
	skipBad      bool
	part         *stopper.Group
	limit        *stopper.Limit
	premade      *premade.Store[made] // next batches made before their requests
	premadeBytes int64
	log          zerolog.Logger
}

// New returns Batches.
func New(c Config) *Batches {
	v := &Batches{sched: c.UseTable, prefetch: c.Prefetch, windows: c.Windows, orders: c.Orders, peers: c.Peers,
		reader: c.Reader, stats: c.Stats, stage: c.Stage, skipBad: c.SkipBadImages,
		part: stopper.Own(c.Group, "visit: premade batches"), limit: c.Limit, log: c.Log}
	if v.stage == nil {
		v.stage = noStage{}
	}
	if v.limit == nil {
		v.limit = stopper.NewLimit(1)
	}
	v.premade, v.premadeBytes = newPremade(c.PremadeBytes), c.PremadeBytes
	// Once the premade batches' work has ended, what it made and nobody took gives
	// back its memory.
	v.part.OnStop(v.premade.Close)
	return v
}

// Close ends the batches being premade, waits for them, and releases
// those made and not taken (the Batches' part).
func (v *Batches) Close() { v.part.Stop() }

// PremadeStats are the figures of the premade batches.
func (v *Batches) PremadeStats() api.TransformAheadStats {
	st := v.premade.Stats()
	return api.TransformAheadStats{Started: st.Claimed, Hits: st.Taken, Dropped: st.Dropped, Bytes: st.Bytes, MaxBytes: v.premadeBytes}
}

// Served is a batch read: the batch as served (without the samples of
// chunks damaged at rest, in skip mode: Batch.Missing names them) and its
// samples' bytes, valid until Release.
type Served struct {
	Batch *layout.Batch
	*reader.Result
}

// Follow moves the batch's streams to its end and queues what they need
// next, reading nothing: a client revalidating a batch it holds (304)
// still moves through the epoch.
func (v *Batches) Follow(b *layout.Batch) {
	var ahead [][]usetable.Use
	v.sched.Coalesce(func() { ahead = v.follow(b) })
	v.enqueue(ahead)
}

// follow moves the batch's streams to its end and returns, per part,
// what to prefetch: queued once the use table's snapshot has been rebuilt
// for the moves (after Coalesce), which says what the cache can keep.
func (v *Batches) follow(b *layout.Batch) [][]usetable.Use {
	v.stats.Follow(b)
	ahead := make([][]usetable.Use, len(b.Parts))
	for i, part := range b.Parts {
		ahead[i] = v.sched.Advance(part.Stream, part.Epoch, part.End, v.windows)
	}
	return ahead
}

func (v *Batches) enqueue(ahead [][]usetable.Use) {
	for _, uses := range ahead {
		v.prefetch.Enqueue(uses)
	}
}

// Read serves batch b: its visit to the use table, its read, its
// transform when the job names a pipeline, and its figures. On success
// the caller writes Served's parts and then releases it; on error
// nothing is held.
func (v *Batches) Read(ctx context.Context, b *layout.Batch) (*Served, error) {
	if premakes(b) {
		m, ok, err := v.premade.Take(ctx, b.ETag)
		if err != nil {
			return nil, err
		}
		if ok && m.served != nil {
			// Premade: its visit and read were made then; the stream
			// moves as a read would move it.
			v.Follow(b)
			m.served.Batch = m.served.Batch.For(b)
			v.count(m.served.Batch, m.served.Result, m.wait)
			v.makeNext(b, m.next.of(v, b))
			return m.served, nil
		}
	}
	s, wait, nx, err := v.read(ctx, b, false)
	if err != nil {
		return nil, err
	}
	v.count(s.Batch, s.Result, wait)
	if premakes(b) {
		v.makeNext(b, nx)
	}
	return s, nil
}

// read is a batch's visit, read and transform. premade: made before its
// request, it takes no memory it would wait for. It returns the rank's
// next batch, to be laid out once for whatever is done before its request (nil:
// nothing is, or there is none).
func (v *Batches) read(ctx context.Context, b *layout.Batch, premade bool) (*Served, time.Duration, *nextBatch, error) {
	// Until its chunks are pinned, this batch's position is what "now"
	// means to the use table, however far ahead other requests have gone.
	toks := make([]usetable.Inflight, 0, len(b.Parts))
	finish := func() {
		if len(toks) == 0 {
			return
		}
		v.sched.Coalesce(func() {
			for _, t := range toks {
				v.sched.Finish(t)
			}
		})
		toks = toks[:0]
	}
	defer finish()
	var err error
	var ahead [][]usetable.Use
	who := usetable.Rank{Rank: b.Job.Rank, World: max(b.Job.World, 1)}
	v.sched.Coalesce(func() {
		for _, part := range b.Parts {
			var t usetable.Inflight
			if t, err = v.sched.Begin(part.Stream, part.Epoch, part.First, part.Drawn, part.Share, b.Job.Weight, who); err != nil {
				return
			}
			toks = append(toks, t)
		}
		ahead = v.follow(b)
	})
	if err != nil {
		return nil, 0, nil, err
	}
	v.enqueue(ahead)
	var nx *nextBatch
	if cluster := v.peers.Nodes() > 1; cluster || premakes(b) {
		nx = v.next(b)
		if cluster {
			v.fetchNext(nx)
		}
	}
	start := time.Now()
	if b.Turns() {
		// When the jobs' windows do not fit in the cache together, the
		// batch waits for its job's turn.
		if err := v.sched.Turn(ctx, toks[0]); err != nil {
			return nil, 0, nil, err
		}
	}
	res, err := v.reader.ReadBatch(ctx, b)
	if err != nil {
		return nil, 0, nil, err
	}
	finish()
	wait := time.Since(start)
	// The stage that makes the batch's bytes: its content's, or the
	// transform's, or none for the samples as stored.
	if mk := makerOf(b); mk != nil {
		s, err := mk.Make(ctx, b, res, premade)
		return s, wait, nx, err
	}
	if b.Job.Transform == "" {
		return &Served{Batch: b.Without(res.MissingPos), Result: res}, wait, nx, nil
	}
	s, err := v.transform(ctx, b, res, premade)
	return s, wait, nx, err
}

// count records what each part of a batch served and cost.
// A mixture's batch counts once, under the mixture's job
// (livestats.MixJob), with what each part read.
func (v *Batches) count(b *layout.Batch, res *reader.Result, wait time.Duration) {
	if mx := b.Composite(); mx != nil {
		parts := make([]livestats.PartServed, len(b.Parts))
		for i, part := range b.Parts {
			f := res.PerPart[i]
			parts[i] = livestats.PartServed{Stream: part.Stream, Comp: part.Comp, Samples: f.Samples, Chunks: f.Chunks,
				Loads: f.Loads, DiskBytes: f.DiskBytes, StoreBytes: f.StoreBytes, StoreGETs: f.StoreGETs}
		}
		v.stats.Batch(livestats.Served{Stream: livestats.MixJob(b), Epoch: b.Epoch, EpochSamples: b.EpochSamples,
			Samples: b.End - b.Start, Wait: wait, Mix: mx, Parts: parts})
		return
	}
	for i, part := range b.Parts {
		f := res.PerPart[i]
		n := part.EpochLen
		v.stats.Batch(livestats.Served{Stream: part.Stream, Epoch: part.Epoch, EpochSamples: n,
			Samples: f.Samples, Chunks: f.Chunks, Loads: f.Loads, LoadedBytes: f.LoadedBytes, DiskBytes: f.DiskBytes, StoreBytes: f.StoreBytes,
			StoreGETs: f.StoreGETs, Wait: wait})
	}
}

// fetchNext starts fetching from peers the samples of the rank's next
// batch nx (none after the last), under that batch's ETag, which its read
// looks for: the batch is laid out in the fetch's background work.
func (v *Batches) fetchNext(nx *nextBatch) {
	if nx == nil {
		return
	}
	v.peers.FetchNext(nx.key, func(ctx context.Context) ([]route.Fetch, error) {
		nb, err := nx.layout(ctx)
		if err != nil {
			return nil, err // the read of that batch will say why
		}
		parts := make([]route.Fetch, len(nb.Parts))
		for i, part := range nb.Parts {
			parts[i] = route.Fetch{Samples: part.Samples, Origin: reader.OriginOf(nb, i)}
		}
		return parts, nil
	})
}

// ReadFor reads samples of this node's chunks that a peer asks for, on
// behalf of the stream and position origin names (nil: none named), js
// being its stream as this node lays it out (peerreq.SampleRequest). The
// asker's batch counts against its stream's requests in flight here too,
// and moves the stream: this node's use table and prefetch follow streams
// whose ranks live elsewhere. Every sample is read through this node's
// cache; the result names those left out because their chunk is damaged
// at rest, and the asker decides whether its batch may go without them.
// When the asker names a pipeline (o.Transform), the samples are
// answered transformed, keyed as the asker's batch keys them, and the
// read's pins go back before the answer is written; a sample whose image
// cannot be transformed is answered as stored.
func (v *Batches) ReadFor(ctx context.Context, s layout.Samples, o *transport.Origin, js layout.Stream) (*reader.Result, error) {
	if o != nil {
		tok, err := v.sched.Begin(js, o.Epoch, o.Pos, 0, 0, o.Weight, usetable.Rank{})
		if err != nil {
			return nil, err
		}
		defer v.sched.Finish(tok)
		v.prefetch.Enqueue(v.sched.Advance(js, o.Epoch, o.Pos, v.windows))
	}
	res, err := v.reader.Read(ctx, reader.Request{Samples: s, Local: true})
	if err != nil || o == nil || !o.Transform.On() {
		return res, err
	}
	return v.transformFor(ctx, s, o, res)
}
