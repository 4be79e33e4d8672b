package lance

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/brandgw/brand/format"
)

// What this package does not read is refused by name, wrapping
// format.ErrUnsupported and naming the file, the column and the
// encoding, before any byte of the page is read.
func TestRefusals(t *testing.T) {
	flat := func(bits uint64) *Compression { return &Compression{Kind: "flat", Bits: bits} }
	variable := &Compression{Kind: "variable", Offsets: flat(32)}
	mini := func(v *Compression) *Layout {
		return &Layout{MiniBlock: &MiniBlockLayout{Values: v, Buffers: 1, Items: 4, Layers: []int{LayerAllValidItem}}}
	}
	fullZip := func(v *Compression) *Layout {
		return &Layout{FullZip: &FullZipLayout{BitsPerOffset: 32, Values: v, Items: 4, VisibleItems: 4, Layers: []int{LayerAllValidItem}}}
	}
	tests := []struct {
		name   string
		layout *Layout
		want   string
	}{
		{"byte-stream-split", mini(&Compression{Kind: "byte-stream-split", Values: flat(32)}), "byte-stream-split"},
		{"general compression of mini-blocks", mini(&Compression{Kind: "general", Buffer: &BufferCompression{Scheme: 2}, Values: flat(32)}), "general"},
		{"out-of-line bit-packed values", mini(&Compression{Kind: "out-of-line-bitpacking", Bits: 32, Values: flat(7)}), "out-of-line-bitpacking"},
		{"a flat buffer compressed", mini(&Compression{Kind: "flat", Bits: 32, Buffer: &BufferCompression{Scheme: 1}}), "lz4"},
		{"fixed-size lists with validity", mini(&Compression{Kind: "fixed-size-list", Bits: 4, HasValidity: true, Values: flat(32)}), "fixed-size-list"},
		{"constant", mini(&Compression{Kind: "constant"}), "constant"},
		{"lists", &Layout{MiniBlock: &MiniBlockLayout{Rep: flat(16), Values: flat(32), Buffers: 1, Items: 4, RepIndexDepth: 1}}, "repetition"},
		{"nested layers", &Layout{MiniBlock: &MiniBlockLayout{Values: flat(32), Buffers: 1, Items: 4, Layers: []int{LayerNullableItem, LayerNullableItem}}}, "layers"},
		{"LZ4 per value", fullZip(&Compression{Kind: "general", Buffer: &BufferCompression{Scheme: 1}, Values: variable}), "lz4"},
		{"full-zip lists", &Layout{FullZip: &FullZipLayout{BitsRep: 1, BitsPerOffset: 32, Values: variable}}, "repetition"},
		{"a blob over full-zip", &Layout{Blob: &BlobLayout{Inner: fullZip(variable)}}, "blob layout over"},
		{"a packed struct of a 1-bit field", mini(&Compression{Kind: "packed-struct", PackedBits: []uint64{1, 31}, Values: flat(32)}), "packed-struct"},
		{"a packed struct its bits do not add up to", mini(&Compression{Kind: "packed-struct", PackedBits: []uint64{32, 32}, Values: flat(32)}), "packed-struct"},
		{"a variable packed struct", mini(&Compression{Kind: "variable-packed-struct"}), "variable-packed-struct"},
		{"a dictionary compressed", &Layout{MiniBlock: &MiniBlockLayout{Values: flat(8), Buffers: 1, Items: 4, Dictionary: &Compression{Kind: "general", Buffer: &BufferCompression{Scheme: 2}, Values: variable}, DictionaryItems: 2}}, "dictionary compressed"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := &File{Name: "x.lance", Size: 1 << 20, Rows: 4, Columns: []Column{{Pages: []Page{{
				Rows:    4,
				Buffers: []Buffer{{0, 2}, {64, 64}, {128, 64}},
				Layout:  tt.layout,
			}}}}}
			read := func(off, n uint64) ([]byte, error) {
				if tt.name == "a dictionary compressed" {
					return make([]byte, n), nil // its chunk table is read first
				}
				t.Fatalf("read %d bytes at %d of a refused page", n, off)
				return nil, nil
			}
			_, err := f.ReadRows(0, 0, 4, read, 1<<20)
			if !errors.Is(err, format.ErrUnsupported) || !strings.Contains(err.Error(), "x.lance, column 0") || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("%v: not unsupported, naming x.lance, column 0 and %q", err, tt.want)
			}
		})
	}
}

// Dataset.Column reads a struct only where Lance packed it: the field
// metadata lance-encoding:packed (or packed) true, its children
// fixed-width values of whole bytes; each page must pack those widths.
func TestPackedFields(t *testing.T) {
	m := &Manifest{Fields: []Field{
		{ID: 0, ParentID: -1, Name: "p", LogicalType: "struct", Metadata: map[string]string{"lance-encoding:packed": "true"}},
		{ID: 1, ParentID: 0, Name: "x", LogicalType: "int32"},
		{ID: 2, ParentID: 0, Name: "y", LogicalType: "double"},
		{ID: 3, ParentID: -1, Name: "s", LogicalType: "struct"},
		{ID: 4, ParentID: 3, Name: "a", LogicalType: "int32"},
		{ID: 5, ParentID: -1, Name: "q", LogicalType: "struct", Metadata: map[string]string{"packed": "true"}},
		{ID: 6, ParentID: 5, Name: "b", LogicalType: "string"},
	}}
	if bits, err := m.packedBits(m.Fields[0]); err != nil || len(bits) != 2 || bits[0] != 32 || bits[1] != 64 {
		t.Fatalf("p: %v, %v", bits, err)
	}
	for _, c := range []struct {
		field int
		want  string
	}{{3, "nested"}, {5, "not a fixed-width value"}} {
		if _, err := m.packedBits(m.Fields[c.field]); !errors.Is(err, format.ErrUnsupported) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, not unsupported naming %q", m.Fields[c.field].Name, err, c.want)
		}
	}
	// The packed fixture's pages pack an int32, a double and an int8: a
	// manifest saying the last is an int16 is refused, not misread.
	st, objs, _ := fixture(t, "packed")
	d, err := Open(context.Background(), st, objs, 0, Options{})
	if err != nil {
		t.Fatal(err)
	}
	for i, f := range d.Manifest.Fields {
		if f.Name == "z" {
			d.Manifest.Fields[i].LogicalType = "int16"
		}
	}
	if _, _, err := d.Column(context.Background(), "p"); !errors.Is(err, format.ErrUnsupported) || !strings.Contains(err.Error(), "packed struct of [32 64 16] bits") {
		t.Fatalf("a packed struct of other widths: %v", err)
	}
}
