package usetable

import (
	"context"
	"errors"
	"runtime/pprof"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"github.com/brandgw/brand/internal/cache/chunkcache"
	"github.com/brandgw/brand/internal/job/catalog"
	"github.com/brandgw/brand/internal/server/stopper"
)

// Prefetch reads ahead the chunks the use table says come next. Prefetcher
// does; NoPrefetch (prefetch turned off) does nothing.
type Prefetch interface {
	Enqueue(uses []Use)
	Close()
}

// NoPrefetch is the Prefetch of a gateway that does not prefetch.
type NoPrefetch struct{}

// Enqueue implements Prefetch.
func (NoPrefetch) Enqueue([]Use) {}

// Close implements Prefetch.
func (NoPrefetch) Close() {}

// prefetchCache is what the prefetcher needs of the chunk cache.
type prefetchCache interface {
	Contains(k chunkcache.Key) bool
	Prefetch(ctx context.Context, r chunkcache.Request, admit func(victim chunkcache.Key) bool) (chunkcache.PrefetchResult, error)
}

// prefetchTask is a chunk to read ahead for an epoch of a stream.
type prefetchTask struct {
	chunkcache.Request
	use Use
}

// Prefetcher reads, in the background, the chunks job streams will need
// next. It never waits for cache space and never displaces a chunk needed
// sooner than the one it would bring in, so prefetch cannot slow down the
// batches being served now.
type Prefetcher struct {
	cache    prefetchCache
	distance func(chunkcache.Key) int64  // the use table's next-use key
	keep     func(chunkcache.Key) bool   // whether the cache would keep it until used
	displace func(need, lead int64) bool // whether it may evict chunks needed later
	keeps    func(d int64) bool          // whether the cache keeps a chunk keyed d until used
	standIn  func(chunkcache.Key) bool   // whether this node holds a chunk only for its owner
	local    func(ds *catalog.Dataset, c int) bool
	tally    Tally
	queued   prometheus.Counter
	dropped  prometheus.Counter
	log      zerolog.Logger
	workers  int
	clock    func() time.Time

	// loadTime is a moving mean of the time a prefetch's load takes, in
	// ns (0 until one is measured): what lead is made of.
	loadTime atomic.Int64

	queue chan prefetchTask
	part  *stopper.Group // runs the workers
	ctx   context.Context

	mu      sync.Mutex
	pending map[chunkcache.Key]bool // queued or being fetched
}

// PrefetcherConfig gathers a prefetcher's dependencies.
type PrefetcherConfig struct {
	Workers  int
	Cache    prefetchCache
	Distance func(chunkcache.Key) int64
	// Prefetchable reports whether a chunk read now would stay cached
	// until it is used (Snapshot.Prefetchable); nil: always.
	Prefetchable func(chunkcache.Key) bool
	// Displaces reports whether a chunk needed at need (its key), which
	// takes lead to read, may evict chunks needed after it
	// (Snapshot.Displaces), rather than only chunks no stream needs;
	// nil: always.
	Displaces func(need, lead int64) bool
	// Keeps reports whether the cache keeps a chunk whose next use is
	// keyed d until it is used (Snapshot.Keeps): a prefetch may displace
	// one it does not, needed later than the chunk read, whatever
	// Displaces says; nil: it keeps every chunk some stream needs.
	Keeps func(d int64) bool
	// StandIn reports whether this node holds a chunk only standing in
	// for its owner (Snapshot.StandIn): a stand-in's prefetch displaces
	// only chunks no stream needs and other stand-ins, never a chunk
	// this node owns; nil: it owns every chunk.
	StandIn func(chunkcache.Key) bool
	// Local reports whether this node reads chunk c of ds for the
	// batches now (route.Router.Local), asked again when a queued chunk
	// comes to be read: one queued while its owner was down, or before a
	// membership change gave it to another node, is left to that node;
	// nil: always.
	Local func(ds *catalog.Dataset, c int) bool
	// Tally is told of every chunk a prefetch read.
	Tally Tally
	// Group runs the workers and ends them when it stops (nil: a part of
	// the prefetcher's own, stopped by Close).
	Group    *stopper.Group
	Registry prometheus.Registerer
	Log      zerolog.Logger
}

// prefetchQueue bounds the chunks waiting to be prefetched; beyond it a
// chunk is dropped (and counted), to be read on demand if prefetch does not
// queue it again.
const prefetchQueue = 4096

// NewPrefetcher starts c.Workers workers.
func NewPrefetcher(c PrefetcherConfig) *Prefetcher {
	part := stopper.Own(c.Group, "usetable: prefetch workers")
	keep := c.Prefetchable
	if keep == nil {
		keep = func(chunkcache.Key) bool { return true }
	}
	displace := c.Displaces
	if displace == nil {
		displace = func(int64, int64) bool { return true }
	}
	keeps := c.Keeps
	if keeps == nil {
		keeps = func(int64) bool { return true }
	}
	standIn := c.StandIn
	if standIn == nil {
		standIn = func(chunkcache.Key) bool { return false }
	}
	local := c.Local
	if local == nil {
		local = func(*catalog.Dataset, int) bool { return true }
	}
	p := &Prefetcher{cache: c.Cache, distance: c.Distance, keep: keep, displace: displace, keeps: keeps, standIn: standIn, local: local, tally: c.Tally,
		workers: max(c.Workers, 1), clock: time.Now,
		queued:  prometheus.NewCounter(prometheus.CounterOpts{Name: "brand_prefetch_queued_total", Help: "Chunks queued for prefetch."}),
		dropped: prometheus.NewCounter(prometheus.CounterOpts{Name: "brand_prefetch_dropped_total", Help: "Prefetches dropped: queue full, no room without evicting chunks needed sooner, or more than the cache could keep until used."}),
		log:     c.Log, queue: make(chan prefetchTask, prefetchQueue), part: part, ctx: part.Context(), pending: map[chunkcache.Key]bool{}}
	c.Registry.MustRegister(p.queued, p.dropped)
	for range max(c.Workers, 0) {
		part.Go(func(context.Context) { p.work() })
	}
	return p
}

