package feedback

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/brandgw/brand/internal/job/catalog"
	"github.com/brandgw/brand/internal/testsupport/catalogtest"
	"github.com/brandgw/brand/internal/testsupport/s3test"
)

// storedDataset is catalogtest's dataset "d" of one chunk of n samples,
// keyed d/0/0, d/0/1, …, over a store in memory: feedback's snapshots
// and pointers are written to it.
func storedDataset(t testing.TB, n int) *catalog.Dataset {
	ds := catalogtest.Dataset(t, "d", 1, n)
	return catalog.NewDataset(ds.Name, "", s3test.NewMemory(), ds.Index)
}

// clock is a test's time, moved by hand.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func newClock() *clock { return &clock{now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)} }

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// newTestState is a state with limits l on c's time.
func newTestState(l Limits, c *clock) *State {
	return NewWith(Config{Limits: l, Log: zerolog.Nop(), Now: c.Now})
}

// alone is the Nodes of a gateway without a cluster.
type alone struct{}

func (alone) Peers() []int   { return nil }
func (alone) URL(int) string { return "" }
func (alone) Feedback(context.Context, int, *catalog.Dataset, string, uint64, string) ([]byte, error) {
	return nil, nil
}
func (alone) Settle(context.Context, int, *catalog.Dataset, string, uint64, string, string) error {
	return nil
}
