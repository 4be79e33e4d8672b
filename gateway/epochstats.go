package gateway

import (
	"strconv"
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/brandgw/brand/planner"
)

// maxTrace bounds the demand trace kept per dataset for the optimum: 4M
// accesses (48 MiB) cover several epochs of a million-sample dataset.
const maxTrace = 4 << 20

// epochStats keeps, per dataset and epoch, the chunk accesses batches made
// and the chunks read from the store for them (by demand or prefetch), and
// the demand trace from which the optimal policy's hit ratio on the same
// requests is computed when an epoch completes.
//
// The hit ratio here is 1 − loads/accesses, so a prefetched chunk counts as
// the miss it really was: that is what a simulation of the same requests
// computes, and what backend traffic costs.
type epochStats struct {
	capacity int64
	hitRatio *prometheus.GaugeVec
	bytes    *prometheus.GaugeVec

	mu       sync.Mutex
	counts   map[dsEpoch]*epochCount
	traces   map[string][]planner.Access
	running  bool
	optimal  map[dsEpoch]float64
	computed map[dsEpoch]bool
}

type dsEpoch struct {
	dataset string
	epoch   uint64
}

type epochCount struct {
	accesses, loads int64
	bytes           int64
}

func newEpochStats(reg *prometheus.Registry, capacity int64) *epochStats {
	s := &epochStats{
		capacity: capacity,
		hitRatio: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "brand_epoch_hit_ratio",
			Help: "Per epoch: 1 - chunk loads / chunk accesses; policy=live is this gateway, policy=optimal is Belady on the same demand trace and cache size.",
		}, []string{"dataset", "epoch", "policy"}),
		bytes: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "brand_epoch_backend_bytes",
			Help: "Per epoch: bytes of chunks read from the store for it, by demand or prefetch.",
		}, []string{"dataset", "epoch"}),
		counts:   map[dsEpoch]*epochCount{},
		traces:   map[string][]planner.Access{},
		optimal:  map[dsEpoch]float64{},
		computed: map[dsEpoch]bool{},
	}
	reg.MustRegister(s.hitRatio, s.bytes)
	return s
}

func (s *epochStats) countLocked(k dsEpoch) *epochCount {
	c, ok := s.counts[k]
	if !ok {
		c = &epochCount{}
		s.counts[k] = c
	}
	return c
}

func (s *epochStats) publishLocked(k dsEpoch, c *epochCount) {
	ep := strconv.FormatUint(k.epoch, 10)
	if c.accesses > 0 {
		s.hitRatio.WithLabelValues(k.dataset, ep, "live").Set(1 - float64(c.loads)/float64(c.accesses))
	}
	s.bytes.WithLabelValues(k.dataset, ep).Set(float64(c.bytes))
}

// batch records a batch's distinct chunks and what its Acquire loaded.
func (s *epochStats) batch(ds *served, epoch uint64, chunks []int, loads int, bytes int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	k := dsEpoch{ds.name, epoch}
	c := s.countLocked(k)
	c.accesses += int64(len(chunks))
	c.loads += int64(loads)
	c.bytes += bytes
	s.publishLocked(k, c)
	tr := s.traces[ds.name]
	if len(tr)+len(chunks) > maxTrace {
		tr = append(tr[:0], tr[len(tr)/2:]...) // keep the newer half
	}
	for i, ch := range chunks {
		tr = append(tr, planner.Access{Chunk: int32(ch), Epoch: int32(epoch), Start: i == 0})
	}
	s.traces[ds.name] = tr
}

// prefetched records a chunk read ahead of demand for an epoch.
func (s *epochStats) prefetched(ds *served, epoch uint64, bytes int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	k := dsEpoch{ds.name, epoch}
	c := s.countLocked(k)
	c.loads++
	c.bytes += bytes
	s.publishLocked(k, c)
}

// epochDone computes, in the background, the optimal hit ratio of every
// completed epoch of ds (those before current) on the recorded trace.
func (s *epochStats) epochDone(ds *served, current uint64) {
	s.mu.Lock()
	if s.running {
		s.mu.Unlock()
		return
	}
	tr := append([]planner.Access(nil), s.traces[ds.name]...)
	s.running = true
	s.mu.Unlock()
	go func() {
		sizes := make([]int64, ds.index.NumChunks())
		for c := range sizes {
			sizes[c] = ds.index.Chunk(c).Size
		}
		res := planner.Simulate(tr, sizes, s.capacity, planner.Belady)
		s.mu.Lock()
		defer s.mu.Unlock()
		s.running = false
		for _, e := range res.Epochs {
			k := dsEpoch{ds.name, uint64(e.Epoch)}
			if uint64(e.Epoch) >= current || s.computed[k] || e.Accesses == 0 {
				continue
			}
			// Epochs whose start fell out of the trace would be judged on
			// partial data; only the first complete one onwards count.
			if tr[0].Epoch == int32(e.Epoch) && e.Epoch != 0 {
				continue
			}
			s.computed[k] = true
			s.optimal[k] = e.HitRatio
			s.hitRatio.WithLabelValues(ds.name, strconv.Itoa(e.Epoch), "optimal").Set(e.HitRatio)
		}
	}()
}

// EpochStat is one epoch's figures as the gateway measured them.
type EpochStat struct {
	Dataset      string   `json:"dataset"`
	Epoch        uint64   `json:"epoch"`
	Accesses     int64    `json:"chunk_accesses"`
	Loads        int64    `json:"chunk_loads"`
	BackendBytes int64    `json:"backend_bytes"`
	HitRatio     float64  `json:"hit_ratio"`
	Optimal      *float64 `json:"optimal_hit_ratio,omitempty"`
}

func (s *epochStats) snapshot() []EpochStat {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]EpochStat, 0, len(s.counts))
	for k, c := range s.counts {
		st := EpochStat{Dataset: k.dataset, Epoch: k.epoch, Accesses: c.accesses, Loads: c.loads, BackendBytes: c.bytes}
		if c.accesses > 0 {
			st.HitRatio = 1 - float64(c.loads)/float64(c.accesses)
		}
		if o, ok := s.optimal[k]; ok {
			st.Optimal = &o
		}
		out = append(out, st)
	}
	return out
}
