package bench

import (
	"context"
	"math"
	"sync"
)

// rankSteps keeps the ranks of a benchmark's job within a bounded lead of
// each other, as the ranks of a data-parallel training job are: each
// training step ends in a collective (the gradients' all-reduce) that
// waits for every rank, so a rank's loader runs ahead of the slowest rank
// by at most what it reads ahead (a DataLoader's prefetch), never by an
// epoch. Readers that run free instead — goroutines scheduled unevenly on
// two cores — drift apart by several windows within an epoch, and then
// the windows between them do not fit in a small cache together; the
// planner's optimum, which assumes ranks in step, is not what such a job
// can reach.
//
// rankSteps is safe for concurrent use; each rank calls Wait before
// reading a batch and Done after.
type rankSteps struct {
	lead int // ≤ 0: no bound

	mu       sync.Mutex
	changed  chan struct{} // closed and replaced whenever a rank finishes a batch
	done     []int         // batches each rank has read
	maxAhead int           // the largest lead seen, in batches
}

// newRankSteps bounds ranks' leads: a rank's lead, when it starts batch
// m (counted from 0), is m + 1 less the batches the slowest rank has
// read — how many batches beyond the slowest rank's its reads reach, the
// one it starts included. Ranks in lockstep lead by 1; a rank starts a
// batch only if its lead stays within lead. lead ≤ 0 lets them run free,
// and the lead they reach is only recorded.
func newRankSteps(ranks, lead int) *rankSteps {
	return &rankSteps{lead: lead, changed: make(chan struct{}), done: make([]int, ranks)}
}

// Wait blocks rank r until it may start batch m, or ctx ends.
func (s *rankSteps) Wait(ctx context.Context, r, m int) error {
	for {
		s.mu.Lock()
		slowest := math.MaxInt
		for _, d := range s.done {
			slowest = min(slowest, d)
		}
		if lead := m + 1 - slowest; s.lead <= 0 || lead <= s.lead {
			s.maxAhead = max(s.maxAhead, lead)
			s.mu.Unlock()
			return nil
		}
		ch := s.changed
		s.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// Done records that rank r has read one more batch. A rank that stops
// early (an error) calls Leave instead, so the others are not held back.
func (s *rankSteps) Done(r int) { s.add(r, 1) }

// Leave records that rank r reads no more batches.
func (s *rankSteps) Leave(r int) { s.add(r, math.MaxInt/2) }

func (s *rankSteps) add(r, n int) {
	s.mu.Lock()
	s.done[r] += n
	close(s.changed)
	s.changed = make(chan struct{})
	s.mu.Unlock()
}

// MaxLead is the largest lead a rank started a batch with.
func (s *rankSteps) MaxLead() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.maxAhead
}
