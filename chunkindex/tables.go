package chunkindex

import (
	"container/list"
	"context"
	"fmt"
	"hash/crc32"
	"hash/maphash"
	"strconv"
	"sync"
	"sync/atomic"

	"golang.org/x/sync/errgroup"
	"golang.org/x/sync/singleflight"
)

// partial is what a partial index (Open) holds besides the chunk table:
// where each chunk's records and keys are in the stored object and their
// CRC32C, the tables in memory, and how keys find their chunk.
//
// A chunk's table is in memory for good if this node keeps it
// (resident), else while a Prepare holds it (pinned) or until the cache,
// bounded in bytes, evicts it, least recently released first. slots
// publish the tables in memory to lock-free readers; they change only
// under mu (or in Open, before the index is shared).
type partial struct {
	index       *Index // the index p belongs to: its chunk table
	r           RangeReader
	recordsAt   int64    // object offset of the sample table
	keysAt      int64    // object offset of the key blob
	keyStart    []uint32 // chunk c's keys are key blob bytes [keyStart[c], keyStart[c+1])
	segCRC      []uint32 // CRC32C of chunk c's sample records followed by its keys
	sampleBytes int64
	parallel    int

	// keys finds a key's chunk: kept from Open when the keys are ordered;
	// otherwise a hash directory built on the first lookup by key
	// (directory), which streams the index object again (size, readSize)
	// and hashes with seed. keysMu guards keys.
	keysMu   sync.Mutex
	keys     keyFinder
	size     int64
	readSize int
	seed     maphash.Seed

	slots          []slot
	resident       []bool // set in Open only
	residentTables int
	residentBytes  int64

	flight singleflight.Group

	mu         sync.Mutex
	cacheLimit int64
	entries    map[int]*cacheEntry // tables of chunks not resident
	lru        list.List           // of *cacheEntry not pinned, most recently released first
	cacheBytes int64               // of every entry, pinned or not
	pinned     int                 // entries pinned

	loads, hits atomic.Int64
}

type slot = atomic.Pointer[table]

// cacheEntry is a cached table: pinned by pins Prepares, else in the lru.
type cacheEntry struct {
	c    int
	t    *table
	pins int
	elem *list.Element
}

// table is one chunk's sample records and keys, exactly as stored: the
// records decode on access, which costs nothing measurable and keeps a
// table two allocations whose bytes the garbage collector never scans.
type table struct {
	rec     []byte // sampleRecordLen bytes a sample
	keys    string // the chunk's keys, back to back
	keyBase uint32 // key blob offset of keys[0]; the records' key ends are absolute
}

// tableOverhead is what a table costs besides its bytes: the struct, its
// slice and string headers, and the allocator's rounding, roughly.
const tableOverhead = 96

func (t *table) bytes() int64 { return int64(len(t.rec)+len(t.keys)) + tableOverhead }

func (t *table) sampleRange(i int) (off, length int64, crc uint32) {
	r := t.rec[sampleRecordLen*i : sampleRecordLen*(i+1)]
	return int64(le.Uint64(r)), int64(le.Uint32(r[8:])), le.Uint32(r[12:])
}

func (t *table) keyEnd(i int) uint32 { return le.Uint32(t.rec[sampleRecordLen*i+16:]) }

func (t *table) key(i int) string {
	start := t.keyBase
	if i > 0 {
		start = t.keyEnd(i - 1)
	}
	return t.keys[start-t.keyBase : t.keyEnd(i)-t.keyBase]
}

// read reads chunk c's table from the store and checks it against the
// CRC32C taken when the index streamed in.
func (p *partial) read(ctx context.Context, ix *Index, c int) (*table, error) {
	first, n := ix.ChunkRange(c)
	t := &table{rec: make([]byte, sampleRecordLen*n), keyBase: p.keyStart[c]}
	kb := make([]byte, p.keyStart[c+1]-p.keyStart[c])
	if n > 0 {
		g, gctx := errgroup.WithContext(ctx)
		g.Go(func() error { return p.r.ReadRange(gctx, p.recordsAt+sampleRecordLen*int64(first), t.rec) })
		g.Go(func() error { return p.r.ReadRange(gctx, p.keysAt+int64(t.keyBase), kb) })
		if err := g.Wait(); err != nil {
			return nil, fmt.Errorf("chunkindex: reading the table of chunk %d %q: %w", c, ix.chunks[c].Key, err)
		}
	}
	if got := crc32.Update(crc32.Checksum(t.rec, castagnoli), castagnoli, kb); got != p.segCRC[c] {
		return nil, fmt.Errorf("%w: the table of chunk %d %q read from the store has CRC32C %08x, the index loaded had %08x: the object changed or the read was damaged",
			ErrCorrupt, c, ix.chunks[c].Key, got, p.segCRC[c])
	}
	t.keys = string(kb)
	return t, nil
}

