package gateway

import (
	"context"
	"errors"
	"runtime/pprof"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"github.com/brandgw/brand/chunkcache"
)

// prefetchCache is what the prefetcher needs of the chunk cache.
type prefetchCache interface {
	Contains(k chunkcache.Key) bool
	Prefetch(ctx context.Context, r chunkcache.Request, admit func(victim chunkcache.Key) bool) (chunkcache.PrefetchResult, error)
}

// prefetchTask is a chunk to read ahead for an epoch of a stream.
type prefetchTask struct {
	chunkcache.Request
	js    jobStream
	epoch uint64
}

// prefetcher reads, in the background, the chunks job streams will need
// next. It never waits for cache space and never displaces a chunk needed
// sooner than the one it would bring in, so prefetch cannot slow down the
// batches being served now.
type prefetcher struct {
	cache    prefetchCache
	distance func(chunkcache.Key) int64 // the schedule's next-use distance
	loaded   func(js jobStream, epoch uint64, chunk int, bytes int64)
	queued   prometheus.Counter
	dropped  prometheus.Counter
	log      zerolog.Logger

	queue  chan prefetchTask
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu      sync.Mutex
	pending map[chunkcache.Key]bool // queued or being fetched
}

// prefetcherConfig gathers a prefetcher's dependencies.
type prefetcherConfig struct {
	workers  int
	cache    prefetchCache
	distance func(chunkcache.Key) int64
	// loaded is told of every chunk a prefetch read from the store.
	loaded  func(js jobStream, epoch uint64, chunk int, bytes int64)
	metrics *metrics
	log     zerolog.Logger
}

// prefetchQueue bounds the chunks waiting to be prefetched; beyond it a
// chunk is dropped (and counted), to be read on demand if prefetch does not
// queue it again.
const prefetchQueue = 4096

func newPrefetcher(c prefetcherConfig) *prefetcher {
	ctx, cancel := context.WithCancel(context.Background())
	p := &prefetcher{cache: c.cache, distance: c.distance, loaded: c.loaded,
		queued: c.metrics.prefetchQueued, dropped: c.metrics.prefetchDropped, log: c.log,
		queue: make(chan prefetchTask, prefetchQueue), ctx: ctx, cancel: cancel, pending: map[chunkcache.Key]bool{}}
	for range max(c.workers, 0) {
		p.wg.Go(p.work)
	}
	return p
}

// close stops the workers and waits for them.
func (p *prefetcher) close() {
	p.cancel()
	p.wg.Wait()
}

// enqueue queues the chunks of uses that are not resident or queued yet.
func (p *prefetcher) enqueue(js jobStream, uses []chunkUse) {
	for _, u := range uses {
		r := js.ds.chunkRequest(u.chunk)
		if p.cache.Contains(r.Key) {
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
		case p.queue <- prefetchTask{r, js, u.epoch}:
			p.queued.Inc()
		default:
			p.dropped.Inc()
			p.done(r.Key)
		}
	}
}

func (p *prefetcher) done(k chunkcache.Key) {
	p.mu.Lock()
	delete(p.pending, k)
	p.mu.Unlock()
}

func (p *prefetcher) work() {
	for {
		select {
		case <-p.ctx.Done():
			return
		case t := <-p.queue:
			pprof.Do(p.ctx, epochLabels(t.js.ds, t.epoch), func(context.Context) { p.fetch(t) })
		}
	}
}

func (p *prefetcher) fetch(t prefetchTask) {
	r := t.Request
	defer p.done(r.Key)
	need := p.distance(r.Key)
	if !needed(need) {
		return // the stream moved on or went idle
	}
	// Displace only chunks needed later than this one.
	admit := func(victim chunkcache.Key) bool { return p.distance(victim) > need }
	res, err := p.cache.Prefetch(p.ctx, r, admit)
	switch {
	case err != nil && !errors.Is(err, context.Canceled):
		p.log.Warn().Err(err).Str("chunk", r.Key.String()).Msg("prefetch failed")
	case res == chunkcache.PrefetchRejected:
		p.dropped.Inc()
	case res == chunkcache.PrefetchLoaded:
		if c, ok := t.js.ds.chunkOf(r.Key); ok {
			p.loaded(t.js, t.epoch, c, r.Size)
		}
	}
}
