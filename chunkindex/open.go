package chunkindex

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"hash"
	"hash/crc32"
	"hash/maphash"
	"math"
	"time"

	"golang.org/x/sync/errgroup"
)

// RangeReader reads byte ranges of one version of a stored, encoded
// index: ReadRange fills p with bytes [off, off+len(p)), and fails rather
// than read another version of the object (s3backend stores do, given
// the object's ETag). It must be safe for concurrent use.
type RangeReader interface {
	ReadRange(ctx context.Context, off int64, p []byte) error
}

// RangeReaderFunc adapts a function to a RangeReader.
type RangeReaderFunc func(ctx context.Context, off int64, p []byte) error

// ReadRange calls f.
func (f RangeReaderFunc) ReadRange(ctx context.Context, off int64, p []byte) error {
	return f(ctx, off, p)
}

// Defaults of OpenOptions.
const (
	// DefaultTableCacheBytes bounds the tables of chunks a node does not
	// keep that it holds after use: about two thousand chunks of 580
	// samples with 30-byte keys, several shuffle windows' worth.
	DefaultTableCacheBytes = 64 << 20
	defaultParallel        = 16
	defaultReadSize        = 8 << 20
	// loadTimeout bounds one table load once it has started: it is shared
	// by every caller waiting for it, so no one caller's context ends it.
	loadTimeout = 30 * time.Second
)

// OpenOptions configures Open.
type OpenOptions struct {
	// Resident chooses the chunks whose sample tables stay in memory (a
	// cluster node's own chunks). It is called once the stream has
	// established the index's identity and chunk sample counts, which is
	// what a chunk's owner depends on. nil keeps none.
	Resident func(ix *Index) []int
	// CacheBytes bounds the other chunks' tables held after use
	// (DefaultTableCacheBytes if 0). Tables pinned by a Prepare not yet
	// released come on top.
	CacheBytes int64
	// Parallel bounds the table loads in flight of one Open or Prepare
	// (16 if 0).
	Parallel int
	// ReadSize is the size of each range read of the stream (8 MiB if 0).
	ReadSize int
	// KeyDirectory builds the hash directory that finds a key's chunk
	// when the keys are in no order (about 4.2 bytes a sample) while
	// opening, with the duplicate-key check, instead of on the first
	// lookup by key.
	KeyDirectory bool
}

