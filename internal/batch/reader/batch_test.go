package reader

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/rs/zerolog"

	"github.com/brandgw/brand/chunkindex"
	"github.com/brandgw/brand/internal/batch/layout"
	"github.com/brandgw/brand/internal/cache/chunkcache"
	"github.com/brandgw/brand/internal/cache/preload"
	"github.com/brandgw/brand/internal/cluster/route"
	"github.com/brandgw/brand/internal/job/catalog"
	"github.com/brandgw/brand/internal/server/memory"
	"github.com/brandgw/brand/internal/testsupport/catalogtest"
)

// sampleSize is each test sample's bytes (catalogtest.Dataset's): one
// tar block.
const sampleSize = catalogtest.SampleSize

// store fills a chunk's buffer with its samples' bytes: sample i of chunk
// c of dataset d is sampleSize copies of a byte of (d, c, i). Chunks it
// is told are damaged fail as damaged at rest.
type store struct {
	mu      sync.Mutex
	damaged map[chunkcache.Key]bool
	loads   int
}

func fill(k chunkcache.Key, buf []byte) {
	for i := 0; i*sampleSize < len(buf); i++ {
		b := byte(len(k.Dataset)*31 + len(k.Object)*7 + int(k.Object[len(k.Object)-5])*13 + i)
		for j := range sampleSize {
			buf[i*sampleSize+j] = b
		}
	}
}

func (s *store) Load(_ context.Context, k chunkcache.Key, buf []byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.loads++
	if s.damaged[k] {
		return &catalog.DamagedChunkError{Key: k, Reads: 3, Err: errors.New("CRC32C mismatch")}
	}
	fill(k, buf)
	return nil
}

// want is the bytes of sample id of ds.
func want(ds *catalog.Dataset, id int) []byte {
	s := ds.Index.Sample(id)
	buf := make([]byte, ds.Index.Chunk(s.Chunk).Size)
	fill(ds.ChunkKey(s.Chunk), buf)
	return buf[s.Offset : s.Offset+s.Length]
}

type tally struct {
	mu     sync.Mutex
	chunks int
}

func (t *tally) Prefetched(layout.Stream, uint64, int, int64, bool) {
	t.mu.Lock()
	t.chunks++
	t.mu.Unlock()
}

// newReader is a reader over a cache of capacity bytes loading with st on a single
// gateway.
func newReader(t *testing.T, capacity int64, st chunkcache.Loader, skip bool) (*Reader, *chunkcache.Cache, *prometheus.Registry) {
	t.Helper()
	return newNodeReader(t, capacity, st, skip, route.Solo{})
}

// newNodeReader is newReader on a node whose other nodes remote stands for.
func newNodeReader(t *testing.T, capacity int64, st chunkcache.Loader, skip bool, remote Remote) (*Reader, *chunkcache.Cache, *prometheus.Registry) {
	t.Helper()
	c := chunkcache.New(chunkcache.Config{Capacity: capacity, Loader: st, MaxWait: time.Second})
	a := preload.New(preload.Config{Slots: 8, Cache: c})
	t.Cleanup(func() { a.Close(); c.Close() })
	reg := prometheus.NewRegistry()
	r := New(Config{Cache: c, Loader: st, Remote: remote, SkipDamaged: skip, MaxBytes: 1 << 30, Copies: copies(1 << 30),
		Assemblers: 2, MaxWait: time.Second, Preload: a, Tally: &tally{}, Registry: reg, Log: zerolog.Nop()})
	return r, c, reg
}

// batchOf lays out a batch serving, in order, the samples (part, ID)
// names: each part is one dataset.
func batchOf(ds []*catalog.Dataset, serve [][2]int) *layout.Batch {
	ids := make([][]int, len(ds))
	b := &layout.Batch{ETag: `"b"`}
	for _, s := range serve {
		b.Take = append(b.Take, layout.Take{Part: s[0], At: len(ids[s[0]])})
		ids[s[0]] = append(ids[s[0]], s[1])
	}
	for p, d := range ds {
		info := make([]chunkindex.Sample, len(ids[p]))
		for i, id := range ids[p] {
			info[i] = d.Index.Sample(id)
		}
		b.Parts = append(b.Parts, layout.Part{Comp: p, Stream: layout.Stream{DS: d}, Samples: layout.SamplesOf(d, ids[p], info)})
	}
	return b
}

