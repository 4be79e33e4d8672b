package storepath

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/rs/zerolog"

	"github.com/brandgw/brand/s3backend"
)

// TestWatch: while the store's probes are answered, guarded reads run
// as their callers' contexts let them; once a probe is not answered
// within its bound, the reads under way end with ErrUnreachable, new ones
// end at once, and the node is counted and shown unreachable; a probe
// answered again lets reads run again. A store that answers with an
// error (an object missing) is reachable.
func TestWatch(t *testing.T) {
	var cut atomic.Bool
	var missing atomic.Bool
	probe := func(ctx context.Context) error {
		if cut.Load() {
			<-ctx.Done() // a store cut off: no answer
			return ctx.Err()
		}
		if missing.Load() {
			return fmt.Errorf("stat: %w", s3backend.ErrNotFound)
		}
		return nil
	}
	reg := prometheus.NewRegistry()
	w := New(Config{Probe: probe, Interval: 40 * time.Millisecond, Timeout: 50 * time.Millisecond, Registry: reg, Log: zerolog.Nop()})
	w.Start()
	defer w.Close()

	missing.Store(true)
	time.Sleep(100 * time.Millisecond)
	if w.Down() {
		t.Fatal("a store that answers that an object is missing taken for unreachable")
	}
	// A read under way when the store is cut off ends with
	// ErrUnreachable, within about a probe interval and timeout.
	ctx, release := w.Guard(context.Background())
	defer release()
	start := time.Now()
	cut.Store(true)
	select {
	case <-ctx.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("a guarded read still runs 5 s after the store was cut off")
	}
	if err := Wrap(ctx, ctx.Err()); !errors.Is(err, ErrUnreachable) || !errors.Is(err, s3backend.ErrUnavailable) {
		t.Fatalf("a read ended by the cut: %v, want ErrUnreachable (an ErrUnavailable)", err)
	}
	t.Logf("a read under way ended %s after the cut", time.Since(start).Round(time.Millisecond))
	if !w.Down() || testutil.ToFloat64(w.reachable) != 0 || testutil.ToFloat64(w.lost) != 1 {
		t.Fatalf("cut off: down %t, brand_store_reachable %v, brand_store_unreachable_total %v", w.Down(), testutil.ToFloat64(w.reachable), testutil.ToFloat64(w.lost))
	}
	// A read started while it is: ended at once.
	ctx2, release2 := w.Guard(context.Background())
	if ctx2.Err() == nil || !errors.Is(context.Cause(ctx2), ErrUnreachable) {
		t.Fatalf("a read started while the store is unreachable: %v", context.Cause(ctx2))
	}
	release2()
	// The store answers again.
	cut.Store(false)
	deadline := time.Now().Add(5 * time.Second)
	for w.Down() {
		if time.Now().After(deadline) {
			t.Fatal("the store answers, and is still taken for unreachable 5 s on")
		}
		time.Sleep(10 * time.Millisecond)
	}
	ctx3, release3 := w.Guard(context.Background())
	defer release3()
	time.Sleep(100 * time.Millisecond)
	if ctx3.Err() != nil || testutil.ToFloat64(w.reachable) != 1 {
		t.Fatalf("once the store answers again: a read ended (%v), brand_store_reachable %v", context.Cause(ctx3), testutil.ToFloat64(w.reachable))
	}
	// Wrap leaves other errors alone.
	other := errors.New("x")
	if Wrap(ctx3, other) != other {
		t.Fatal("Wrap changed an error the store's reachability did not cause")
	}
}
