package reader

import (
	"context"
	"errors"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"github.com/brandgw/brand/internal/cache/chunkcache"
	"github.com/brandgw/brand/internal/cluster/route"
	"github.com/brandgw/brand/internal/job/catalog"
	"github.com/brandgw/brand/internal/server/memory"
	"github.com/brandgw/brand/internal/testsupport/catalogtest"
)

// heldAtLoad is a store that notes what the decodes share holds as each
// chunk is loaded.
type heldAtLoad struct {
	*store
	decodes *memory.Account
	held    []int64
}

func (h *heldAtLoad) Load(ctx context.Context, k chunkcache.Key, buf []byte) error {
	h.held = append(h.held, h.decodes.Held())
	return h.store.Load(ctx, k, buf)
}

// TestReadThroughHeldInTheBudget is issue 98's item 8 at the reader: a
// chunk larger than the whole cache is read through into a buffer of the
// decodes share (Config.Through), reserved before a byte is read and
// given back once its samples are copied out; with the share held by
// others the read waits its bound and is refused (chunkcache.ErrBusy),
// loading nothing. Before, it was a make([]byte) of the chunk's size no
// budget counted: 32 requests for 17 MiB samples of 136 MiB chunks under
// a 64 MiB cache took `brand serve --memory-limit 1GiB` to 909–968 MiB
// resident (the copies and two such buffers at once), 510–527 MiB after.
// In a synctest bubble, so that the refused read's wait passes at once.
func TestReadThroughHeldInTheBudget(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a := catalogtest.Dataset(t, "a", 4, 4) // chunks of 2 KiB
		chunk := a.Index.Chunk(0).Size
		mem := memory.New(memory.Config{Budget: memory.Budget{Copies: 1 << 20, Decodes: chunk}, MaxWait: time.Second, Busy: chunkcache.ErrBusy})
		st := &heldAtLoad{store: &store{}, decodes: mem.Decodes()}
		c := chunkcache.New(chunkcache.Config{Capacity: chunk / 2, Loader: st, MaxWait: time.Second})
		defer c.Close()
		r := New(Config{Cache: c, Loader: st, Remote: route.Solo{}, MaxBytes: 1 << 30, Copies: mem.Copies(), Through: mem.Decodes(),
			Assemblers: 2, MaxWait: time.Second, Registry: prometheus.NewRegistry(), Log: zerolog.Nop()})
		read := func() (*Result, error) {
			return r.ReadBatch(context.Background(), batchOf([]*catalog.Dataset{a}, [][2]int{{0, 13}, {0, 2}}))
		}

		res, err := read()
		if err != nil {
			t.Fatal(err)
		}
		if len(st.held) != 2 || st.held[0] != chunk || st.held[1] != chunk {
			t.Errorf("the decodes share held %v bytes as each chunk was read through, want %d each", st.held, chunk)
		}
		if got := string(res.Parts[0]) + string(res.Parts[1]); got != string(want(a, 13))+string(want(a, 2)) {
			t.Error("the samples read through have the wrong bytes")
		}
		res.Release()
		if n := mem.Decodes().Held(); n != 0 {
			t.Errorf("the decodes share holds %d bytes after the read, want 0", n)
		}

		other, err := mem.Decodes().Reserve(context.Background(), chunk)
		if err != nil {
			t.Fatal(err)
		}
		loads := len(st.held)
		if res, err := read(); !errors.Is(err, chunkcache.ErrBusy) {
			if err == nil {
				res.Release()
			}
			t.Errorf("a read through with the decodes share held by another: %v, want chunkcache.ErrBusy", err)
		}
		if len(st.held) != loads {
			t.Errorf("a read refused room loaded %d chunks", len(st.held)-loads)
		}
		other()
	})
}

// workingStore is a store whose loads decode as they read, taking
// working memory of the decodes share beside their buffer, as
// catalog.Loader's loads of a chunk served in place do: reserved by the
// load itself unless its caller holds it (catalog.WithWorkingHeld).
type workingStore struct {
	heldAtLoad
	working int64
}

func (w *workingStore) Working(chunkcache.Key) int64 { return w.working }

func (w *workingStore) Load(ctx context.Context, k chunkcache.Key, buf []byte) error {
	if !catalog.WorkingHeld(ctx) {
		release, err := w.decodes.Reserve(ctx, w.working)
		if err != nil {
			return err
		}
		defer release()
	}
	return w.heldAtLoad.Load(ctx, k, buf)
}

// TestReadThroughWithItsWorkingMemory: a chunk larger than the cache
// whose load takes working memory of the decodes share beside its buffer
// (a chunk served in place) reserves the two at once, and its load none.
// Before, the buffer's room was reserved first and the load asked for its
// working memory while holding it: a load that asks for the whole share
// (a chunk holding a long text does: catalog's longTexts) waited on its
// own read's buffer and was refused (integration
// TestLongTextWithinTheMemoryLimit: every vision batch of its long-text
// chunk 503 after a minute).
func TestReadThroughWithItsWorkingMemory(t *testing.T) {
	for _, c := range []struct {
		name           string
		reads, working int64 // working: in chunks
		share          float64
	}{
		{"the load asks the whole share", 1, 4, 4},
	} {
		t.Run(c.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				a := catalogtest.Dataset(t, "a", 4, 4) // chunks of 2 KiB
				chunk := a.Index.Chunk(0).Size
				working, share := c.working*chunk, int64(c.share*float64(chunk))
				mem := memory.New(memory.Config{Budget: memory.Budget{Copies: 1 << 20, Decodes: share}, MaxWait: time.Second, Busy: chunkcache.ErrBusy})
				st := &workingStore{heldAtLoad: heldAtLoad{store: &store{}, decodes: mem.Decodes()}, working: working}
				cc := chunkcache.New(chunkcache.Config{Capacity: chunk / 2, Loader: st, MaxWait: time.Second})
				defer cc.Close()
				r := New(Config{Cache: cc, Loader: st, Remote: route.Solo{}, MaxBytes: 1 << 30, Copies: mem.Copies(), Through: mem.Decodes(),
					Assemblers: 2, MaxWait: time.Second, Registry: prometheus.NewRegistry(), Log: zerolog.Nop()})
				var wg sync.WaitGroup
				for i := range c.reads {
					wg.Go(func() {
						s := []int{13, 2}[i]
						res, err := r.ReadBatch(context.Background(), batchOf([]*catalog.Dataset{a}, [][2]int{{0, s}}))
						if err != nil {
							t.Errorf("read %d: a chunk's buffer and %d bytes of working memory, a share of %d: %v", i, working, share, err)
							return
						}
						if string(res.Parts[0]) != string(want(a, s)) {
							t.Errorf("read %d: the sample read through has the wrong bytes", i)
						}
						res.Release()
					})
				}
				wg.Wait()
				for _, h := range st.held {
					if h != chunk+working {
						t.Errorf("the decodes share held %v bytes as each chunk was loaded, want %d each (its buffer and the load's working memory)", st.held, chunk+working)
						break
					}
				}
				if n := mem.Decodes().Held(); n != 0 {
					t.Errorf("the decodes share holds %d bytes after the reads, want 0", n)
				}
			})
		})
	}
}
