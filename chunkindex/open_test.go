package chunkindex

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// memObject is a stored index for Open: range reads of b, counted, with
// an optional hook that may damage or delay what a read returns.
type memObject struct {
	b     []byte
	reads atomic.Int64
	hook  atomic.Pointer[func(off int64, p []byte) error]
}

func (m *memObject) ReadRange(ctx context.Context, off int64, p []byte) error {
	m.reads.Add(1)
	if off < 0 || off+int64(len(p)) > int64(len(m.b)) {
		return fmt.Errorf("range %d+%d outside %d bytes", off, len(p), len(m.b))
	}
	copy(p, m.b[off:])
	if h := m.hook.Load(); h != nil {
		return (*h)(off, p)
	}
	return ctx.Err()
}

func (m *memObject) setHook(h func(off int64, p []byte) error) { m.hook.Store(&h) }

func encode(t testing.TB, ix *Index) *memObject {
	t.Helper()
	b, err := ix.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	return &memObject{b: b}
}

func open(t testing.TB, obj *memObject, opts OpenOptions) *Index {
	t.Helper()
	if opts.ReadSize == 0 {
		opts.ReadSize = 1000 // many blocks, records and keys split across them
	}
	ix, err := Open(context.Background(), obj, int64(len(obj.b)), opts)
	if err != nil {
		t.Fatal(err)
	}
	return ix
}

// orderedDataset is synthDataset with keys that ascend across chunks, as
// an unshuffled pack writes them.
func orderedDataset(n, per int) ([]Chunk, []Sample) {
	chunks, samples := synthDataset(n, per)
	for i := range samples {
		samples[i].Key = fmt.Sprintf("train/%09d", i)
	}
	return chunks, samples
}

// everyOther keeps the tables of the even chunks.
func everyOther(ix *Index) []int {
	var cs []int
	for c := 0; c < ix.NumChunks(); c += 2 {
		cs = append(cs, c)
	}
	return cs
}

// TestOpenMatchesDecode: a partial index answers every question as the
// whole index does, whatever it keeps and however small its cache.
func TestOpenMatchesDecode(t *testing.T) {
	emptyChunks := func() ([]Chunk, []Sample) {
		return []Chunk{{Key: "e0", Size: 1024}, {Key: "c1", Size: 2048, Samples: 2}, {Key: "e2"}, {Key: "c3", Size: 512, Samples: 1}},
			[]Sample{{Key: "q", Chunk: 1, Length: 512}, {Key: "p", Chunk: 1, Offset: 512, Length: 1024}, {Key: "r", Chunk: 3, Length: 512}}
	}
	datasets := []struct {
		name    string
		data    func() ([]Chunk, []Sample)
		ordered bool
	}{
		{"golden", goldenDataset, true},
		{"shuffled keys", func() ([]Chunk, []Sample) { return synthDataset(3000, 41) }, false},
		{"ordered keys", func() ([]Chunk, []Sample) { return orderedDataset(3000, 41) }, true},
		{"empty chunks", emptyChunks, false},
		{"empty", func() ([]Chunk, []Sample) { return nil, nil }, true},
	}
	keeps := []struct {
		name     string
		resident func(*Index) []int
		cache    int64
	}{
		{"none", nil, 0},
		{"even chunks", everyOther, 0},
		{"all", func(ix *Index) []int { return everyOther(ix)[:0:0] }, 0},
		{"tiny cache", nil, 1},
	}
	keeps[2].resident = func(ix *Index) []int {
		cs := make([]int, ix.NumChunks())
		for c := range cs {
			cs[c] = c
		}
		return cs
	}
	for _, ds := range datasets {
		for _, k := range keeps {
			t.Run(ds.name+"/"+k.name, func(t *testing.T) {
				chunks, samples := ds.data()
				whole := mustNew(t, chunks, samples)
				obj := encode(t, whole)
				ix := open(t, obj, OpenOptions{Resident: k.resident, CacheBytes: k.cache})
				if !ix.Tables().Partial() {
					t.Fatal("Open returned a whole index")
				}
				if _, ok := ix.part.keys.(*orderedKeys); ok != ds.ordered {
					t.Errorf("ordered key lookup: %t, want %t", ok, ds.ordered)
				}
				if ix.ID() != whole.ID() {
					t.Errorf("ID %s, want %s", ix.ID(), whole.ID())
				}
				if ix.SampleBytes() != whole.SampleBytes() {
					t.Errorf("SampleBytes %d, want %d", ix.SampleBytes(), whole.SampleBytes())
				}
				ids := make([]int, len(samples))
				for i := range ids {
					ids[i] = i
				}
				got, err := ix.Samples(context.Background(), ids)
				if err != nil {
					t.Fatal(err)
				}
				for i, s := range samples {
					if got[i] != s {
						t.Errorf("Samples: sample %d = %+v, want %+v", i, got[i], s)
					}
					if c := ix.ChunkOf(i); c != s.Chunk {
						t.Errorf("ChunkOf(%d) = %d, want %d", i, c, s.Chunk)
					}
				}
				// SampleRange, Lookup, ... with every chunk prepared.
				all := make([]int, ix.NumChunks())
				for c := range all {
					all[c] = c
				}
				release, err := ix.Tables().Prepare(context.Background(), all)
				if err != nil {
					t.Fatal(err)
				}
				checkIndex(t, ix, chunks, samples)
				release()
				for _, key := range []string{"", "a", "zzz", "train/", "train/000000000x", "train/n00000001"} {
					id, ok, err := ix.Lookup(context.Background(), key)
					if err != nil {
						t.Fatal(err)
					}
					wid, wok := lookup(t, whole, key)
					if ok != wok || ok && id != wid {
						t.Errorf("Lookup(%q) = %d, %t; whole index: %d, %t", key, id, ok, wid, wok)
					}
				}
				if _, err := ix.MarshalBinary(); err == nil {
					t.Error("MarshalBinary of a partial index succeeded")
				}
				st := ix.Tables().Stats()
				if st.Pinned != 0 {
					t.Errorf("%d tables still pinned", st.Pinned)
				}
				if k.cache == 1 && st.Cached != 0 {
					t.Errorf("a one-byte cache holds %d tables", st.Cached)
				}
			})
		}
	}
}

