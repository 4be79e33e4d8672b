package chunkindex

import (
	"context"
	"fmt"
	"math"
	"runtime"
	"slices"
	"strings"
	"sync"
)

// Chunk describes one chunk object of a dataset.
type Chunk struct {
	// Key is the object key relative to the dataset root.
	Key string
	// Size is the object size in bytes.
	Size int64
	// ETag pins the object version: a chunk rewritten under the same key is
	// detected instead of served as if it were the indexed one. It may be
	// empty when the store has no ETags.
	ETag string
	// Samples is the number of samples in the chunk.
	Samples int
}

// Sample describes one sample: where its bytes are and their CRC32C.
type Sample struct {
	Key    string
	Chunk  int
	Offset int64
	Length int64
	CRC    uint32
}

// Limits of the format (see docs/format.md). They are far above what a
// dataset needs and exist so every count and length has a fixed-width field.
const (
	// MaxSampleLength is the longest sample range an index can hold.
	MaxSampleLength = math.MaxUint32 &^ (BlockSize - 1)
	// MaxChunkKeyLen bounds a chunk key and a chunk ETag, in bytes.
	MaxChunkKeyLen = math.MaxUint16
	// MaxSamples bounds the number of samples and of chunks.
	MaxSamples = math.MaxUint32
	// MaxKeyBytes bounds the total length of all sample keys.
	MaxKeyBytes = math.MaxUint32
)

// Index maps sample IDs (0..NumSamples-1, grouped by chunk in chunk order) to
// chunk byte ranges, and sample keys to IDs. It is immutable and safe for
// concurrent use.
//
// It holds the chunk table, and the sample tables: all of them column by
// column (columns), or on a partial index (Open) those of some chunks
// (partial). Its Tables and its Lineage are parts with types of their
// own.
type Index struct {
	chunks     []Chunk
	chunkStart []int // chunkStart[c] is the ID of chunk c's first sample; len NumChunks+1
	total      int64 // sum of chunk sizes

	// The sample tables: cols on an index with every table in memory
	// (New, Decode); part on an index opened partially (Open), whose
	// cols are then empty.
	cols columns
	part *partial

	// deferred is set on an index of a dataset served in place (package
	// format): its chunks are decoded when loaded, and each sample's range
	// and CRC32C are in its decoded chunk's table, not here (NewDeferred).
	// source names its format and what decodes it.
	deferred bool
	source   InPlace
	// spans, per chunk, are the ranges of a deferred index's chunks'
	// objects with the CRC32C their bytes had when indexed; nil without
	// checksums (NewDeferredChecked).
	spans [][]Span
	// lineage is what the index extends, its parent first (Lineage.Extend);
	// nil for one that extends none.
	lineage []Ancestor
	// prefix marks an ancestor's index made from a descendant's
	// (Lineage.AncestorIndex): named by the ancestor's ID, not by its own encoding.
	prefix bool

	idOnce sync.Once
	id     string
}

// New builds an index. Samples must be grouped by chunk in chunk order, with
// chunks[c].Samples of them in chunk c, ascending and non-overlapping within
// the chunk. Every range must be block-aligned (BlockSize), non-empty and
// inside its chunk, every key non-empty and unique across the dataset, chunk
// keys non-empty, unique and outside "_brand/". Violations return an error
// wrapping ErrInvalid (and ErrDuplicateKey for duplicate sample keys).
func New(chunks []Chunk, samples []Sample) (*Index, error) {
	return newIndex(chunks, samples, false)
}