// Open reads the encoded index of size bytes that r reads and returns a
// partial index: it keeps in memory what every node needs — the chunk
// table, each chunk's sample count and first sample ID, which is enough to
// compute any order and to find any sample's chunk — and the sample tables
// (offset, length, CRC32C, key) of the chunks opts.Resident chooses. The
// tables of other chunks are read from r when needed (Tables.Prepare),
// checked, and held in a cache bounded by opts.CacheBytes.
//
// Open reads the object once, front to back, and checks it as Decode
// does: the trailer's CRC32C, and every field, with errors wrapping the
// same sentinels (a streamed load reports the first problem it meets,
// where Decode checks the trailer first). Its ID is the SHA-256 of the
// bytes read, as Decode's. While the stream passes it records per chunk
// where the chunk's records and keys are in the object and their CRC32C,
// so a table read later is trusted only if it is the one checked now.
//
// Finding a sample by key (Lookup) needs to know which chunk a key
// is in without the keys in memory. If every chunk's keys ascend and the
// chunks' key ranges do not overlap (an unshuffled `brand pack`, or
// WebDataset shards of sorted keys), Open keeps each chunk's first key
// and finds the chunk by binary search. Otherwise (a shuffled pack) a hash
// directory of about 4.2 bytes a sample finds it (docs/format.md has the
// formula): built on the first lookup by key, which streams the index
// object again (seconds per ten million samples), so that a node that
// only serves batches never holds it; OpenOptions.KeyDirectory builds it
// here. Duplicate keys, which no index Brand writes has, are found when
// the directory is built.
func Open(ctx context.Context, r RangeReader, size int64, opts OpenOptions) (*Index, error) {
	if opts.CacheBytes <= 0 {
		opts.CacheBytes = DefaultTableCacheBytes
	}
	if opts.Parallel <= 0 {
		opts.Parallel = defaultParallel
	}
	if opts.ReadSize <= 0 {
		opts.ReadSize = defaultReadSize
	}
	st := newStream(ctx, r, size, opts.ReadSize)
	defer st.close()

	ix, hdr, err := openHeader(st, size)
	if err != nil {
		return nil, err
	}
	p := &partial{
		index:      ix,
		r:          r,
		recordsAt:  headerSize + hdr.tableLen,
		keysAt:     headerSize + hdr.tableLen + sampleRecordLen*hdr.samples,
		keyStart:   make([]uint32, len(ix.chunks)+1),
		segCRC:     make([]uint32, len(ix.chunks)),
		slots:      make([]slot, len(ix.chunks)),
		resident:   make([]bool, len(ix.chunks)),
		parallel:   opts.Parallel,
		cacheLimit: opts.CacheBytes,
		entries:    map[int]*cacheEntry{},
	}
	// scratch holds, per sample, its key end during the records pass and
	// then its key's hash: 8 bytes a sample, dropped when Open returns.
	scratch := make([]uint64, hdr.samples)
	// The tables the stream passes are kept, as far as the table cache
	// holds them: which chunks are this node's is known only once the
	// whole object is read, so those the node keeps come from here too.
	held := &captured{budget: opts.CacheBytes, tables: make([]*table, len(ix.chunks))}
	if err := p.streamRecords(st, ix, scratch, held); err != nil {
		return nil, err
	}
	if uint64(p.keyStart[len(ix.chunks)]) != uint64(hdr.keyLen) {
		return nil, fmt.Errorf("%w: key ends reach %d, key bytes are %d", ErrCorrupt, p.keyStart[len(ix.chunks)], hdr.keyLen)
	}
	seed := maphash.MakeSeed()
	ord, err := p.streamKeys(st, ix, scratch, seed, held)
	if err != nil {
		return nil, err
	}
	if ix.deferred {
		// Without checksums the section is a few bytes; with them its
		// length is the object's (bounded by its size, as every section).
		if !hdr.checksums && hdr.inPlace > 2+maxFormatName+32+8+4+lineageRecordLen*MaxAncestors {
			return nil, fmt.Errorf("%w: an in-place section of %d bytes", ErrCorrupt, hdr.inPlace)
		}
		sec, err := st.next(int(hdr.inPlace))
		if err != nil {
			return nil, err
		}
		if ix.source, ix.spans, ix.lineage, err = parseInPlace(sec, hdr.checksums, hdr.lineage, len(ix.chunks)); err != nil {
			return nil, err
		}
	}
	trailer, err := st.next(trailerSize)
	if err != nil {
		return nil, err
	}
	want := le.Uint32(trailer)
	sum, crc, err := st.finish()
	if err != nil {
		return nil, err
	}
	if crc != want {
		return nil, fmt.Errorf("%w: checksum mismatch: trailer says %#08x, content sums to %#08x", ErrCorrupt, want, crc)
	}
	ix.id = hex.EncodeToString(sum)[:16]
	ix.idOnce.Do(func() {}) // the ID is the hash of what was read
	ix.part = p

	p.size, p.readSize, p.seed = size, opts.ReadSize, seed
	if ord.ok {
		p.keys = ord.lookup()
	} else if opts.KeyDirectory {
		h, dups := buildHashed(seed, scratch, ix)
		p.keys = h
		if err := p.checkDuplicates(ctx, ix, dups); err != nil {
			return nil, err
		}
	}
	scratch = nil
	if opts.Resident != nil {
		if err := p.keep(ctx, ix, opts.Resident(ix), held.tables); err != nil {
			return nil, err
		}
	}
	p.mu.Lock()
	for c, t := range held.tables {
		if t != nil && !p.resident[c] {
			p.addLocked(c, t, false)
		}
	}
	p.mu.Unlock()
	return ix, nil
}

// captured is the sample tables an Open's stream keeps as it passes them,
// chunk by chunk from the first, while their bytes stay within budget
// (the table cache's bound): a node then reads none of them from the
// store again, neither those it keeps for good (its own chunks) nor, on
// the batch path, those of other chunks a batch lays out — a node whose
// table cache holds every table never reads one after its load. Tables
// are nil past the budget.
type captured struct {
	budget, bytes int64
	tables        []*table
	recs          [][]byte // per chunk, its records while the keys are to come
}

