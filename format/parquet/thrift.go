package parquet

import (
	"errors"
	"fmt"
)

// A Parquet footer and a page header are Thrift structs in the compact
// protocol. This is a reader of that protocol over a byte slice that
// allocates nothing itself: a struct is walked field by field and the
// caller keeps what it needs, so what a hostile footer costs is what the
// caller chose to keep, checked against the limits as it goes. Lists and
// binaries are checked against the bytes left before anything is made of
// them, and nesting against maxThriftDepth.

// Thrift compact types.
const (
	tStop   = 0
	tTrue   = 1
	tFalse  = 2
	tByte   = 3
	tI16    = 4
	tI32    = 5
	tI64    = 6
	tDouble = 7
	tBinary = 8
	tList   = 9
	tSet    = 10
	tMap    = 11
	tStruct = 12
)

// maxThriftDepth bounds the nesting of Thrift structs and containers: a
// footer's deepest path (FileMetaData, RowGroup, ColumnChunk,
// ColumnMetaData, Statistics or SizeStatistics, a list) is 6 deep.
const maxThriftDepth = 16

var errThrift = errors.New("malformed thrift")

type treader struct {
	b     []byte
	pos   int
	depth int
}

func (r *treader) fail(what string) error {
	return fmt.Errorf("%w: %s at byte %d of %d", errThrift, what, r.pos, len(r.b))
}

func (r *treader) byte() (byte, error) {
	if r.pos >= len(r.b) {
		return 0, r.fail("unexpected end")
	}
	c := r.b[r.pos]
	r.pos++
	return c, nil
}

func (r *treader) uvarint() (uint64, error) {
	var x uint64
	for s := uint(0); s < 70; s += 7 {
		c, err := r.byte()
		if err != nil {
			return 0, err
		}
		if s == 63 && c > 1 {
			return 0, r.fail("varint overflows 64 bits")
		}
		x |= uint64(c&0x7f) << s
		if c < 0x80 {
			return x, nil
		}
	}
	return 0, r.fail("varint too long")
}

func (r *treader) i64() (int64, error) {
	u, err := r.uvarint()
	return int64(u>>1) ^ -int64(u&1), err
}

func (r *treader) i32() (int32, error) {
	v, err := r.i64()
	if err == nil && (v < -1<<31 || v >= 1<<31) {
		return 0, r.fail("i32 out of range")
	}
	return int32(v), err
}

// binary returns the next binary value as a slice of the input (no copy).
func (r *treader) binary() ([]byte, error) {
	n, err := r.uvarint()
	if err != nil {
		return nil, err
	}
	if n > uint64(len(r.b)-r.pos) {
		return nil, r.fail(fmt.Sprintf("binary of %d bytes", n))
	}
	b := r.b[r.pos : r.pos+int(n) : r.pos+int(n)]
	r.pos += int(n)
	return b, nil
}

// list reads a list (or set) header: the element type and count. Every
// element takes at least one byte, so a count past the bytes left is a
// lie, refused before any caller sizes anything by it.
func (r *treader) list() (typ byte, n int, err error) {
	c, err := r.byte()
	if err != nil {
		return 0, 0, err
	}
	typ, m := c&0x0f, uint64(c>>4)
	if m == 15 {
		if m, err = r.uvarint(); err != nil {
			return 0, 0, err
		}
	}
	if m > uint64(len(r.b)-r.pos) {
		return 0, 0, r.fail(fmt.Sprintf("list of %d elements", m))
	}
	return typ, int(m), nil
}

// boolElem reads a boolean list element.
func (r *treader) boolElem() (bool, error) {
	c, err := r.byte()
	return c == tTrue, err
}

// walk reads a struct, calling f with each field's id and type; f reads
// the field's value (or returns skip to have it skipped).
func (r *treader) walk(f func(id int16, typ byte) error) error {
	if r.depth++; r.depth > maxThriftDepth {
		return r.fail("nested too deep")
	}
	defer func() { r.depth-- }()
	var last int16
	for {
		c, err := r.byte()
		if err != nil {
			return err
		}
		typ := c & 0x0f
		if typ == tStop {
			return nil
		}
		id := last + int16(c>>4)
		if c>>4 == 0 {
			v, err := r.i64()
			if err != nil {
				return err
			}
			if v < -1<<15 || v >= 1<<15 {
				return r.fail("field id out of range")
			}
			id = int16(v)
		}
		last = id
		if err := f(id, typ); err == errSkip {
			if err := r.skip(typ); err != nil {
				return err
			}
		} else if err != nil {
			return err
		}
	}
}

var errSkip = errors.New("skip")

// skip skips a value of type typ.
func (r *treader) skip(typ byte) error {
	switch typ {
	case tTrue, tFalse:
		return nil // a struct field's boolean is in its type
	case tByte:
		_, err := r.byte()
		return err
	case tI16, tI32, tI64:
		_, err := r.uvarint()
		return err
	case tDouble:
		if len(r.b)-r.pos < 8 {
			return r.fail("unexpected end")
		}
		r.pos += 8
		return nil
	case tBinary:
		_, err := r.binary()
		return err
	case tList, tSet:
		et, n, err := r.list()
		if err != nil {
			return err
		}
		return r.elems(et, n)
	case tMap:
		n, err := r.uvarint()
		if err != nil {
			return err
		}
		if n == 0 {
			return nil
		}
		if n > uint64(len(r.b)-r.pos) {
			return r.fail(fmt.Sprintf("map of %d entries", n))
		}
		kv, err := r.byte()
		if err != nil {
			return err
		}
		if r.depth++; r.depth > maxThriftDepth {
			return r.fail("nested too deep")
		}
		defer func() { r.depth-- }()
		for range n {
			if err := r.elem(kv >> 4); err != nil {
				return err
			}
			if err := r.elem(kv & 0x0f); err != nil {
				return err
			}
		}
		return nil
	case tStruct:
		return r.walk(func(int16, byte) error { return errSkip })
	}
	return r.fail(fmt.Sprintf("unknown type %d", typ))
}

func (r *treader) elems(typ byte, n int) error {
	if r.depth++; r.depth > maxThriftDepth {
		return r.fail("nested too deep")
	}
	defer func() { r.depth-- }()
	for range n {
		if err := r.elem(typ); err != nil {
			return err
		}
	}
	return nil
}

// elem skips a container element: booleans there take a byte.
func (r *treader) elem(typ byte) error {
	if typ == tTrue || typ == tFalse {
		_, err := r.byte()
		return err
	}
	return r.skip(typ)
}

// want checks a field's type is the one the Parquet spec gives it.
func want(typ, is byte, what string) error {
	if typ != is && !(is == tTrue && typ == tFalse) {
		return fmt.Errorf("%w: field %s has thrift type %d, not %d", errThrift, what, typ, is)
	}
	return nil
}

func (r *treader) readI32(typ byte, what string) (int32, error) {
	if err := want(typ, tI32, what); err != nil {
		return 0, err
	}
	return r.i32()
}

func (r *treader) readI64(typ byte, what string) (int64, error) {
	if err := want(typ, tI64, what); err != nil {
		return 0, err
	}
	return r.i64()
}