func newIndex(chunks []Chunk, samples []Sample, deferred bool) (*Index, error) {
	if uint64(len(chunks)) > MaxSamples || uint64(len(samples)) > MaxSamples {
		return nil, fmt.Errorf("%w: %d chunks, %d samples: at most %d each", ErrInvalid, len(chunks), len(samples), uint64(MaxSamples))
	}
	ix := &Index{
		chunks:     slices.Clone(chunks),
		chunkStart: make([]int, len(chunks)+1),
		cols: columns{
			offsets: make([]int64, len(samples)),
			lengths: make([]uint32, len(samples)),
			crcs:    make([]uint32, len(samples)),
			keyEnds: make([]uint32, len(samples)),
		},
		deferred: deferred,
	}
	keyBytes := 0
	for c, ch := range chunks {
		if ch.Samples < 0 {
			return nil, fmt.Errorf("%w: chunk %d %q: negative sample count %d", ErrInvalid, c, ch.Key, ch.Samples)
		}
		if ch.Samples > len(samples)-ix.chunkStart[c] {
			return nil, fmt.Errorf("%w: chunks count more than the %d samples given", ErrInvalid, len(samples))
		}
		ix.chunkStart[c+1] = ix.chunkStart[c] + ch.Samples
	}
	if ix.chunkStart[len(chunks)] != len(samples) {
		return nil, fmt.Errorf("%w: chunks count %d samples, %d given", ErrInvalid, ix.chunkStart[len(chunks)], len(samples))
	}
	c := 0
	for i, s := range samples {
		for ix.chunkStart[c+1] <= i {
			c++
		}
		if s.Chunk != c {
			return nil, fmt.Errorf("%w: sample %d %q: chunk %d, but the chunk sample counts place it in chunk %d", ErrInvalid, i, s.Key, s.Chunk, c)
		}
		if !deferred && (s.Offset < 0 || s.Length <= 0 || s.Length > MaxSampleLength) {
			return nil, fmt.Errorf("%w: sample %d %q: range offset %d length %d out of bounds", ErrInvalid, i, s.Key, s.Offset, s.Length)
		}
		keyBytes += len(s.Key)
		if uint64(keyBytes) > MaxKeyBytes {
			return nil, fmt.Errorf("%w: sample keys exceed %d bytes", ErrInvalid, uint64(MaxKeyBytes))
		}
		ix.cols.offsets[i] = s.Offset
		ix.cols.lengths[i] = uint32(s.Length)
		ix.cols.crcs[i] = s.CRC
		ix.cols.keyEnds[i] = uint32(keyBytes)
	}
	var keys strings.Builder
	keys.Grow(keyBytes)
	for _, s := range samples {
		keys.WriteString(s.Key)
	}
	ix.cols.keys = keys.String()
	if err := ix.validate(ErrInvalid); err != nil {
		return nil, err
	}
	return ix, nil
}

// InPlace is what a deferred index says of the dataset it describes: its
// format (package format's Format.Name) and the SHA-256 of the format's
// description of its chunks (format.Layout.Meta, stored beside the index
// at FormatKey), so that the index's ID names the decoding too: the same
// objects described otherwise (another member mapping) are another index.
type InPlace struct {
	Format string
	Meta   [32]byte
	// Created is when the index was built (Unix seconds): the modification
	// time of every member of its decoded chunks, the same on every node
	// that decodes them.
	Created int64
}

// NewDeferred builds the index of a dataset served in place (package
// format) as src describes it: chunks whose Size is their resident bound
// and whose Key names the chunk (not necessarily an object), and every
// sample's key, chunk by chunk. Each sample's range and CRC32C are decided when its chunk is
// decoded and are in the decoded chunk's table; here a sample's range is
// its ordinal in its chunk with length 0 (SampleRange), so that nothing
// can mistake it for bytes. Keys are checked as New checks them.
func NewDeferred(chunks []Chunk, keys []string, src InPlace) (*Index, error) {
	if src.Format == "" || len(src.Format) > maxFormatName {
		return nil, fmt.Errorf("%w: a format name of %d bytes (1 to %d)", ErrInvalid, len(src.Format), maxFormatName)
	}
	samples := make([]Sample, 0, len(keys))
	c, first := 0, 0
	for i, k := range keys {
		for c < len(chunks) && i-first >= chunks[c].Samples {
			first += chunks[c].Samples
			c++
		}
		if c == len(chunks) {
			return nil, fmt.Errorf("%w: %d keys, the chunks count %d samples", ErrInvalid, len(keys), i)
		}
		samples = append(samples, Sample{Key: k, Chunk: c, Offset: int64(i - first)})
	}
	ix, err := newIndex(chunks, samples, true)
	if err != nil {
		return nil, err
	}
	ix.source = src
	return ix, nil
}

// maxFormatName bounds a format's name in an index.
const maxFormatName = 64

// Span is a byte range of the object a chunk of a dataset served in place
// is read from, and the CRC32C of its bytes when the index was built: a
// reader of the range checks its bytes are still those, as a tar chunk's
// samples are checked against theirs.
type Span struct {
	Off, Len int64
	CRC      uint32
}

// End is the offset just past the span.
func (s Span) End() int64 { return s.Off + s.Len }

