package lance

import (
	"context"
	"encoding/binary"
	"fmt"
	"strings"

	"google.golang.org/protobuf/encoding/protowire"

	"github.com/brandgw/brand/format"
)

// A File is a Lance data file's metadata, all of it from the file's tail:
// the footer, the column metadata and the schema.
type File struct {
	Name         string
	Size         int64
	Major, Minor uint16
	// Rows is the file's row count (FileDescriptor.length).
	Rows   uint64
	Schema []Field
	// Columns are the file's columns in order: a DataFile's column index
	// is an index here.
	Columns []Column
	// GlobalBuffers are the file's global buffers; the first holds the
	// FileDescriptor.
	GlobalBuffers []Buffer
}

// A Buffer is a range of a file.
type Buffer struct{ Off, Len uint64 }

// A Column is one column of a file: its pages, in row order.
type Column struct {
	Index int
	Pages []Page
	// Buffers are the column's own buffers (none in what the default
	// writer writes).
	Buffers []Buffer
}

// A Page is one page of a column: Rows rows whose values are in Buffers
// as Layout says.
type Page struct {
	Rows     uint64
	Buffers  []Buffer
	Layout   *Layout
	Priority uint64
}

// footerLen is the data file's footer: the column metadata's start, the
// column metadata offset table's, the global buffer offset table's (u64
// each), the global buffer count and the column count (u32 each), the
// file format's major and minor version (u16 each), "LANC".
const footerLen = 40

// MaxMetadataBytes bounds a data file's metadata (its schema, column
// metadata and offset tables): what a file of thousands of columns of
// thousands of pages needs.
const MaxMetadataBytes = 64 << 20

// tailGuess is the first tail read of a file: the metadata of a file of
// a few dozen columns of a few pages each, in one read.
const tailGuess = 64 << 10

// ReadFile reads the metadata of the data file key of size bytes: one
// read of its tail, a second only where the metadata is larger than the
// first read guessed. Neither read is larger than limit.
func ReadFile(ctx context.Context, st format.Store, key, etag string, size, limit int64) (*File, error) {
	n := min(size, tailGuess, max(limit, footerLen))
	for {
		if n < 0 || n > size {
			return nil, fmt.Errorf("%w: lance file %s: metadata of %d bytes in a file of %d", format.ErrInvalid, key, n, size)
		}
		if n > limit {
			return nil, overLimit("lance file "+key+"'s metadata", uint64(n), limit)
		}
		tail := make([]byte, n)
		if err := st.ReadRange(ctx, key, etag, size-n, tail); err != nil {
			return nil, fmt.Errorf("lance file %s: %w", key, err)
		}
		f, need, err := ParseFile(key, size, tail)
		if err != nil {
			return nil, err
		}
		if f != nil {
			return f, nil
		}
		if need <= n {
			return nil, fmt.Errorf("%w: lance file %s: metadata not found in its tail", format.ErrInvalid, key)
		}
		n = need
	}
}

