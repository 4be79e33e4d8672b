package parquet

import (
	"fmt"
	"hash/fnv"
)

// What Brand keeps of a Parquet footer (parquet.thrift's FileMetaData):
// the schema, and per row group per column chunk what reading, bounding
// and decoding it take. Statistics, key-value metadata, bloom filters and
// page-index locations are skipped unread.

// Physical types.
const (
	tyBoolean = 0
	tyInt32   = 1
	tyInt64   = 2
	tyInt96   = 3
	tyFloat   = 4
	tyDouble  = 5
	tyBytes   = 6
	tyFixed   = 7
	tyGroup   = -1
)

// Repetitions.
const (
	repRequired = 0
	repOptional = 1
	repRepeated = 2
)

// Converted types (the legacy annotations) that matter here.
const (
	ctUTF8        = 0
	ctMap         = 1
	ctMapKeyValue = 2
	ctList        = 3
	ctEnum        = 4
	ctUint8       = 11
	ctUint16      = 12
	ctUint32      = 13
	ctUint64      = 14
	ctInt8        = 15
	ctInt16       = 16
	ctInt32       = 17
	ctInt64       = 18
	ctJSON        = 19
)

// Logical types (the LogicalType union's field ids) that matter here.
const (
	ltString  = 1
	ltMap     = 2
	ltList    = 3
	ltEnum    = 4
	ltInteger = 10
	ltJSON    = 12
	ltUUID    = 14
)

// Codecs.
const (
	codecNone   = 0
	codecSnappy = 1
	codecGzip   = 2
	codecLZO    = 3
	codecBrotli = 4
	codecLZ4    = 5
	codecZstd   = 6
	codecLZ4Raw = 7
)

var codecNames = [...]string{"UNCOMPRESSED", "SNAPPY", "GZIP", "LZO", "BROTLI", "LZ4", "ZSTD", "LZ4_RAW"}

func codecName(c int) string {
	if c >= 0 && c < len(codecNames) {
		return codecNames[c]
	}
	return fmt.Sprintf("codec %d", c)
}

// Encodings.
const (
	encPlain          = 0
	encPlainDict      = 2
	encRLE            = 3
	encBitPacked      = 4
	encDeltaBinary    = 5
	encDeltaLength    = 6
	encDeltaByteArray = 7
	encRLEDict        = 8
	encByteStreamSplt = 9
)

// Page types.
const (
	pageData   = 0
	pageIndex  = 1
	pageDict   = 2
	pageDataV2 = 3
)

// element is a SchemaElement.
type element struct {
	name      string
	phys      int8 // tyGroup for a group
	typeLen   int32
	rep       int8
	children  int32
	converted int8 // -1: none
	logical   int8 // 0: none
	bitWidth  int8
	signed    bool
}

// chunkMeta is a column chunk's ColumnMetaData, as far as Brand uses it.
type chunkMeta struct {
	phys       int8
	codec      int8
	pathHash   uint64
	numValues  int64
	unc, comp  int64
	dataOff    int64
	dictOff    int64 // 0: none
	encodings  uint16
	dictPages  bool  // a dictionary page, by the encoding stats
	sizeStat   int64 // unencoded_byte_array_data_bytes; -1: absent
	hasSize    bool
	hasPhys    bool
	hasCodec   bool
	hasValues  bool
	hasSizes   bool
	hasDataOff bool
}

// start is where the chunk's first page (its dictionary's, if any) is.
func (c *chunkMeta) start() int64 {
	if c.dictOff > 0 && c.dictOff < c.dataOff {
		return c.dictOff
	}
	return c.dataOff
}

// hasDict reports whether the chunk may hold a dictionary page.
func (c *chunkMeta) hasDict() bool {
	return c.dictPages || (c.dictOff > 0 && c.dictOff < c.dataOff) ||
		c.encodings&(1<<encPlainDict|1<<encRLEDict) != 0
}

type rowGroup struct {
	rows int64
	cols []chunkMeta
}

type footer struct {
	schema    []element
	groups    []rowGroup
	createdBy string
}

// footerLimits bound what a footer may describe, so that what parsing
// keeps is bounded before it is kept.
type footerLimits struct {
	elements int // schema elements
	leaves   int // columns (leaves) a row group may have
}

