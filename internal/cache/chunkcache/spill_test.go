package chunkcache_test

import (
	"bytes"
	"context"
	"sync"
	"testing"
	"time"

	"github.com/brandgw/brand/internal/cache/chunkcache"
)

// wantingSpiller is a Spiller that fills a chunk with its key's first
// byte, keeps the bytes of each spill, and wants the chunks in want.
type wantingSpiller struct {
	mu      sync.Mutex
	want    map[chunkcache.Key]bool
	spilled map[chunkcache.Key][][]byte
	loads   int
}

func (s *wantingSpiller) Load(_ context.Context, k chunkcache.Key, buf []byte) error {
	s.mu.Lock()
	s.loads++
	s.mu.Unlock()
	for i := range buf {
		buf[i] = k.Object[0]
	}
	return nil
}

func (s *wantingSpiller) Spill(k chunkcache.Key, data []byte, release func()) {
	s.mu.Lock()
	s.spilled[k] = append(s.spilled[k], bytes.Clone(data))
	s.mu.Unlock()
	release()
}

func (s *wantingSpiller) Wants(k chunkcache.Key) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.want[k]
}

// spills is how many times k was spilled, each time with its bytes.
func (s *wantingSpiller) spills(t *testing.T, k chunkcache.Key) int {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, b := range s.spilled[k] {
		if len(b) != 8 || b[0] != k.Object[0] {
			t.Fatalf("%s spilled as %q", k.Object, b)
		}
	}
	return len(s.spilled[k])
}

// TestResidentChunksOfferedWhenWanted: a chunk loaded is spilled once; a
// chunk found resident by a later Acquire is spilled again only if the
// Spiller wants it (a disk tier that could not take it when it was
// loaded catches up while it is in memory), without loading it again,
// and every pin is given back.
func TestResidentChunksOfferedWhenWanted(t *testing.T) {
	sp := &wantingSpiller{want: map[chunkcache.Key]bool{}, spilled: map[chunkcache.Key][][]byte{}}
	c := chunkcache.New(chunkcache.Config{Capacity: 1 << 10, Loader: sp})
	defer c.Close()
	a := chunkcache.Key{Dataset: "d", Object: "a", ETag: "1"}
	b := chunkcache.Key{Dataset: "d", Object: "b", ETag: "1"}
	acquire := func() {
		t.Helper()
		l, err := c.Acquire(context.Background(), []chunkcache.Request{{Key: a, Size: 8}, {Key: b, Size: 8}})
		if err != nil {
			t.Fatal(err)
		}
		l.Release()
	}
	// settled waits for the spills offered in the background and for
	// their pins to be given back.
	settled := func(wantA, wantB int) {
		t.Helper()
		for deadline := time.Now().Add(10 * time.Second); sp.spills(t, a) != wantA || sp.spills(t, b) != wantB || c.Stats().Pinned != 0; time.Sleep(time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("spills a %d, b %d, %d pinned; want %d, %d and none", sp.spills(t, a), sp.spills(t, b), c.Stats().Pinned, wantA, wantB)
			}
		}
	}
	acquire()
	settled(1, 1)
	acquire() // resident, not wanted: not offered
	settled(1, 1)
	sp.mu.Lock()
	sp.want[b] = true
	sp.mu.Unlock()
	acquire() // b wanted: offered again
	settled(1, 2)
	if sp.loads != 2 {
		t.Fatalf("%d loads, want a's and b's once", sp.loads)
	}
}