// TestOpenRejects: Open refuses every edit Decode refuses, with the same
// sentinel; a duplicate key among keys in no order, when the key
// directory is built: at Open with KeyDirectory, else at the first
// lookup by key.
func TestOpenRejects(t *testing.T) {
	for _, tt := range rejectCases() {
		t.Run(tt.name, func(t *testing.T) {
			b := tt.edit(golden(t))
			_, err := Open(context.Background(), &memObject{b: b}, int64(len(b)), OpenOptions{ReadSize: 7, KeyDirectory: true})
			if !errors.Is(err, tt.is) {
				t.Fatalf("Open: %v, want %v", err, tt.is)
			}
			if !errors.Is(tt.is, ErrDuplicateKey) {
				return
			}
			ix, err := Open(context.Background(), &memObject{b: b}, int64(len(b)), OpenOptions{ReadSize: 7})
			if err != nil {
				t.Fatalf("Open without the key directory: %v", err)
			}
			if _, _, err := ix.Lookup(context.Background(), "any"); !errors.Is(err, tt.is) {
				t.Fatalf("first lookup: %v, want %v", err, tt.is)
			}
		})
	}
	b := golden(t)
	for n := range len(b) {
		if _, err := Open(context.Background(), &memObject{b: b[:n]}, int64(n), OpenOptions{}); !errors.Is(err, ErrTruncated) {
			t.Errorf("prefix of %d bytes: %v, want ErrTruncated", n, err)
		}
	}
}

// TestOpenStoreError: a failed read fails Open with the store's error.
func TestOpenStoreError(t *testing.T) {
	chunks, samples := synthDataset(500, 20)
	obj := encode(t, mustNew(t, chunks, samples))
	errGone := errors.New("store unreachable")
	obj.setHook(func(off int64, p []byte) error {
		if off > 3000 {
			return errGone
		}
		return nil
	})
	if _, err := Open(context.Background(), obj, int64(len(obj.b)), OpenOptions{ReadSize: 1000}); !errors.Is(err, errGone) {
		t.Fatalf("Open: %v, want %v", err, errGone)
	}
}

