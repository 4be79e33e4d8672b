package gateway

import (
	"cmp"
	"context"
	"iter"
	"slices"
	"strconv"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"
)

// Bounds of the per-epoch figures (see liveStats). A gateway serving a long
// run, or a flood of client-chosen epochs and seeds, keeps at most
// statsJobs × statsEpochs epochs and their metric series.
const (
	// statsJobs is how many job streams keep figures: the ones served most
	// recently.
	statsJobs = 8
	// statsEpochs is how many epochs a stream keeps figures for: the
	// highest-numbered ones. A benchmark or a monitoring scrape reads them
	// after the run's epochs, so this covers a few more than a typical one.
	statsEpochs = 16
	// statsTrace bounds a stream's demand trace, from which the optimal
	// policy's figures are computed: 1M chunk accesses (4 MiB) cover
	// several epochs of a million-sample dataset. Beyond it the older half
	// is dropped.
	statsTrace = 1 << 20
)

// optimizer computes the optimal policy's hit ratio per epoch on a demand
// trace given batch by batch: each batch's epoch and its distinct chunks in
// first-use order. planner.ForGateway is one.
type optimizer interface {
	OptimalHitRatios(ctx context.Context, sizes []int64, capacity int64, batches iter.Seq2[uint64, []int32]) (map[uint64]float64, error)
}

// liveStats keeps, per job stream and epoch, the chunk accesses batches
// made, the chunks read from the store for them (by demand or prefetch),
// and the demand trace from which the optimal policy's hit ratio on the
// same requests is computed once an epoch is complete.
//
// The hit ratio is 1 − loads/accesses, so a prefetched chunk counts as the
// miss it really was: that is what a simulation of the same requests
// computes, and what backend traffic costs. A prefetched chunk counts
// against its epoch when a batch of that epoch first uses it, so an epoch
// served in part never shows more loads than accesses.
//
// An epoch is complete once batches of it have carried as many samples as
// it has, whatever order they came in: a job that interleaves epochs (one
// rank ahead of another, a retry) gets its optimum when the epoch is done,
// computed by a goroutine the gateway stops on Close.
type liveStats struct {
	capacity int64
	optimum  optimizer // nil: no optimal figures
	log      zerolog.Logger
	hitRatio *prometheus.GaugeVec
	bytes    *prometheus.GaugeVec

	mu   sync.Mutex
	jobs map[jobStream]*jobStats
	tick uint64 // orders jobs by last use

	pending map[jobStream]bool // jobs with an epoch to compute
	wake    chan struct{}
	ctx     context.Context
	cancel  context.CancelFunc
	wg      sync.WaitGroup
}

type jobStats struct {
	lastUse uint64
	epochs  map[uint64]*epochCount
	trace   []tracedBatch
	traced  int  // chunk accesses in trace
	trimmed bool // the trace lost its oldest batches
}

type tracedBatch struct {
	epoch  uint64
	chunks []int32
}

type epochCount struct {
	samples         int // in the epoch
	served          int // samples of the epoch served so far
	accesses, loads int64
	bytes           int64
	prefetched      map[int]bool // chunks read ahead for the epoch, not yet used by it
	optimal         *float64
	computedAt      int64 // accesses when the optimum was computed
	partial         bool  // some of its batches fell out of the trace
}

func (c *epochCount) complete() bool { return c.served >= c.samples }

func newLiveStats(reg prometheus.Registerer, capacity int64, optimum optimizer, log zerolog.Logger) *liveStats {
	labels := []string{"dataset", "seed", "window", "epoch"}
	s := &liveStats{
		capacity: capacity, optimum: optimum, log: log,
		hitRatio: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "brand_epoch_hit_ratio",
			Help: "Per job stream and epoch (the last few): 1 - chunk loads / chunk accesses; policy=live is this gateway, policy=optimal is Belady on the same demand trace and cache size, once the epoch is complete.",
		}, append(labels, "policy")),
		bytes: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "brand_epoch_backend_bytes",
			Help: "Per job stream and epoch (the last few): bytes of chunks read from the store for it, by demand or prefetch.",
		}, labels),
		jobs: map[jobStream]*jobStats{}, pending: map[jobStream]bool{}, wake: make(chan struct{}, 1),
	}
	reg.MustRegister(s.hitRatio, s.bytes)
	s.ctx, s.cancel = context.WithCancel(context.Background())
	if optimum != nil {
		s.wg.Go(s.computeOptima)
	}
	return s
}

