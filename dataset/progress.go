package dataset

import (
	"sync"
	"sync/atomic"
	"time"
)

// Progress reports how far Pack, IndexShards or Verify has got. Done figures
// count finished work only: for Pack, chunks stored (and their bytes and
// samples); for IndexShards and Verify, bytes read, and the chunks and
// samples of fully read chunks. A zero total means it is not known yet
// (IndexShards learns the number of samples as it reads); the final call has
// every total set.
type Progress struct {
	Bytes, TotalBytes     int64
	Samples, TotalSamples int
	Chunks, TotalChunks   int
}

// progressInterval is how often a running operation reports progress.
// A terminal renderer redraws about this often; more would only cost.
const progressInterval = 100 * time.Millisecond

// tracker counts progress from many goroutines and reports it from one.
type tracker struct {
	fn                     func(Progress)
	total                  Progress
	bytes, samples, chunks atomic.Int64

	once  sync.Once
	final atomic.Bool   // report once more on stop
	quit  chan struct{} // closed by stop
	done  chan struct{} // closed when the reporting goroutine has exited
}

// startTracker starts reporting to fn (which may be nil) with the given
// totals. The caller must call stop (or finish) before returning.
func startTracker(fn func(Progress), total Progress) *tracker {
	t := &tracker{fn: fn, total: total, quit: make(chan struct{}), done: make(chan struct{})}
	if fn == nil {
		close(t.done)
		return t
	}
	go t.report()
	return t
}

func (t *tracker) report() {
	defer close(t.done)
	tick := time.NewTicker(progressInterval)
	defer tick.Stop()
	var last Progress
	for {
		select {
		case <-tick.C:
			if p := t.snapshot(); p != last {
				t.fn(p)
				last = p
			}
		case <-t.quit:
			if t.final.Load() {
				p := t.snapshot()
				p.TotalSamples = max(p.TotalSamples, p.Samples)
				p.TotalBytes = max(p.TotalBytes, p.Bytes)
				p.TotalChunks = max(p.TotalChunks, p.Chunks)
				t.fn(p)
			}
			return
		}
	}
}

func (t *tracker) snapshot() Progress {
	p := t.total
	p.Bytes = t.bytes.Load()
	p.Samples = int(t.samples.Load())
	p.Chunks = int(t.chunks.Load())
	return p
}

// add records finished work. It is safe for concurrent use.
func (t *tracker) add(bytes int64, samples, chunks int) {
	t.bytes.Add(bytes)
	t.samples.Add(int64(samples))
	t.chunks.Add(int64(chunks))
}

// finish reports the final figures and stops reporting.
func (t *tracker) finish() {
	t.final.Store(true)
	t.stop()
}

// stop stops reporting without a final report (the operation failed) and
// waits until fn is no longer running. It may be called more than once.
func (t *tracker) stop() {
	t.once.Do(func() { close(t.quit) })
	<-t.done
}