// TestPrepareRefusesDamagedTable: a table whose range read comes back
// different from what Open checked is refused, not cached, and read
// again by the next Prepare.
func TestPrepareRefusesDamagedTable(t *testing.T) {
	chunks, samples := synthDataset(1000, 50)
	whole := mustNew(t, chunks, samples)
	for _, region := range []string{"records", "keys"} {
		t.Run(region, func(t *testing.T) {
			obj := encode(t, whole)
			ix := open(t, obj, OpenOptions{})
			uncache(ix)
			at := ix.part.recordsAt + sampleRecordLen*int64(whole.chunkStart[3])
			if region == "keys" {
				at = ix.part.keysAt + int64(ix.part.keyStart[3])
			}
			obj.setHook(func(off int64, p []byte) error {
				if off == at {
					p[len(p)/2] ^= 0x10
				}
				return nil
			})
			_, err := ix.Tables().Prepare(context.Background(), []int{2, 3, 4})
			if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "chunk 3") {
				t.Fatalf("Prepare of a damaged table: %v, want ErrCorrupt naming chunk 3", err)
			}
			if st := ix.Tables().Stats(); st.Pinned != 0 || ix.part.slots[3].Load() != nil {
				t.Fatalf("after a failed Prepare: %d pinned, chunk 3 in memory: %t", st.Pinned, ix.part.slots[3].Load() != nil)
			}
			obj.setHook(func(int64, []byte) error { return nil })
			release, err := ix.Tables().Prepare(context.Background(), []int{3})
			if err != nil {
				t.Fatal(err)
			}
			if got := ix.Sample(whole.chunkStart[3] + 1); got != whole.Sample(whole.chunkStart[3]+1) {
				t.Errorf("after a good read: %+v", got)
			}
			release()
		})
	}
}

// TestPrepareLoadsOncePerChunk: many reads preparing overlapping chunks
// at once load each table once.
func TestPrepareLoadsOncePerChunk(t *testing.T) {
	chunks, samples := synthDataset(4000, 40) // 100 chunks
	obj := encode(t, mustNew(t, chunks, samples))
	ix := open(t, obj, OpenOptions{Resident: everyOther})
	uncache(ix)
	var slow sync.WaitGroup
	slow.Add(1)
	obj.setHook(func(int64, []byte) error { slow.Wait(); return nil }) // every load waits for all the Prepares
	before := obj.reads.Load()
	var wg sync.WaitGroup
	errs := make(chan error, 32)
	for g := range 32 {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(g), 1))
			cs := rng.Perm(100)[:30]
			release, err := ix.Tables().Prepare(context.Background(), cs)
			if err != nil {
				errs <- err
				return
			}
			for _, c := range cs {
				first, _ := ix.ChunkRange(c)
				_ = ix.SampleKey(first)
			}
			release()
		})
	}
	time.Sleep(50 * time.Millisecond) // let the Prepares pile up on the loads
	slow.Done()
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	st := ix.Tables().Stats()
	if st.Loads > 50 {
		t.Errorf("%d loads for at most 50 chunks not kept", st.Loads)
	}
	if reads := obj.reads.Load() - before; reads != 2*st.Loads {
		t.Errorf("%d range reads for %d loads, want 2 a load", reads, st.Loads)
	}
	if st.Resident != 50 {
		t.Errorf("%d resident tables, want 50", st.Resident)
	}
}

// TestTableCacheBound: released tables stay within the bound; pinned ones
// may exceed it until released.
func TestTableCacheBound(t *testing.T) {
	chunks, samples := synthDataset(4000, 40)
	obj := encode(t, mustNew(t, chunks, samples))
	const bound = 10 << 10
	ix := open(t, obj, OpenOptions{CacheBytes: bound})
	all := make([]int, ix.NumChunks())
	for c := range all {
		all[c] = c
	}
	release, err := ix.Tables().Prepare(context.Background(), all)
	if err != nil {
		t.Fatal(err)
	}
	if st := ix.Tables().Stats(); st.Cached != 100 || st.Pinned != 100 || st.CachedBytes <= bound {
		t.Errorf("all pinned: %+v", st)
	}
	release()
	release() // idempotent
	st := ix.Tables().Stats()
	if st.CachedBytes > bound || st.Pinned != 0 || st.Cached == 0 {
		t.Errorf("released: %+v, bound %d", st, bound)
	}
	// The most recently released stay; a hit loads nothing.
	loads := st.Loads
	for c := range 100 {
		release, err := ix.Tables().Prepare(context.Background(), []int{c})
		if err != nil {
			t.Fatal(err)
		}
		release()
		if st := ix.Tables().Stats(); st.CachedBytes > bound {
			t.Fatalf("after chunk %d: %d bytes cached, bound %d", c, st.CachedBytes, bound)
		}
	}
	if st := ix.Tables().Stats(); st.Loads-loads > 100 || st.Loads-loads < 50 {
		t.Errorf("%d loads for 100 chunks through a cache of a few", st.Loads-loads)
	}
}