func pathHash(parts [][]byte) uint64 {
	h := fnv.New64a()
	for _, p := range parts {
		h.Write(p)
		h.Write([]byte{0})
	}
	return h.Sum64()
}

// parseFooter parses a FileMetaData.
func parseFooter(b []byte, lim footerLimits) (*footer, error) {
	r := &treader{b: b}
	f := &footer{}
	var hasSchema bool
	err := r.walk(func(id int16, typ byte) error {
		switch id {
		case 2: // schema
			if err := want(typ, tList, "schema"); err != nil {
				return err
			}
			et, n, err := r.list()
			if err != nil {
				return err
			}
			if et != tStruct {
				return r.fail("schema is not a list of structs")
			}
			if n > lim.elements {
				return fmt.Errorf("the schema has %d elements, more than the %d allowed", n, lim.elements)
			}
			f.schema = make([]element, n)
			for i := range f.schema {
				if err := parseElement(r, &f.schema[i]); err != nil {
					return err
				}
			}
			hasSchema = true
		case 4: // row_groups
			if err := want(typ, tList, "row_groups"); err != nil {
				return err
			}
			et, n, err := r.list()
			if err != nil {
				return err
			}
			if et != tStruct {
				return r.fail("row_groups is not a list of structs")
			}
			for range n {
				g, err := parseRowGroup(r, lim)
				if err != nil {
					return fmt.Errorf("row group %d: %w", len(f.groups), err)
				}
				f.groups = append(f.groups, g)
			}
		case 6: // created_by
			if err := want(typ, tBinary, "created_by"); err != nil {
				return err
			}
			v, err := r.binary()
			if err != nil {
				return err
			}
			if len(v) > 256 {
				v = v[:256]
			}
			f.createdBy = string(v)
		case 8: // encryption_algorithm: a plaintext footer of an encrypted file
			return fmt.Errorf("%w: the file is encrypted", errUnsupported)
		default:
			return errSkip
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if !hasSchema || len(f.schema) == 0 {
		return nil, fmt.Errorf("the footer has no schema")
	}
	return f, nil
}

// errUnsupported is wrapped into format.ErrUnsupported by the caller.
var errUnsupported = fmt.Errorf("unsupported")

func parseElement(r *treader, e *element) error {
	e.phys, e.converted = tyGroup, -1
	return r.walk(func(id int16, typ byte) error {
		var v int32
		var err error
		switch id {
		case 1, 2, 3, 5, 6:
			if v, err = r.readI32(typ, "schema element"); err != nil {
				return err
			}
		}
		switch id {
		case 1:
			if v < tyBoolean || v > tyFixed {
				return fmt.Errorf("schema element has physical type %d", v)
			}
			e.phys = int8(v)
		case 2:
			e.typeLen = v
		case 3:
			if v < repRequired || v > repRepeated {
				return fmt.Errorf("schema element has repetition %d", v)
			}
			e.rep = int8(v)
		case 4:
			if err := want(typ, tBinary, "name"); err != nil {
				return err
			}
			n, err := r.binary()
			if err != nil {
				return err
			}
			e.name = string(n)
		case 5:
			if v < 0 {
				return fmt.Errorf("schema element has %d children", v)
			}
			e.children = v
		case 6:
			if v >= 0 && v < 64 {
				e.converted = int8(v)
			}
		case 10:
			if err := want(typ, tStruct, "logicalType"); err != nil {
				return err
			}
			return r.walk(func(id int16, typ byte) error {
				if id <= 0 || id > 64 {
					return errSkip
				}
				e.logical = int8(id)
				if id != ltInteger {
					return errSkip
				}
				if err := want(typ, tStruct, "IntType"); err != nil {
					return err
				}
				return r.walk(func(id int16, typ byte) error {
					switch id {
					case 1:
						if err := want(typ, tByte, "bitWidth"); err != nil {
							return err
						}
						c, err := r.byte()
						e.bitWidth = int8(c)
						return err
					case 2:
						if err := want(typ, tTrue, "isSigned"); err != nil {
							return err
						}
						e.signed = typ == tTrue
						return nil
					}
					return errSkip
				})
			})
		default:
			return errSkip
		}
		return nil
	})
}

func parseRowGroup(r *treader, lim footerLimits) (rowGroup, error) {
	var g rowGroup
	var hasRows bool
	err := r.walk(func(id int16, typ byte) error {
		switch id {
		case 1: // columns
			if err := want(typ, tList, "columns"); err != nil {
				return err
			}
			et, n, err := r.list()
			if err != nil {
				return err
			}
			if et != tStruct {
				return r.fail("columns is not a list of structs")
			}
			if n > lim.leaves {
				return fmt.Errorf("%d column chunks, more than the %d columns allowed", n, lim.leaves)
			}
			g.cols = make([]chunkMeta, n)
			for i := range g.cols {
				if err := parseColumnChunk(r, &g.cols[i]); err != nil {
					return fmt.Errorf("column chunk %d: %w", i, err)
				}
			}
		case 3:
			v, err := r.readI64(typ, "num_rows")
			if err != nil {
				return err
			}
			g.rows, hasRows = v, true
		default:
			return errSkip
		}
		return nil
	})
	if err == nil && !hasRows {
		err = fmt.Errorf("no num_rows")
	}
	return g, err
}

func parseColumnChunk(r *treader, c *chunkMeta) error {
	var hasMeta bool
	err := r.walk(func(id int16, typ byte) error {
		switch id {
		case 1: // file_path: the data is in another file
			return fmt.Errorf("%w: its data is in another file (file_path)", errUnsupported)
		case 3:
			if err := want(typ, tStruct, "meta_data"); err != nil {
				return err
			}
			hasMeta = true
			return parseColumnMeta(r, c)
		case 8, 9:
			return fmt.Errorf("%w: the column is encrypted", errUnsupported)
		}
		return errSkip
	})
	if err != nil {
		return err
	}
	switch {
	case !hasMeta:
		return fmt.Errorf("no meta_data")
	case !c.hasPhys || !c.hasCodec || !c.hasValues || !c.hasSizes || !c.hasDataOff:
		return fmt.Errorf("meta_data lacks a required field (type, codec, num_values, sizes or data_page_offset)")
	}
	return nil
}

func parseColumnMeta(r *treader, c *chunkMeta) error {
	c.sizeStat = -1
	var hasUnc, hasComp bool
	err := r.walk(func(id int16, typ byte) error {
		switch id {
		case 1:
			v, err := r.readI32(typ, "type")
			if err != nil {
				return err
			}
			if v < tyBoolean || v > tyFixed {
				return fmt.Errorf("physical type %d", v)
			}
			c.phys, c.hasPhys = int8(v), true
		case 2: // encodings
			if err := want(typ, tList, "encodings"); err != nil {
				return err
			}
			et, n, err := r.list()
			if err != nil {
				return err
			}
			if et != tI32 {
				return r.fail("encodings is not a list of i32")
			}
			for range n {
				v, err := r.i32()
				if err != nil {
					return err
				}
				if v >= 0 && v < 16 {
					c.encodings |= 1 << v
				}
			}
		case 3: // path_in_schema
			if err := want(typ, tList, "path_in_schema"); err != nil {
				return err
			}
			et, n, err := r.list()
			if err != nil {
				return err
			}
			if et != tBinary {
				return r.fail("path_in_schema is not a list of strings")
			}
			h := fnv.New64a()
			for range n {
				p, err := r.binary()
				if err != nil {
					return err
				}
				h.Write(p)
				h.Write([]byte{0})
			}
			c.pathHash = h.Sum64()
		case 4:
			v, err := r.readI32(typ, "codec")
			if err != nil {
				return err
			}
			if v < 0 || v > 127 {
				return fmt.Errorf("codec %d", v)
			}
			c.codec, c.hasCodec = int8(v), true
		case 5:
			v, err := r.readI64(typ, "num_values")
			if err != nil {
				return err
			}
			c.numValues, c.hasValues = v, true
		case 6:
			v, err := r.readI64(typ, "total_uncompressed_size")
			if err != nil {
				return err
			}
			c.unc, hasUnc = v, true
		case 7:
			v, err := r.readI64(typ, "total_compressed_size")
			if err != nil {
				return err
			}
			c.comp, hasComp = v, true
		case 9:
			v, err := r.readI64(typ, "data_page_offset")
			if err != nil {
				return err
			}
			c.dataOff, c.hasDataOff = v, true
		case 11:
			v, err := r.readI64(typ, "dictionary_page_offset")
			if err != nil {
				return err
			}
			c.dictOff = v
		case 13: // encoding_stats
			if err := want(typ, tList, "encoding_stats"); err != nil {
				return err
			}
			et, n, err := r.list()
			if err != nil {
				return err
			}
			if et != tStruct {
				return r.fail("encoding_stats is not a list of structs")
			}
			for range n {
				var pt int32 = -1
				if err := r.walk(func(id int16, typ byte) error {
					if id == 1 {
						v, err := r.readI32(typ, "page_type")
						pt = v
						return err
					}
					return errSkip
				}); err != nil {
					return err
				}
				if pt == pageDict {
					c.dictPages = true
				}
			}
		case 16: // size_statistics
			if err := want(typ, tStruct, "size_statistics"); err != nil {
				return err
			}
			return r.walk(func(id int16, typ byte) error {
				if id == 1 {
					v, err := r.readI64(typ, "unencoded_byte_array_data_bytes")
					if err == nil && v >= 0 {
						c.sizeStat, c.hasSize = v, true
					}
					return err
				}
				return errSkip
			})
		default:
			return errSkip
		}
		return nil
	})
	if err != nil {
		return err
	}
	c.hasSizes = hasUnc && hasComp
	return nil
}

// pageHeader is a PageHeader, as far as checking and bounding a page
// takes.
type pageHeader struct {
	typ        int32
	unc, comp  int32
	crc        uint32
	hasCRC     bool
	numValues  int32 // data, v2 and dictionary pages
	encoding   int32
	numRows    int32 // v2
	levelsLen  int32 // v2: repetition and definition levels' bytes
	repLen     int32 // v2: repetition levels' bytes (first), then definition levels'
	defEnc     int32 // v1: the definition and repetition levels' encodings
	repEnc     int32
	compressed bool // v2 (default true)
	len        int  // the header's own bytes
}

func parsePageHeader(b []byte) (pageHeader, error) {
	r := &treader{b: b}
	h := pageHeader{typ: -1, numValues: -1, encoding: -1, compressed: true, defEnc: encRLE, repEnc: encRLE}
	var sizes int
	err := r.walk(func(id int16, typ byte) error {
		switch id {
		case 1, 2, 3:
			v, err := r.readI32(typ, "page header")
			if err != nil {
				return err
			}
			switch id {
			case 1:
				h.typ = v
			case 2:
				h.unc = v
			case 3:
				h.comp = v
			}
			sizes++
		case 4:
			v, err := r.readI32(typ, "crc")
			h.crc, h.hasCRC = uint32(v), true
			return err
		case 5, 7, 8: // data_page_header, dictionary_page_header, data_page_header_v2
			if err := want(typ, tStruct, "page header"); err != nil {
				return err
			}
			return r.walk(func(fid int16, typ byte) error {
				switch {
				case fid == 1: // num_values in all three
					v, err := r.readI32(typ, "num_values")
					h.numValues = v
					return err
				case (id != 8 && fid == 2) || (id == 8 && fid == 4): // encoding
					v, err := r.readI32(typ, "encoding")
					h.encoding = v
					return err
				case id == 8 && fid == 3:
					v, err := r.readI32(typ, "num_rows")
					h.numRows = v
					return err
				case id == 5 && (fid == 3 || fid == 4):
					v, err := r.readI32(typ, "levels encoding")
					if fid == 3 {
						h.defEnc = v
					} else {
						h.repEnc = v
					}
					return err
				case id == 8 && (fid == 5 || fid == 6):
					v, err := r.readI32(typ, "levels byte length")
					if v < 0 {
						return fmt.Errorf("levels of %d bytes", v)
					}
					if fid == 6 {
						h.repLen = v
					}
					h.levelsLen += v
					return err
				case id == 8 && fid == 7:
					if err := want(typ, tTrue, "is_compressed"); err != nil {
						return err
					}
					h.compressed = typ == tTrue
					return nil
				}
				return errSkip
			})
		default:
			return errSkip
		}
		return nil
	})
	if err != nil {
		return h, err
	}
	if sizes < 3 || h.unc < 0 || h.comp < 0 {
		return h, fmt.Errorf("a page header without its type and sizes")
	}
	if (h.typ == pageData || h.typ == pageDataV2 || h.typ == pageDict) && (h.numValues < 0 || h.encoding < 0) {
		return h, fmt.Errorf("a page header without its values' count and encoding")
	}
	h.len = r.pos
	return h, nil
}
