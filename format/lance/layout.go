package lance

import (
	"fmt"
	"strings"

	"google.golang.org/protobuf/encoding/protowire"
)

// A Layout is a page's structural encoding (encodings_v2_1.proto's
// PageLayout): exactly one of its fields is set.
type Layout struct {
	MiniBlock *MiniBlockLayout
	FullZip   *FullZipLayout
	AllNull   *AllNullLayout
	Blob      *BlobLayout
}

// The meanings of a repetition/definition layer (RepDefLayer).
const (
	LayerAllValidItem     = 1
	LayerAllValidList     = 2
	LayerNullableItem     = 3
	LayerNullableList     = 4
	LayerEmptyableList    = 5
	LayerNullAndEmptyList = 6
)

// A MiniBlockLayout is a page of small values in chunks of about a disk
// sector, each read whole: buffer 0 the chunk table, buffer 1 the chunks,
// buffer 2 the dictionary if any, the next the repetition index if any.
type MiniBlockLayout struct {
	Rep, Def, Values, Dictionary *Compression
	DictionaryItems              uint64
	Layers                       []int
	Buffers                      uint64 // the values' buffers in each chunk
	RepIndexDepth                uint32
	Items                        uint64
}

// A FullZipLayout is a page of large values, each value's control word,
// size and bytes zipped together in buffer 0, with a repetition index of
// each row's offset in buffer 1 where values vary in size.
type FullZipLayout struct {
	BitsRep, BitsDef uint32
	// Exactly one of BitsPerValue (fixed width) and BitsPerOffset
	// (variable width: 32 or 64) is not zero.
	BitsPerValue, BitsPerOffset uint32
	Items, VisibleItems         uint32
	Values                      *Compression
	Layers                      []int
}

// An AllNullLayout is a page of nulls.
type AllNullLayout struct{ Layers []int }

// A BlobLayout is a page of large values stored out of line: the page
// holds each value's (position, size) in Inner.
type BlobLayout struct {
	Inner  *Layout
	Layers []int
}

func (l *Layout) String() string {
	switch {
	case l.MiniBlock != nil:
		m := l.MiniBlock
		s := fmt.Sprintf("mini-block(values=%v", m.Values)
		if m.Def != nil {
			s += fmt.Sprintf(", def=%v", m.Def)
		}
		if m.Rep != nil {
			s += fmt.Sprintf(", rep=%v", m.Rep)
		}
		if m.Dictionary != nil {
			s += fmt.Sprintf(", dictionary=%v", m.Dictionary)
		}
		return s + ")"
	case l.FullZip != nil:
		z := l.FullZip
		return fmt.Sprintf("full-zip(values=%v, bits rep/def/value/offset %d/%d/%d/%d)", z.Values, z.BitsRep, z.BitsDef, z.BitsPerValue, z.BitsPerOffset)
	case l.AllNull != nil:
		return "all-null"
	case l.Blob != nil:
		return fmt.Sprintf("blob(%v)", l.Blob.Inner)
	}
	return "no layout"
}

// A Compression is a node of a compressive encoding's tree
// (CompressiveEncoding): Kind names it, and the fields its kind has are
// set.
type Compression struct {
	Kind string // "flat", "variable", "inline-bitpacking", "fsst", …
	// Bits is Flat's bits per value, a bitpacking's uncompressed bits
	// per value, FixedSizeList's items per value.
	Bits uint64
	// Buffer is the general compression of Flat's data, Variable's
	// values or InlineBitpacking's values, if any.
	Buffer *BufferCompression
	// Values, Offsets, Indices, Items and RunLengths are the children:
	// Variable's offsets; Fsst's, OutOfLineBitpacking's, General's,
	// Rle's, ByteStreamSplit's, FixedSizeList's and PackedStruct's
	// values; Dictionary's indices and items; Rle's run lengths.
	Values, Offsets, Indices, Items, RunLengths *Compression
	SymbolTable                                 []byte   // Fsst
	Constant                                    []byte   // Constant
	HasConstant                                 bool     // Constant
	DictionaryItems                             uint64   // Dictionary
	HasValidity                                 bool     // FixedSizeList
	PackedBits                                  []uint64 // PackedStruct
}

