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
	chunks []chunk
	tokens *tokenSpec // a token dataset's, else nil (tokens.go)
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

type chunk struct {
	at    int // its index in dataset.chunks (set by a token dataset's decoder)
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
	return w.b
}

// sectionTokens tags the token dataset's section of a description.
const sectionTokens = 1

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
	if len(r.b) > 0 {
		if r.u() != sectionTokens {
			return nil, fmt.Errorf("%w: an unknown section", errMeta)
		}
		t := &tokenSpec{field: r.n(len(r.b)), text: r.u() == 1}
		t.model = []byte(r.s())
		t.vocab = r.s()
		t.counts = make([][]uint32, len(d.chunks))
		for i, c := range d.chunks {
			if r.err != nil || c.rows > int64(len(r.b)) {
				return nil, fmt.Errorf("%w: token counts", errMeta)
			}
			t.counts[i] = make([]uint32, c.rows)
			for j := range t.counts[i] {
				t.counts[i][j] = uint32(r.n(format.MaxDocTokens))
			}
		}
		if r.err != nil {
			return nil, r.err
		}
		if len(r.b) != 0 {
			return nil, fmt.Errorf("%w: %d bytes after the token counts", errMeta, len(r.b))
		}
		d.tokens = t
	}
	return d, nil
}