// TestReadBatch: a batch of one part or several is read whole, in the
// batch's order, however its parts fit in the cache (together, in turn,
// or one part assembled a group of chunks at a time), and each part's
// figures say what it loaded; in skip mode the samples of a chunk damaged
// at rest are left out and named by batch position, whichever way the
// batch is read.
func TestReadBatch(t *testing.T) {
	a, b := catalogtest.Dataset(t, "a", 4, 4), catalogtest.Dataset(t, "b", 4, 4) // chunks of 2 KiB
	tests := []struct {
		name     string
		parts    []*catalog.Dataset
		serve    [][2]int
		capacity int64
		damaged  []chunkcache.Key
		missing  []int
		copied   float64 // parts copied out to read the next
		inParts  bool    // assembled a group of chunks at a time
	}{
		{"one part", []*catalog.Dataset{a}, [][2]int{{0, 5}, {0, 0}, {0, 9}}, 64 << 10, nil, nil, 0, false},
		{"two parts together", []*catalog.Dataset{a, b}, [][2]int{{1, 3}, {0, 5}, {1, 12}, {0, 1}}, 64 << 10, nil, nil, 0, false},
		// Four chunks of 2 KiB do not fit in 5 KiB: one part at a time.
		{"two parts in turn", []*catalog.Dataset{a, b}, [][2]int{{1, 3}, {0, 5}, {1, 12}, {0, 1}}, 5 << 10, nil, nil, 1, false},
		// One part's four chunks do not fit in 5 KiB: two at a time.
		{"one part in groups", []*catalog.Dataset{a}, [][2]int{{0, 13}, {0, 0}, {0, 9}, {0, 5}}, 5 << 10, nil, nil, 0, true},
		{"a damaged chunk, one part", []*catalog.Dataset{a}, [][2]int{{0, 5}, {0, 0}, {0, 9}, {0, 1}},
			64 << 10, []chunkcache.Key{a.ChunkKey(0)}, []int{1, 3}, 0, false},
		{"a damaged chunk, two parts", []*catalog.Dataset{a, b}, [][2]int{{1, 3}, {0, 5}, {1, 12}, {0, 1}},
			64 << 10, []chunkcache.Key{b.ChunkKey(3)}, []int{2}, 1, false}, // not together: in turn
		{"a damaged chunk, one part in groups", []*catalog.Dataset{a}, [][2]int{{0, 13}, {0, 4}, {0, 0}, {0, 9}, {0, 5}},
			5 << 10, []chunkcache.Key{a.ChunkKey(1)}, []int{1, 4}, 0, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			st := &store{damaged: map[chunkcache.Key]bool{}}
			for _, k := range tc.damaged {
				st.damaged[k] = true
			}
			r, c, reg := newReader(t, tc.capacity, st, len(tc.damaged) > 0)
			bt := batchOf(tc.parts, tc.serve)
			res, err := r.ReadBatch(context.Background(), bt)
			if err != nil {
				t.Fatal(err)
			}
			var wantBody [][]byte
			m := 0
			for i, s := range tc.serve {
				if m < len(tc.missing) && tc.missing[m] == i {
					m++
					continue
				}
				wantBody = append(wantBody, want(tc.parts[s[0]], s[1]))
			}
			if len(res.Parts) != len(wantBody) {
				t.Fatalf("%d samples read, want %d", len(res.Parts), len(wantBody))
			}
			var n int64
			for i := range wantBody {
				if !bytes.Equal(res.Parts[i], wantBody[i]) {
					t.Fatalf("sample %d of the batch has the wrong bytes", i)
				}
				n += int64(len(res.Parts[i]))
			}
			if res.Bytes != n || fmt.Sprint(res.MissingPos) != fmt.Sprint(tc.missing) {
				t.Errorf("Bytes %d (read %d), MissingPos %v, want %v", res.Bytes, n, res.MissingPos, tc.missing)
			}
			if len(res.PerPart) != len(tc.parts) {
				t.Fatalf("%d parts' figures, want %d", len(res.PerPart), len(tc.parts))
			}
			served := 0
			for p, f := range res.PerPart {
				served += f.Samples
				if f.Loads > len(f.Chunks) {
					t.Errorf("part %d loaded %d of its %d chunks", p, f.Loads, len(f.Chunks))
				}
				if len(tc.damaged) > 0 {
					continue
				}
				// From an empty cache, a part loads exactly the chunks
				// its samples are in, each once.
				chunks := map[int]bool{}
				var size int64
				for _, s := range tc.serve {
					if c := tc.parts[p].Index.Sample(s[1]).Chunk; s[0] == p && !chunks[c] {
						chunks[c] = true
						size += tc.parts[p].Index.Chunk(c).Size
					}
				}
				if f.Loads != len(chunks) || f.LoadedBytes != size {
					t.Errorf("part %d loaded %d chunks, %d bytes; its samples are in %d chunks of %d bytes", p, f.Loads, f.LoadedBytes, len(chunks), size)
				}
			}
			if served != len(wantBody) {
				t.Errorf("the parts' figures count %d samples served, %d were", served, len(wantBody))
			}
			if res.InParts != tc.inParts {
				t.Errorf("assembled in parts: %t, want %t", res.InParts, tc.inParts)
			}
			if got := testutil.ToFloat64(r.partsCopied); got != tc.copied {
				t.Errorf("%v parts copied out, want %v", got, tc.copied)
			}
			res.Release()
			if st := c.Stats(); st.PinnedBytes != 0 {
				t.Errorf("%d bytes still pinned after Release", st.PinnedBytes)
			}
			_ = reg
		})
	}
}