// A BufferCompression is general compression of a whole buffer.
type BufferCompression struct {
	Scheme   int // 1 LZ4, 2 zstd
	Level    int32
	HasLevel bool
}

func (b *BufferCompression) String() string {
	switch b.Scheme {
	case 1:
		return "lz4"
	case 2:
		return "zstd"
	}
	return fmt.Sprintf("scheme %d", b.Scheme)
}

func (c *Compression) String() string {
	if c == nil {
		return "none"
	}
	var parts []string
	if c.Bits != 0 {
		parts = append(parts, fmt.Sprint(c.Bits))
	}
	if c.Buffer != nil {
		parts = append(parts, c.Buffer.String())
	}
	for _, ch := range []struct {
		name string
		c    *Compression
	}{{"offsets", c.Offsets}, {"indices", c.Indices}, {"items", c.Items}, {"values", c.Values}, {"runs", c.RunLengths}} {
		if ch.c != nil {
			parts = append(parts, ch.name+"="+ch.c.String())
		}
	}
	if len(parts) == 0 {
		return c.Kind
	}
	return c.Kind + "(" + strings.Join(parts, ", ") + ")"
}

// maxDepth bounds the nesting of layouts and compressions: a hostile
// protobuf of nested messages costs a stack frame a level.
const maxDepth = 32

func parseLayout(b []byte) (*Layout, error) { return parseLayoutAt(b, 0) }

func parseLayoutAt(b []byte, depth int) (*Layout, error) {
	if depth > maxDepth {
		return nil, fmt.Errorf("layouts nested deeper than %d", maxDepth)
	}
	l := &Layout{}
	n := 0
	err := walkPB(b, func(f pbField) error {
		var err error
		switch f.num {
		case 1:
			n++
			l.MiniBlock, err = parseMiniBlock(f, depth)
		case 2:
			n++
			l.AllNull = &AllNullLayout{}
			err = walkSub(f, func(g pbField) error {
				if g.num == 5 {
					l.AllNull.Layers, err = layers(g, l.AllNull.Layers, len(f.b))
					return err
				}
				return nil
			})
		case 3:
			n++
			l.FullZip, err = parseFullZip(f, depth)
		case 4:
			n++
			l.Blob = &BlobLayout{}
			err = walkSub(f, func(g pbField) error {
				var err error
				switch g.num {
				case 1:
					if err = g.want(protowire.BytesType); err == nil {
						l.Blob.Inner, err = parseLayoutAt(g.b, depth+1)
					}
				case 2:
					l.Blob.Layers, err = layers(g, l.Blob.Layers, len(f.b))
				}
				return err
			})
			if err == nil && l.Blob.Inner == nil {
				err = fmt.Errorf("a blob layout without its inner layout")
			}
		default:
			return fmt.Errorf("a page layout of kind %d", f.num)
		}
		return err
	})
	if err == nil && n != 1 {
		err = fmt.Errorf("%d page layouts in one", n)
	}
	return l, err
}

func layers(f pbField, ls []int, max int) ([]int, error) {
	vs, err := f.uints(nil, max)
	for _, v := range vs {
		ls = append(ls, int(v))
	}
	return ls, err
}

func parseMiniBlock(f pbField, depth int) (*MiniBlockLayout, error) {
	m := &MiniBlockLayout{}
	err := walkSub(f, func(g pbField) error {
		var err error
		switch g.num {
		case 1:
			m.Rep, err = parseCompression(g, depth+1)
		case 2:
			m.Def, err = parseCompression(g, depth+1)
		case 3:
			m.Values, err = parseCompression(g, depth+1)
		case 4:
			m.Dictionary, err = parseCompression(g, depth+1)
		case 5:
			m.DictionaryItems, err = g.n, g.want(protowire.VarintType)
		case 6:
			m.Layers, err = layers(g, m.Layers, len(f.b))
		case 7:
			m.Buffers, err = g.n, g.want(protowire.VarintType)
		case 8:
			m.RepIndexDepth, err = uint32(g.n), g.want(protowire.VarintType)
		case 9:
			m.Items, err = g.n, g.want(protowire.VarintType)
		}
		return err
	})
	if err == nil && m.Values == nil {
		err = fmt.Errorf("a mini-block layout without a value compression")
	}
	return m, err
}

