package feedback

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/brandgw/brand/chunkindex"
	"github.com/brandgw/brand/internal/job/catalog"
	"github.com/brandgw/brand/s3backend"
)

// testDataset is a dataset of n samples, keyed s00000, s00001, …, over
// a fresh local store.
func testDataset(t testing.TB, n int) *catalog.Dataset {
	t.Helper()
	samples := make([]chunkindex.Sample, n)
	for i := range samples {
		samples[i] = chunkindex.Sample{Key: fmt.Sprintf("s%05d", i), Offset: int64(512 * i), Length: 512}
	}
	ix, err := chunkindex.New([]chunkindex.Chunk{{Key: "chunks/0.tar", Size: int64(512 * n), Samples: n}}, samples)
	if err != nil {
		t.Fatal(err)
	}
	st, err := s3backend.NewLocal(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return catalog.NewDataset("d", "", st, ix)
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

// alone is the Parts of a gateway without a cluster.
type alone struct{}

func (alone) Peers() []int   { return nil }
func (alone) URL(int) string { return "" }
func (alone) Feedback(context.Context, int, *catalog.Dataset, string, uint64, string) ([]byte, error) {
	return nil, nil
}
func (alone) Settle(context.Context, int, *catalog.Dataset, string, uint64, string, string) error {
	return nil
}