// table returns chunk c's table, which must be in memory: kept for good
// (resident), or held by a Prepare not yet released. It reads nothing:
// loading a table is Prepare's, which takes a context and returns an
// error. A table asked for that is in neither is a caller's bug, as an ID
// out of range is, and panics naming the missing Prepare.
func (p *partial) table(c int) *table {
	if t := p.slots[c].Load(); t != nil {
		return t
	}
	panic(fmt.Sprintf("chunkindex: the table of chunk %d is not in memory: prepare the chunks a read uses first (Tables.Prepare, Index.Samples)", c))
}

// fetch loads chunk c's table, once however many ask at the same time.
// The load runs on its own time (loadTimeout), not the first caller's,
// since every waiting caller shares it; each caller stops waiting when
// its own context ends.
func (p *partial) fetch(ctx context.Context, c int) (*table, error) {
	ch := p.flight.DoChan(strconv.Itoa(c), func() (any, error) {
		// A load that finished just before this one started: use it.
		if t := p.slots[c].Load(); t != nil {
			return t, nil
		}
		lctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), loadTimeout)
		defer cancel()
		t, err := p.read(lctx, p.index, c)
		if err != nil {
			return nil, err
		}
		p.loads.Add(1)
		// In the cache before the flight ends, so that a Prepare coming
		// after it finds the table rather than loading it again.
		p.mu.Lock()
		t = p.addLocked(c, t, false)
		p.mu.Unlock()
		return t, nil
	})
	select {
	case r := <-ch:
		if r.Err != nil {
			return nil, r.Err
		}
		return r.Val.(*table), nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// addLocked puts chunk c's table t in the cache, pinned if pin, and
// returns the table the cache holds for c (another load may have put one
// there first).
func (p *partial) addLocked(c int, t *table, pin bool) *table {
	e, ok := p.entries[c]
	if !ok {
		e = &cacheEntry{c: c, t: t}
		p.entries[c] = e
		p.cacheBytes += t.bytes()
		p.slots[c].Store(t)
		e.elem = p.lru.PushFront(e)
	}
	if pin {
		p.pinLocked(e)
	}
	p.evictLocked()
	return e.t
}

func (p *partial) pinLocked(e *cacheEntry) {
	if e.pins == 0 {
		p.lru.Remove(e.elem)
		e.elem = nil
		p.pinned++
	}
	e.pins++
}

func (p *partial) unpinLocked(c int) {
	e := p.entries[c]
	if e.pins--; e.pins == 0 {
		e.elem = p.lru.PushFront(e)
		p.pinned--
	}
}

// evictLocked drops the least recently released tables not pinned until
// the cache is within its bound.
func (p *partial) evictLocked() {
	for p.cacheBytes > p.cacheLimit && p.lru.Len() > 0 {
		e := p.lru.Remove(p.lru.Back()).(*cacheEntry)
		delete(p.entries, e.c)
		p.cacheBytes -= e.t.bytes()
		p.slots[e.c].Store(nil)
	}
}

// Tables is an index's sample tables as memory holds them
// (Index.Tables): each sample's range, CRC32C and key, chunk by chunk. An
// index made by New or Decode holds every table in memory; a partial one
// (Open) holds its node's own for good and loads the others in one
// explicit step a read takes (Prepare), caching them within a byte bound.
// A Tables is a view of its index, cheap to make and to copy.
type Tables struct{ ix *Index }

// Tables returns ix's sample tables: preparing them for a read, and what
// they hold in memory.
func (ix *Index) Tables() Tables { return Tables{ix} }

// Prepare makes the sample tables of chunks available until release is
// called: those this node keeps are in memory already; the others are
// loaded from the store, concurrently, once each however many reads ask
// at the same time, or taken from the cache, and held (pinned) until
// release. Between the two, SampleRange, SampleKey and Sample of these
// chunks' samples read memory only; outside it they panic, as for an ID
// out of range, unless this node keeps the chunk's table. Prepare is the
// one place a table is loaded. On an index with every table in
// memory (New, Decode) it does nothing.
//
// On error nothing stays pinned. release may be called more than once.
func (t Tables) Prepare(ctx context.Context, chunks []int) (release func(), err error) {
	p := t.ix.part
	if p == nil {
		return func() {}, nil
	}
	var (
		mu      sync.Mutex
		pinned  = make([]int, 0, len(chunks))
		missing []int
		seen    = make(map[int]bool, len(chunks))
	)
	p.mu.Lock()
	for _, c := range chunks {
		if p.resident[c] || seen[c] {
			continue
		}
		seen[c] = true
		if e, ok := p.entries[c]; ok {
			p.pinLocked(e)
			pinned = append(pinned, c)
			p.hits.Add(1)
		} else {
			missing = append(missing, c)
		}
	}
	p.mu.Unlock()
	var once sync.Once
	release = func() {
		once.Do(func() {
			p.mu.Lock()
			for _, c := range pinned {
				p.unpinLocked(c)
			}
			p.evictLocked()
			p.mu.Unlock()
		})
	}
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(p.parallel)
	for _, c := range missing {
		g.Go(func() error {
			t, err := p.fetch(gctx, c)
			if err != nil {
				return err
			}
			p.mu.Lock()
			p.addLocked(c, t, true)
			p.mu.Unlock()
			mu.Lock()
			pinned = append(pinned, c)
			mu.Unlock()
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		release()
		return nil, err
	}
	return release, nil
}

// prepareSamples is Prepare of the chunks of samples ids, each once.
func (t Tables) prepareSamples(ctx context.Context, ids []int) (release func(), err error) {
	if t.ix.part == nil {
		return func() {}, nil
	}
	chunks := make([]int, 0, 16)
	seen := make(map[int]bool, 16)
	for _, id := range ids {
		if c := t.ix.ChunkOf(id); !seen[c] {
			seen[c] = true
			chunks = append(chunks, c)
		}
	}
	return t.Prepare(ctx, chunks)
}

// Samples returns samples ids, as Sample does, preparing their chunks for
// the call (see Tables.Prepare): the one call serving code needs to know
// about the samples it reads before it reads any chunk.
func (ix *Index) Samples(ctx context.Context, ids []int) ([]Sample, error) {
	release, err := ix.Tables().prepareSamples(ctx, ids)
	if err != nil {
		return nil, err
	}
	defer release()
	out := make([]Sample, len(ids))
	for i, id := range ids {
		out[i] = ix.Sample(id)
	}
	return out, nil
}

// TableStats describes the sample tables of a partial index. On an index
// with every table in memory it is the zero value but for Resident and
// ResidentBytes.
type TableStats struct {
	Resident      int   // tables kept for good: this node's chunks
	ResidentBytes int64 // their bytes
	Cached        int   // other chunks' tables in memory
	CachedBytes   int64 // their bytes, pinned ones included
	Pinned        int   // cached tables a Prepare holds
	Loads         int64 // tables read from the store after Open
	Hits          int64 // tables a Prepare found in the cache
}

// Stats returns the state of the index's sample tables.
func (t Tables) Stats() TableStats {
	p := t.ix.part
	if p == nil {
		return TableStats{Resident: len(t.ix.chunks), ResidentBytes: t.ix.cols.bytes()}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return TableStats{Resident: p.residentTables, ResidentBytes: p.residentBytes, Cached: len(p.entries),
		CachedBytes: p.cacheBytes, Pinned: p.pinned, Loads: p.loads.Load(), Hits: p.hits.Load()}
}

// Partial reports whether the index holds only some sample tables in
// memory (Open) rather than all (New, Decode).
func (t Tables) Partial() bool { return t.ix.part != nil }

// Footprint returns the bytes the index holds in memory, by the sizes of
// what it holds: the chunk table and per-chunk data, the sample tables in
// memory (cached ones included) and the key lookup. It is the formula of
// docs/format.md evaluated on this index, and leaves out allocator
// rounding and map overheads.
func (t Tables) Footprint() int64 {
	ix := t.ix
	n := int64(len(ix.chunkStart)) * 8
	for _, ch := range ix.chunks {
		n += chunkStructBytes + int64(len(ch.Key)+len(ch.ETag))
	}
	p := ix.part
	if p == nil {
		return n + ix.cols.bytes()
	}
	st := t.Stats()
	n += int64(len(p.keyStart)+len(p.segCRC))*4 + int64(len(p.slots))*8 + int64(len(p.resident))
	p.keysMu.Lock()
	if p.keys != nil {
		n += p.keys.bytes()
	}
	p.keysMu.Unlock()
	return n + st.ResidentBytes + st.CachedBytes
}

// chunkStructBytes is the size of a Chunk: two string headers and two
// ints.
const chunkStructBytes = 48
