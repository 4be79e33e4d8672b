package tensorize

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/brandgw/brand/transform"
)

// TestPoolPlaces: with the one worker held, calls queue; a job's batch
// goes ahead of the queued later batches of the same job (a trainer's
// first step before its loaders' read-ahead), in order within a call,
// while another job's work and work with no place keep their order of
// arrival.
func TestPoolPlaces(t *testing.T) {
	s := newStage(t, &budget{size: 1 << 30}, 1, 1<<30)
	p := s.pool
	gate := make(chan struct{})
	var mu sync.Mutex
	var order []string
	var wg sync.WaitGroup
	call := func(name string, place Place, n int) {
		wg.Go(func() {
			err := p.run(context.Background(), place, n, func(i int, _ *transform.Scratch) {
				if name == "gate" {
					<-gate
					return
				}
				mu.Lock()
				order = append(order, fmt.Sprint(name, i))
				mu.Unlock()
			})
			if err != nil {
				t.Errorf("%s: %v", name, err)
			}
		})
	}
	waitFor := func(what string, ok func() bool) {
		t.Helper()
		for deadline := time.Now().Add(10 * time.Second); !ok(); time.Sleep(time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("waited 10 s for %s", what)
			}
		}
	}
	call("gate", Place{}, 1)
	waitFor("the worker to be held", func() bool { return p.running.Load() == 1 })
	type epoch struct{ job string }
	queued := int64(1)
	for _, c := range []struct {
		name  string
		place Place
		n     int
	}{
		{"late", Place{Job: epoch{"j"}, Pos: 20}, 2},
		{"early", Place{Job: epoch{"j"}, Pos: 10}, 2},
		{"other", Place{Job: epoch{"k"}, Pos: 0}, 1},
		{"arrival", Place{}, 1},
		{"earliest", Place{Job: epoch{"j"}, Pos: 0}, 1},
		{"same", Place{Job: epoch{"j"}, Pos: 10}, 1},
	} {
		call(c.name, c.place, c.n)
		queued += int64(c.n)
		waitFor(c.name+" to be queued", func() bool { return p.queued.Load() == queued })
	}
	close(gate)
	wg.Wait()
	want := []string{"earliest0", "early0", "early1", "same0", "late0", "late1", "other0", "arrival0"}
	if !slices.Equal(order, want) {
		t.Errorf("served %v, want %v", order, want)
	}
	if q := p.queued.Load(); q != 0 {
		t.Errorf("%d queued after every call returned", q)
	}
}

// TestPoolHooks: calls made at once from many goroutines are taken in
// the order their queued hooks ran (a batch's GOPs decided as its tasks
// are queued), and each task's taken hook runs as a worker takes it,
// before any task queued behind it runs: what lets a later batch wait
// for an earlier one's fill (gopcache.Lease.Start).
func TestPoolHooks(t *testing.T) {
	s := newStage(t, &budget{size: 1 << 30}, 2, 1<<30)
	p := s.pool
	var mu sync.Mutex
	var hooked, taken []string
	var wg sync.WaitGroup
	for c := range 40 {
		wg.Go(func() {
			err := p.runCalls(context.Background(), calls{n: 3,
				queued: func() { hooked = append(hooked, fmt.Sprint(c)) }, // under the queue's lock
				taken:  func(i int) { taken = append(taken, fmt.Sprint(c, ".", i)) },
				f: func(i int, _ *transform.Scratch) {
					mu.Lock()
					defer mu.Unlock()
					name := fmt.Sprint(c, ".", i)
					p.mu.Lock()
					if !slices.Contains(taken, name) {
						t.Errorf("%s runs before it was taken", name)
					}
					p.mu.Unlock()
				}})
			if err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	var want []string
	for _, c := range hooked {
		for i := range 3 {
			want = append(want, fmt.Sprint(c, ".", i))
		}
	}
	if !slices.Equal(taken, want) {
		t.Errorf("taken %v, want the calls in the order their hooks ran: %v", taken, want)
	}
}
