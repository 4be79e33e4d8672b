package chunkcache_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/brandgw/brand/internal/cache/chunkcache"
)

// spaceLoader records the keys it is asked for and fills buffers with fill.
type spaceLoader struct {
	mu              sync.Mutex
	loaded, spilled []chunkcache.Key
	fill            byte
	spills          bool
}

func (l *spaceLoader) Load(_ context.Context, k chunkcache.Key, buf []byte) error {
	l.mu.Lock()
	l.loaded = append(l.loaded, k)
	l.mu.Unlock()
	for i := range buf {
		buf[i] = l.fill
	}
	return nil
}

// spillingLoader is a spaceLoader that is a Spiller.
type spillingLoader struct{ *spaceLoader }

func (l spillingLoader) Spill(k chunkcache.Key, _ []byte, release func()) {
	l.mu.Lock()
	l.spilled = append(l.spilled, k)
	l.mu.Unlock()
	release()
}

func (l spillingLoader) Wants(chunkcache.Key) bool { return false }

// TestBySpace: each space's keys reach its own loader only, and only the
// chunks' loader is offered spills; a chunk and an object block that
// share dataset, object and ETag are two entries.
func TestBySpace(t *testing.T) {
	chunks := &spaceLoader{fill: 'c'}
	objects := &spaceLoader{fill: 'o'}
	c := chunkcache.New(chunkcache.Config{Capacity: 1 << 20, Loader: chunkcache.BySpace{Chunks: spillingLoader{chunks}, Objects: objects}})
	defer c.Close()
	chunk := chunkcache.Key{Dataset: "d", Object: "x", ETag: "e"}
	block := chunkcache.Key{Space: chunkcache.Object, Dataset: "d", Object: "x", ETag: "e", Offset: 4096}
	l, err := c.Acquire(context.Background(), []chunkcache.Request{{Key: chunk, Size: 10}, {Key: block, Size: 10}})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Release()
	if l.Bytes(0)[0] != 'c' || l.Bytes(1)[0] != 'o' {
		t.Fatalf("bytes: %q %q", l.Bytes(0), l.Bytes(1))
	}
	if len(chunks.loaded) != 1 || chunks.loaded[0] != chunk || len(objects.loaded) != 1 || objects.loaded[0] != block {
		t.Fatalf("chunks' loader saw %v, objects' %v", chunks.loaded, objects.loaded)
	}
	chunks.mu.Lock()
	defer chunks.mu.Unlock()
	if len(chunks.spilled) != 1 || chunks.spilled[0] != chunk {
		t.Fatalf("spilled %v; want the chunk alone", chunks.spilled)
	}
}

// TestBySpaceMissing: a space without a loader fails to load, and does not
// reach the other space's loader.
func TestBySpaceMissing(t *testing.T) {
	chunks := &spaceLoader{}
	c := chunkcache.New(chunkcache.Config{Capacity: 1 << 20, Loader: chunkcache.BySpace{Chunks: chunks}})
	defer c.Close()
	_, err := c.Acquire(context.Background(), []chunkcache.Request{{Key: chunkcache.Key{Space: chunkcache.Object, Dataset: "b", Object: "k"}, Size: 1}})
	if err == nil || len(chunks.loaded) != 0 {
		t.Fatalf("an object key with no objects' loader: %v; chunks' loader saw %v", err, chunks.loaded)
	}
}

// blockingLoader holds every load until its context ends.
type blockingLoader struct {
	started, running atomic.Int64
}

func (l *blockingLoader) Load(ctx context.Context, _ chunkcache.Key, _ []byte) error {
	l.started.Add(1)
	l.running.Add(1)
	defer l.running.Add(-1)
	<-ctx.Done()
	return ctx.Err()
}

// TestCloseWaitsForLoads: Close returns only once every load it
// cancelled has returned, those started by Prefetch (whose callers do not
// wait for them) included.
func TestCloseWaitsForLoads(t *testing.T) {
	l := &blockingLoader{}
	c := chunkcache.New(chunkcache.Config{Capacity: 1 << 20, Loader: l})
	ctx, cancel := context.WithCancel(context.Background())
	for i := range 4 {
		k := chunkcache.Key{Dataset: "d", Object: string(rune('a' + i))}
		go func() { _, _ = c.Prefetch(ctx, chunkcache.Request{Key: k, Size: 1}, nil) }()
	}
	for l.started.Load() < 4 {
		time.Sleep(time.Millisecond)
	}
	cancel() // the callers stop waiting; the loads go on
	c.Close()
	if n := l.running.Load(); n != 0 {
		t.Fatalf("%d loads still running after Close", n)
	}
	_, err := c.Acquire(context.Background(), []chunkcache.Request{{Key: chunkcache.Key{Dataset: "d", Object: "late"}, Size: 1}})
	if !errors.Is(err, chunkcache.ErrClosed) {
		t.Fatalf("a load after Close: %v, want ErrClosed", err)
	}
}
