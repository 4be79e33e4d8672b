package admit

import (
	"context"
	"errors"
	"testing"
	"time"
)

var errBusy = errors.New("busy")

func TestGate(t *testing.T) {
	g := New(10, 20*time.Millisecond, "units", errBusy)
	r1, err := g.Acquire(context.Background(), 6)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := g.TryAcquire(5); ok {
		t.Fatal("5 units beside 6 of 10")
	}
	r2, ok := g.TryAcquire(4)
	if !ok {
		t.Fatal("4 units beside 6 of 10 refused")
	}
	// Full: a waiter is refused after the wait, with the busy sentinel,
	// and the gate shows it stalled while it waits.
	done := make(chan error, 1)
	go func() {
		_, err := g.Acquire(context.Background(), 1)
		done <- err
	}()
	deadline := time.Now().Add(5 * time.Second)
	for !g.Stalled(0) && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	if !g.Stalled(0) {
		t.Error("a caller waits on a full gate, and it does not say it is stalled")
	}
	if err := <-done; !errors.Is(err, errBusy) {
		t.Fatalf("waiting past the bound: %v, want the busy sentinel", err)
	}
	r1()
	r2()
	// More than the gate holds takes all of it.
	r3, err := g.Acquire(context.Background(), 100)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := g.TryAcquire(1); ok {
		t.Fatal("a unit beside a holder of more than the whole gate")
	}
	r3()
	if g.Stalled(0) {
		t.Error("stalled with nobody waiting")
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	r4, _ := g.Acquire(context.Background(), 10)
	if _, err := g.Acquire(ctx, 1); !errors.Is(err, context.Canceled) {
		t.Errorf("a cancelled wait: %v", err)
	}
	r4()
}
