// Package livestats keeps, per job stream and epoch, what serving it cost —
// chunk accesses, chunk loads, store bytes — and the optimal policy's hit
// ratio on the same demand, once the epoch is complete: /stats "epochs"
// and the brand_epoch_* metrics; and per job, what it cost in all and how
// long its batches waited: /stats "jobs" and the brand_job_* metrics.
//
// A mixture is one job: its batches, their waits and what their parts
// cost count under the mixture (MixJob), by the mixture's epochs, whatever
// the number of its components — one set of figures and series, where one
// per component stream made a mixture of more components than statsJobs
// replace a stream's figures and series at nearly every part it served.
// What each component served and loaded is in the mixtures' figures
// (/stats "mixtures", brand_mix_*).
//
// Store (backend) bytes are what loads read from the store: a chunk's
// store size (catalog.Dataset.StoreSize), which for a dataset served in
// place is its store extent with the fields read, not the decoded bytes
// the cache holds; disk bytes are the decoded bytes the disk tier gave.
// They are what the planner predicts.
//
// The optimum is Belady's rule over the demand of every job the gateway
// served, merged in the order it arrived: jobs share the cache, so what
// one job could have hit depends on what the others needed meanwhile.
// Each chunk weighs its bytes in the cache (catalog.Dataset.ChunkSize:
// for a view of some fields, its resident bound with them), as the cache
// accounts it.
package livestats

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"iter"
	"maps"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"github.com/brandgw/brand/api"
	"github.com/brandgw/brand/internal/batch/layout"
	"github.com/brandgw/brand/internal/cache/evict"
	"github.com/brandgw/brand/internal/job/catalog"
	"github.com/brandgw/brand/internal/server/stopper"
)

// Bounds of the per-epoch figures (see Stats). A gateway serving a long
// run, or a flood of client-chosen epochs and seeds, keeps at most
// statsJobs × statsEpochs epochs and their metric series.
const (
	// statsJobs is how many job streams keep figures: the ones served most
	// recently.
	statsJobs = 16
	// statsJobIdle is how long a job kept must have gone without a batch
	// before a job not kept takes its place: with more jobs than
	// statsJobs served at once, a place given to each new one at once
	// dropped one job's figures and series and made another's at nearly
	// every batch (1,024 jobs of their own on one gateway: a sixth of its
	// CPU, and series that lived a batch). The jobs kept then stay, and
	// the others' batches count in no job's figures, only in the demand
	// trace every kept job's optimum is computed over.
	statsJobIdle = time.Second
	// othersID is the ID the trace names the batches of jobs not kept by
	// (statsJobIdle): one for all, so that a trace of many jobs served at
	// once names no more jobs than the planner's optimum takes (65,536).
	// Kept jobs' IDs count from 1.
	othersID = -1
	// statsEpochs is how many epochs a stream keeps figures for: the
	// highest-numbered ones. A benchmark or a monitoring scrape reads them
	// after the run's epochs, so this covers a few more than a typical one.
	statsEpochs = 16
	// statsTrace bounds the demand trace, from which the optimal
	// policy's figures are computed: 1M chunk accesses (4 MiB; 12 MiB of
	// mixtures', which name each chunk's dataset) cover
	// several job-epochs of a million-sample dataset. Beyond it the older
	// half is dropped.
	statsTrace = 1 << 20
	// statsTraceBatches bounds the trace's batches too, each about 100
	// bytes beside its accesses: batches of a chunk or two would
	// otherwise hold 100 MB at statsTrace. 262,144 batches of 256 are 67M
	// samples.
	statsTraceBatches = 1 << 18
)

// Optimizer computes the optimal policy's hit ratio per job and epoch on a
// demand trace given batch by batch: each batch's job and epoch, and its
// distinct chunks in first-use order (IDs into sizes). planner.ForGateway
// is one.
type Optimizer interface {
	OptimalHitRatios(ctx context.Context, sizes []int64, capacity int64, batches iter.Seq2[evict.JobEpoch, []int32]) (map[evict.JobEpoch]float64, error)
}

