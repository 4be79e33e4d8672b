package bench

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"
)

// TestRankStepsBoundTheLead: ranks that read at very different speeds
// stay within the lead of each other; run free, the fast one gets far
// ahead, and the lead it reached is what MaxLead reports.
func TestRankStepsBoundTheLead(t *testing.T) {
	for _, tc := range []struct {
		lead    int
		maxLead func(int) bool
	}{
		{1, func(l int) bool { return l <= 1 }},
		{2, func(l int) bool { return l <= 2 }},
		{-1, func(l int) bool { return l >= 10 }}, // free: the fast rank finishes first
	} {
		const batches = 20
		s := newRankSteps(2, tc.lead)
		var wg sync.WaitGroup
		slow := make(chan struct{})
		for r := range 2 {
			wg.Go(func() {
				for m := range batches {
					if err := s.Wait(context.Background(), r, m); err != nil {
						t.Error(err)
						return
					}
					if r == 1 && m == 0 {
						<-slow // rank 1 stalls on its first batch
					}
					s.Done(r)
				}
			})
		}
		// Rank 0 runs until it may go no further (or ends, run free).
		deadline := time.Now().Add(5 * time.Second)
		for {
			s.mu.Lock()
			d := s.done[0]
			s.mu.Unlock()
			if (tc.lead > 0 && d >= tc.lead) || d == batches || time.Now().After(deadline) {
				break
			}
			time.Sleep(time.Millisecond)
		}
		close(slow)
		wg.Wait()
		if got := s.MaxLead(); !tc.maxLead(got) {
			t.Errorf("lead %d: ranks were %d batches apart", tc.lead, got)
		}
	}
}

// TestRankStepsLeaveReleasesTheOthers: a rank that stops (an error) does
// not hold the others back, and a waiting rank's context ends its wait.
func TestRankStepsLeaveReleasesTheOthers(t *testing.T) {
	s := newRankSteps(2, 1)
	if err := s.Wait(context.Background(), 0, 0); err != nil {
		t.Fatal(err)
	}
	s.Done(0)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if err := s.Wait(ctx, 0, 1); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("rank 0 started batch 1 before rank 1 read batch 0: %v", err)
	}
	done := make(chan error, 1)
	go func() { done <- s.Wait(context.Background(), 0, 1) }()
	s.Leave(1)
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("rank 0 still waits after rank 1 left")
	}
}
