package planner

import (
	"fmt"

	"github.com/brandgw/brand/importance"
)

// Importance asks a plan for importance mode beside the uniform shuffle
// (docs/importance.md): every simulated epoch drawn from Snapshot with Hot
// hot chunks, as a gateway serves sampling=importance&importance=V&hot=H.
//
// A plan has one snapshot for all its epochs. A real job seals a new
// snapshot after each epoch from that epoch's losses, which no planner can
// know beforehand, so the figures are those of a job whose scores stay as
// they are now; the next epoch's snapshot changes the hot set and the
// weights only at their margin while the losses are stable.
type Importance struct {
	Snapshot *importance.Snapshot // one score per sample of the dataset
	Hot      int                  // >= 0
}

// ImportancePlan is a plan's importance-mode figures: the epochs drawn
// from one snapshot, replayed through the same cache under LRU, under the
// gateway's importance-aware eviction, and under the offline optimum
// (Belady over the whole multi-epoch trace, which knows the epochs to
// come).
type ImportancePlan struct {
	Job           string `json:"job"`            // the snapshot's job name
	Version       string `json:"version"`        // the snapshot's version
	SnapshotEpoch uint64 `json:"snapshot_epoch"` // the epoch whose losses it sealed
	Hot           int    `json:"hot"`
	// ChunksRead is, per simulated epoch, how many chunks the epoch reads
	// (those with draws).
	ChunksRead []int `json:"chunks_read"`
	// ReadBytes is, per simulated epoch, the bytes of those chunks: what
	// the epoch reads from the store with no cache hit at all but one read
	// per chunk (their store sizes).
	ReadBytes []int64 `json:"read_bytes"`

	LRU     Result `json:"lru"`
	Aware   Result `json:"importance_aware"`
	Optimal Result `json:"optimal"`

	// Disk is the three policies' store and disk reads with a disk tier
	// below the cache, when the plan has one (PlanInput.DiskCacheBytes).
	Disk *DiskPlan `json:"disk,omitempty"`
}

// validate checks imp against a dataset of n samples.
func (imp *Importance) validate(n int) error {
	switch {
	case imp.Snapshot == nil:
		return fmt.Errorf("%w: importance mode without a snapshot", ErrInvalid)
	case imp.Hot < 0:
		return fmt.Errorf("%w: hot %d chunks; must be >= 0", ErrInvalid, imp.Hot)
	case imp.Snapshot.NumSamples() != n:
		return fmt.Errorf("%w: the snapshot has %d scores, the dataset %d samples", ErrInvalid, imp.Snapshot.NumSamples(), n)
	}
	return nil
}

// planImportance simulates s's epochs drawn from imp, which validate
// accepted, at cacheBytes, and with a disk of diskBytes below the cache
// unless that is 0.
func planImportance(m *meter, s *schedule, imp *Importance, cacheBytes, diskBytes int64) (*ImportancePlan, error) {
	p := &ImportancePlan{
		Job:           imp.Snapshot.Job(),
		Version:       imp.Snapshot.Version(),
		SnapshotEpoch: imp.Snapshot.Epoch(),
		Hot:           imp.Hot,
	}
	var weights []float64
	stores := s.d.stores()
	order := func(e int) (importance.Order, error) {
		spec := s.spec(e, s.j.Window)
		spec.Snapshot, spec.Hot = imp.Snapshot, imp.Hot
		o, err := importance.NewOrder(spec)
		if err != nil {
			return nil, err
		}
		ep := o.(*importance.Epoch) // a snapshot chooses the importance order
		var bytes int64
		for _, c := range ep.ChunkOrder() {
			bytes += stores[c]
		}
		p.ChunksRead = append(p.ChunksRead, ep.NumRead())
		p.ReadBytes = append(p.ReadBytes, bytes)
		if weights == nil {
			// One snapshot: every epoch has the same chunk weights.
			weights = make([]float64, ep.NumChunks())
			for c := range weights {
				weights[c] = ep.ChunkWeight(c)
			}
		}
		return ep, nil
	}
	trace, err := s.traceOf(m, func(visit func(epoch int, chunks []int32)) error {
		return s.walkOrder(m, func(e int) (epochOrder, error) { return order(e) }, visit)
	}, nil)
	if err != nil {
		return nil, err
	}
	sim := newSimulator(trace, s.d.ChunkSizes, s.d.StoreSizes, m)
	if p.LRU, err = sim.run(cacheBytes, LRU); err != nil {
		return nil, err
	}
	if p.Aware, err = sim.runAware(cacheBytes, 0, weights); err != nil {
		return nil, err
	}
	if p.Optimal, err = sim.run(cacheBytes, Belady); err != nil {
		return nil, err
	}
	if diskBytes > 0 {
		run := func(pol Policy) (Result, error) {
			if pol == ImportanceAware {
				return sim.runAware(cacheBytes, diskBytes, weights)
			}
			return sim.runTiers(cacheBytes, diskBytes, pol)
		}
		if p.Disk, err = newDiskPlan(diskBytes, sum(s.d.ChunkSizes), sum(stores), run, LRU, ImportanceAware, Belady); err != nil {
			return nil, err
		}
	}
	return p, nil
}
