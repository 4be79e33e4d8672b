package lance

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/klauspost/compress/zstd"
)

// A deletion file of Arrow IPC's file format is read here rather than by
// arrow-go, whose reader allocates what a file's flatbuffers declare
// before checking it against the file (a schema of a billion fields is
// 30 GB). What Lance writes is one column of row offsets (UInt32, Int32
// in older writers) in record batches, the body compressed with zstd or
// not; only that is read, every offset and length checked against the
// bytes first.

var errFlatbuffer = errors.New("malformed flatbuffer")

// fbTable is a flatbuffers table: the buffer and the table's position.
type fbTable struct {
	b   []byte
	pos uint32
}

func fbU32(b []byte, at uint64) (uint32, bool) {
	if at+4 > uint64(len(b)) {
		return 0, false
	}
	return binary.LittleEndian.Uint32(b[at:]), true
}

// fbRoot is the root table of the flatbuffer b.
func fbRoot(b []byte) (fbTable, error) {
	off, ok := fbU32(b, 0)
	if !ok {
		return fbTable{}, errFlatbuffer
	}
	return fbTableAt(b, uint64(off))
}

func fbTableAt(b []byte, pos uint64) (fbTable, error) {
	if _, ok := fbU32(b, pos); !ok {
		return fbTable{}, errFlatbuffer
	}
	return fbTable{b, uint32(pos)}, nil
}

// field is the position of field i of t, or 0 where it is absent.
func (t fbTable) field(i int) (uint64, error) {
	so := int64(int32(binary.LittleEndian.Uint32(t.b[t.pos:])))
	vt := int64(t.pos) - so
	if vt < 0 || vt+4 > int64(len(t.b)) {
		return 0, errFlatbuffer
	}
	vsize := int64(binary.LittleEndian.Uint16(t.b[vt:]))
	slot := 4 + 2*int64(i)
	if slot+2 > vsize {
		return 0, nil
	}
	if vt+slot+2 > int64(len(t.b)) {
		return 0, errFlatbuffer
	}
	off := uint64(binary.LittleEndian.Uint16(t.b[vt+slot:]))
	if off == 0 {
		return 0, nil
	}
	return uint64(t.pos) + off, nil
}

// scalar reads field i of t as a little-endian integer of n bytes (n is
// 1, 2, 4 or 8), def where absent.
func (t fbTable) scalar(i, n int, def uint64) (uint64, error) {
	p, err := t.field(i)
	if err != nil || p == 0 {
		return def, err
	}
	if p+uint64(n) > uint64(len(t.b)) {
		return 0, errFlatbuffer
	}
	var v uint64
	for j := range n {
		v |= uint64(t.b[p+uint64(j)]) << (8 * j)
	}
	return v, nil
}

// ref follows the offset in field i of t: the position it points at, or
// 0 where the field is absent.
func (t fbTable) ref(i int) (uint64, error) {
	p, err := t.field(i)
	if err != nil || p == 0 {
		return 0, err
	}
	off, ok := fbU32(t.b, p)
	if !ok {
		return 0, errFlatbuffer
	}
	return p + uint64(off), nil
}

// table is the table field i of t points at.
func (t fbTable) table(i int) (fbTable, bool, error) {
	p, err := t.ref(i)
	if err != nil || p == 0 {
		return fbTable{}, false, err
	}
	s, err := fbTableAt(t.b, p)
	return s, err == nil, err
}

// vector is the vector of elements of size bytes field i of t points at:
// its count and its first element's position, the count checked against
// the buffer.
func (t fbTable) vector(i int, size uint64) (n, at uint64, err error) {
	p, err := t.ref(i)
	if err != nil || p == 0 {
		return 0, 0, err
	}
	c, ok := fbU32(t.b, p)
	if !ok || uint64(c) > (uint64(len(t.b))-p-4)/size {
		return 0, 0, errFlatbuffer
	}
	return uint64(c), p + 4, nil
}

// arrowRowOffsets reads the row offsets of the Arrow IPC file b: no more
// than most of them.
func arrowRowOffsets(b []byte, most uint64) ([]uint32, error) {
	const magicLen = 6
	n := uint64(len(b))
	if n < 2*magicLen+4+4 || string(b[:magicLen]) != "ARROW1" || string(b[n-magicLen:]) != "ARROW1" {
		return nil, fmt.Errorf("not an Arrow IPC file")
	}
	fl := uint64(binary.LittleEndian.Uint32(b[n-magicLen-4:]))
	if fl > n-magicLen-4-8 {
		return nil, fmt.Errorf("a footer of %d bytes in a file of %d", fl, n)
	}
	footer, err := fbRoot(b[n-magicLen-4-fl : n-magicLen-4])
	if err != nil {
		return nil, fmt.Errorf("footer: %w", err)
	}
	if err := checkOffsetSchema(footer); err != nil {
		return nil, err
	}
	// recordBatches: Blocks of (offset i64, metadata length i32, pad,
	// body length i64).
	nb, at, err := footer.vector(3, 24)
	if err != nil {
		return nil, fmt.Errorf("footer: %w", err)
	}
	var offs []uint32
	for i := range nb {
		blk := footer.b[at+24*i:]
		pos := binary.LittleEndian.Uint64(blk)
		meta := uint64(binary.LittleEndian.Uint32(blk[8:]))
		body := binary.LittleEndian.Uint64(blk[16:])
		if pos > n || meta > n-pos || body > n-pos-meta {
			return nil, fmt.Errorf("batch %d: %d and %d bytes at %d of %d", i, meta, body, pos, n)
		}
		if offs, err = readBatch(b[pos:pos+meta], b[pos+meta:pos+meta+body], offs, most); err != nil {
			return nil, fmt.Errorf("batch %d: %w", i, err)
		}
	}
	return offs, nil
}