// record keeps chunk c's records if the budget has room for them.
func (h *captured) record(c int, recs []byte) {
	if h == nil || h.bytes+int64(len(recs))+tableOverhead > h.budget {
		return
	}
	if h.recs == nil {
		h.recs = make([][]byte, len(h.tables))
	}
	h.recs[c] = bytes.Clone(recs)
	h.bytes += int64(len(recs)) + tableOverhead
}

// keys completes chunk c's table with its keys if its records were kept
// and the budget has room for both.
func (h *captured) keys(c int, kb []byte, keyBase uint32) {
	if h == nil || h.recs == nil || h.recs[c] == nil {
		return
	}
	rec := h.recs[c]
	h.recs[c] = nil
	if h.bytes+int64(len(kb)) > h.budget {
		h.bytes -= int64(len(rec)) + tableOverhead
		return
	}
	h.bytes += int64(len(kb))
	h.tables[c] = &table{rec: rec, keys: string(kb), keyBase: keyBase}
}

// header is an encoded index's header fields.
type header struct {
	chunks, samples, tableLen, keyLen int64
	inPlace                           int64 // the in-place section's length
	checksums                         bool  // FlagChecksums
	lineage                           bool  // FlagLineage
}

// openHeader reads and checks the header and the chunk table (Decode's
// steps 1–5 and 7–8, and the chunk checks of step 10), and returns the
// index with its chunks.
func openHeader(st *stream, size int64) (*Index, header, error) {
	var hdr header
	magic, err := st.next(int(min(size, int64(len(Magic)))))
	if err != nil {
		return nil, hdr, err
	}
	if string(magic) != Magic[:len(magic)] {
		return nil, hdr, fmt.Errorf("%w: bad magic %q, want %q: not a Brand index", ErrCorrupt, magic, Magic)
	}
	if size < headerSize {
		return nil, hdr, fmt.Errorf("%w: header needs %d bytes, %d remain", ErrTruncated, headerSize, size)
	}
	b, err := st.next(headerSize - len(Magic))
	if err != nil {
		return nil, hdr, err
	}
	b = append(append(make([]byte, 0, headerSize), Magic...), b...)
	switch v := le.Uint32(b[8:]); {
	case v == 0:
		return nil, hdr, fmt.Errorf("%w: format version 0", ErrCorrupt)
	case v != FormatVersion:
		return nil, hdr, fmt.Errorf("%w: index format version %d, this build reads version %d", ErrVersion, v, FormatVersion)
	}
	flags := le.Uint32(b[12:])
	if err := checkFlags(flags); err != nil {
		return nil, hdr, err
	}
	hdr = header{
		chunks:    int64(le.Uint32(b[16:])),
		samples:   int64(le.Uint32(b[20:])),
		tableLen:  int64(le.Uint32(b[24:])),
		keyLen:    int64(le.Uint32(b[28:])),
		checksums: flags&FlagChecksums != 0,
		lineage:   flags&FlagLineage != 0,
	}
	rest := size - headerSize
	for _, sec := range []struct {
		name string
		n    int64
	}{
		{"chunk table", hdr.tableLen},
		{"sample table", sampleRecordLen * hdr.samples},
		{"key blob", hdr.keyLen},
		{"trailer", trailerSize},
	} {
		if sec.n > rest {
			return nil, hdr, fmt.Errorf("%w: %s needs %d bytes, %d remain", ErrTruncated, sec.name, sec.n, rest)
		}
		rest -= sec.n
	}
	// What is left is the in-place section of a deferred index.
	hdr.inPlace = rest
	if flags&FlagDeferred == 0 && rest > 0 {
		return nil, hdr, fmt.Errorf("%w: %d bytes after the trailer", ErrCorrupt, rest)
	}
	if hdr.chunks > hdr.tableLen/chunkRecordMin {
		return nil, hdr, fmt.Errorf("%w: %d chunks cannot fit a %d-byte chunk table", ErrCorrupt, hdr.chunks, hdr.tableLen)
	}
	table, err := st.next(int(hdr.tableLen))
	if err != nil {
		return nil, hdr, err
	}
	ix := &Index{chunks: make([]Chunk, hdr.chunks), chunkStart: make([]int, hdr.chunks+1), deferred: flags&FlagDeferred != 0}
	for c := range ix.chunks {
		ch, n, err := decodeChunk(table)
		if err != nil {
			return nil, hdr, fmt.Errorf("%w: chunk %d: %w", ErrCorrupt, c, err)
		}
		table = table[n:]
		ix.chunkStart[c+1] = ix.chunkStart[c] + ch.Samples
		if int64(ix.chunkStart[c+1]) > hdr.samples {
			return nil, hdr, fmt.Errorf("%w: chunks count more than the header's %d samples", ErrCorrupt, hdr.samples)
		}
		ix.chunks[c] = ch
	}
	if len(table) != 0 {
		return nil, hdr, fmt.Errorf("%w: %d bytes left over in the chunk table", ErrCorrupt, len(table))
	}
	if got := int64(ix.chunkStart[hdr.chunks]); got != hdr.samples {
		return nil, hdr, fmt.Errorf("%w: chunks count %d samples, header says %d", ErrCorrupt, got, hdr.samples)
	}
	check := newChunkCheck(ErrCorrupt, len(ix.chunks))
	for c, ch := range ix.chunks {
		if err := check.add(c, ch); err != nil {
			return nil, hdr, err
		}
	}
	ix.total = check.total
	return ix, hdr, nil
}