// close stops the optimum computation and waits for it.
func (s *liveStats) close() {
	s.cancel()
	s.wg.Wait()
}

func labelsOf(js jobStream, epoch uint64) prometheus.Labels {
	return prometheus.Labels{"dataset": js.ds.name, "seed": strconv.FormatUint(js.seed, 10),
		"window": strconv.Itoa(js.window), "epoch": strconv.FormatUint(epoch, 10)}
}

// jobLocked returns js's figures, making room for them among statsJobs.
func (s *liveStats) jobLocked(js jobStream) *jobStats {
	s.tick++
	j, ok := s.jobs[js]
	if !ok {
		if len(s.jobs) >= statsJobs {
			var oldest jobStream
			first := true
			for k, o := range s.jobs {
				if first || o.lastUse < s.jobs[oldest].lastUse {
					oldest, first = k, false
				}
			}
			for e := range s.jobs[oldest].epochs {
				s.forgetLocked(oldest, e)
			}
			delete(s.jobs, oldest)
			delete(s.pending, oldest)
		}
		j = &jobStats{epochs: map[uint64]*epochCount{}}
		s.jobs[js] = j
	}
	j.lastUse = s.tick
	return j
}

// epochLocked returns an epoch's figures, making room for them among the
// job's statsEpochs highest; nil if the epoch is older than those.
func (s *liveStats) epochLocked(js jobStream, j *jobStats, epoch uint64, samples int) *epochCount {
	if c, ok := j.epochs[epoch]; ok {
		return c
	}
	if len(j.epochs) >= statsEpochs {
		lowest := epoch
		for e := range j.epochs {
			lowest = min(lowest, e)
		}
		if lowest == epoch {
			return nil
		}
		s.forgetLocked(js, lowest)
		delete(j.epochs, lowest)
	}
	c := &epochCount{samples: samples}
	j.epochs[epoch] = c
	return c
}

func (s *liveStats) forgetLocked(js jobStream, epoch uint64) {
	l := labelsOf(js, epoch)
	s.bytes.Delete(l)
	l["policy"] = "live"
	s.hitRatio.Delete(l)
	l["policy"] = "optimal"
	s.hitRatio.Delete(l)
}

func (s *liveStats) publishLocked(js jobStream, epoch uint64, c *epochCount) {
	l := labelsOf(js, epoch)
	s.bytes.With(l).Set(float64(c.bytes))
	if c.accesses > 0 {
		l["policy"] = "live"
		s.hitRatio.With(l).Set(1 - float64(c.loads)/float64(c.accesses))
	}
}

// batch records a served batch of an epoch of samples samples: the samples
// it carried, its distinct chunks in first-use order, and what its Acquire
// read from the store.
func (s *liveStats) batch(js jobStream, epoch uint64, samples, served int, chunks []int, loads int, loadedBytes int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	j := s.jobLocked(js)
	c := s.epochLocked(js, j, epoch, samples)
	if c == nil {
		return
	}
	for _, ch := range chunks {
		if c.prefetched[ch] {
			delete(c.prefetched, ch)
			loads++
		}
	}
	c.accesses += int64(len(chunks))
	c.loads += int64(min(loads, len(chunks)))
	c.bytes += loadedBytes
	c.served += served
	s.publishLocked(js, epoch, c)

	tb := tracedBatch{epoch: epoch, chunks: make([]int32, len(chunks))}
	for i, ch := range chunks {
		tb.chunks[i] = int32(ch)
	}
	if j.traced+len(chunks) > statsTrace {
		drop := len(j.trace) / 2
		for _, b := range j.trace[:drop] {
			j.traced -= len(b.chunks)
			if e, ok := j.epochs[b.epoch]; ok {
				e.partial = true
			}
		}
		j.trace = append(j.trace[:0], j.trace[drop:]...)
		j.trimmed = true
	}
	j.trace = append(j.trace, tb)
	j.traced += len(chunks)
	if c.complete() && c.accesses != c.computedAt && s.optimum != nil {
		s.pending[js] = true
		select {
		case s.wake <- struct{}{}:
		default:
		}
	}
}

