package lance

import (
	"encoding/binary"
	"fmt"
)

// FSST, as Lance's own FSST (rust/compression/fsst) writes its symbol
// table into a page's encoding, always 2,312 bytes: a u64 of information
// ("FSST" in its top 32 bits, bit 24 set where the values are compressed
// at all, the number n of symbols in its low byte), then the n symbols
// of 8 bytes (each a little-endian u64 whose low bytes are the symbol),
// then their n lengths (1 to 8), then zeros.
// A compressed value is a sequence of codes: a code below n stands for
// its symbol's bytes, 255 for the byte after it, taken as is.

const fsstTableSize = 8 + 256*8 + 256

// An fsstTable is a parsed symbol table.
type fsstTable struct {
	compressed bool
	n          int // at most 255: code 255 is the escape
	symbols    [256][8]byte
	lens       [256]uint8
}

func parseFSST(b []byte) (*fsstTable, error) {
	if len(b) != fsstTableSize {
		return nil, fmt.Errorf("an FSST symbol table of %d bytes, not %d", len(b), fsstTableSize)
	}
	info := binary.LittleEndian.Uint64(b)
	if info>>32 != 0x46535354 {
		return nil, fmt.Errorf("an FSST symbol table without its magic")
	}
	t := &fsstTable{compressed: info&(1<<24) != 0, n: int(info & 255)}
	for i := range t.n {
		copy(t.symbols[i][:], b[8+8*i:])
		t.lens[i] = b[8+8*t.n+i]
		if t.lens[i] == 0 || t.lens[i] > 8 {
			return nil, fmt.Errorf("FSST symbol %d of %d bytes", i, t.lens[i])
		}
	}
	return t, nil
}

// decode appends the value in (compressed) decoded to out.
func (t *fsstTable) decode(out, in []byte) ([]byte, error) {
	if !t.compressed {
		return append(out, in...), nil
	}
	for i := 0; i < len(in); i++ {
		c := in[i]
		switch {
		case c == 255:
			if i++; i == len(in) {
				return nil, fmt.Errorf("an FSST escape at the value's end")
			}
			out = append(out, in[i])
		case int(c) < t.n:
			out = append(out, t.symbols[c][:t.lens[c]]...)
		default:
			// Lance's decoder writes nothing for these; no encoder writes them.
			return nil, fmt.Errorf("FSST code %d, no symbol of a table of %d", c, t.n)
		}
	}
	return out, nil
}