// Stats keeps, per job stream and epoch, the chunk accesses batches
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
type Stats struct {
	capacity int64
	optimum  Optimizer // nil: no optimal figures
	log      zerolog.Logger
	mix      *mixtures
	balance  balances
	hitRatio *prometheus.GaugeVec
	bytes    *prometheus.GaugeVec

	jobBytes, jobGets, jobStall *prometheus.CounterVec
	jobBatches                  *prometheus.CounterVec

	clock func() time.Time // time.Now; a test's

	mu   sync.Mutex
	jobs map[layout.Stream]*jobStats
	// byID are the kept jobs by their IDs, which the trace's batches
	// name: a job no longer kept is named by an ID alone, so that its
	// figures and series go with it however long its batches stay in the
	// trace.
	byID map[int]*jobStats
	// comps are the mixtures' component streams seen (Follow), each
	// mapped to its mixture's job, so that what prefetch reads for one
	// counts there; bounded by maxComps.
	comps map[layout.Stream]layout.Stream
	tick  uint64 // orders jobs by last use
	ids   int    // the last job ID given

	// trace is the demand of every job, merged as it arrived, bounded
	// by statsTrace accesses (traced) and traceBatches batches
	// (statsTraceBatches, or a test's).
	trace        []tracedBatch
	traced       int
	traceBatches int
	pending      bool // an epoch completed since the optimum was computed
	wake         chan struct{}
	part         *stopper.Group // runs the optimum's computation
	ctx          context.Context
}

type jobStats struct {
	id int // its batches' tag in the trace
	// dataset and index name it in /stats and the labels: a dataset's
	// name and index ID, or a mixture as written and mixIndex.
	dataset, index string
	// datasets are the names of the datasets it reads: its dataset's,
	// or its mixture's components' (Shown).
	datasets []string
	// current is the epoch its last batch was of: a mixture's prefetch,
	// made for a component's pass, counts against it.
	current uint64
	// labels are its series' job labels (jobLabelsOf), made once: a
	// mixture of more sources than statsJobs makes room for a stream at
	// nearly every part of every batch, and each time compares the
	// labels of every job kept.
	labels  prometheus.Labels
	lastUse uint64
	lastAt  time.Time // when its last batch was counted
	// kept: it is one of the jobs kept (Stats.jobs); a job not kept
	// (statsJobIdle) is counted in a jobStats of its own for one batch,
	// with no series, and dropped.
	kept   bool
	epochs map[uint64]*epochCount
	// trimmed: the trace lost batches of this job; firstTraced is then
	// the epoch of its oldest batch left, whose optimum lacks its start.
	trimmed     bool
	firstTraced uint64
	// The job's totals.
	batches, samples int64
	accesses, loads  int64
	bytes, disk      int64 // loaded from the store; from the disk tier
	gets             int64 // the store's requests for those loads
	wait             time.Duration
	// Its series of the job metrics, resolved once: looking a series up
	// by its labels costs more than the rest of a batch's accounting.
	batchesC, stallC, bytesC, getsC prometheus.Counter
}

// tracedBatch is a batch's demand: its chunks are of ds, or for a
// mixture's batch each of its dataset in dss. A mixture's batch is one,
// whatever its parts: the trace's length, and what the optimum's
// computation copies and tags, follow the batches, not the sources. Its
// job is named by its ID, never held: a trace of a million accesses
// outlives thousands of jobs, each with its labels and series.
type tracedBatch struct {
	job    int // the jobStats.id that tags the batch
	epoch  uint64
	ds     *catalog.Dataset
	dss    []*catalog.Dataset
	chunks []int32
}

// tracedHas reports whether a mixture's batch b holds chunk c of ds.
func tracedHas(b *tracedBatch, ds *catalog.Dataset, c int32) bool {
	for k, x := range b.chunks {
		if x == c && b.dss[k] == ds {
			return true
		}
	}
	return false
}

