package lance

import (
	"encoding/binary"
	"fmt"
)

// roaringOffsets reads a 32-bit roaring bitmap in its portable
// serialization (what roaring-rs's serialize_into writes, and Lance's
// .bin deletion files are): a cookie (12346 and a u32 container count,
// or 12347 with the count less one in its upper 16 bits and a bitmap of
// which containers are runs), each container's key and cardinality less
// one (u16 each), the containers' offsets (u32 each; absent for a run
// cookie of fewer than 4 containers), then the containers: an array of
// u16 values (cardinality at most 4,096), a bitmap of 8,192 bytes, or
// runs (a u16 count, then starts and lengths less one, u16 each). It
// returns the values in order, at most most of them, every count checked
// against the bytes before it is read.
func roaringOffsets(b []byte, most uint64) ([]uint32, error) {
	const (
		cookieNoRuns = 12346
		cookieRuns   = 12347
	)
	if len(b) < 4 {
		return nil, fmt.Errorf("a roaring bitmap of %d bytes", len(b))
	}
	cookie := binary.LittleEndian.Uint32(b)
	at := uint64(4)
	var n uint64
	var runs []byte
	switch {
	case cookie == cookieNoRuns:
		if len(b) < 8 {
			return nil, fmt.Errorf("a roaring bitmap of %d bytes", len(b))
		}
		n = uint64(binary.LittleEndian.Uint32(b[4:]))
		at = 8
	case cookie&0xffff == cookieRuns:
		n = uint64(cookie>>16) + 1
		rb := (n + 7) / 8
		if rb > uint64(len(b))-at {
			return nil, fmt.Errorf("a roaring bitmap's run flags past its end")
		}
		runs = b[at : at+rb]
		at += rb
	default:
		return nil, fmt.Errorf("no roaring cookie (%#x)", cookie)
	}
	isRun := func(i uint64) bool { return runs != nil && runs[i/8]>>(i%8)&1 == 1 }
	if n > 1<<16 || 4*n > uint64(len(b))-at {
		return nil, fmt.Errorf("%d roaring containers in %d bytes", n, len(b))
	}
	desc := b[at : at+4*n]
	at += 4 * n
	if runs == nil || n >= 4 {
		if 4*n > uint64(len(b))-at {
			return nil, fmt.Errorf("roaring container offsets past the end")
		}
		at += 4 * n // the offsets: the containers follow one another anyway
	}
	var total uint64
	for i := range n {
		total += uint64(binary.LittleEndian.Uint16(desc[4*i+2:])) + 1
	}
	if total > most {
		return nil, fmt.Errorf("a roaring bitmap of %d values, more than %d", total, most)
	}
	out := make([]uint32, 0, total)
	prevKey := -1
	for i := range n {
		key := int(binary.LittleEndian.Uint16(desc[4*i:]))
		card := uint64(binary.LittleEndian.Uint16(desc[4*i+2:])) + 1
		if key <= prevKey {
			return nil, fmt.Errorf("roaring container keys out of order")
		}
		prevKey = key
		hi := uint32(key) << 16
		start := len(out)
		switch {
		case isRun(i):
			if 2 > uint64(len(b))-at {
				return nil, fmt.Errorf("a roaring run container past the end")
			}
			nr := uint64(binary.LittleEndian.Uint16(b[at:]))
			at += 2
			if 4*nr > uint64(len(b))-at {
				return nil, fmt.Errorf("%d roaring runs past the end", nr)
			}
			for r := range nr {
				s := uint64(binary.LittleEndian.Uint16(b[at+4*r:]))
				l := uint64(binary.LittleEndian.Uint16(b[at+4*r+2:])) + 1
				if s+l > 1<<16 || uint64(len(out)-start)+l > card {
					return nil, fmt.Errorf("a roaring run past its container")
				}
				for v := s; v < s+l; v++ {
					out = append(out, hi|uint32(v))
				}
			}
			at += 4 * nr
		case card <= 4096:
			if 2*card > uint64(len(b))-at {
				return nil, fmt.Errorf("a roaring array container past the end")
			}
			for j := range card {
				out = append(out, hi|uint32(binary.LittleEndian.Uint16(b[at+2*j:])))
			}
			at += 2 * card
		default:
			if 8192 > uint64(len(b))-at {
				return nil, fmt.Errorf("a roaring bitmap container past the end")
			}
			for j := range uint64(1 << 16) {
				if b[at+j/8]>>(j%8)&1 == 1 {
					if uint64(len(out)-start) == card {
						return nil, fmt.Errorf("a roaring bitmap container of more than its %d values", card)
					}
					out = append(out, hi|uint32(j))
				}
			}
			at += 8192
		}
		if uint64(len(out)-start) != card {
			return nil, fmt.Errorf("a roaring container of %d values, its header says %d", len(out)-start, card)
		}
		for j := start + 1; j < len(out); j++ {
			if out[j] <= out[j-1] {
				return nil, fmt.Errorf("roaring values out of order")
			}
		}
	}
	if at != uint64(len(b)) {
		return nil, fmt.Errorf("%d bytes after a roaring bitmap", uint64(len(b))-at)
	}
	return out, nil
}
