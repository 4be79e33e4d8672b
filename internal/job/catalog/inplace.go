package catalog

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/brandgw/brand/chunkindex"
	"github.com/brandgw/brand/dataset/stored"
	"github.com/brandgw/brand/format"
	"github.com/brandgw/brand/internal/errkind"
	"github.com/brandgw/brand/s3backend"
)

// ErrSelect marks fields a job asks for that its dataset cannot give: a
// field it does not have, or fields of a tar dataset, whose samples are
// served whole.
var ErrSelect = errkind.New(errkind.Invalid, "fields not selectable")

// ErrGrown marks a load of a chunk that needed more room than its bound:
// its size is learnt (Dataset.ChunkSize says it now), and a request for
// it again, sized anew, loads it. The reader retries.
var ErrGrown = errkind.New(errkind.Unavailable, "chunk needs more room than its bound")

// InPlace is what a dataset served in place adds (package format).
type InPlace struct {
	Format  string
	Decoder format.Decoder
	Fields  []format.Field
	// Data is the store the chunks' objects are read from: the dataset's
	// own, or the one its manifest names (an index written beside
	// read-only data).
	Data s3backend.Store

	// A view reading some of the fields: the selection, its names (the
	// chunk keys' Select), and each chunk's resident bound with them.
	sel   format.Selection
	names string
	sizes []int64
	// grown holds, per chunk, the size a load found it to need, 0 for
	// none: more than its bound, when it decoded larger (format.
	// GrowError), or less, when its long texts were left unread (fit):
	// learnt on its first load, used by every later request for it
	// (ChunkSize).
	grown []atomic.Int64

	views *viewMemo // shared by a dataset and its views

	// reads keeps the bytes a load read for a chunk that then learnt it
	// needs more room (ErrGrown), for the load that follows it: a chunk is
	// read from the store once, grown or not. At most keptReads of them.
	readsMu sync.Mutex
	reads   []keptRead
}

// keptRead is one chunk's bytes as read, kept for its next load.
type keptRead struct {
	c   int
	src []byte
}

// keptReads bounds the reads kept for chunks that grew: loads that would
// retry at once, so a few.
const keptReads = 4

// working is what loading chunk c takes beside its resident buffer: its
// ranges as read, and what its decoder allocates (format.Working).
func (ip *InPlace) working(c int) int64 {
	ranges, _ := ip.Decoder.Extent(c, ip.sel)
	n := format.Concat(ranges)
	if w, ok := ip.Decoder.(format.Working); ok {
		n += w.Working(c, ip.sel)
	}
	return n
}

// longTexts reports whether chunk c is decoded with its text values of
// more than most bytes left unread (format.TextBound, most > 0: the
// loader's WithTexts), as its decoder finds from the chunk's metadata
// before a byte of it is read, and what that decode takes beside its
// resident buffer: its ranges as read, and the decoder's own.
func (ip *InPlace) longTexts(c int, most int64) (int64, bool) {
	tb, ok := ip.Decoder.(format.TextBound)
	if !ok || most <= 0 {
		return 0, false
	}
	w, may := tb.LongTexts(c, ip.sel, most)
	if !may {
		return 0, false
	}
	ranges, _ := ip.Decoder.Extent(c, ip.sel)
	return format.Concat(ranges) + w, true
}

// keepRead keeps chunk c's bytes as read for its next load.
func (ip *InPlace) keepRead(c int, src []byte) {
	ip.readsMu.Lock()
	defer ip.readsMu.Unlock()
	if len(ip.reads) == keptReads {
		ip.reads = ip.reads[1:]
	}
	ip.reads = append(ip.reads, keptRead{c, src})
}

// takeRead returns and forgets chunk c's kept bytes, nil if none.
func (ip *InPlace) takeRead(c int) []byte {
	ip.readsMu.Lock()
	defer ip.readsMu.Unlock()
	for i, r := range ip.reads {
		if r.c == c {
			ip.reads = append(ip.reads[:i], ip.reads[i+1:]...)
			return r.src
		}
	}
	return nil
}

// viewMemo holds a dataset version's views, one per selection, so that a
// selection is always the same *Dataset: streams, the schedule and the
// cache tell datasets apart by it.
type viewMemo struct {
	mu    sync.Mutex
	views map[string]*Dataset
}

// maxViews bounds the selections of one dataset version held at once.
const maxViews = 64

// Selected names the fields the dataset is read with: "" for all of them
// (and for a tar dataset).
func (d *Dataset) Selected() string {
	if d.InPlace == nil {
		return ""
	}
	return d.InPlace.names
}

// Selection is the fields the dataset is read with; nil for all.
func (d *Dataset) Selection() format.Selection {
	if d.InPlace == nil {
		return nil
	}
	return d.InPlace.sel
}