// ParseFile parses a data file's metadata from tail, the file's last
// len(tail) bytes (size in all). Where the metadata begins before tail
// does, it returns a nil File and the tail's length needed.
func ParseFile(name string, size int64, tail []byte) (*File, int64, error) {
	bad := func(format_ string, a ...any) error {
		return fmt.Errorf("%w: lance file %s: %s", format.ErrInvalid, name, fmt.Sprintf(format_, a...))
	}
	if int64(len(tail)) > size {
		return nil, 0, bad("a tail of %d bytes in a file of %d", len(tail), size)
	}
	if len(tail) < footerLen {
		return nil, 0, bad("%d bytes, too short for a footer", len(tail))
	}
	ft := tail[len(tail)-footerLen:]
	if [4]byte(ft[36:]) != magic {
		return nil, 0, bad("no LANC at the end")
	}
	cmStart := binary.LittleEndian.Uint64(ft[0:])
	cmoStart := binary.LittleEndian.Uint64(ft[8:])
	gboStart := binary.LittleEndian.Uint64(ft[16:])
	ng := uint64(binary.LittleEndian.Uint32(ft[24:]))
	nc := uint64(binary.LittleEndian.Uint32(ft[28:]))
	major := binary.LittleEndian.Uint16(ft[32:])
	minor := binary.LittleEndian.Uint16(ft[34:])
	switch {
	case major == 2 && minor == 1:
	case major == 0 && minor < 3:
		return nil, 0, fmt.Errorf("%w: lance file %s: legacy file format (%d.%d)", format.ErrUnsupported, name, major, minor)
	default:
		return nil, 0, fmt.Errorf("%w: lance file %s: file format %s (2.1 is read)", format.ErrUnsupported, name, fileVersion(major, minor))
	}
	end := uint64(size) - footerLen
	if !(cmStart <= cmoStart && cmoStart <= gboStart && gboStart <= end) {
		return nil, 0, bad("footer's offsets out of order or past the end: column metadata %d, its table %d, global buffers' table %d, footer %d", cmStart, cmoStart, gboStart, end)
	}
	if nc > (gboStart-cmoStart)/16 {
		return nil, 0, bad("%d columns' offsets do not fit %d bytes", nc, gboStart-cmoStart)
	}
	if ng == 0 || ng > (end-gboStart)/16 {
		return nil, 0, bad("%d global buffers' offsets do not fit %d bytes", ng, end-gboStart)
	}
	// The global buffers' table first: buffer 0, the schema, lies before
	// the column metadata, and the tail needed starts at whichever is first.
	at := func(off uint64) []byte { return tail[uint64(len(tail))-(uint64(size)-off):] }
	if uint64(size)-gboStart > MaxMetadataBytes {
		return nil, 0, bad("global buffers' table %d bytes from the end, over the %d of metadata read", uint64(size)-gboStart, MaxMetadataBytes)
	}
	if uint64(size)-gboStart > uint64(len(tail)) {
		return nil, int64(uint64(size) - gboStart), nil
	}
	gbo := at(gboStart)
	f := &File{Name: name, Size: size, Major: major, Minor: minor, GlobalBuffers: make([]Buffer, ng)}
	for i := range f.GlobalBuffers {
		b := Buffer{binary.LittleEndian.Uint64(gbo[16*i:]), binary.LittleEndian.Uint64(gbo[16*i+8:])}
		if b.Off > end || b.Len > end-b.Off {
			return nil, 0, bad("global buffer %d (%d bytes at %d) past the end", i, b.Len, b.Off)
		}
		f.GlobalBuffers[i] = b
	}
	start := min(cmStart, f.GlobalBuffers[0].Off)
	if uint64(size)-start > MaxMetadataBytes {
		return nil, 0, bad("metadata of %d bytes, over the %d read", uint64(size)-start, MaxMetadataBytes)
	}
	if uint64(size)-start > uint64(len(tail)) {
		return nil, int64(uint64(size) - start), nil
	}
	sb := f.GlobalBuffers[0]
	var err error
	if f.Rows, f.Schema, err = parseDescriptor(at(sb.Off)[:sb.Len]); err != nil {
		return nil, 0, bad("file descriptor: %v", err)
	}
	cmo := at(cmoStart)
	f.Columns = make([]Column, nc)
	for i := range f.Columns {
		off, n := binary.LittleEndian.Uint64(cmo[16*i:]), binary.LittleEndian.Uint64(cmo[16*i+8:])
		if off < cmStart || off > cmoStart || n > cmoStart-off {
			return nil, 0, bad("column %d's metadata (%d bytes at %d) outside the column metadata (%d to %d)", i, n, off, cmStart, cmoStart)
		}
		c, err := parseColumn(at(off)[:n], end)
		if err != nil {
			return nil, 0, bad("column %d: %v", i, err)
		}
		c.Index = i
		f.Columns[i] = c
	}
	return f, 0, nil
}

// fileVersion is the file format's version as Lance names it: a footer's
// 0.3 is 2.0.
func fileVersion(major, minor uint16) string {
	if major == 0 && minor == 3 {
		return "2.0"
	}
	return fmt.Sprintf("%d.%d", major, minor)
}

// parseDescriptor parses file.proto's FileDescriptor: the schema and the
// row count.
func parseDescriptor(b []byte) (uint64, []Field, error) {
	var rows uint64
	var fields []Field
	err := walkPB(b, func(f pbField) error {
		switch f.num {
		case 1:
			return walkSub(f, func(g pbField) error {
				if g.num != 1 {
					return nil
				}
				fd, err := parseField(g)
				fields = append(fields, fd)
				return err
			})
		case 2:
			rows = f.n
			return f.want(protowire.VarintType)
		}
		return nil
	})
	return rows, fields, err
}

// parseColumn parses file2.proto's ColumnMetadata, every buffer within
// the file's data (before end).
func parseColumn(b []byte, end uint64) (Column, error) {
	var c Column
	var offs, lens []uint64
	err := walkPB(b, func(f pbField) error {
		var err error
		switch f.num {
		case 1:
			err = parseColumnEncoding(f)
		case 2:
			var p Page
			if p, err = parsePage(f, end); err != nil {
				return fmt.Errorf("page %d: %w", len(c.Pages), err)
			}
			c.Pages = append(c.Pages, p)
		case 3:
			offs, err = f.uints(offs, len(b))
		case 4:
			lens, err = f.uints(lens, len(b))
		}
		return err
	})
	if err != nil {
		return c, err
	}
	c.Buffers, err = buffers(offs, lens, end)
	return c, err
}

