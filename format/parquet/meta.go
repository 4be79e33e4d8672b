package parquet

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/brandgw/brand/format"
)

// The dataset as Index describes it and Open reads it back (Layout.Meta):
// the schema once, each field's extension, each file's key prefix, and
// per row group per column chunk what reading, bounding and decoding it
// take. Everything is a uvarint or a length-prefixed string, in a fixed
// order, so the same source indexes to the same bytes.

const metaMagic = "BPQ1"

type dataset struct {
	elems  []element
	exts   []fieldExt // per top-level column
	files  []fileMeta
	chunks []chunk    // the row groups, file by file, in order
	tokens *tokenSpec // a token dataset's, else nil (tokens.go)
	// ends cuts the row groups into chunks: chunk i is the row groups
	// chunks[ends[i-1]:ends[i]] (from 0 for the first), consecutive row
	// groups of one file (span.go). nil is a chunk a row group, as every
	// description written before chunks of several row groups.
	ends []int
	// docs is a token dataset's counts by chunk where a chunk is several
	// row groups (tokens.counts is by row group), else nil.
	docs [][]uint32
}

type fieldExt struct {
	ext    string
	forced bool
}

type fileMeta struct {
	prefix string // the object's key without ".parquet"
	rows   int64
	width  int // digits of a row's index in its keys
}

// chunk is one row group (a chunk of the dataset is one or more of them:
// dataset.ends).
type chunk struct {
	at    int // its index in dataset.chunks (set by newDecoder)
	file  int
	first int64 // the row group's first row in its file
	rows  int64
	cols  []colMeta
}

// colMeta is a column chunk: its bytes, its codec and counts, and for a
// byte-array column the bound of its values (bound.go).
type colMeta struct {
	start, length int64
	codec         int8
	numValues     int64
	unc           int64
	dict          bool // may hold a dictionary page
	front         bool // may hold DELTA_BYTE_ARRAY pages
	// Byte arrays: the sum of the values' lengths and the longest
	// value, at most.
	bytesSum, bytesMax int64
	// guess: the footer could not bound the byte arrays (a dictionary
	// or front coding may repeat values, and the writer gave no size
	// statistics): bytesSum assumes each value is read once, and a
	// chunk that needs more learns its size when decoded
	// (format.WriterOptions.MayGrow).
	guess bool
}

type metaWriter struct{ b []byte }

func (w *metaWriter) u(v uint64)  { w.b = binary.AppendUvarint(w.b, v) }
func (w *metaWriter) i(v int64)   { w.b = binary.AppendVarint(w.b, v) }
func (w *metaWriter) s(v string)  { w.u(uint64(len(v))); w.b = append(w.b, v...) }
func (w *metaWriter) bool(v bool) { w.u(map[bool]uint64{false: 0, true: 1}[v]) }

func encodeMeta(d *dataset) []byte {
	w := &metaWriter{b: []byte(metaMagic)}
	w.u(uint64(len(d.elems)))
	for _, e := range d.elems {
		w.s(e.name)
		w.i(int64(e.phys))
		w.i(int64(e.typeLen))
		w.i(int64(e.rep))
		w.i(int64(e.children))
		w.i(int64(e.converted))
		w.i(int64(e.logical))
		w.i(int64(e.bitWidth))
		w.bool(e.signed)
	}
	w.u(uint64(len(d.exts)))
	for _, x := range d.exts {
		w.s(x.ext)
		w.bool(x.forced)
	}
	w.u(uint64(len(d.files)))
	for _, f := range d.files {
		w.s(f.prefix)
		w.u(uint64(f.rows))
		w.u(uint64(f.width))
	}
	w.u(uint64(len(d.chunks)))
	for _, c := range d.chunks {
		w.u(uint64(c.file))
		w.u(uint64(c.first))
		w.u(uint64(c.rows))
		for _, m := range c.cols {
			w.u(uint64(m.start))
			w.u(uint64(m.length))
			w.u(uint64(m.codec))
			w.u(uint64(m.numValues))
			w.u(uint64(m.unc))
			w.bool(m.dict)
			w.bool(m.front)
			w.u(uint64(m.bytesSum))
			w.u(uint64(m.bytesMax))
			w.bool(m.guess)
		}
	}
	// A token dataset's section follows; a description without one
	// ends here (as every description written before token datasets).
	if t := d.tokens; t != nil {
		w.u(sectionTokens)
		w.u(uint64(t.field))
		w.bool(t.text)
		w.s(string(t.model))
		w.s(t.vocab)
		for _, cs := range t.counts {
			for _, n := range cs {
				w.u(uint64(n))
			}
		}
	}
	// Chunks of several row groups: each chunk's count of row groups.
	if d.ends != nil {
		w.u(sectionSpans)
		w.u(uint64(len(d.ends)))
		prev := 0
		for _, e := range d.ends {
			w.u(uint64(e - prev))
			prev = e
		}
	}
	return w.b
}

// The sections that may follow the row groups, in this order.
const (
	sectionTokens = 1 // a token dataset's
	sectionSpans  = 2 // chunks of several row groups (dataset.ends)
)

type metaReader struct {
	b   []byte
	err error
}

var errMeta = errors.New("parquet: malformed meta")