// copies is a copy budget of n bytes.
func copies(n int64) Copies {
	return memory.New(memory.Config{Budget: memory.Budget{Copies: n}, MaxWait: time.Second, Busy: chunkcache.ErrBusy}).Copies()
}

// inGroups serves 4 samples of 4 chunks of 2 KiB, which a cache of 5 KiB
// assembles in parts.
var inGroups = [][2]int{{0, 13}, {0, 0}, {0, 9}, {0, 5}}

// TestAssembledReadsHoldNoRoom: a read assembled in parts holds room to
// assemble (Config.Assemblers) only while it copies. Its result, held
// until the response carrying it is written, holds none: clients that
// stop reading assembled batches take no other client's turn. The
// reproduction (gateway's TestStalledAssembledReadersDoNotBlockOthers):
// two clients that never read assembled batches held both slots while
// their responses were written, and 8 other requests timed out at 60 s.
// In a synctest bubble, so that a read waiting for room would wait out
// the reader's MaxWait at once and fail.
func TestAssembledReadsHoldNoRoom(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a := catalogtest.Dataset(t, "a", 4, 4)
		r, c, _ := newReader(t, 5<<10, &store{}, false)
		var held []*Result
		for i := range 2 * 2 { // twice the reader's assemblers, none released
			res, err := r.ReadBatch(context.Background(), batchOf([]*catalog.Dataset{a}, inGroups))
			if err != nil {
				t.Fatalf("read %d, beside %d assembled results not released: %v", i, len(held), err)
			}
			if !res.InParts {
				t.Fatalf("read %d was not assembled in parts", i)
			}
			held = append(held, res)
		}
		if st := c.Stats(); st.PinnedBytes != 0 {
			t.Errorf("%d bytes pinned by results copied out", st.PinnedBytes)
		}
		for _, res := range held {
			res.Release()
		}
	})
}

// gatedStore is a store whose loads wait until open is closed.
type gatedStore struct {
	*store
	open chan struct{}
}

func (g gatedStore) Load(ctx context.Context, k chunkcache.Key, buf []byte) error {
	<-g.open
	return g.store.Load(ctx, k, buf)
}

// TestAssemblyWaitsForRoom: a read assembled in parts while the reader's
// assemblers are all busy waits for one of them to finish, then is read.
// In a synctest bubble: the reads still assembling hold their room until
// the test lets their loads go, and the waiting read's MaxWait never
// passes meanwhile.
func TestAssemblyWaitsForRoom(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a := catalogtest.Dataset(t, "a", 4, 4)
		st := gatedStore{&store{}, make(chan struct{})}
		r, _, _ := newReader(t, 5<<10, st, false)
		errs := make(chan error, 3)
		read := func() {
			res, err := r.ReadBatch(context.Background(), batchOf([]*catalog.Dataset{a}, inGroups))
			if err == nil {
				res.Release()
			}
			errs <- err
		}
		go read() // the reader's two assemblers, held while their loads wait
		go read()
		synctest.Wait()
		go read()
		time.Sleep(time.Millisecond) // every read blocked: a millisecond passes
		waiting := r.assembly.Stalled(0)
		close(st.open)
		for range 3 {
			if err := <-errs; err != nil {
				t.Fatal(err)
			}
		}
		if !waiting {
			t.Error("a third read beside two assembling did not wait for room")
		}
	})
}