// NewDeferredChecked is NewDeferred for an index that carries checksums:
// spans[c] are chunk c's, each range its chunk is read in covered by
// whole spans (package dataset makes them); ascending, not overlapping,
// none empty. A chunk may have none (one with nothing to read).
func NewDeferredChecked(chunks []Chunk, keys []string, src InPlace, spans [][]Span) (*Index, error) {
	if len(spans) != len(chunks) {
		return nil, fmt.Errorf("%w: checksums of %d chunks for %d chunks", ErrInvalid, len(spans), len(chunks))
	}
	if err := checkSpans(ErrInvalid, spans); err != nil {
		return nil, err
	}
	ix, err := NewDeferred(chunks, keys, src)
	if err != nil {
		return nil, err
	}
	ix.spans = make([][]Span, len(spans))
	for c, ss := range spans {
		ix.spans[c] = slices.Clone(ss)
		if ix.spans[c] == nil {
			ix.spans[c] = []Span{}
		}
	}
	return ix, nil
}

// checkSpans checks every chunk's spans ascend, do not overlap, are not
// empty and end within int64. kind is the sentinel errors wrap.
func checkSpans(kind error, spans [][]Span) error {
	for c, ss := range spans {
		end := int64(0)
		for i, s := range ss {
			switch {
			case s.Len <= 0 || s.Off < end:
				return fmt.Errorf("%w: chunk %d: span %d at %d+%d is empty or does not follow the one before, which ends at %d", kind, c, i, s.Off, s.Len, end)
			case s.Off > math.MaxInt64-s.Len:
				return fmt.Errorf("%w: chunk %d: span %d at %d+%d ends past the largest offset", kind, c, i, s.Off, s.Len)
			}
			end = s.End()
		}
	}
	return nil
}

// Checksummed reports whether the index carries the CRC32C of every
// range of its chunks' objects (NewDeferredChecked).
func (ix *Index) Checksummed() bool { return ix.spans != nil }

// Spans returns chunk c's spans, nil on an index without checksums. The
// slice is shared: read it, never write it.
func (ix *Index) Spans(c int) []Span {
	if ix.spans == nil {
		return nil
	}
	return ix.spans[c]
}

// InPlace returns what a deferred index says of its dataset's format;
// the zero InPlace for a tar dataset's.
func (ix *Index) InPlace() InPlace { return ix.source }

// Deferred reports whether the index is of a dataset served in place,
// whose samples' ranges are in their decoded chunks (NewDeferred).
func (ix *Index) Deferred() bool { return ix.deferred }

// validate checks the invariants shared by New and Decode and builds the
// key lookup. kind is the sentinel that errors wrap: ErrInvalid or
// ErrCorrupt.
func (ix *Index) validate(kind error) error {
	// Key ends first: the messages below quote sample keys.
	var prev uint32
	for i, e := range ix.cols.keyEnds {
		if e <= prev && i > 0 || e == 0 {
			return fmt.Errorf("%w: sample %d: key end %d does not follow %d (keys must be non-empty)", kind, i, e, prev)
		}
		prev = e
	}
	if int(prev) != len(ix.cols.keys) {
		return fmt.Errorf("%w: key ends reach %d, key bytes are %d", kind, prev, len(ix.cols.keys))
	}
	if n := (encoding{ix}).chunkTableLen(); n > math.MaxUint32 {
		return fmt.Errorf("%w: chunk table of %d bytes exceeds %d", kind, n, uint64(math.MaxUint32))
	}
	check := newChunkCheck(kind, len(ix.chunks))
	for c, ch := range ix.chunks {
		if err := check.add(c, ch); err != nil {
			return err
		}

		if ix.deferred {
			for i := ix.chunkStart[c]; i < ix.chunkStart[c+1]; i++ {
				if ix.cols.offsets[i] != int64(i-ix.chunkStart[c]) || ix.cols.lengths[i] != 0 || ix.cols.crcs[i] != 0 {
					return fmt.Errorf("%w: sample %d %q of an index served in place: record %d+%d %08x, want its ordinal %d in chunk %d and no range",
						kind, i, ix.SampleKey(i), ix.cols.offsets[i], ix.cols.lengths[i], ix.cols.crcs[i], i-ix.chunkStart[c], c)
				}
			}
			continue
		}
		end := int64(0) // end of the previous sample in this chunk
		for i := ix.chunkStart[c]; i < ix.chunkStart[c+1]; i++ {
			off, n := ix.cols.offsets[i], int64(ix.cols.lengths[i])
			switch {
			case n == 0 || off%BlockSize != 0 || n%BlockSize != 0:
				return fmt.Errorf("%w: sample %d %q: range offset %d length %d is not a non-empty run of %d-byte tar blocks",
					kind, i, ix.SampleKey(i), off, n, BlockSize)
			case off < end:
				return fmt.Errorf("%w: sample %d %q: offset %d overlaps or precedes the previous sample of chunk %d, which ends at %d",
					kind, i, ix.SampleKey(i), off, c, end)
			case off > ch.Size-n:
				return fmt.Errorf("%w: sample %d %q: range %d+%d exceeds chunk %d %q size %d",
					kind, i, ix.SampleKey(i), off, n, c, ch.Key, ch.Size)
			}
			end = off + n
		}
	}
	ix.total = check.total

	if a, b, dup := ix.cols.buildLookup(); dup {
		ca, cb := ix.ChunkOf(a), ix.ChunkOf(b)
		return fmt.Errorf("%w: %w %q in sample %d (chunk %d %q) and sample %d (chunk %d %q)",
			kind, ErrDuplicateKey, ix.SampleKey(a), a, ca, ix.chunks[ca].Key, b, cb, ix.chunks[cb].Key)
	}
	return nil
}