func (r *metaReader) u() uint64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Uvarint(r.b)
	if n <= 0 {
		r.err = errMeta
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *metaReader) n(max int) int {
	v := r.u()
	if v > uint64(max) {
		r.err = fmt.Errorf("%w: a count of %d", errMeta, v)
		return 0
	}
	return int(v)
}

func (r *metaReader) i() int64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Varint(r.b)
	if n <= 0 {
		r.err = errMeta
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *metaReader) s() string {
	n := r.n(len(r.b))
	if r.err != nil {
		return ""
	}
	v := string(r.b[:n])
	r.b = r.b[n:]
	return v
}

func (r *metaReader) i64() int64 {
	v := r.u()
	if v > 1<<62 {
		r.err = fmt.Errorf("%w: a size of %d", errMeta, v)
	}
	return int64(v)
}

func decodeMeta(b []byte) (*dataset, error) {
	if len(b) < len(metaMagic) || string(b[:len(metaMagic)]) != metaMagic {
		return nil, fmt.Errorf("%w: not Parquet meta", errMeta)
	}
	r := &metaReader{b: b[len(metaMagic):]}
	d := &dataset{}
	d.elems = make([]element, r.n(len(r.b)))
	for i := range d.elems {
		e := &d.elems[i]
		e.name = r.s()
		e.phys = int8(r.i())
		e.typeLen = int32(r.i())
		e.rep = int8(r.i())
		e.children = int32(r.i())
		e.converted = int8(r.i())
		e.logical = int8(r.i())
		e.bitWidth = int8(r.i())
		e.signed = r.u() == 1
	}
	leaves := 0
	for _, e := range d.elems {
		if e.phys != tyGroup {
			leaves++
		}
	}
	d.exts = make([]fieldExt, r.n(len(r.b)))
	for i := range d.exts {
		d.exts[i] = fieldExt{ext: r.s(), forced: r.u() == 1}
	}
	d.files = make([]fileMeta, r.n(len(r.b)))
	for i := range d.files {
		d.files[i] = fileMeta{prefix: r.s(), rows: r.i64(), width: r.n(20)}
	}
	d.chunks = make([]chunk, r.n(len(r.b)/max(1, leaves)))
	for i := range d.chunks {
		c := &d.chunks[i]
		c.file, c.first, c.rows = r.n(len(d.files)-1), r.i64(), r.i64()
		if r.err != nil {
			return nil, r.err
		}
		if len(d.files) == 0 {
			return nil, fmt.Errorf("%w: a chunk without files", errMeta)
		}
		c.cols = make([]colMeta, 0, leaves)
		for range leaves {
			if r.err != nil {
				return nil, r.err
			}
			var m colMeta
			m.start, m.length = r.i64(), r.i64()
			m.codec = int8(r.n(127))
			m.numValues, m.unc = r.i64(), r.i64()
			m.dict, m.front = r.u() == 1, r.u() == 1
			m.bytesSum, m.bytesMax = r.i64(), r.i64()
			m.guess = r.u() == 1
			c.cols = append(c.cols, m)
		}
	}
	if r.err != nil {
		return nil, r.err
	}
	last := 0
	for len(r.b) > 0 {
		sec := r.u()
		if r.err != nil {
			return nil, r.err
		}
		if sec <= uint64(last) || sec > sectionSpans {
			return nil, fmt.Errorf("%w: an unknown section %d", errMeta, sec)
		}
		last = int(sec)
		switch sec {
		case sectionTokens:
			t, err := decodeTokens(r, d.chunks)
			if err != nil {
				return nil, err
			}
			d.tokens = t
		case sectionSpans:
			ends, err := decodeSpans(r, len(d.chunks))
			if err != nil {
				return nil, err
			}
			d.ends = ends
		}
	}
	return d, nil
}

func decodeTokens(r *metaReader, chunks []chunk) (*tokenSpec, error) {
	t := &tokenSpec{field: r.n(len(r.b)), text: r.u() == 1}
	t.model = []byte(r.s())
	t.vocab = r.s()
	t.counts = make([][]uint32, len(chunks))
	for i, c := range chunks {
		if r.err != nil || c.rows > int64(len(r.b)) {
			return nil, fmt.Errorf("%w: token counts", errMeta)
		}
		t.counts[i] = make([]uint32, c.rows)
		for j := range t.counts[i] {
			t.counts[i][j] = uint32(r.n(format.MaxDocTokens))
		}
	}
	return t, r.err
}

// decodeSpans reads the spans section: every chunk's row groups, at least
// one each, adding up to the groups.
func decodeSpans(r *metaReader, groups int) ([]int, error) {
	n := r.n(groups)
	ends := make([]int, 0, n)
	at := 0
	for range n {
		k := r.n(groups - at)
		if r.err != nil {
			return nil, r.err
		}
		if k == 0 {
			return nil, fmt.Errorf("%w: a chunk of no row groups", errMeta)
		}
		at += k
		ends = append(ends, at)
	}
	if r.err != nil {
		return nil, r.err
	}
	if at != groups {
		return nil, fmt.Errorf("%w: chunks of %d row groups, of %d", errMeta, at, groups)
	}
	return ends, nil
}