// prefetched records a chunk read ahead of demand for an epoch.
func (s *liveStats) prefetched(js jobStream, epoch uint64, chunk int, bytes int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	j := s.jobLocked(js)
	c := s.epochLocked(js, j, epoch, js.ds.index.NumSamples())
	if c == nil {
		return
	}
	if c.prefetched == nil {
		c.prefetched = map[int]bool{}
	}
	c.prefetched[chunk] = true
	c.bytes += bytes
	s.publishLocked(js, epoch, c)
}

// computeOptima runs until close, computing the optimum of the complete
// epochs of the jobs batch marked pending, one job at a time.
func (s *liveStats) computeOptima() {
	for {
		select {
		case <-s.ctx.Done():
			return
		case <-s.wake:
		}
		for {
			s.mu.Lock()
			var js jobStream
			found := false
			for k := range s.pending {
				js, found = k, true
				delete(s.pending, k)
				break
			}
			var trace []tracedBatch
			if found {
				trace = slices.Clone(s.jobs[js].trace)
			}
			s.mu.Unlock()
			if !found {
				break
			}
			s.computeOptimum(js, trace)
		}
	}
}

func (s *liveStats) computeOptimum(js jobStream, trace []tracedBatch) {
	ix := js.ds.index
	sizes := make([]int64, ix.NumChunks())
	for c := range sizes {
		sizes[c] = ix.Chunk(c).Size
	}
	batches := func(yield func(uint64, []int32) bool) {
		for _, b := range trace {
			if !yield(b.epoch, b.chunks) {
				return
			}
		}
	}
	ratios, err := s.optimum.OptimalHitRatios(s.ctx, sizes, s.capacity, batches)
	if err != nil {
		if s.ctx.Err() == nil {
			s.log.Warn().Err(err).Str("dataset", js.ds.name).Msg("computing the optimal hit ratio")
		}
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	j, ok := s.jobs[js]
	if !ok || len(trace) == 0 {
		return
	}
	accesses := map[uint64]int64{}
	for _, b := range trace {
		accesses[b.epoch] += int64(len(b.chunks))
	}
	for e, c := range j.epochs {
		r, ok := ratios[e]
		// An epoch is judged only on its whole demand, with the cache
		// state before it: complete, all of it in the trace, and not the
		// first epoch of a trace that lost its beginning.
		if !ok || !c.complete() || c.partial || accesses[e] != c.accesses || (j.trimmed && e == trace[0].epoch) {
			continue
		}
		c.optimal = &r
		c.computedAt = c.accesses
		l := labelsOf(js, e)
		l["policy"] = "optimal"
		s.hitRatio.With(l).Set(r)
	}
}

// EpochStat is one epoch's figures as the gateway measured them.
type EpochStat struct {
	Dataset      string   `json:"dataset"`
	Seed         uint64   `json:"seed"`
	Window       int      `json:"window"`
	Epoch        uint64   `json:"epoch"`
	Accesses     int64    `json:"chunk_accesses"`
	Loads        int64    `json:"chunk_loads"`
	BackendBytes int64    `json:"backend_bytes"`
	HitRatio     float64  `json:"hit_ratio"`
	Optimal      *float64 `json:"optimal_hit_ratio,omitempty"`
	// Complete says batches of the epoch have carried all its samples.
	Complete bool `json:"complete"`
}

// snapshot returns every kept epoch's figures, by dataset, seed, window and
// epoch.
func (s *liveStats) snapshot() []EpochStat {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := []EpochStat{}
	for js, j := range s.jobs {
		for e, c := range j.epochs {
			st := EpochStat{Dataset: js.ds.name, Seed: js.seed, Window: js.window, Epoch: e,
				Accesses: c.accesses, Loads: c.loads, BackendBytes: c.bytes, Complete: c.complete()}
			if c.accesses > 0 {
				st.HitRatio = 1 - float64(c.loads)/float64(c.accesses)
			}
			if c.optimal != nil {
				o := *c.optimal
				st.Optimal = &o
			}
			out = append(out, st)
		}
	}
	slices.SortFunc(out, func(a, b EpochStat) int {
		return cmp.Or(cmp.Compare(a.Dataset, b.Dataset), cmp.Compare(a.Seed, b.Seed),
			cmp.Compare(a.Window, b.Window), cmp.Compare(a.Epoch, b.Epoch))
	})
	return out
}
