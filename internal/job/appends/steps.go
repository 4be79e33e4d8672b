package appends

import (
	"github.com/brandgw/brand/api"
)

// Steps counts a job's global steps through the epochs its append
// records grow: a step is a global batch, counted from epoch 0's first,
// and epoch e has the batches of the order in force for it — the
// samples of the newest version whose record's epoch is e or before, or
// of the version the job read first. So once a record applies, its
// epoch and every later one have its version's batches. The append and
// exclusion handlers, the served-step check and every other count of a
// job's steps go through it (docs/http-api.md "Appends").
type Steps struct {
	job   api.Job
	first int     // the samples of the version the job read first
	grown []Grown // the records, first first
}

// A Grown is a record as steps count it: its epoch, and its version's
// samples.
type Grown struct {
	Epoch   uint64
	Samples int
}

// NewSteps counts job's steps over a version of first samples, grown by
// grown (its records, first first; none: a job without one).
func NewSteps(job api.Job, first int, grown []Grown) Steps {
	return Steps{job: job, first: first, grown: grown}
}

// Samples is the samples of epoch's order.
func (s Steps) Samples(epoch uint64) int {
	n := s.first
	for _, g := range s.grown {
		if g.Epoch <= epoch {
			n = g.Samples
		}
	}
	return n
}

// Batches is epoch's global batches.
func (s Steps) Batches(epoch uint64) int { return s.job.NumBatches(s.Samples(epoch)) }

// bounds are the epochs at which the batches an epoch has may change,
// ascending, after 0.
func (s Steps) bounds() []uint64 {
	var b []uint64
	for _, g := range s.grown {
		if g.Epoch > 0 && (len(b) == 0 || b[len(b)-1] < g.Epoch) {
			b = append(b, g.Epoch)
		}
	}
	return b
}

// Step is the global step of batch m of epoch.
func (s Steps) Step(epoch uint64, m int) uint64 {
	var step, e uint64
	for _, b := range s.bounds() {
		if b > epoch {
			break
		}
		step += (b - e) * uint64(s.Batches(e))
		e = b
	}
	return step + (epoch-e)*uint64(s.Batches(e)) + uint64(m)
}

// At is the epoch and batch of global step step; ok is false if an epoch
// it passes has no batches.
func (s Steps) At(step uint64) (epoch uint64, m int, ok bool) {
	var e uint64
	for _, b := range s.bounds() {
		nb := uint64(s.Batches(e))
		if nb == 0 {
			return 0, 0, false
		}
		span := (b - e) * nb
		if step < span {
			return e + step/nb, int(step % nb), true
		}
		step, e = step-span, b
	}
	nb := uint64(s.Batches(e))
	if nb == 0 {
		return 0, 0, false
	}
	return e + step/nb, int(step % nb), true
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
