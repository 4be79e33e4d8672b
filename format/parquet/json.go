package parquet

import (
	"fmt"
	"strconv"

	pq "github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/file"

	"github.com/brandgw/brand/format"
)

// A field that is none of the simple kinds (a struct, a map, a list of
// anything but integers, a float, a boolean, ...) is each row's value as
// JSON, assembled from its leaves' levels (Dremel's record assembly).

// leafData is one leaf column of a row group read whole: its levels and
// its values (byte arrays copied out of the pages, which the reader
// reuses).
type leafData struct {
	n          *node
	defs, reps []int16
	pos        int // the next level
	vi         int // the next value
	bools      []bool
	ints       []int64
	i96        []pq.Int96
	floats     []float64
	bytes      [][]byte
}

func readLeaf(r file.ColumnChunkReader, n *node, numValues, rows int64) (*leafData, error) {
	if n.rep == 0 && numValues != rows {
		return nil, fmt.Errorf("%d values in a column of %d rows", numValues, rows)
	}
	ld := &leafData{n: n, defs: make([]int16, numValues), reps: make([]int16, numValues)}
	var arena []byte
	var got int64
	for got < numValues {
		want := min(batch, numValues-got)
		defs, reps := ld.defs[got:got+want], ld.reps[got:got+want]
		if n.rep == 0 {
			reps = nil
		}
		if n.def == 0 {
			defs = nil
		}
		var total int64
		var read int
		var err error
		switch r := r.(type) {
		case *file.BooleanColumnChunkReader:
			v := make([]bool, want)
			total, read, err = r.ReadBatch(want, v, defs, reps)
			ld.bools = append(ld.bools, v[:read]...)
		case *file.Int32ColumnChunkReader:
			v := make([]int32, want)
			total, read, err = r.ReadBatch(want, v, defs, reps)
			for _, x := range v[:read] {
				if n.el.logical == ltInteger && !n.el.signed || n.el.converted >= ctUint8 && n.el.converted <= ctUint64 {
					ld.ints = append(ld.ints, int64(uint32(x)))
				} else {
					ld.ints = append(ld.ints, int64(x))
				}
			}
		case *file.Int64ColumnChunkReader:
			v := make([]int64, want)
			total, read, err = r.ReadBatch(want, v, defs, reps)
			ld.ints = append(ld.ints, v[:read]...)
		case *file.Int96ColumnChunkReader:
			v := make([]pq.Int96, want)
			total, read, err = r.ReadBatch(want, v, defs, reps)
			ld.i96 = append(ld.i96, v[:read]...)
		case *file.Float32ColumnChunkReader:
			v := make([]float32, want)
			total, read, err = r.ReadBatch(want, v, defs, reps)
			for _, x := range v[:read] {
				ld.floats = append(ld.floats, float64(x))
			}
		case *file.Float64ColumnChunkReader:
			v := make([]float64, want)
			total, read, err = r.ReadBatch(want, v, defs, reps)
			ld.floats = append(ld.floats, v[:read]...)
		case *file.ByteArrayColumnChunkReader:
			v := make([]pq.ByteArray, want)
			total, read, err = r.ReadBatch(want, v, defs, reps)
			for _, x := range v[:read] {
				at := len(arena)
				arena = append(arena, x...)
				ld.bytes = append(ld.bytes, arena[at:len(arena):len(arena)])
			}
		case *file.FixedLenByteArrayColumnChunkReader:
			v := make([]pq.FixedLenByteArray, want)
			total, read, err = r.ReadBatch(want, v, defs, reps)
			for _, x := range v[:read] {
				at := len(arena)
				arena = append(arena, x...)
				ld.bytes = append(ld.bytes, arena[at:len(arena):len(arena)])
			}
		default:
			return nil, fmt.Errorf("a column of type %T", r)
		}
		if err != nil {
			return nil, err
		}
		if total == 0 {
			if err := r.Err(); err != nil {
				return nil, err
			}
			return nil, fmt.Errorf("the pages hold %d of the %d values the footer counts", got, numValues)
		}
		got += total
	}
	return ld, nil
}

func (l *leafData) def() int16 {
	if l.pos >= len(l.defs) {
		return -1
	}
	return l.defs[l.pos]
}

func (l *leafData) rep() int16 {
	if l.pos >= len(l.reps) {
		return -1
	}
	return l.reps[l.pos]
}

type jsonWriter struct {
	d      *decoder
	f      *field
	leaves map[int]*leafData
	buf    []byte
	err    error
}

func (j *jsonWriter) name() string { return j.f.name }

func (j *jsonWriter) row(w *format.Writer) (bool, error) {
	first := j.leaves[j.f.leaves[0]]
	if first.pos >= len(first.defs) {
		return false, fmt.Errorf("fewer values than rows")
	}
	for _, l := range j.f.leaves {
		if r := j.leaves[l].rep(); r != 0 {
			return false, fmt.Errorf("a row starts with repetition level %d", r)
		}
	}
	n := j.f.node
	if n.el.rep == repOptional && int(first.def()) < n.def {
		j.skip(n)
		return false, j.end()
	}
	j.err = nil
	b := j.buf[:0]
	if n.el.rep == repRepeated {
		b = j.repeated(b, n)
	} else {
		b = j.value(b, n)
	}
	j.buf = b
	if err := j.end(); err != nil {
		return false, err
	}
	return true, w.Add(j.f.ext, b)
}