// checkOffsetSchema checks that the footer's schema is one column of 32-
// bit integers.
func checkOffsetSchema(footer fbTable) error {
	schema, ok, err := footer.table(1)
	if err != nil || !ok {
		return fmt.Errorf("footer: no schema")
	}
	nf, at, err := schema.vector(1, 4)
	if err != nil || nf != 1 {
		return fmt.Errorf("a schema of %d fields, not one", nf)
	}
	off, _ := fbU32(schema.b, at)
	field, err := fbTableAt(schema.b, at+uint64(off))
	if err != nil {
		return fmt.Errorf("schema: %w", err)
	}
	typ, err := field.scalar(2, 1, 0)
	if err != nil || typ != 2 { // Type.Int
		return fmt.Errorf("a column of type %d, not an integer", typ)
	}
	it, ok, err := field.table(3)
	if err != nil || !ok {
		return fmt.Errorf("an integer column without its width")
	}
	bits, err := it.scalar(0, 4, 0)
	if err != nil || bits != 32 {
		return fmt.Errorf("a column of %d-bit integers, not 32", bits)
	}
	return nil
}

// readBatch appends the offsets of one record batch (its message, after
// the continuation marker and length, and its body) to offs.
func readBatch(msg, body []byte, offs []uint32, most uint64) ([]uint32, error) {
	if len(msg) >= 8 && binary.LittleEndian.Uint32(msg) == 0xFFFFFFFF {
		msg = msg[8:]
	} else if len(msg) >= 4 {
		msg = msg[4:]
	}
	m, err := fbRoot(msg)
	if err != nil {
		return nil, err
	}
	if h, err := m.scalar(1, 1, 0); err != nil || h != 3 { // MessageHeader.RecordBatch
		return nil, fmt.Errorf("a message of kind %d, not a record batch", h)
	}
	rb, ok, err := m.table(2)
	if err != nil || !ok {
		return nil, fmt.Errorf("a record batch without its header")
	}
	rows, err := rb.scalar(0, 8, 0)
	if err != nil {
		return nil, err
	}
	if rows > most-uint64(len(offs)) {
		return nil, fmt.Errorf("%d rows, more than the %d deleted", rows, most)
	}
	nn, nat, err := rb.vector(1, 16)
	if err != nil || nn != 1 {
		return nil, fmt.Errorf("%d field nodes, not one", nn)
	}
	if nulls := binary.LittleEndian.Uint64(rb.b[nat+8:]); nulls != 0 || binary.LittleEndian.Uint64(rb.b[nat:]) != rows {
		return nil, fmt.Errorf("a column of %d nulls or another length", nulls)
	}
	nbuf, bat, err := rb.vector(2, 16)
	if err != nil || nbuf != 2 {
		return nil, fmt.Errorf("%d buffers, not two", nbuf)
	}
	compressed := false
	if c, ok, err := rb.table(3); err != nil {
		return nil, err
	} else if ok {
		codec, err := c.scalar(0, 1, 0)
		if err != nil || codec != 1 {
			return nil, fmt.Errorf("a body compressed with codec %d (zstd, 1, is read)", codec)
		}
		compressed = true
	}
	// Buffer 1 holds the values (buffer 0 the validity, empty here).
	off := binary.LittleEndian.Uint64(rb.b[bat+16:])
	n := binary.LittleEndian.Uint64(rb.b[bat+24:])
	if off > uint64(len(body)) || n > uint64(len(body))-off {
		return nil, fmt.Errorf("values of %d bytes at %d of a body of %d", n, off, len(body))
	}
	vals := body[off : off+n]
	if compressed && len(vals) > 0 {
		if len(vals) < 8 {
			return nil, fmt.Errorf("a compressed buffer of %d bytes", len(vals))
		}
		decoded := int64(binary.LittleEndian.Uint64(vals))
		vals = vals[8:]
		if decoded != -1 {
			if uint64(decoded) != 4*rows {
				return nil, fmt.Errorf("values declaring %d bytes for %d rows", decoded, rows)
			}
			// The decoder's bound is at least a window of 1 MiB, which a
			// frame may declare whatever its content.
			z, err := zstd.NewReader(nil, zstd.WithDecoderConcurrency(1), zstd.WithDecoderMaxMemory(max(uint64(decoded), 1<<20)))
			if err != nil {
				return nil, err
			}
			defer z.Close()
			if vals, err = z.DecodeAll(vals, make([]byte, 0, decoded)); err != nil {
				return nil, fmt.Errorf("zstd: %w", err)
			}
			if int64(len(vals)) != decoded {
				return nil, fmt.Errorf("values of %d bytes declared %d", len(vals), decoded)
			}
		}
	}
	if uint64(len(vals)) < 4*rows {
		return nil, fmt.Errorf("%d rows in %d bytes", rows, len(vals))
	}
	for i := range rows {
		offs = append(offs, binary.LittleEndian.Uint32(vals[4*i:]))
	}
	return offs, nil
}