func parseFullZip(f pbField, depth int) (*FullZipLayout, error) {
	z := &FullZipLayout{}
	err := walkSub(f, func(g pbField) error {
		var err error
		if g.num <= 6 {
			if err = g.want(protowire.VarintType); err != nil {
				return err
			}
		}
		switch g.num {
		case 1:
			z.BitsRep = uint32(g.n)
		case 2:
			z.BitsDef = uint32(g.n)
		case 3:
			z.BitsPerValue = uint32(g.n)
		case 4:
			z.BitsPerOffset = uint32(g.n)
		case 5:
			z.Items = uint32(g.n)
		case 6:
			z.VisibleItems = uint32(g.n)
		case 7:
			z.Values, err = parseCompression(g, depth+1)
		case 8:
			z.Layers, err = layers(g, z.Layers, len(f.b))
		}
		return err
	})
	if err == nil && z.Values == nil {
		err = fmt.Errorf("a full-zip layout without a value compression")
	}
	return z, err
}

// compressionKinds are CompressiveEncoding's oneof, by field number.
var compressionKinds = [...]string{
	1: "flat", 2: "variable", 3: "constant", 4: "out-of-line-bitpacking",
	5: "inline-bitpacking", 6: "fsst", 7: "dictionary", 8: "rle",
	9: "byte-stream-split", 10: "general", 11: "fixed-size-list",
	12: "packed-struct", 13: "variable-packed-struct",
}

func parseCompression(f pbField, depth int) (*Compression, error) {
	if depth > maxDepth {
		return nil, fmt.Errorf("compressions nested deeper than %d", maxDepth)
	}
	c := &Compression{}
	n := 0
	err := walkSub(f, func(g pbField) error {
		if int(g.num) >= len(compressionKinds) || compressionKinds[g.num] == "" {
			return fmt.Errorf("a compression of kind %d", g.num)
		}
		n++
		c.Kind = compressionKinds[g.num]
		child := func(e pbField, into **Compression) error {
			var err error
			*into, err = parseCompression(e, depth+1)
			return err
		}
		return walkSub(g, func(e pbField) error {
			switch c.Kind + "." + fmt.Sprint(e.num) {
			case "flat.1", "out-of-line-bitpacking.1", "inline-bitpacking.1", "fixed-size-list.1":
				c.Bits = e.n
				return e.want(protowire.VarintType)
			case "flat.2", "variable.2", "inline-bitpacking.2":
				var err error
				c.Buffer, err = parseBufferCompression(e)
				return err
			case "variable.1":
				return child(e, &c.Offsets)
			case "constant.1":
				c.Constant, c.HasConstant = e.b, true
				return e.want(protowire.BytesType)
			case "out-of-line-bitpacking.3", "fsst.2", "rle.1", "byte-stream-split.1",
				"general.3", "fixed-size-list.2", "packed-struct.2":
				return child(e, &c.Values)
			case "fsst.1":
				c.SymbolTable = e.b
				return e.want(protowire.BytesType)
			case "dictionary.1":
				return child(e, &c.Indices)
			case "dictionary.2":
				return child(e, &c.Items)
			case "dictionary.3":
				c.DictionaryItems = e.n
				return e.want(protowire.VarintType)
			case "rle.2":
				return child(e, &c.RunLengths)
			case "general.1":
				var err error
				c.Buffer, err = parseBufferCompression(e)
				return err
			case "fixed-size-list.3":
				c.HasValidity = e.n != 0
				return e.want(protowire.VarintType)
			case "packed-struct.1":
				var err error
				c.PackedBits, err = e.uints(c.PackedBits, len(g.b))
				return err
			}
			return nil
		})
	})
	if err == nil && n != 1 {
		err = fmt.Errorf("%d compressions in one", n)
	}
	return c, err
}

func parseBufferCompression(f pbField) (*BufferCompression, error) {
	b := &BufferCompression{}
	err := walkSub(f, func(g pbField) error {
		switch g.num {
		case 1:
			b.Scheme = int(g.n)
		case 2:
			b.Level, b.HasLevel = int32(g.n), true
		default:
			return nil
		}
		return g.want(protowire.VarintType)
	})
	return b, err
}