// streamRecords reads the sample table: it checks every record (Decode's
// steps 9 and 11), sums the sample lengths, notes where each chunk's keys
// start, starts each chunk's CRC32C and leaves each sample's key end in
// keyEnds.
func (p *partial) streamRecords(st *stream, ix *Index, keyEnds []uint64, held *captured) error {
	var prev uint32 // the previous sample's key end
	for c, ch := range ix.chunks {
		first, n := ix.ChunkRange(c)
		p.keyStart[c] = prev
		recs, err := st.next(sampleRecordLen * n)
		if err != nil {
			return err
		}
		p.segCRC[c] = crc32.Update(0, castagnoli, recs)
		held.record(c, recs)
		end := int64(0) // end of the previous sample in this chunk
		for j := range n {
			i, r := first+j, recs[sampleRecordLen*j:]
			off64, n32, ke := le.Uint64(r), le.Uint32(r[8:]), le.Uint32(r[16:])
			if off64 > math.MaxInt64 {
				return fmt.Errorf("%w: sample %d: offset %d out of range", ErrCorrupt, i, off64)
			}
			off, n := int64(off64), int64(n32)
			switch {
			case ke <= prev && i > 0 || ke == 0:
				return fmt.Errorf("%w: sample %d: key end %d does not follow %d (keys must be non-empty)", ErrCorrupt, i, ke, prev)
			case ix.deferred:
				if off != int64(j) || n != 0 || le.Uint32(r[12:]) != 0 {
					return fmt.Errorf("%w: sample %d of an index served in place: record %d+%d, want its ordinal %d in chunk %d and no range",
						ErrCorrupt, i, off, n, j, c)
				}
			case n == 0 || off%BlockSize != 0 || n%BlockSize != 0:
				return fmt.Errorf("%w: sample %d: range offset %d length %d is not a non-empty run of %d-byte tar blocks",
					ErrCorrupt, i, off, n, BlockSize)
			case off < end:
				return fmt.Errorf("%w: sample %d: offset %d overlaps or precedes the previous sample of chunk %d, which ends at %d",
					ErrCorrupt, i, off, c, end)
			case off > ch.Size-n:
				return fmt.Errorf("%w: sample %d: range %d+%d exceeds chunk %d %q size %d", ErrCorrupt, i, off, n, c, ch.Key, ch.Size)
			}
			end = off + n
			prev = ke
			keyEnds[i] = uint64(ke)
			p.sampleBytes += n
		}
	}
	p.keyStart[len(ix.chunks)] = prev
	return nil
}