// Close stops the workers and waits for them (the prefetcher's part).
func (p *Prefetcher) Close() { p.part.Stop() }

// Enqueue queues the chunks of uses that are not resident or queued yet.
func (p *Prefetcher) Enqueue(uses []Use) {
	for _, u := range uses {
		r := u.Stream.DS.ChunkRequest(u.Chunk)
		if p.cache.Contains(r.Key) {
			continue
		}
		if !p.keep(r.Key) {
			p.dropped.Inc()
			continue
		}
		p.mu.Lock()
		dup := p.pending[r.Key]
		p.pending[r.Key] = true
		p.mu.Unlock()
		if dup {
			continue
		}
		select {
		case p.queue <- prefetchTask{r, u}:
			p.queued.Inc()
		default:
			p.dropped.Inc()
			p.done(r.Key)
		}
	}
}

func (p *Prefetcher) done(k chunkcache.Key) {
	p.mu.Lock()
	delete(p.pending, k)
	p.mu.Unlock()
}

func (p *Prefetcher) work() {
	for {
		select {
		case <-p.ctx.Done():
			return
		case t := <-p.queue:
			pprof.Do(p.ctx, EpochLabels(t.use.Stream.DS.Name, t.use.Epoch), func(context.Context) { p.fetch(t) })
		}
	}
}

func (p *Prefetcher) fetch(t prefetchTask) {
	r := t.Request
	defer p.done(r.Key)
	if !p.local(t.use.Stream.DS, t.use.Chunk) {
		// Another node reads it now (its owner came back, or a change
		// gave it away since it was queued): read here too, it would be
		// read twice.
		return
	}
	need := p.distance(r.Key)
	if !Needed(need) {
		return // the stream moved on or went idle
	}
	if !p.keep(r.Key) {
		// Sooner uses fill the cache now: read ahead, it would be
		// evicted before its use. Its stream's next move queues it again.
		p.dropped.Inc()
		return
	}
	// Displace only chunks needed later than this one: chunks the cache
	// would not keep until their use anyway (not needed, or needed after
	// the chunks that fill it), and chunks it keeps only while that
	// cannot pass over a better victim, or waiting for one would leave
	// too little time to read this chunk.
	// A chunk read standing in for its owner takes no room from a chunk
	// this node owns that a job needs: that one would be read again once
	// the fault heals (Snapshot.victimKey).
	displace := p.displace(need, p.lead())
	standIn := p.standIn(r.Key)
	admit := func(victim chunkcache.Key) bool {
		d := p.distance(victim)
		if standIn && Needed(d) && !p.standIn(victim) {
			return false
		}
		return d > need && (displace || !Needed(d) || !p.keeps(d))
	}
	began := p.clock()
	res, err := p.cache.Prefetch(p.ctx, r, admit)
	if err == nil && (res == chunkcache.PrefetchLoaded || res == chunkcache.PrefetchLoadedBelow) {
		p.measured(p.clock().Sub(began))
	}
	switch {
	case err != nil && !errors.Is(err, context.Canceled):
		p.log.Warn().Err(err).Str("chunk", r.Key.String()).Msg("prefetch failed")
	case res == chunkcache.PrefetchRejected:
		p.dropped.Inc()
	case res == chunkcache.PrefetchLoaded:
		p.tally.Prefetched(t.use.Stream, t.use.Epoch, t.use.Chunk, r.Size, false)
	case res == chunkcache.PrefetchLoadedBelow:
		p.tally.Prefetched(t.use.Stream, t.use.Epoch, t.use.Chunk, r.Size, true)
	}
}

// measured folds a load's duration into loadTime: a moving mean over
// about the last four loads, so that it follows the store's latency as it
// changes.
func (p *Prefetcher) measured(d time.Duration) {
	for {
		old := p.loadTime.Load()
		v := int64(d)
		if old > 0 {
			v = old + (v-old)/4
		}
		if p.loadTime.CompareAndSwap(old, max(v, 1)) {
			return
		}
	}
}

// lead is how long a chunk asked for now takes to be read: a load's
// measured time for each round the workers need to read the chunks
// queued or being read, this one among them. A read that can wait for a
// better victim only until less than that before its use would come too
// late (Snapshot.Displaces).
func (p *Prefetcher) lead() int64 {
	p.mu.Lock()
	n := len(p.pending)
	p.mu.Unlock()
	return p.loadTime.Load() * int64(max((n+p.workers-1)/p.workers, 1))
}

// EpochLabels are the profiler labels of work done for an epoch of a
// dataset: a CPU profile can then be cut by epoch (go tool pprof
// -tagfocus epoch=0 shows the cold one).
func EpochLabels(dataset string, epoch uint64) pprof.LabelSet {
	return pprof.Labels("dataset", dataset, "epoch", strconv.FormatUint(epoch, 10))
}
