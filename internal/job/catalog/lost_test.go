package catalog

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"github.com/brandgw/brand/internal/cache/chunkcache"
	"github.com/brandgw/brand/s3backend"
)

// goneStore answers every read of key as an object the store no longer
// holds, while gone is set.
type goneStore struct {
	s3backend.Store
	key  string
	gone atomic.Bool
}

func (g *goneStore) ReadRange(ctx context.Context, key, etag string, off int64, p []byte) error {
	if key == g.key && g.gone.Load() {
		return fmt.Errorf("%w: %s", s3backend.ErrNotFound, key)
	}
	return g.Store.ReadRange(ctx, key, etag, off, p)
}

// A chunk whose object is no longer in the store is lost at rest: a
// *LostChunkError naming the chunk, which AtRest tells skip mode to leave
// out as it does a damaged chunk, which still wraps the store's
// ErrNotFound (the same 502 as before), and which nothing remembers: put
// back, the chunk loads. Other errors of the store are neither.
func TestLostChunk(t *testing.T) {
	ctx := context.Background()
	d, _ := inPlaceDataset(t)
	gs := &goneStore{Store: d.InPlace.Data, key: "f.lines"}
	gs.gone.Store(true)
	d.InPlace.Data = gs
	c := New([]string{"lines"}, "lines", NewMetrics(prometheus.NewRegistry()), zerolog.Nop())
	c.Add(d)
	c.MarkReady()
	req := d.ChunkRequest(0)
	cache := chunkcache.New(chunkcache.Config{Capacity: 4 * req.Size, Loader: NewLoader(c, time.Minute, 1)})
	defer cache.Close()

	_, err := cache.Acquire(ctx, []chunkcache.Request{req})
	var lce *LostChunkError
	if !errors.As(err, &lce) || !errors.Is(err, s3backend.ErrNotFound) || !lce.InPlace {
		t.Fatalf("a chunk of a file gone: %v; want a LostChunkError of a file served in place wrapping ErrNotFound", err)
	}
	if key, ok := AtRest(err); !ok || key != req.Key {
		t.Errorf("AtRest: %v %v, want %v", key, ok, req.Key)
	}
	for _, says := range []string{req.Key.Object, "dataset lines", "no longer in the store", "brand index", "--on-damaged-chunk=skip"} {
		if !strings.Contains(lce.Public(), says) {
			t.Errorf("%q does not say %q", lce.Public(), says)
		}
	}
	if strings.Contains(lce.Public(), "/") {
		t.Errorf("%q names a path: a client is told the dataset's keys alone", lce.Public())
	}
	if d.IsDamaged(0) {
		t.Error("a lost chunk is marked damaged: it may be put back")
	}

	gs.gone.Store(false)
	lease, err := cache.Acquire(ctx, []chunkcache.Request{req})
	if err != nil {
		t.Fatalf("put back: %v", err)
	}
	lease.Release()

	for _, tc := range []struct {
		name string
		err  error
	}{
		{"changed", fmt.Errorf("%w: f.lines", s3backend.ErrChanged)},
		{"unavailable", fmt.Errorf("%w: f.lines", s3backend.ErrUnavailable)},
		{"damaged", &DamagedChunkError{Key: req.Key, Err: ErrCorrupt}},
	} {
		_, ok := AtRest(tc.err)
		if want := tc.name == "damaged"; ok != want {
			t.Errorf("AtRest(%s) = %v, want %v", tc.name, ok, want)
		}
	}
}
