package gateway

import (
	"context"
	"errors"
	"runtime/pprof"
	"sync"

	"github.com/brandgw/brand/chunkcache"
)

// prefetchTask is a chunk to read ahead for an epoch.
type prefetchTask struct {
	chunkcache.Request
	ds    *served
	epoch uint64
}

// prefetcher reads, in the background, the chunks job streams will need
// next. It never waits for cache space and never displaces a chunk needed
// sooner than the one it would bring in, so prefetch cannot slow down the
// batches being served now.
type prefetcher struct {
	g      *Gateway
	ahead  int
	queue  chan prefetchTask
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu     sync.Mutex
	queued map[chunkcache.Key]bool
}

func newPrefetcher(g *Gateway, workers, ahead int) *prefetcher {
	ctx, cancel := context.WithCancel(context.Background())
	p := &prefetcher{g: g, ahead: ahead, queue: make(chan prefetchTask, 4096),
		ctx: ctx, cancel: cancel, queued: map[chunkcache.Key]bool{}}
	for range max(workers, 0) {
		p.wg.Go(p.work)
	}
	return p
}

func (p *prefetcher) close() {
	p.cancel()
	p.wg.Wait()
}

// observe is called after a batch is planned: it advances the stream and,
// when the stream moved, queues the chunks of its upcoming windows.
func (p *prefetcher) observe(ds *served, job Job, epoch uint64, end int) {
	st, moved, newEpoch := p.g.sched.observe(ds, job.Seed, job.Window, epoch, end)
	if newEpoch {
		p.g.stats.epochDone(ds, st.epoch)
	}
	if !moved || p.g.cfg.PrefetchConcurrency < 0 {
		return
	}
	for _, u := range p.g.sched.upcoming(st, job.Seed, job.Window, p.ahead) {
		c := u.chunk
		k := ds.chunkKey(c)
		if p.g.cache.Contains(k) {
			continue
		}
		p.mu.Lock()
		dup := p.queued[k]
		p.queued[k] = true
		p.mu.Unlock()
		if dup {
			continue
		}
		select {
		case p.queue <- prefetchTask{ds.request(c), ds, u.epoch}:
			p.g.metrics.prefetchQueued.Inc()
		default:
			p.g.metrics.prefetchDropped.Inc()
			p.mu.Lock()
			delete(p.queued, k)
			p.mu.Unlock()
		}
	}
}

func (p *prefetcher) work() {
	for {
		select {
		case <-p.ctx.Done():
			return
		case t := <-p.queue:
			pprof.Do(p.ctx, epochLabels(t.ds, t.epoch), func(context.Context) { p.fetch(t) })
		}
	}
}

func (p *prefetcher) fetch(t prefetchTask) {
	r := t.Request
	defer func() {
		p.mu.Lock()
		delete(p.queued, r.Key)
		p.mu.Unlock()
	}()
	need := p.g.sched.nextUse(r.Key)
	if need == never {
		return // the stream moved on or went idle
	}
	// Displace only chunks needed later than this one.
	admit := func(victim chunkcache.Key) bool { return p.g.sched.nextUse(victim) > need }
	res, err := p.g.cache.Prefetch(p.ctx, r, admit)
	switch {
	case err != nil && !errors.Is(err, context.Canceled):
		p.g.log.Warn().Err(err).Str("chunk", r.Key.String()).Msg("prefetch failed")
	case res == chunkcache.PrefetchRejected:
		p.g.metrics.prefetchDropped.Inc()
	case res == chunkcache.PrefetchLoaded:
		p.g.stats.prefetched(t.ds, t.epoch, r.Size)
	}
}
