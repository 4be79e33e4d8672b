// Package pipeline serves a batch — of one dataset or a mixture, from any
// offset, a single gateway's or a cluster node's — through one sequence
// of stages, the same for every batch:
//
//	layout    internal/order      which samples, in which parts, under which ETag
//	visit     the schedule        begin, follow and prefetch, fetch ahead, turn
//	read      internal/reader     the parts' samples, complete and verified
//	respond   the gateway         headers, the partial ETag, the body (internal/respond)
//
// A Pipeline owns the visit: the calls into the schedule a batch makes,
// in an order nothing else has to keep — Begin before the chunks are
// pinned (so that they keep counting as needed now), the stream moved
// and its next windows queued for prefetch, the next batch's samples
// fetched from peers ahead, the job's turn awaited (when the jobs' windows
// do not fit in the cache together), Finish once the read holds its
// chunks. It also counts what each part cost (internal/livestats). It
// knows nothing of HTTP: the gateway lays a batch out, calls Read and
// writes what it returns.
//
// A peer's request for samples of this node's chunks is a visit too, on
// behalf of a stream whose ranks live elsewhere (ReadFor): it moves the
// stream here, so that this node's schedule and prefetch follow it, and
// counts against its requests in flight, but takes no turn and is counted
// by the asker.
package pipeline

import (
	"context"
	"time"

	"github.com/brandgw/brand/internal/livestats"
	"github.com/brandgw/brand/internal/order"
	"github.com/brandgw/brand/internal/peer"
	"github.com/brandgw/brand/internal/reader"
	"github.com/brandgw/brand/internal/schedule"
)

// Schedule is what a visit needs of the schedule (schedule.Schedule).
type Schedule interface {
	Begin(js order.Stream, epoch uint64, start, global int, weight float64) (schedule.Inflight, error)
	Advance(js order.Stream, epoch uint64, end int, ahead int) []schedule.Use
	Turn(ctx context.Context, f schedule.Inflight) error
	Finish(f schedule.Inflight)
}

// Peers fetches from other nodes, in the background, the samples of a
// batch before it is asked for (peer.Set; peer.Solo fetches nothing).
// Nodes is the cluster's member count now: with one, nothing is fetched.
type Peers interface {
	Nodes() int
	FetchAhead(key string, next func(ctx context.Context) ([]peer.Fetch, error))
}

// Reader reads a batch's samples (reader.Reader).
type Reader interface {
	ReadBatch(ctx context.Context, b *order.Batch) (*reader.Result, error)
	Read(ctx context.Context, req reader.Request) (*reader.Result, error)
}

// Config configures a Pipeline.
type Config struct {
	Schedule Schedule
	// Prefetch reads ahead what the schedule says a moved stream needs
	// next, Windows windows beyond its current one.
	Prefetch schedule.Prefetch
	Windows  int
	Orders   *order.Orders
	Peers    Peers
	Reader   Reader
	Stats    *livestats.Stats
}

// Pipeline serves batches. Safe for concurrent use.
type Pipeline struct {
	sched    Schedule
	prefetch schedule.Prefetch
	windows  int
	orders   *order.Orders
	peers    Peers
	reader   Reader
	stats    *livestats.Stats
}

// New returns a pipeline.
func New(c Config) *Pipeline {
	return &Pipeline{sched: c.Schedule, prefetch: c.Prefetch, windows: c.Windows, orders: c.Orders, peers: c.Peers,
		reader: c.Reader, stats: c.Stats}
}

// Served is a batch read: the batch as served (without the samples of
// chunks damaged at rest, in skip mode: Batch.Missing names them) and its
// samples' bytes, valid until Release.
type Served struct {
	Batch *order.Batch
	*reader.Result
}

// Follow moves the batch's streams to its end and queues what they need
// next, reading nothing: a client revalidating a batch it holds (304)
// still moves through the epoch.
func (p *Pipeline) Follow(b *order.Batch) {
	p.stats.Follow(b)
	for _, part := range b.Parts {
		p.prefetch.Enqueue(p.sched.Advance(part.Stream, part.Epoch, part.End, p.windows))
	}
}