// chunkCheck checks a chunk table record by record, as New, Decode and
// Open meet them: each record alone, its key not another chunk's, and
// the sum of the sizes so far (total) within int64.
type chunkCheck struct {
	kind  error          // the sentinel errors wrap
	keys  map[string]int // the chunk of each key so far
	total int64
}

func newChunkCheck(kind error, chunks int) *chunkCheck {
	return &chunkCheck{kind: kind, keys: make(map[string]int, chunks)}
}

// add checks chunk c's record ch and adds it to the table.
func (k *chunkCheck) add(c int, ch Chunk) error {
	kind := k.kind
	switch {
	case ch.Key == "":
		return fmt.Errorf("%w: chunk %d: empty key", kind, c)
	case strings.HasPrefix(ch.Key, metaPrefix):
		return fmt.Errorf("%w: chunk %d: key %q is under %s, which holds the dataset's metadata", kind, c, ch.Key, metaPrefix)
	case len(ch.Key) > MaxChunkKeyLen || len(ch.ETag) > MaxChunkKeyLen:
		return fmt.Errorf("%w: chunk %d: key or ETag longer than %d bytes", kind, c, MaxChunkKeyLen)
	case ch.Size < 0:
		return fmt.Errorf("%w: chunk %d %q: negative size %d", kind, c, ch.Key, ch.Size)
	case k.total > math.MaxInt64-ch.Size:
		return fmt.Errorf("%w: chunk sizes overflow int64", kind)
	}
	if prev, dup := k.keys[ch.Key]; dup {
		return fmt.Errorf("%w: chunk key %q used by chunks %d and %d", kind, ch.Key, prev, c)
	}
	k.keys[ch.Key] = c
	k.total += ch.Size
	return nil
}

// NumChunks returns the number of chunks.
func (ix *Index) NumChunks() int { return len(ix.chunks) }

// NumSamples returns the number of samples.
func (ix *Index) NumSamples() int { return ix.chunkStart[len(ix.chunks)] }

// TotalBytes returns the sum of the chunk sizes.
func (ix *Index) TotalBytes() int64 { return ix.total }

// SampleBytes returns the sum of the sample lengths: the bytes an epoch
// serves, which is TotalBytes less end-of-archive markers, padding and
// directory entries.
func (ix *Index) SampleBytes() int64 {
	if ix.part != nil {
		return ix.part.sampleBytes // summed while the index streamed in
	}
	return ix.cols.sampleBytes()
}

// Chunk returns chunk c. It panics if c is out of range.
func (ix *Index) Chunk(c int) Chunk { return ix.chunks[c] }

// ChunkRange returns the IDs of chunk c's samples: first .. first+n-1.
func (ix *Index) ChunkRange(c int) (first, n int) {
	return ix.chunkStart[c], ix.chunkStart[c+1] - ix.chunkStart[c]
}

