package lance

import (
	"encoding/binary"
	"strings"
	"testing"
)

// fsstOf is a symbol table of the symbols syms, compressed.
func fsstOf(syms ...string) []byte {
	b := make([]byte, fsstTableSize)
	binary.LittleEndian.PutUint64(b, 0x46535354<<32|1<<24|uint64(len(syms)))
	for i, s := range syms {
		copy(b[8+8*i:], s)
		b[8+8*len(syms)+i] = byte(len(s))
	}
	return b
}

// FSST decodes codes to their symbols and escapes to their byte, and
// refuses what no encoder writes.
func TestFSST(t *testing.T) {
	tb, err := parseFSST(fsstOf("ab", "cde", "fghijklm"))
	if err != nil {
		t.Fatal(err)
	}
	got, err := tb.decode(nil, []byte{2, 0, 255, 'x', 1, 0})
	if err != nil || string(got) != "fghijklmabxcdeab" {
		t.Fatalf("%q %v", got, err)
	}
	for _, tt := range []struct {
		name string
		in   []byte
		want string
	}{
		{"an escape at the end", []byte{0, 255}, "escape"},
		{"a code past the symbols", []byte{3}, "code 3"},
	} {
		if _, err := tb.decode(nil, tt.in); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: %v", tt.name, err)
		}
	}
	bad := fsstOf("ab")
	bad[8+8] = 9 // a symbol of 9 bytes
	for _, tt := range []struct {
		name string
		b    []byte
	}{{"short", fsstOf("ab")[:100]}, {"no magic", make([]byte, fsstTableSize)}, {"a long symbol", bad}} {
		if _, err := parseFSST(tt.b); err == nil {
			t.Errorf("%s: parsed", tt.name)
		}
	}
	// An uncompressed table passes values through.
	plain := fsstOf()
	binary.LittleEndian.PutUint64(plain, 0x46535354<<32)
	tp, err := parseFSST(plain)
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := tp.decode(nil, []byte{255, 7}); string(got) != "\xff\x07" {
		t.Fatalf("%q", got)
	}
}
