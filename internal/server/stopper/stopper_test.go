package stopper

import (
	"context"
	"slices"
	"sync"
	"testing"
)

// TestStopDrainsInReverseOrder: each group's tasks end and its OnStop
// runs before the group registered before it is touched, and no task of
// any group runs once Stop returns.
func TestStopDrainsInReverseOrder(t *testing.T) {
	s := New()
	var mu sync.Mutex
	var log []string
	note := func(e string) {
		mu.Lock()
		log = append(log, e)
		mu.Unlock()
	}
	names := []string{"catalog", "cache", "prefetcher", "made ahead"}
	started := make(chan struct{}, len(names))
	for _, n := range names {
		p := s.Group(n)
		if !p.Go(func(ctx context.Context) {
			started <- struct{}{}
			<-ctx.Done()
			note(n + " task")
		}) {
			t.Fatalf("%s: Go refused before Stop", n)
		}
		p.OnStop(func() { note(n + " stop") })
	}
	for range names {
		<-started
	}
	if got, want := s.Order(), []string{"made ahead", "prefetcher", "cache", "catalog"}; !slices.Equal(got, want) {
		t.Fatalf("Order = %v, want %v", got, want)
	}
	s.Stop()
	want := []string{"made ahead task", "made ahead stop", "prefetcher task", "prefetcher stop", "cache task", "cache stop", "catalog task", "catalog stop"}
	if !slices.Equal(log, want) {
		t.Fatalf("drained as %v, want %v", log, want)
	}
	s.Stop() // idempotent
	if len(log) != len(want) {
		t.Fatalf("a second Stop ran more: %v", log)
	}
}

// TestAfterStop: a stopped group runs nothing, and a group registered after
// Stop is stopped at once.
func TestAfterStop(t *testing.T) {
	s := New()
	p := s.Group("a")
	s.Stop()
	tests := []struct {
		name string
		run  func(f func(context.Context)) bool
	}{
		{"Go", p.Go},
		{"TryGo", func(f func(context.Context)) bool { return p.TryGo(NewLimit(1), f) }},
		{"Go of a group registered after Stop", s.Group("late").Go},
	}
	for _, tc := range tests {
		if tc.run(func(context.Context) { t.Errorf("%s ran a task after Stop", tc.name) }) {
			t.Errorf("%s reported a task run after Stop", tc.name)
		}
	}
	if p.Context().Err() == nil {
		t.Error("a stopped group's context has not ended")
	}
}

// TestTryGoBounded: a Limit shared by two groups runs at most its slots at
// once, drops the rest, and frees a slot when a task returns.
func TestTryGoBounded(t *testing.T) {
	s := New()
	a, b := s.Group("a"), s.Group("b")
	l := NewLimit(2)
	release := make(chan struct{})
	var running sync.WaitGroup
	running.Add(2)
	hold := func(context.Context) { running.Done(); <-release }
	if !a.TryGo(l, hold) || !b.TryGo(l, hold) {
		t.Fatal("TryGo refused with free slots")
	}
	running.Wait()
	if a.TryGo(l, hold) || b.TryGo(l, hold) {
		t.Fatal("TryGo ran a task beyond the limit")
	}
	close(release)
	s.Stop()
	done := make(chan struct{})
	if !New().Group("c").TryGo(l, func(context.Context) { close(done) }) {
		t.Fatal("the limit's slots were not given back")
	}
	<-done
}

// TestOwn: a nil group is replaced by one of its own, which stops alone.
func TestOwn(t *testing.T) {
	s := New()
	p := s.Group("given")
	if Own(p, "x") != p {
		t.Fatal("Own replaced a given group")
	}
	own := Own(nil, "own")
	stopped := false
	own.OnStop(func() { stopped = true })
	own.Stop()
	if !stopped || p.Context().Err() != nil {
		t.Fatalf("own group stopped: %t; given group stopped with it: %t", stopped, p.Context().Err() != nil)
	}
}