// dsOf is the dataset of the batch's k-th chunk.
func (b *tracedBatch) dsOf(k int) *catalog.Dataset {
	if b.dss != nil {
		return b.dss[k]
	}
	return b.ds
}

type epochCount struct {
	samples         int // in the epoch
	served          int // samples of the epoch served so far
	accesses, loads int64
	bytes, disk     int64            // loaded from the store; from the disk tier
	gets            int64            // the store's requests for those loads
	prefetched      map[chunkID]bool // chunks read ahead for the epoch, not yet used by it
	optimal         *float64
	computedAt      int64 // accesses when the optimum was computed
	partial         bool  // some of its batches fell out of the trace
	// Its series of the epoch metrics (bytes, live hit ratio), resolved
	// on first use.
	bytesG, liveG prometheus.Gauge
}

func (c *epochCount) complete() bool { return c.served >= c.samples }

// New returns the statistics of a gateway whose cache holds capacity
// bytes. optimum, if not nil, computes the optimal figures, on part (nil:
// a part of the Stats' own, stopped by Close).
func New(reg prometheus.Registerer, capacity int64, optimum Optimizer, part *stopper.Group, log zerolog.Logger) *Stats {
	labels := []string{"dataset", "index", "seed", "window", "job", "snapshot", "epoch"}
	jobLabels := []string{"dataset", "index", "seed", "window", "job"}
	s := &Stats{
		capacity: capacity, optimum: optimum, log: log, clock: time.Now,
		hitRatio: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "brand_epoch_hit_ratio",
			Help: "Per job stream and epoch (the last few): 1 - chunk loads / chunk accesses; policy=live is this gateway, policy=optimal is Belady on the same demand trace and cache size, once the epoch is complete.",
		}, append(labels, "policy")),
		bytes: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "brand_epoch_backend_bytes",
			Help: "Per job stream and epoch (the last few): bytes of chunks read from the store for it, by demand or prefetch.",
		}, labels),
		jobBytes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "brand_job_backend_bytes_total",
			Help: "Per job (16 kept, as /stats jobs): bytes of chunks read from the store for it, by demand or prefetch.",
		}, jobLabels),
		jobGets: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "brand_job_store_gets_total",
			Help: "Per job (16 kept, as /stats jobs): requests its chunk loads sent the store (a chunk read whole in the store's parts), by demand or prefetch: what /plan's bill counts as gets.",
		}, jobLabels),
		jobStall: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "brand_job_wait_seconds_total",
			Help: "Per job (16 kept, as /stats jobs): time its batches waited for their samples — for a turn, for room in the cache, for chunks to load — in all.",
		}, jobLabels),
		jobBatches: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "brand_job_batches_total",
			Help: "Per job (16 kept, as /stats jobs): batches served.",
		}, jobLabels),
		traceBatches: statsTraceBatches, jobs: map[layout.Stream]*jobStats{}, byID: map[int]*jobStats{}, comps: map[layout.Stream]layout.Stream{}, wake: make(chan struct{}, 1),
	}
	reg.MustRegister(s.hitRatio, s.bytes, s.jobBytes, s.jobGets, s.jobStall, s.jobBatches)
	s.mix = newMixtures(reg)
	s.part = stopper.Own(part, "livestats: optima")
	s.ctx = s.part.Context()
	if optimum != nil {
		s.part.Go(func(context.Context) { s.computeOptima() })
	}
	return s
}

// Close stops the optimum computation and waits for it (the Stats' part).
func (s *Stats) Close() { s.part.Stop() }

// labelsOf are the labels of an epoch's series of a job whose job
// labels are jl (not changed).
func labelsOf(jl prometheus.Labels, js layout.Stream, epoch uint64) prometheus.Labels {
	l := maps.Clone(jl)
	l["snapshot"], l["epoch"] = js.Imp.Version, strconv.FormatUint(epoch, 10)
	return l
}