// TestUnpreparedRead: a sample whose table is neither kept nor prepared
// is a caller's bug, as an ID out of range is: reading it reads nothing
// from the store, with no context to end it and no error to return, and
// panics naming Prepare. Prepared, it is read; kept, it needs nothing.
func TestUnpreparedRead(t *testing.T) {
	chunks, samples := synthDataset(200, 20)
	whole := mustNew(t, chunks, samples)
	obj := encode(t, whole)
	ix := open(t, obj, OpenOptions{Resident: everyOther})
	uncache(ix) // Open keeps the tables its cache holds: drop chunk 1's
	before := obj.reads.Load()
	for _, read := range []struct {
		name string
		f    func()
	}{
		{"Sample", func() { _ = ix.Sample(25) }}, // chunk 1: not kept
		{"SampleRange", func() { _, _, _, _ = ix.SampleRange(25) }},
		{"SampleKey", func() { _ = ix.SampleKey(25) }},
	} {
		func() {
			defer func() {
				if r := recover(); r == nil || !strings.Contains(fmt.Sprint(r), "Tables.Prepare") {
					t.Errorf("%s of an unprepared chunk: recovered %v, want a panic naming Tables.Prepare", read.name, r)
				}
			}()
			read.f()
		}()
	}
	if st := ix.Tables().Stats(); obj.reads.Load() != before || st.Loads != 0 {
		t.Errorf("unprepared reads read the store: %d reads, stats %+v", obj.reads.Load()-before, st)
	}
	if got := ix.Sample(5); got != whole.Sample(5) { // chunk 0: kept
		t.Errorf("Sample(5) = %+v, want %+v", got, whole.Sample(5))
	}
	release, err := ix.Tables().Prepare(context.Background(), []int{1})
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	if got := ix.Sample(25); got != whole.Sample(25) {
		t.Errorf("prepared, Sample(25) = %+v, want %+v", got, whole.Sample(25))
	}
}

func TestOpenConcurrentUse(t *testing.T) {
	chunks, samples := synthDataset(3000, 30)
	whole := mustNew(t, chunks, samples)
	ix := open(t, encode(t, whole), OpenOptions{CacheBytes: 8 << 10})
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(g), 2))
			for range 200 {
				ids := make([]int, 16)
				for i := range ids {
					ids[i] = rng.IntN(len(samples))
				}
				got, err := ix.Samples(context.Background(), ids)
				if err != nil {
					t.Error(err)
					return
				}
				for i, id := range ids {
					if got[i] != samples[id] {
						t.Errorf("sample %d: %+v, want %+v", id, got[i], samples[id])
						return
					}
				}
				id, ok, err := ix.Lookup(context.Background(), samples[ids[0]].Key)
				if err != nil || !ok || id != ids[0] {
					t.Errorf("Lookup(%q) = %d, %t, %v", samples[ids[0]].Key, id, ok, err)
				}
			}
		})
	}
	wg.Wait()
}

// TestFootprint: a partial index keeping half its tables holds about half
// the bytes of the whole one, plus its chunk-level data (and the other
// tables its cache holds: none here).
func TestFootprint(t *testing.T) {
	chunks, samples := orderedDataset(20000, 100)
	whole := mustNew(t, chunks, samples)
	ix := open(t, encode(t, whole), OpenOptions{Resident: everyOther})
	uncache(ix)
	w, p := whole.Tables().Footprint(), ix.Tables().Footprint()
	if p > w*6/10 || p < w*4/10 {
		t.Errorf("partial footprint %d, whole %d: want about half", p, w)
	}
}

