package importance

import (
	"fmt"
	"iter"
	"math"
	"sync/atomic"
)

// Dataset is what this package needs of a dataset index: its content
// identity and its sample count. *chunkindex.Index satisfies it.
type Dataset interface {
	ID() string
	NumSamples() int
}

// unreported is the bit pattern of a slot no loss was reported for: a quiet
// NaN, which no accepted loss can be.
const unreported = 0x7fc00000

// An Accumulator gathers the losses reported for one epoch of one job on
// one dataset index: a float32 slot per sample, 4 bytes a sample, NaN until
// a loss is reported. It is safe for concurrent use; Add and Merge are
// lock-free.
//
// A sample reported several times keeps the largest loss. The rule makes
// the accumulated scores a function of the set of reports alone, not of the
// order they arrived in: two feedback requests racing, a retried request,
// or nodes' parts merged in any order (Merge applies the same rule) all
// seal to the same snapshot, so two gateways agree on its version. With
// replacement sampling a sample may legitimately be drawn twice in an
// epoch; its largest loss is the one that says it is still worth drawing.
type Accumulator struct {
	indexID string
	job     string
	epoch   uint64
	slots   []atomic.Uint32
}

// NewAccumulator returns an empty accumulator for epoch epoch of job on ds.
// The job name must be usable in an object key (see ValidJobName).
func NewAccumulator(ds Dataset, job string, epoch uint64) (*Accumulator, error) {
	if err := ValidJobName(job); err != nil {
		return nil, err
	}
	if len(ds.ID()) > math.MaxUint16 {
		return nil, fmt.Errorf("%w: index ID of %d bytes; at most %d", ErrInvalid, len(ds.ID()), math.MaxUint16)
	}
	n := ds.NumSamples()
	if n < 0 || uint64(n) > maxSamples {
		return nil, fmt.Errorf("%w: %d samples; at most %d", ErrInvalid, n, uint64(maxSamples))
	}
	a := &Accumulator{indexID: ds.ID(), job: job, epoch: epoch, slots: make([]atomic.Uint32, n)}
	for i := range a.slots {
		a.slots[i].Store(unreported)
	}
	return a, nil
}

// IndexID returns the ID of the dataset index the accumulator was made for.
func (a *Accumulator) IndexID() string { return a.indexID }

// Job returns the job name the accumulator was made for.
func (a *Accumulator) Job() string { return a.job }

// Epoch returns the epoch the accumulator gathers.
func (a *Accumulator) Epoch() uint64 { return a.epoch }

// NumSamples returns the number of samples of the dataset.
func (a *Accumulator) NumSamples() int { return len(a.slots) }

// Add records losses[k] for sample ids[k]. The whole batch is checked
// first: ids and losses of different lengths, an ID outside
// [0, NumSamples()), or a loss that is NaN, infinite or negative reject the
// batch with an error wrapping ErrBadFeedback that names the first bad
// entry, and nothing of it is recorded. A sample keeps the largest loss
// reported for it.
func (a *Accumulator) Add(ids []int, losses []float32) error {
	if len(ids) != len(losses) {
		return fmt.Errorf("%w: %d sample IDs but %d losses", ErrBadFeedback, len(ids), len(losses))
	}
	for k, id := range ids {
		if id < 0 || id >= len(a.slots) {
			return fmt.Errorf("%w: entry %d: sample ID %d not in [0, %d)", ErrBadFeedback, k, id, len(a.slots))
		}
		if l := losses[k]; !validScore(l) {
			return fmt.Errorf("%w: entry %d (sample %d): loss %v; losses must be finite and >= 0", ErrBadFeedback, k, id, l)
		}
	}
	for k, id := range ids {
		a.raise(id, losses[k])
	}
	return nil
}

// Merge adds every loss other holds into a, keeping the larger of the two
// where both hold one; other is not modified. Merging is commutative and
// associative, so nodes' parts merge to the same result in any order.
// other must have been made for the same index, job and epoch, or Merge
// returns an error wrapping ErrMismatch and changes nothing.
func (a *Accumulator) Merge(other *Accumulator) error {
	if other.indexID != a.indexID || other.job != a.job || other.epoch != a.epoch || len(other.slots) != len(a.slots) {
		return fmt.Errorf("%w: merging index %s job %q epoch %d (%d samples) into index %s job %q epoch %d (%d samples)",
			ErrMismatch, other.indexID, other.job, other.epoch, len(other.slots), a.indexID, a.job, a.epoch, len(a.slots))
	}
	for i := range other.slots {
		if b := other.slots[i].Load(); b != unreported {
			a.raise(i, math.Float32frombits(b))
		}
	}
	return nil
}

// Reported returns how many samples have a loss.
func (a *Accumulator) Reported() int {
	n := 0
	for i := range a.slots {
		if a.slots[i].Load() != unreported {
			n++
		}
	}
	return n
}

// Reports yields every sample that has a loss, with it, in ID order: what
// a node hands the node sealing the epoch, which adds it to its own with
// Add (the largest loss kept, as Merge does).
func (a *Accumulator) Reports() iter.Seq2[int, float32] {
	return func(yield func(int, float32) bool) {
		for i := range a.slots {
			if b := a.slots[i].Load(); b != unreported && !yield(i, math.Float32frombits(b)) {
				return
			}
		}
	}
}

// loss returns sample i's loss and whether one was reported.
func (a *Accumulator) loss(i int) (float32, bool) {
	b := a.slots[i].Load()
	return math.Float32frombits(b), b != unreported
}

// raise stores l in slot i unless the slot holds a larger loss. Accepted
// losses are finite and >= 0 (-0 is stored as +0), so their bit
// patterns order as their values do, and unreported (a NaN with a larger
// pattern than +Inf) is replaced by any of them.
func (a *Accumulator) raise(i int, l float32) {
	if l == 0 {
		l = 0 // -0 becomes +0
	}
	nb := math.Float32bits(l)
	for {
		old := a.slots[i].Load()
		if old != unreported && old >= nb {
			return
		}
		if a.slots[i].CompareAndSwap(old, nb) {
			return
		}
	}
}

// validScore reports whether s may be a loss or a score: finite and >= 0.
func validScore(s float32) bool {
	return s >= 0 && !math.IsInf(float64(s), 1)
}