// Select returns the dataset read with only the fields named: the same
// dataset for none or all of them, else a view whose chunks are decoded
// with those fields alone — what a job that names columns reads, from the
// store too (format.Decoder.Extent). Fields a dataset does not have, or
// any field of a tar dataset, are ErrSelect.
func (d *Dataset) Select(names []string) (*Dataset, error) {
	if len(names) == 0 {
		return d, nil
	}
	if d.InPlace == nil {
		return nil, fmt.Errorf("%w: dataset %s is tar chunks, whose samples are served whole; columns= selects fields of a dataset served in place", ErrSelect, d.Name)
	}
	if d.InPlace.sel != nil {
		return nil, fmt.Errorf("%w: dataset %s is already read with fields %s", ErrSelect, d.Name, d.InPlace.names)
	}
	sel, err := format.Select(d.InPlace.Fields, names)
	if err != nil {
		return nil, fmt.Errorf("%w: dataset %s: %w", ErrSelect, d.Name, err)
	}
	if sel == nil {
		return d, nil
	}
	key := sel.Names(d.InPlace.Fields)
	m := d.InPlace.views
	m.mu.Lock()
	defer m.mu.Unlock()
	if v, ok := m.views[key]; ok {
		return v, nil
	}
	if len(m.views) >= maxViews {
		return nil, fmt.Errorf("%w: dataset %s is read with %d selections of fields already, the most a version holds", ErrSelect, d.Name, maxViews)
	}
	v := *d
	v.ancestors = &ancestorMemo{}
	ip := InPlace{Format: d.InPlace.Format, Decoder: d.InPlace.Decoder, Fields: d.InPlace.Fields, Data: d.InPlace.Data, views: d.InPlace.views}
	ip.sel, ip.names = sel, key
	ip.sizes = make([]int64, d.Index.NumChunks())
	ip.grown = make([]atomic.Int64, d.Index.NumChunks())
	v.MaxChunk = 0
	for c := range ip.sizes {
		_, ip.sizes[c] = ip.Decoder.Extent(c, sel)
		v.MaxChunk = max(v.MaxChunk, ip.sizes[c])
	}
	v.MaxChunk = BufferClass(v.MaxChunk)
	v.reuse = d.MaxChunk
	v.InPlace = &ip
	m.views[key] = &v
	return &v, nil
}

// viewOf returns the view of d that reads the fields names names ("" for
// d itself), as a cache key's Select names them.
func (d *Dataset) viewOf(names string) (*Dataset, bool) {
	if names == "" {
		return d, true
	}
	if d.InPlace == nil {
		return nil, false
	}
	v, err := d.Select(strings.Split(names, ","))
	return v, err == nil && v.Selected() == names
}

// grow records that chunk c needs n bytes (format.GrowError).
func (d *Dataset) grow(c int, n int64) {
	if d.InPlace != nil && n > d.ChunkSize(c) {
		d.InPlace.grown[c].Store(n)
	}
}

// ObjectOf is the object chunk c's bytes are in and its version: the
// chunk's key and ETag for a tar chunk; the object a chunk of a dataset
// served in place names (stored.ChunkObject).
func (d *Dataset) ObjectOf(c int) (key, etag string) {
	ch := d.Index.Chunk(c)
	if d.InPlace == nil {
		return ch.Key, ch.ETag
	}
	return stored.ChunkObject(ch.Key), ch.ETag
}

// openInPlace reads what a deferred index needs besides itself — its
// manifest (where the data is) and its format's description — and opens
// its format's decoder from the formats sp offers.
func openInPlace(ctx context.Context, sp opening, store s3backend.Store, ix *chunkindex.Index) (*InPlace, error) {
	name := ix.InPlace().Format
	i := slices.IndexFunc(sp.formats, func(f format.Format) bool { return f.Name() == name })
	if i < 0 {
		return nil, fmt.Errorf("its index is of a dataset in %s format, which this gateway does not read", name)
	}
	m, err := stored.ReadManifest(ctx, store)
	if err != nil {
		return nil, err
	}
	if err := m.Describes(ix); err != nil {
		// The manifest is written after the index: being written now.
		return nil, fmt.Errorf("%w: %w", s3backend.ErrUnavailable, err)
	}
	meta, err := stored.ReadFormat(ctx, store, ix)
	if err != nil {
		return nil, err
	}
	dec, err := sp.formats[i].Open(meta)
	if err != nil {
		return nil, fmt.Errorf("opening its %s description: %w", name, err)
	}
	ip := &InPlace{Format: name, Decoder: dec, Fields: dec.Fields(), Data: store, views: &viewMemo{views: map[string]*Dataset{}},
		grown: make([]atomic.Int64, ix.NumChunks())}
	if m.InPlace != nil && m.InPlace.Data != "" {
		if ip.Data, err = s3backend.Open(ctx, m.InPlace.Data, sp.backend); err != nil {
			return nil, fmt.Errorf("opening its data at %s: %w", m.InPlace.Data, err)
		}
	}
	return ip, nil
}