// TestKeyDirectoryOnDemand: with keys in no order, a node holds no key
// directory until a lookup by key needs one; the first lookup builds it
// from the object, checked to be the same index, and a replaced object is
// refused rather than believed.
func TestKeyDirectoryOnDemand(t *testing.T) {
	chunks, samples := synthDataset(3000, 41)
	whole := mustNew(t, chunks, samples)
	obj := encode(t, whole)
	ix := open(t, obj, OpenOptions{})
	before := ix.Tables().Footprint()
	if ix.part.keys != nil {
		t.Fatal("a key directory was built at Open")
	}
	key := whole.SampleKey(1234)
	if id, ok, err := ix.Lookup(context.Background(), key); err != nil || !ok || id != 1234 {
		t.Fatalf("lookup %q: %d %v %v, want 1234", key, id, ok, err)
	}
	if grown := ix.Tables().Footprint() - before; grown < 4*int64(whole.NumSamples()) {
		t.Fatalf("the key directory adds %d bytes, want about 4.2 a sample", grown)
	}

	// A replaced object: the directory is not built from it.
	ix = open(t, encode(t, whole), OpenOptions{})
	other := encode(t, mustNew(t, chunks, samples))
	ix.part.r = &memObject{b: append(other.b[:len(other.b)-5:len(other.b)-5], 0, 0, 0, 0, 0)}
	if _, _, err := ix.Lookup(context.Background(), key); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("lookup over a changed object: %v, want ErrCorrupt", err)
	}
}

// uncache drops the other chunks' tables Open kept in the table cache, so
// that a test of loading them on demand starts with none in memory.
func uncache(ix *Index) {
	p := ix.part
	p.mu.Lock()
	defer p.mu.Unlock()
	limit := p.cacheLimit
	p.cacheLimit = 0
	p.evictLocked()
	p.cacheLimit = limit
}

// TestOpenKeepsTheTablesItsCacheHolds: Open keeps the sample tables its
// stream passes, as far as the table cache holds them — those of the
// chunks the node keeps for good and, in the cache, the others' — so that
// a node whose cache holds every table reads none from the store after
// its load, neither to keep its own nor for a batch: Prepare of every
// chunk reads nothing. With a cache too small for all, the first chunks'
// are kept within its bound and the rest read on demand, checked as
// ever. The reproduction: a node of a cluster read the table of another
// node's chunk from the store the first time one of its ranks' batches
// held one of its samples, epochs after it was warm (116 tables in the
// second epoch of a job on four nodes), and cut off from the store, it
// could not lay such a batch out.
func TestOpenKeepsTheTablesItsCacheHolds(t *testing.T) {
	chunks, samples := synthDataset(4000, 40) // 100 chunks
	whole := mustNew(t, chunks, samples)
	all := make([]int, whole.NumChunks())
	for c := range all {
		all[c] = c
	}
	for _, tc := range []struct {
		name  string
		cache int64
		every bool // every table fits
	}{{"a cache that holds every table", 0, true}, {"a cache that holds a few", 10 << 10, false}} {
		t.Run(tc.name, func(t *testing.T) {
			obj := encode(t, whole)
			ix := open(t, obj, OpenOptions{Resident: everyOther, CacheBytes: tc.cache})
			opened := obj.reads.Load()
			st := ix.Tables().Stats()
			if st.Resident != 50 || st.Cached == 0 {
				t.Fatalf("after Open: %+v, want 50 resident and some cached", st)
			}
			release, err := ix.Tables().Prepare(context.Background(), all)
			if err != nil {
				t.Fatal(err)
			}
			for id := range whole.NumSamples() {
				if got := ix.Sample(id); got != whole.Sample(id) {
					t.Fatalf("sample %d: %+v, want %+v", id, got, whole.Sample(id))
				}
			}
			release()
			st = ix.Tables().Stats()
			reads := obj.reads.Load() - opened
			switch {
			case tc.every && (st.Loads != 0 || reads != 0):
				t.Errorf("every table fits the cache: %d tables loaded (%d reads) after Open, want none", st.Loads, reads)
			case !tc.every && (st.Loads == 0 || st.Loads >= 50):
				t.Errorf("a cache of %d bytes: %d tables loaded after Open, want some of the 50 not kept", tc.cache, st.Loads)
			case tc.cache > 0 && st.CachedBytes > tc.cache:
				t.Errorf("%d bytes of tables cached, over the bound %d", st.CachedBytes, tc.cache)
			}
		})
	}
}