func jobLabelsOf(dataset, index string, js layout.Stream) prometheus.Labels {
	return prometheus.Labels{"dataset": dataset, "index": index, "seed": strconv.FormatUint(js.Seed, 10),
		"window": strconv.Itoa(js.Window), "job": js.Name}
}

// MixJob is the job a mixture's batch counts under: the mixture's order
// (Mixed.Key) read with the job's seed, window and name.
func MixJob(b *layout.Batch) layout.Stream {
	return layout.Stream{Seed: b.Job.Seed, Window: b.Job.Window, Name: b.Job.Name, Mix: b.Composite().Key()}
}

// mixIndex names a mixture's versions, weights and schedule as an index
// ID names a dataset's version: a digest of its key, 16 hex digits.
func mixIndex(mx layout.Composite) string {
	h := sha256.Sum256([]byte(mx.Key()))
	return hex.EncodeToString(h[:8])
}

// maxComps bounds the mixtures' component streams remembered for
// prefetch (Stats.comps): more than a mixture has (api's bound on
// sources) times a few jobs; a flood of seeds clears them, and the
// prefetches of streams forgotten count only in the mixtures' figures
// until their next batch.
const maxComps = 4096

// jobLocked returns js's figures, making room for them among statsJobs;
// mx is the mixture js is the job of (nil: a dataset's job).
func (s *Stats) jobLocked(js layout.Stream, mx layout.Composite) *jobStats {
	s.tick++
	now := s.clock()
	j, ok := s.jobs[js]
	if !ok {
		if len(s.jobs) >= statsJobs {
			var oldest layout.Stream
			first := true
			for k, o := range s.jobs {
				if first || o.lastUse < s.jobs[oldest].lastUse {
					oldest, first = k, false
				}
			}
			if now.Sub(s.jobs[oldest].lastAt) < statsJobIdle {
				return &jobStats{id: othersID, epochs: map[uint64]*epochCount{}}
			}
			for e := range s.jobs[oldest].epochs {
				s.forgetLocked(oldest, e)
			}
			l := s.jobs[oldest].labels
			s.jobBytes.Delete(l)
			s.jobGets.Delete(l)
			s.jobStall.Delete(l)
			s.jobBatches.Delete(l)
			delete(s.byID, s.jobs[oldest].id)
			delete(s.jobs, oldest)
			s.reresolveLocked(l)
		}
		s.ids++
		var dataset, index string
		var datasets []string
		if mx != nil {
			dataset, index = mx.Name(), mixIndex(mx)
			for _, ds := range mx.Datasets() {
				datasets = append(datasets, ds.Name)
			}
		} else {
			dataset, index, datasets = js.DS.Name, js.DS.ID(), []string{js.DS.Name}
		}
		l := jobLabelsOf(dataset, index, js)
		j = &jobStats{id: s.ids, epochs: map[uint64]*epochCount{}, dataset: dataset, index: index, datasets: datasets, labels: l, kept: true,
			batchesC: s.jobBatches.With(l), stallC: s.jobStall.With(l), bytesC: s.jobBytes.With(l), getsC: s.jobGets.With(l)}
		s.jobs[js] = j
		s.byID[j.id] = j
	}
	j.lastUse, j.lastAt = s.tick, now
	return j
}

