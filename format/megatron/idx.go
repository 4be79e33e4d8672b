package megatron

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/brandgw/brand/format"
)

// idxMagic opens every .idx.
const idxMagic = "MMIDIDX\x00\x00"

// headerLen is the .idx's fixed header: magic, version, dtype, S, D.
const headerLen = 9 + 8 + 1 + 8 + 8

// dtype is one of the .idx's token types.
type dtype struct {
	name  string // NumPy's name
	descr string // the .npy descriptor
	size  int64  // bytes a token
}

// dtypes by the .idx's code (Megatron's DType enum).
var dtypes = map[byte]dtype{
	1: {"uint8", "|u1", 1},
	2: {"int8", "|i1", 1},
	3: {"int16", "<i2", 2},
	4: {"int32", "<i4", 4},
	5: {"int64", "<i8", 8},
	6: {"float64", "<f8", 8},
	7: {"float32", "<f4", 4},
	8: {"uint16", "<u2", 2},
}

// index is what one .idx says: its dtype and each document's tokens.
type index struct {
	code byte
	docs []uint32 // tokens per document
}

// parseIdx reads the .idx b, whose .bin is binSize bytes, and checks it
// describes that .bin: the sequences back to back from byte 0 to its
// end, grouped into documents in order. name names the .idx in errors.
func parseIdx(name string, b []byte, binSize int64) (index, error) {
	bad := func(f string, a ...any) (index, error) {
		return index{}, fmt.Errorf("%w: %s: %s", format.ErrInvalid, name, fmt.Sprintf(f, a...))
	}
	if len(b) < headerLen {
		return bad("%d bytes cannot hold the %d-byte header (truncated?)", len(b), headerLen)
	}
	if string(b[:len(idxMagic)]) != idxMagic {
		return bad("not a Megatron index (magic %q)", b[:len(idxMagic)])
	}
	le := binary.LittleEndian
	p := b[len(idxMagic):]
	if v := le.Uint64(p); v != 1 {
		return bad("version %d; only 1 is known", v)
	}
	code := p[8]
	dt, ok := dtypes[code]
	if !ok {
		return bad("unknown dtype code %d", code)
	}
	s, d := le.Uint64(p[9:]), le.Uint64(p[17:])
	rest := uint64(len(b) - headerLen)
	// Counts checked against the file before any multiplication.
	if s > rest/12 || d > rest/8 || 12*s+8*d > rest {
		return bad("%d sequences and %d document boundaries need more than the file's %d bytes (truncated, or counts that lie)", s, d, len(b))
	}
	switch extra := rest - 12*s - 8*d; {
	case extra == s && s > 0:
		return index{}, fmt.Errorf("%w: %s: a multimodal index (sequence modes) is not served", format.ErrUnsupported, name)
	case extra != 0:
		return bad("%d bytes after the tables of %d sequences and %d document boundaries", extra, s, d)
	}
	if d == 0 {
		return bad("an empty document index (it starts with 0)")
	}
	sizes := b[headerLen : headerLen+4*s]
	ptrs := b[headerLen+4*s : headerLen+12*s]
	docIdx := b[headerLen+12*s : headerLen+12*s+8*d]

	// The pointers are the builder's: each sequence where the one before
	// it ends.
	var end uint64 // bytes so far
	for i := range s {
		n := int32(le.Uint32(sizes[4*i:]))
		if n < 0 {
			return bad("sequence %d has %d tokens", i, n)
		}
		ptr := le.Uint64(ptrs[8*i:])
		if ptr != end {
			what := "out of order or overlapping"
			if ptr > end {
				what = "leaving a gap"
			}
			return bad("sequence %d starts at byte %d, where the sequences before it end at %d: pointers %s", i, int64(ptr), end, what)
		}
		end += uint64(n) * uint64(dt.size)
	}
	if end != uint64(binSize) {
		return bad("its sizes total %d bytes of %s tokens; the .bin holds %d", end, dt.name, binSize)
	}
	if le.Uint64(docIdx) != 0 || le.Uint64(docIdx[8*(d-1):]) != s {
		return bad("the document index runs from %d to %d; it must run from 0 to the %d sequences", int64(le.Uint64(docIdx)), int64(le.Uint64(docIdx[8*(d-1):])), s)
	}
	docs := make([]uint32, d-1)
	prev := uint64(0)
	for i := range d - 1 {
		next := le.Uint64(docIdx[8*(i+1):])
		if next < prev || next > s {
			return bad("document %d ends at sequence %d, before it starts (%d) or past the %d sequences", i, int64(next), prev, s)
		}
		var tokens uint64
		for j := prev; j < next; j++ {
			tokens += uint64(le.Uint32(sizes[4*j:]))
		}
		if tokens > math.MaxUint32 {
			return bad("document %d has %d tokens", i, tokens)
		}
		docs[i] = uint32(tokens)
		prev = next
	}
	return index{code: code, docs: docs}, nil
}