// columnEncodingType is the type URL of a column's encoding, a protobuf
// Any (encodings_v2_0.proto's ColumnEncoding, which 2.1 files keep).
const columnEncodingType = "lance.encodings.ColumnEncoding"

// parseColumnEncoding accepts a column encoding of plain values, the one
// the default writer writes, and refuses the others (a zone index, a
// blob column) by name.
func parseColumnEncoding(f pbField) error {
	return walkSub(f, func(e pbField) error {
		if e.num != 2 {
			return fmt.Errorf("a %s column encoding (only direct ones are read)", encodingKind(e.num))
		}
		return walkSub(e, func(d pbField) error {
			if d.num != 1 {
				return nil
			}
			var typ string
			var value []byte
			if err := d.want(protowire.BytesType); err != nil {
				return err
			}
			if err := walkPB(d.b, func(a pbField) error {
				switch a.num {
				case 1:
					typ = string(a.b)
				case 2:
					value = a.b
				}
				return a.want(protowire.BytesType)
			}); err != nil {
				return err
			}
			if !strings.HasSuffix(typ, "/"+columnEncodingType) {
				return fmt.Errorf("a column encoding of type %q", typ)
			}
			return walkPB(value, func(c pbField) error {
				switch c.num {
				case 1:
					return nil
				case 2:
					return fmt.Errorf("a zone index column encoding")
				case 3:
					return fmt.Errorf("a blob column encoding")
				}
				return fmt.Errorf("a column encoding of kind %d", c.num)
			})
		})
	})
}

func encodingKind(num protowire.Number) string {
	switch num {
	case 1:
		return "deferred"
	case 2:
		return "direct"
	}
	return "none"
}

// buffers pairs offsets with sizes, each buffer within the data (before
// end).
func buffers(offs, lens []uint64, end uint64) ([]Buffer, error) {
	if len(offs) != len(lens) {
		return nil, fmt.Errorf("%d buffer offsets but %d sizes", len(offs), len(lens))
	}
	bs := make([]Buffer, len(offs))
	for i := range bs {
		if offs[i] > end || lens[i] > end-offs[i] {
			return nil, fmt.Errorf("buffer %d (%d bytes at %d) past the data's end (%d)", i, lens[i], offs[i], end)
		}
		bs[i] = Buffer{offs[i], lens[i]}
	}
	return bs, nil
}

// pageLayoutType is the type URL of a 2.1 page's encoding, a protobuf Any.
const pageLayoutType = "lance.encodings21.PageLayout"

func parsePage(f pbField, end uint64) (Page, error) {
	var p Page
	var offs, lens []uint64
	var layout []byte
	var haveLayout bool
	err := walkSub(f, func(g pbField) error {
		var err error
		switch g.num {
		case 1:
			offs, err = g.uints(offs, len(f.b))
		case 2:
			lens, err = g.uints(lens, len(f.b))
		case 3:
			p.Rows, err = g.n, g.want(protowire.VarintType)
		case 4:
			err = walkSub(g, func(e pbField) error {
				if e.num != 2 {
					return fmt.Errorf("a %s encoding (only direct ones are read)", encodingKind(e.num))
				}
				return walkSub(e, func(d pbField) error {
					if d.num != 1 {
						return nil
					}
					if err := d.want(protowire.BytesType); err != nil {
						return err
					}
					// d is a google.protobuf.Any: a type URL and a value.
					var typ string
					err := walkPB(d.b, func(a pbField) error {
						switch a.num {
						case 1:
							typ = string(a.b)
						case 2:
							layout, haveLayout = a.b, true
						}
						return a.want(protowire.BytesType)
					})
					if err == nil && !strings.HasSuffix(typ, "/"+pageLayoutType) {
						err = fmt.Errorf("an encoding of type %q, not a 2.1 page layout", typ)
					}
					return err
				})
			})
		case 5:
			p.Priority, err = g.n, g.want(protowire.VarintType)
		}
		return err
	})
	if err != nil {
		return p, err
	}
	if !haveLayout {
		return p, fmt.Errorf("no page layout")
	}
	if p.Buffers, err = buffers(offs, lens, end); err != nil {
		return p, err
	}
	if p.Layout, err = parseLayout(layout); err != nil {
		return p, fmt.Errorf("page layout: %w", err)
	}
	return p, nil
}