// epochLocked returns an epoch's figures, making room for them among the
// job's statsEpochs highest; nil if the epoch is older than those.
func (s *Stats) epochLocked(js layout.Stream, j *jobStats, epoch uint64, samples int) *epochCount {
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

// reresolveLocked resolves again the series of the jobs whose labels are
// l, which were just deleted: streams that differ only in what the labels
// leave out (a mixture's component and the plain job of the same seed,
// window and name) share their series, and the handles a job holds must
// not outlive them.
func (s *Stats) reresolveLocked(l prometheus.Labels) {
	for _, o := range s.jobs {
		if !maps.Equal(o.labels, l) {
			continue
		}
		o.batchesC, o.stallC, o.bytesC, o.getsC = s.jobBatches.With(l), s.jobStall.With(l), s.jobBytes.With(l), s.jobGets.With(l)
		for _, c := range o.epochs {
			c.bytesG, c.liveG = nil, nil
		}
	}
}

func (s *Stats) forgetLocked(js layout.Stream, epoch uint64) {
	// The series are shared by streams of the same labels (see
	// reresolveLocked): theirs are resolved again on next use.
	jl := s.jobs[js].labels
	for k, o := range s.jobs {
		if c, ok := o.epochs[epoch]; ok && k != js && k.Imp.Version == js.Imp.Version && maps.Equal(o.labels, jl) {
			c.bytesG, c.liveG = nil, nil
		}
	}
	l := labelsOf(jl, js, epoch)
	s.bytes.Delete(l)
	l["policy"] = "live"
	s.hitRatio.Delete(l)
	l["policy"] = "optimal"
	s.hitRatio.Delete(l)
}

func (s *Stats) publishLocked(js layout.Stream, j *jobStats, epoch uint64, c *epochCount) {
	if !j.kept {
		return // no series
	}
	if c.bytesG == nil {
		l := labelsOf(j.labels, js, epoch)
		c.bytesG = s.bytes.With(l)
		l["policy"] = "live"
		c.liveG = s.hitRatio.With(l)
	}
	c.bytesG.Set(float64(c.bytes))
	if c.accesses > 0 {
		c.liveG.Set(1 - float64(c.loads)/float64(c.accesses))
	}
}

// Served is a batch served, for Batch.
type Served struct {
	// Stream is the job the batch counts under: its job stream for one
	// dataset, MixJob for a mixture.
	Stream       layout.Stream
	Epoch        uint64
	EpochSamples int // in the epoch (a mixture's: its epoch's positions)
	Samples      int // the batch carried (a mixture's: its positions)
	// Chunks are its distinct chunks in first-use order; Loads and
	// LoadedBytes what its read loaded into the cache, DiskBytes the part
	// of those the disk tier gave (the rest came from the store), and
	// StoreBytes what the loads from the store read from it. For a
	// mixture they are its parts' (Parts), and these are unused.
	Chunks      []int
	Loads       int
	LoadedBytes int64
	DiskBytes   int64
	StoreBytes  int64
	StoreGETs   int64
	// Wait is how long the batch waited for its samples: for its job's
	// turn, for room in the cache, for its chunks to load.
	Wait time.Duration
	// Mix is the mixture the batch was of (nil: one dataset), and Parts
	// what each of its parts read: the mixture's figures count them per
	// component.
	Mix   layout.Composite
	Parts []PartServed
}

// PartServed is what a part of a mixture's batch read: its component
// and component stream, the samples it carried, and its chunks and loads
// as Served has them.
type PartServed struct {
	Stream     layout.Stream
	Comp       int
	Samples    int
	Chunks     []int
	Loads      int
	DiskBytes  int64
	StoreBytes int64
	StoreGETs  int64
}

// Follow registers a batch's streams before its prefetch starts, so that
// the loads read ahead for a mixture's component streams are credited to
// the mixture and its job: its figures count them against the epoch of
// the last batch followed.
func (s *Stats) Follow(b *layout.Batch) {
	mx := b.Composite()
	if mx == nil {
		return
	}
	s.mix.follow(b)
	job := MixJob(b)
	s.mu.Lock()
	defer s.mu.Unlock()
	j := s.jobLocked(job, mx)
	j.current = b.Epoch
	s.epochLocked(job, j, b.Epoch, b.EpochSamples)
	for _, p := range b.Parts {
		if k, ok := s.comps[p.Stream]; ok && k == job {
			continue
		}
		if len(s.comps) >= maxComps {
			clear(s.comps)
		}
		s.comps[p.Stream] = job
	}
}

// Mixtures returns what the mixtures served, per component, oldest first.
func (s *Stats) Mixtures() []api.MixStat { return s.mix.snapshot() }

// Batch records a served batch.
func (s *Stats) Batch(b Served) {
	parts := b.Parts
	if b.Mix != nil {
		for _, p := range parts {
			s.mix.add(b.Mix, p.Stream, p.Comp, p.Samples, p.StoreBytes, p.DiskBytes)
		}
	} else {
		parts = []PartServed{{Stream: b.Stream, Samples: b.Samples, Chunks: b.Chunks, Loads: b.Loads, DiskBytes: b.DiskBytes, StoreBytes: b.StoreBytes, StoreGETs: b.StoreGETs}}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	js := b.Stream
	j := s.jobLocked(js, b.Mix)
	j.batches++
	j.samples += int64(b.Samples)
	j.wait += b.Wait
	if j.kept {
		j.batchesC.Inc()
		j.stallC.Add(b.Wait.Seconds())
	}
	c := s.epochLocked(js, j, b.Epoch, b.EpochSamples)
	if c == nil {
		return
	}
	c.served += b.Samples
	n, loads := 0, 0
	for _, p := range parts {
		loads += s.partLocked(j, c, p)
		n += len(p.Chunks)
	}
	tb := tracedBatch{job: j.id, epoch: b.Epoch, chunks: make([]int32, 0, n)}
	if b.Mix != nil {
		tb.dss = make([]*catalog.Dataset, 0, n)
	} else {
		tb.ds = b.Stream.DS
	}
	for _, p := range parts {
		for _, ch := range p.Chunks {
			if tb.dss != nil {
				// Distinct, as the optimum takes a batch's chunks: two
				// parts of a component (two of its passes) may share one.
				if tracedHas(&tb, p.Stream.DS, int32(ch)) {
					continue
				}
				tb.dss = append(tb.dss, p.Stream.DS)
			}
			tb.chunks = append(tb.chunks, int32(ch))
		}
	}
	// A batch's accesses are its distinct chunks, the trace's; its loads
	// at most as many.
	n = len(tb.chunks)
	loads = min(loads, n)
	c.accesses += int64(n)
	c.loads += int64(loads)
	j.accesses += int64(n)
	j.loads += int64(loads)
	s.publishLocked(js, j, b.Epoch, c)
	if s.traced+n > statsTrace || len(s.trace) >= s.traceBatches {
		s.trimLocked()
	}
	s.trace = append(s.trace, tb)
	s.traced += n
	if !j.trimmed && j.batches == 1 {
		j.firstTraced = b.Epoch
	}
	if c.complete() && c.accesses != c.computedAt && s.optimum != nil {
		s.pending = true
		select {
		case s.wake <- struct{}{}:
		default:
		}
	}
}

// partLocked counts the bytes a batch's part (the batch, for one dataset)
// read against its job j and epoch c, and returns its loads, those of
// prefetch it used included.
func (s *Stats) partLocked(j *jobStats, c *epochCount, p PartServed) int {
	ds := p.Stream.DS
	loads := p.Loads
	for _, ch := range p.Chunks {
		k := chunkID{ds, int32(ch)}
		if c.prefetched[k] {
			delete(c.prefetched, k)
			loads++
		}
	}
	c.bytes += p.StoreBytes
	c.disk += p.DiskBytes
	c.gets += p.StoreGETs
	j.bytes += p.StoreBytes
	j.disk += p.DiskBytes
	j.gets += p.StoreGETs
	if j.kept {
		j.bytesC.Add(float64(p.StoreBytes))
		j.getsC.Add(float64(p.StoreGETs))
	}
	return min(loads, len(p.Chunks))
}

// trimLocked drops the older half of the trace.
func (s *Stats) trimLocked() {
	drop := len(s.trace) / 2
	for _, d := range s.trace[:drop] {
		s.traced -= len(d.chunks)
		j := s.byID[d.job]
		if j == nil {
			continue // no longer kept: nothing reads its figures
		}
		if e, ok := j.epochs[d.epoch]; ok {
			e.partial = true
		}
		j.trimmed = true
	}
	old := s.trace
	s.trace = append(s.trace[:0], s.trace[drop:]...)
	clear(old[len(s.trace):]) // let what was dropped go
	first := map[int]uint64{}
	for _, d := range s.trace {
		if f, ok := first[d.job]; !ok || d.epoch < f {
			first[d.job] = d.epoch
		}
	}
	for _, o := range s.jobs {
		if f, ok := first[o.id]; ok && o.trimmed {
			o.firstTraced = f
		}
	}
}

// Prefetched records a chunk read ahead of demand for an epoch of a
// stream, from the store or (disk) from the disk tier: bytes are what it
// takes in the cache, which the disk tier gave; from the store, it read
// the chunk's store size. For a mixture's component stream it counts
// under the mixture's job (registered by Follow; skipped if not kept),
// against the epoch of its last batch followed.
func (s *Stats) Prefetched(js layout.Stream, epoch uint64, chunk int, bytes int64, disk bool) {
	ds := js.DS
	store, below, gets := ds.StoreSize(chunk), int64(0), int64(ds.StoreGETs(chunk))
	if disk {
		store, below, gets = 0, bytes, 0
	}
	s.mix.prefetched(js, store+below, disk)
	s.mu.Lock()
	defer s.mu.Unlock()
	var j *jobStats
	var c *epochCount
	if js.Mix != "" {
		var ok bool
		if j, ok = s.jobs[s.comps[js]]; !ok {
			return
		}
		js, epoch = s.comps[js], j.current
		s.tick++
		j.lastUse = s.tick
		c = j.epochs[epoch] // made by Follow; nil if no longer kept
	} else {
		j = s.jobLocked(js, nil)
		c = s.epochLocked(js, j, epoch, ds.Index.NumSamples())
	}
	j.bytes += store
	j.disk += below
	j.gets += gets
	if j.kept {
		j.bytesC.Add(float64(store))
		j.getsC.Add(float64(gets))
	}
	if c == nil {
		return
	}
	if c.prefetched == nil {
		c.prefetched = map[chunkID]bool{}
	}
	c.prefetched[chunkID{ds, int32(chunk)}] = true
	c.bytes += store
	c.disk += below
	c.gets += gets
	s.publishLocked(js, j, epoch, c)
}

// computeOptima runs until close, computing the optimum over the merged
// trace whenever an epoch completed since the last time.
func (s *Stats) computeOptima() {
	for {
		select {
		case <-s.ctx.Done():
			return
		case <-s.wake:
		}
		s.mu.Lock()
		if !s.pending {
			s.mu.Unlock()
			continue
		}
		s.pending = false
		trace := slices.Clone(s.trace)
		s.mu.Unlock()
		s.computeOptimum(trace)
	}
}

// chunkID names a chunk of one dataset version in the merged trace.
type chunkID struct {
	ds *catalog.Dataset
	c  int32
}

func (s *Stats) computeOptimum(trace []tracedBatch) {
	if len(trace) == 0 {
		return
	}
	// Chunks of every dataset version the jobs read, numbered densely.
	ids := map[chunkID]int32{}
	var sizes []int64
	tagged := make([][]int32, len(trace))
	for i, b := range trace {
		tagged[i] = make([]int32, len(b.chunks))
		for k, c := range b.chunks {
			ds := b.dsOf(k)
			id, ok := ids[chunkID{ds, c}]
			if !ok {
				id = int32(len(sizes))
				ids[chunkID{ds, c}] = id
				sizes = append(sizes, ds.ChunkSize(int(c)))
			}
			tagged[i][k] = id
		}
	}
	batches := func(yield func(evict.JobEpoch, []int32) bool) {
		for i, b := range trace {
			if !yield(evict.JobEpoch{Job: b.job, Epoch: b.epoch}, tagged[i]) {
				return
			}
		}
	}
	ratios, err := s.optimum.OptimalHitRatios(s.ctx, sizes, s.capacity, batches)
	if err != nil {
		if s.ctx.Err() == nil {
			s.log.Warn().Err(err).Msg("computing the optimal hit ratio")
		}
		return
	}
	accesses := map[evict.JobEpoch]int64{}
	for _, b := range trace {
		accesses[evict.JobEpoch{Job: b.job, Epoch: b.epoch}] += int64(len(b.chunks))
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for js, j := range s.jobs {
		for e, c := range j.epochs {
			k := evict.JobEpoch{Job: j.id, Epoch: e}
			r, ok := ratios[k]
			// An epoch is judged only on its whole demand, with the
			// cache state before it: complete, all of it in the trace,
			// and not the first epoch of a job whose trace lost its
			// beginning.
			if !ok || !c.complete() || c.partial || accesses[k] != c.accesses || (j.trimmed && e == j.firstTraced) {
				continue
			}
			c.optimal = &r
			c.computedAt = c.accesses
			l := labelsOf(j.labels, js, e)
			l["policy"] = "optimal"
			s.hitRatio.With(l).Set(r)
		}
	}
}

// Shown says whether the figures of a job named job ("" for none) that
// reads datasets may be shown (a token's scope: gateway's visible).
type Shown func(datasets []string, job string) bool

// Snapshot returns every kept epoch's figures, by dataset, seed, window and
// epoch.
func (s *Stats) Snapshot() []api.EpochStat { return s.SnapshotOf(nil) }

// SnapshotOf is Snapshot of the jobs shown says may be shown (nil: every
// one).
func (s *Stats) SnapshotOf(shown Shown) []api.EpochStat {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := []api.EpochStat{}
	for js, j := range s.jobs {
		if shown != nil && !shown(j.datasets, js.Name) {
			continue
		}
		for e, c := range j.epochs {
			st := api.EpochStat{Dataset: j.dataset, Index: j.index, Seed: js.Seed, Window: js.Window, Job: js.Name, Snapshot: js.Imp.Version, Epoch: e,
				Accesses: c.accesses, Loads: c.loads, BackendBytes: c.bytes, DiskBytes: c.disk, StoreGETs: c.gets, Complete: c.complete()}
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
	slices.SortFunc(out, func(a, b api.EpochStat) int {
		return cmp.Or(cmp.Compare(a.Dataset, b.Dataset), cmp.Compare(a.Index, b.Index), cmp.Compare(a.Seed, b.Seed),
			cmp.Compare(a.Window, b.Window), cmp.Compare(a.Job, b.Job), cmp.Compare(a.Snapshot, b.Snapshot), cmp.Compare(a.Epoch, b.Epoch))
	})
	return out
}

// Jobs returns every kept job's totals, by dataset, seed, window and name.
func (s *Stats) Jobs() []api.JobStat { return s.JobsOf(nil) }

// JobsOf is Jobs of the jobs shown says may be shown (nil: every one).
func (s *Stats) JobsOf(shown Shown) []api.JobStat {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := []api.JobStat{}
	for js, j := range s.jobs {
		if shown != nil && !shown(j.datasets, js.Name) {
			continue
		}
		st := api.JobStat{Dataset: j.dataset, Index: j.index, Seed: js.Seed, Window: js.Window, Job: js.Name,
			Batches: j.batches, Samples: j.samples, Accesses: j.accesses, Loads: j.loads, BackendBytes: j.bytes, DiskBytes: j.disk, StoreGETs: j.gets,
			WaitSeconds: j.wait.Seconds()}
		if j.accesses > 0 {
			st.HitRatio = 1 - float64(j.loads)/float64(j.accesses)
		}
		out = append(out, st)
	}
	slices.SortFunc(out, func(a, b api.JobStat) int {
		return cmp.Or(cmp.Compare(a.Dataset, b.Dataset), cmp.Compare(a.Index, b.Index), cmp.Compare(a.Seed, b.Seed),
			cmp.Compare(a.Window, b.Window), cmp.Compare(a.Job, b.Job))
	})
	return out
}