// end checks every leaf of the field is at the next row's start.
func (j *jsonWriter) end() error {
	if j.err != nil {
		return j.err
	}
	for _, l := range j.f.leaves {
		if r := j.leaves[l].rep(); r > 0 {
			return fmt.Errorf("column %d's levels disagree with its neighbours'", l)
		}
	}
	return nil
}

// skip consumes the one level each leaf under n has for an instance of
// n that is null or empty.
func (j *jsonWriter) skip(n *node) {
	for _, l := range n.leaves(nil) {
		j.leaves[l].pos++
	}
}

func (j *jsonWriter) firstLeaf(n *node) *leafData {
	for !n.isLeaf() {
		n = n.children[0]
	}
	return j.leaves[n.leaf]
}

// value renders the instance of n (not repeated) the leaves are at.
func (j *jsonWriter) value(b []byte, n *node) []byte {
	if j.err != nil {
		return b
	}
	first := j.firstLeaf(n)
	if d := first.def(); d < 0 {
		j.err = fmt.Errorf("the levels end inside a row")
		return b
	} else if int(d) < n.def {
		if n.el.rep != repOptional {
			j.err = fmt.Errorf("a required value is missing")
			return b
		}
		j.skip(n)
		return append(b, "null"...)
	}
	switch {
	case n.isLeaf():
		return j.leaf(b, n)
	case n.isList():
		if _, r, ok := listElement(n); ok {
			return j.repeated(b, r)
		}
	case n.isMap():
		if len(n.children) == 1 && n.children[0].el.rep == repRepeated && len(n.children[0].children) == 2 {
			return j.repeated(b, n.children[0])
		}
	}
	return j.object(b, n)
}

func (j *jsonWriter) object(b []byte, n *node) []byte {
	b = append(b, '{')
	for i, c := range n.children {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendJSONString(b, []byte(c.el.name))
		b = append(b, ':')
		if c.el.rep == repRepeated {
			b = j.repeated(b, c)
		} else {
			b = j.value(b, c)
		}
	}
	return append(b, '}')
}

// repeated renders the instances of the repeated node r under one
// instance of its parent: a JSON array, or an object for a map's
// key_value.
func (j *jsonWriter) repeated(b []byte, r *node) []byte {
	if j.err != nil {
		return b
	}
	isMap := r.parent != nil && r.parent.isMap() && len(r.children) == 2
	open, close := byte('['), byte(']')
	if isMap {
		open, close = '{', '}'
	}
	b = append(b, open)
	first := j.firstLeaf(r)
	if int(first.def()) < r.def {
		j.skip(r)
		return append(b, close)
	}
	var elem *node
	if r.parent != nil && r.parent.isList() {
		elem, _, _ = listElement(r.parent)
	}
	for i := 0; ; i++ {
		if i > 0 {
			b = append(b, ',')
		}
		switch {
		case isMap:
			at := len(b)
			b = j.value(b, r.children[0])
			if at < len(b) && b[at] != '"' {
				b = append(b[:at+1], b[at:]...)
				b[at] = '"'
				b = append(b, '"')
			}
			b = append(b, ':')
			b = j.value(b, r.children[1])
		case elem != nil && elem != r:
			b = j.value(b, elem)
		case r.isLeaf():
			b = j.leaf(b, r)
		default:
			b = j.object(b, r)
		}
		if j.err != nil {
			return b
		}
		if int(first.rep()) != r.rep {
			break
		}
	}
	return append(b, close)
}

// leaf renders the value leaf n is at and consumes its level.
func (j *jsonWriter) leaf(b []byte, n *node) []byte {
	l := j.leaves[n.leaf]
	if int(l.def()) != n.def {
		j.err = fmt.Errorf("a value's level is %d, its column's %d", l.def(), n.def)
		return b
	}
	l.pos++
	i := l.vi
	l.vi++
	switch n.el.phys {
	case tyBoolean:
		if i >= len(l.bools) {
			break
		}
		return strconv.AppendBool(b, l.bools[i])
	case tyInt32, tyInt64:
		if i >= len(l.ints) {
			break
		}
		if t, _ := npyType(n); isInt(n) && t[1] == 'u' {
			return strconv.AppendUint(b, uint64(l.ints[i]), 10)
		}
		return strconv.AppendInt(b, l.ints[i], 10)
	case tyInt96:
		if i >= len(l.i96) {
			break
		}
		return strconv.AppendInt(b, int96Nanos(l.i96[i]), 10)
	case tyFloat:
		if i >= len(l.floats) {
			break
		}
		return appendFloat(b, l.floats[i], 32)
	case tyDouble:
		if i >= len(l.floats) {
			break
		}
		return appendFloat(b, l.floats[i], 64)
	case tyBytes:
		if i >= len(l.bytes) {
			break
		}
		if isString(n) {
			return appendJSONString(b, l.bytes[i])
		}
		return appendBase64(b, l.bytes[i])
	case tyFixed:
		if i >= len(l.bytes) {
			break
		}
		if n.el.logical == ltUUID && len(l.bytes[i]) == 16 {
			return appendUUID(b, l.bytes[i])
		}
		return appendBase64(b, l.bytes[i])
	}
	j.err = fmt.Errorf("fewer values than levels say")
	return b
}
