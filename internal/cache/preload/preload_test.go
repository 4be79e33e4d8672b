package preload

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/brandgw/brand/internal/cache/chunkcache"
)

// fakeCache blocks every Prefetch until its context ends or release is
// closed.
type fakeCache struct {
	resident map[chunkcache.Key]bool
	release  chan struct{}
	started  chan chunkcache.Key
	running  atomic.Int64
}

func (c *fakeCache) Contains(k chunkcache.Key) bool { return c.resident[k] }

func (c *fakeCache) Prefetch(ctx context.Context, r chunkcache.Request, _ func(chunkcache.Key) bool) (chunkcache.PrefetchResult, error) {
	c.running.Add(1)
	defer c.running.Add(-1)
	c.started <- r.Key
	select {
	case <-ctx.Done():
		return 0, ctx.Err()
	case <-c.release:
		return chunkcache.PrefetchLoaded, nil
	}
}

func key(o string) chunkcache.Request {
	return chunkcache.Request{Key: chunkcache.Key{Dataset: "d", Object: o}, Size: 1}
}

// TestSetBoundsAndClose: loads beyond the slots are dropped, resident
// entries are not read, and Close cancels and waits for what runs.
func TestSetBoundsAndClose(t *testing.T) {
	c := &fakeCache{resident: map[chunkcache.Key]bool{key("r").Key: true}, release: make(chan struct{}), started: make(chan chunkcache.Key, 8)}
	s := New(Config{Slots: 2, Cache: c})
	tests := []struct {
		obj  string
		want bool
	}{
		{"r", false}, // resident
		{"a", true},
		{"b", true},
		{"c", false}, // no slot
	}
	for _, tc := range tests {
		if got := s.Load(key(tc.obj), nil); got != tc.want {
			t.Errorf("Load(%s) = %t, want %t", tc.obj, got, tc.want)
		}
	}
	<-c.started
	<-c.started
	s.Close()
	if n := c.running.Load(); n != 0 {
		t.Fatalf("%d loads still running after Close", n)
	}
	if s.Load(key("d"), nil) {
		t.Error("a closed set ran a task")
	}
	s.Close() // idempotent
}

// TestLoadReportsDone: done hears what the cache did.
func TestLoadReportsDone(t *testing.T) {
	c := &fakeCache{resident: map[chunkcache.Key]bool{}, release: make(chan struct{}), started: make(chan chunkcache.Key, 1)}
	close(c.release)
	s := New(Config{Cache: c})
	var wg sync.WaitGroup
	wg.Add(1)
	var got chunkcache.PrefetchResult = -1
	if !s.Load(key("a"), func(r chunkcache.PrefetchResult) { got = r; wg.Done() }) {
		t.Fatal("Load refused with a free slot")
	}
	wg.Wait()
	s.Close()
	if got != chunkcache.PrefetchLoaded {
		t.Errorf("done got %v, want PrefetchLoaded", got)
	}
}
