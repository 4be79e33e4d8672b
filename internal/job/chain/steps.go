package chain

import (
	"slices"

	"github.com/brandgw/brand/api"
	"github.com/brandgw/brand/internal/batch/layout"
)

// Steps counts a job's global steps through the epochs its chain of
// edits changes: a step is a global batch, counted from epoch 0's first,
// and epoch e has the batches of the order in force for it — the order
// of the chain's edits of epoch e and before (an exclusion's epoch and
// every later one have fewer samples, an append's more). Between the
// chain's epochs an epoch's length does not change, so it is asked for
// once per epoch an edit starts in and the one after. The edit endpoints,
// the served-step check and every other count of a job's steps go
// through it (docs/http-api.md "Steps").
type Steps struct {
	job     api.Job
	bounds  []uint64 // ascending, from 0: the epochs whose length may differ from the epoch before
	samples []int    // per bound: its epoch's samples, and every epoch's up to the next bound
}

// NewSteps counts job's steps under the chain ending at head (nil: none),
// samples telling the samples of an epoch's order under it
// (layout.Orders.Extent).
func NewSteps(job api.Job, head *layout.Edit, samples func(epoch uint64) (int, error)) (Steps, error) {
	return NewVaryingSteps(job, head, samples, 0, 0)
}

// NewVaryingSteps is NewSteps for a job whose epochs' lengths may differ
// one from the next up to global step until (a staged bucket job's: its
// stages change its batch sizes), up to epoch maxEpoch at most: every
// epoch up to the one holding step until is asked.
func NewVaryingSteps(job api.Job, head *layout.Edit, samples func(epoch uint64) (int, error), until, maxEpoch uint64) (Steps, error) {
	bounds := []uint64{0}
	for e := head; e != nil; e = e.Prev {
		bounds = append(bounds, e.Epoch, e.Epoch+1)
	}
	known := map[uint64]int{}
	ask := func(epoch uint64) (int, error) {
		if n, ok := known[epoch]; ok {
			return n, nil
		}
		n, err := samples(epoch)
		if err == nil {
			known[epoch] = n
		}
		return n, err
	}
	var step uint64
	for e := uint64(0); step < until && e < maxEpoch; e++ {
		n, err := ask(e)
		if err != nil {
			return Steps{}, err
		}
		nb := uint64(job.NumBatches(n))
		if nb == 0 {
			break
		}
		step += nb
		bounds = append(bounds, e, e+1)
	}
	slices.Sort(bounds)
	bounds = slices.Compact(bounds)
	s := Steps{job: job, bounds: bounds, samples: make([]int, len(bounds))}
	for i, b := range bounds {
		n, err := ask(b)
		if err != nil {
			return Steps{}, err
		}
		s.samples[i] = n
	}
	return s, nil
}

// Samples is the samples of epoch's order.
func (s Steps) Samples(epoch uint64) int {
	i, found := slices.BinarySearch(s.bounds, epoch)
	if !found {
		i--
	}
	return s.samples[i]
}

// Batches is epoch's global batches.
func (s Steps) Batches(epoch uint64) int { return s.job.NumBatches(s.Samples(epoch)) }

// Step is the global step of batch m of epoch.
func (s Steps) Step(epoch uint64, m int) uint64 {
	var step uint64
	for i, b := range s.bounds {
		if b >= epoch {
			break
		}
		end := epoch
		if i+1 < len(s.bounds) {
			end = min(end, s.bounds[i+1])
		}
		step += (end - b) * uint64(s.job.NumBatches(s.samples[i]))
	}
	return step + uint64(m)
}

// At is the epoch and batch of global step step; ok is false if an epoch
// it passes has no batches.
func (s Steps) At(step uint64) (epoch uint64, m int, ok bool) {
	for i, b := range s.bounds {
		nb := uint64(s.job.NumBatches(s.samples[i]))
		if nb == 0 {
			return 0, 0, false
		}
		if i+1 == len(s.bounds) {
			return b + step/nb, int(step % nb), true
		}
		span := (s.bounds[i+1] - b) * nb
		if step < span {
			return b + step/nb, int(step % nb), true
		}
		step -= span
	}
	return 0, 0, false
}

// After is the first step whose batch starts at or after position end of
// epoch's order: where an edit could start after what was served.
func (s Steps) After(epoch uint64, end int) uint64 {
	g := s.job.BatchSize * max(s.job.World, 1)
	k := (max(end-s.job.Offset, 0) + g - 1) / g
	if end >= s.Samples(epoch) || k >= s.Batches(epoch) {
		return s.Step(epoch+1, 0)
	}
	return s.Step(epoch, k)
}