// keyOrder follows whether the keys are ordered: each chunk's keys
// ascending, and the chunks' key ranges, once sorted, disjoint.
type keyOrder struct {
	ok          bool
	first, last []string // per chunk; "" for an empty chunk
}

// streamKeys reads the key blob: it finishes each chunk's CRC32C, replaces
// each sample's key end in scratch with its key's hash, and finds whether
// the keys are ordered.
func (p *partial) streamKeys(st *stream, ix *Index, scratch []uint64, seed maphash.Seed, held *captured) (keyOrder, error) {
	ord := keyOrder{ok: true, first: make([]string, len(ix.chunks)), last: make([]string, len(ix.chunks))}
	for c := range ix.chunks {
		base := p.keyStart[c]
		kb, err := st.next(int(p.keyStart[c+1] - base))
		if err != nil {
			return ord, err
		}
		p.segCRC[c] = crc32.Update(p.segCRC[c], castagnoli, kb)
		held.keys(c, kb, base)
		first, n := ix.ChunkRange(c)
		var firstKey, prevKey []byte
		start := base
		for i := first; i < first+n; i++ {
			end := uint32(scratch[i])
			key := kb[start-base : end-base]
			start = end
			scratch[i] = maphash.Bytes(seed, key)
			if i == first {
				firstKey = key
			} else if ord.ok && bytes.Compare(prevKey, key) >= 0 {
				ord.ok = false
			}
			prevKey = key
		}
		if ord.ok && n > 0 {
			ord.first[c], ord.last[c] = string(firstKey), string(prevKey)
		}
	}
	if ord.ok {
		ord.ok = ord.disjoint()
	}
	return ord, nil
}

// stream reads an object front to back in blocks, one block ahead of its
// reader, and hashes every byte on the way in: SHA-256 for the index ID,
// CRC32C (of all but the trailer) for the trailer check. Hashing in the
// reading goroutine puts a second core to work beside the parser.
type stream struct {
	blocks chan block
	free   chan []byte
	cur    []byte // the unread rest of the current block
	buf    []byte // the current block, to recycle
	big    []byte // a reused buffer for reads across blocks
	done   chan struct{}
	cancel context.CancelFunc
	err    error

	sha hash.Hash // written only by the reading goroutine until done
	crc uint32
}

type block struct {
	b   []byte
	err error
}

func newStream(ctx context.Context, r RangeReader, size int64, readSize int) *stream {
	ctx, cancel := context.WithCancel(ctx)
	s := &stream{blocks: make(chan block, 1), free: make(chan []byte, 3), done: make(chan struct{}), cancel: cancel, sha: sha256.New()}
	readSize = int(min(int64(readSize), max(size, 1)))
	for range 3 {
		s.free <- make([]byte, readSize)
	}
	go func() {
		defer close(s.done)
		defer close(s.blocks)
		for off := int64(0); off < size; {
			var buf []byte
			select {
			case buf = <-s.free:
			case <-ctx.Done():
				return
			}
			buf = buf[:min(int64(readSize), size-off)]
			err := r.ReadRange(ctx, off, buf)
			if err == nil {
				s.sha.Write(buf)
				s.crc = crc32.Update(s.crc, castagnoli, buf[:max(0, min(int64(len(buf)), size-trailerSize-off))])
			}
			select {
			case s.blocks <- block{buf, err}:
			case <-ctx.Done():
				return
			}
			if err != nil {
				return
			}
			off += int64(len(buf))
		}
	}()
	return s
}

// next returns the next n bytes, valid until the next call.
func (s *stream) next(n int) ([]byte, error) {
	if n <= len(s.cur) {
		b := s.cur[:n]
		s.cur = s.cur[n:]
		return b, nil
	}
	if cap(s.big) < n {
		s.big = make([]byte, n)
	}
	out := s.big[:n]
	for got := 0; got < n; {
		if len(s.cur) == 0 {
			if err := s.more(); err != nil {
				return nil, err
			}
		}
		k := copy(out[got:], s.cur)
		s.cur = s.cur[k:]
		got += k
	}
	return out, nil
}