// Read serves batch b: its visit to the schedule, its read and its
// figures. On success the caller writes Served's parts and then releases
// it; on error nothing is held.
func (p *Pipeline) Read(ctx context.Context, b *order.Batch) (*Served, error) {
	// Until its chunks are pinned, this batch's position is what "now"
	// means to the schedule, however far ahead other requests have gone.
	toks := make([]schedule.Inflight, 0, len(b.Parts))
	finish := func() {
		for _, t := range toks {
			p.sched.Finish(t)
		}
		toks = toks[:0]
	}
	defer finish()
	for _, part := range b.Parts {
		t, err := p.sched.Begin(part.Stream, part.Epoch, part.First, part.Share, b.Job.Weight)
		if err != nil {
			return nil, err
		}
		toks = append(toks, t)
	}
	p.Follow(b)
	p.fetchAhead(b)
	wait := time.Now()
	if b.Turns() {
		// When the jobs' windows do not fit in the cache together, the
		// batch waits for its job's turn.
		if err := p.sched.Turn(ctx, toks[0]); err != nil {
			return nil, err
		}
	}
	res, err := p.reader.ReadBatch(ctx, b)
	if err != nil {
		return nil, err
	}
	finish()
	p.count(b, res, time.Since(wait))
	return &Served{Batch: b.Without(res.MissingPos), Result: res}, nil
}

// count records what each part of a batch served and cost.
func (p *Pipeline) count(b *order.Batch, res *reader.Result, wait time.Duration) {
	for i, part := range b.Parts {
		f := res.PerPart[i]
		p.stats.Batch(livestats.Served{Stream: part.Stream, Epoch: part.Epoch, EpochSamples: part.Stream.DS.Index.NumSamples(),
			Samples: f.Samples, Chunks: f.Chunks, Loads: f.Loads, LoadedBytes: f.LoadedBytes, DiskBytes: f.DiskBytes,
			Wait: wait, Mix: b.Mix, Comp: part.Comp})
	}
}

// fetchAhead starts fetching from peers the samples of the rank's next
// batch (nothing on a single gateway), under that batch's ETag, which its
// read looks for: the batch is laid out in the fetch's background work.
func (p *Pipeline) fetchAhead(b *order.Batch) {
	next := b.Batch + 1
	if p.peers.Nodes() < 2 || next >= uint64(b.Batches) {
		return
	}
	p.peers.FetchAhead(p.orders.ETag(b.Source, b.Job, b.Epoch, next), func(ctx context.Context) ([]peer.Fetch, error) {
		nb, err := p.orders.Layout(ctx, b.Source, b.Job, b.Epoch, next)
		if err != nil {
			return nil, err // the read of that batch will say why
		}
		parts := make([]peer.Fetch, len(nb.Parts))
		for i, part := range nb.Parts {
			parts[i] = peer.Fetch{Samples: part.Samples,
				Origin: &peer.Origin{Stream: part.Stream, Epoch: part.Epoch, Pos: part.First, Weight: nb.Job.Weight}}
		}
		return parts, nil
	})
}

// ReadFor reads samples of this node's chunks that a peer asks for, on
// behalf of the stream and position origin names (nil: none named). The
// asker's batch counts against its stream's requests in flight here too,
// and moves the stream: this node's schedule and prefetch follow streams
// whose ranks live elsewhere. Every sample is read through this node's
// cache; the result names those left out because their chunk is damaged
// at rest, and the asker decides whether its batch may go without them.
func (p *Pipeline) ReadFor(ctx context.Context, s order.Samples, o *peer.Origin) (*reader.Result, error) {
	if o != nil {
		tok, err := p.sched.Begin(o.Stream, o.Epoch, o.Pos, 0, o.Weight)
		if err != nil {
			return nil, err
		}
		defer p.sched.Finish(tok)
		p.prefetch.Enqueue(p.sched.Advance(o.Stream, o.Epoch, o.Pos, p.windows))
	}
	return p.reader.Read(ctx, reader.Request{Samples: s, Local: true})
}