// SampleCounts returns the number of samples of each chunk, in chunk order:
// the input the shuffle package needs. The slice is a copy.
func (ix *Index) SampleCounts() []int {
	counts := make([]int, len(ix.chunks))
	for c := range counts {
		counts[c] = ix.chunkStart[c+1] - ix.chunkStart[c]
	}
	return counts
}

// ChunkOf returns the chunk holding sample id. Every index answers it
// from memory, a partial one too, by a binary search over chunks: storing
// it per sample would cost 4 bytes a sample. It panics if id is out of
// range.
func (ix *Index) ChunkOf(id int) int {
	if id < 0 || id >= ix.NumSamples() {
		panic(fmt.Sprintf("chunkindex: sample id %d out of range [0, %d)", id, ix.NumSamples()))
	}
	// The first chunk whose end is past id; empty chunks are skipped because
	// their end equals the next chunk's start.
	c, _ := slices.BinarySearch(ix.chunkStart[1:], id+1)
	return c
}

// Sample returns sample id. It panics if id is out of range.
//
// On a partial index (Open), the sample's chunk must be prepared (see
// Tables.Prepare), as for SampleRange.
func (ix *Index) Sample(id int) Sample {
	c, off, n, crc := ix.SampleRange(id)
	return Sample{Key: ix.SampleKey(id), Chunk: c, Offset: off, Length: n, CRC: crc}
}

// SampleRange returns where sample id's bytes are. On a deferred index
// (NewDeferred) it returns the sample's ordinal in its chunk as off, and
// length 0 and CRC 0: the range is in the decoded chunk's table. It does
// not allocate,
// which matters on the path that serves every sample of every batch.
// It panics if id is out of range.
//
// On a partial index (Open) it reads the table of the sample's chunk,
// which is in memory if this node keeps it or a Prepare of the chunk has
// not been released; it never reads the store, and panics if the table
// is not in memory (a read that did not prepare its chunks:
// Tables.Prepare, Samples).
func (ix *Index) SampleRange(id int) (chunk int, off, length int64, crc uint32) {
	c := ix.ChunkOf(id)
	if ix.part != nil {
		t := ix.part.table(c)
		off, length, crc := t.sampleRange(id - ix.chunkStart[c])
		return c, off, length, crc
	}
	return c, ix.cols.offsets[id], int64(ix.cols.lengths[id]), ix.cols.crcs[id]
}

// SampleKey returns sample id's key. It does not allocate.
// It panics if id is out of range. On a partial index, see SampleRange.
func (ix *Index) SampleKey(id int) string {
	if ix.part != nil {
		c := ix.ChunkOf(id)
		return ix.part.table(c).key(id - ix.chunkStart[c])
	}
	return ix.cols.key(id)
}

// Lookup returns the ID of the sample with the given key, and whether
// there is one. On an index with every table in memory (New, Decode) it
// reads memory only: its table is built with the index, where it doubles
// as the duplicate-key check, so it needs no lazy initialisation or
// locking, and err is nil. On a partial index it loads the table of the
// chunk the key can be in (see Open for how that chunk is found), and
// fails only if that load does.
func (ix *Index) Lookup(ctx context.Context, key string) (id int, ok bool, err error) {
	if ix.part != nil {
		return ix.part.lookup(ctx, ix, key)
	}
	id, ok = ix.cols.lookup(key)
	return id, ok, nil
}

// LookupMany is Lookup of every key: ids[i] and found[i] are keys[i]'s.
// On an index with every table in memory, a list that is a good part of
// the index is found in one walk of the index's hash order (cut in parts
// walked at once, one a processor), each key and each sample hashed
// once, rather than by a binary search per key (which hashes a sample at
// every probe): a million keys in a fraction of a second.
func (ix *Index) LookupMany(ctx context.Context, keys []string) (ids []int, found []bool, err error) {
	if ix.part != nil || len(keys)*32 < ix.NumSamples() {
		ids, found = make([]int, len(keys)), make([]bool, len(keys))
		for i, k := range keys {
			if ids[i], found[i], err = ix.Lookup(ctx, k); err != nil {
				return nil, nil, err
			}
		}
		return ids, found, nil
	}
	// The walk is cut in parts, one a processor, if each has a good many
	// keys.
	ids, found = ix.cols.lookupWalk(keys, min(runtime.GOMAXPROCS(0), max(len(keys)>>16, 1)))
	return ids, found, nil
}