// more moves to the next block.
func (s *stream) more() error {
	if s.err != nil {
		return s.err
	}
	if s.buf != nil {
		s.free <- s.buf[:cap(s.buf)]
		s.buf = nil
	}
	b, ok := <-s.blocks
	switch {
	case !ok:
		s.err = fmt.Errorf("%w: the stream ended early", ErrTruncated)
	case b.err != nil:
		s.err = fmt.Errorf("chunkindex: reading the index: %w", b.err)
	}
	if s.err != nil {
		return s.err
	}
	s.buf, s.cur = b.b, b.b
	return nil
}

// finish waits for the reading goroutine, which has read everything, and
// returns the SHA-256 and the CRC32C of what it read.
func (s *stream) finish() ([]byte, uint32, error) {
	if len(s.cur) != 0 {
		return nil, 0, fmt.Errorf("%w: %d bytes after the trailer", ErrCorrupt, len(s.cur))
	}
	<-s.done
	return s.sha.Sum(nil), s.crc, nil
}

// close stops the reading goroutine and waits for it.
func (s *stream) close() {
	s.cancel()
	for range s.blocks {
	}
	<-s.done
}

// keep loads the tables of chunks and keeps them for good — those the
// stream kept (held, by chunk) from there, the others from the store. It
// runs before the index is shared, but after the duplicate check may have
// cached tables, which it takes out of the cache.
func (p *partial) keep(ctx context.Context, ix *Index, chunks []int, held []*table) error {
	p.mu.Lock()
	for _, c := range chunks {
		if e, ok := p.entries[c]; ok {
			p.lru.Remove(e.elem)
			delete(p.entries, c)
			p.cacheBytes -= e.t.bytes()
			p.slots[c].Store(nil)
		}
	}
	p.mu.Unlock()
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(p.parallel)
	for _, c := range chunks {
		if c < 0 || c >= len(ix.chunks) || p.resident[c] {
			continue
		}
		p.resident[c] = true
		if t := held[c]; t != nil {
			p.slots[c].Store(t)
			continue
		}
		g.Go(func() error {
			t, err := p.read(gctx, ix, c)
			if err != nil {
				return err
			}
			p.slots[c].Store(t)
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return fmt.Errorf("chunkindex: loading the tables this node keeps: %w", err)
	}
	for c, r := range p.resident {
		if r {
			p.residentTables++
			p.residentBytes += p.slots[c].Load().bytes()
		}
	}
	return nil
}

// directory builds the hash directory of an index whose keys are in no
// order: it streams the object again (its keys and their ends), checks that
// it is still the index p was opened from (its ID), hashes every key and
// checks for duplicates, as Open does with OpenOptions.KeyDirectory.
func (p *partial) directory(ctx context.Context, ix *Index) (*hashedKeys, error) {
	st := newStream(ctx, p.r, p.size, p.readSize)
	defer st.close()
	again, hdr, err := openHeader(st, p.size)
	if err != nil {
		return nil, err
	}
	tmp := &partial{keyStart: make([]uint32, len(again.chunks)+1), segCRC: make([]uint32, len(again.chunks))}
	scratch := make([]uint64, hdr.samples)
	if err := tmp.streamRecords(st, again, scratch, nil); err != nil {
		return nil, err
	}
	if _, err := tmp.streamKeys(st, again, scratch, p.seed, nil); err != nil {
		return nil, err
	}
	// A deferred index's in-place section lies between its keys and its
	// trailer (Open parses it; the directory needs none of it).
	if hdr.inPlace > 0 {
		if _, err := st.next(int(hdr.inPlace)); err != nil {
			return nil, err
		}
	}
	if _, err := st.next(trailerSize); err != nil {
		return nil, err
	}
	sum, _, err := st.finish()
	if err != nil {
		return nil, err
	}
	if id := hex.EncodeToString(sum)[:16]; id != ix.ID() {
		return nil, fmt.Errorf("%w: the index object now has ID %s, not %s: it was replaced", ErrCorrupt, id, ix.ID())
	}
	h, dups := buildHashed(p.seed, scratch, ix)
	if err := p.checkDuplicates(ctx, ix, dups); err != nil {
		return nil, err
	}
	return h, nil
}
