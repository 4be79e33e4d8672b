package parquet

import (
	"encoding/binary"
	"fmt"
	"math/bits"
)

// levelReader reads a column chunk's repetition or definition levels
// from one page: Parquet's RLE / bit-packed hybrid, values of bitWidth
// bits, without allocating. Counting a list column's elements per row
// (--tokens) needs the levels alone, never the values.
type levelReader struct {
	b        []byte
	width    int    // bits per level
	bytes    int    // bytes of an RLE run's value
	run      int    // levels left in the current RLE run
	runValue uint32 // its value
	packed   []byte
	packedN  int // levels left in the current bit-packed run
	packedAt int // the next one's index in it
}

// levelWidth is the bits a level of at most max takes.
func levelWidth(max int) int { return bits.Len(uint(max)) }

func newLevelReader(b []byte, maxLevel int) *levelReader {
	w := levelWidth(maxLevel)
	return &levelReader{b: b, width: w, bytes: (w + 7) / 8}
}

// take returns the next levels, up to most of them, that have one value:
// the rest of an RLE run at once, a bit-packed level alone. A level past
// the data, or one above 2^width−1, cannot be: the page is damaged.
func (l *levelReader) take(most int64) (int16, int64, error) {
	v, n, err := l.next(most)
	return int16(v), n, err
}

// next is take for values of up to 32 bits (a dictionary's indices).
func (l *levelReader) next(most int64) (uint32, int64, error) {
	for {
		if l.run > 0 {
			n := min(int64(l.run), most)
			l.run -= int(n)
			return l.runValue, n, nil
		}
		if l.packedN > 0 {
			bit := l.packedAt * l.width
			var v uint32
			for i := 0; i < l.width; i++ {
				if l.packed[(bit+i)/8]>>((bit+i)%8)&1 != 0 {
					v |= 1 << i
				}
			}
			l.packedAt++
			l.packedN--
			return v, 1, nil
		}
		if len(l.b) == 0 {
			return 0, 0, fmt.Errorf("its levels end before its values")
		}
		h, n := binary.Uvarint(l.b)
		if n <= 0 || h>>1 > 1<<31 {
			return 0, 0, fmt.Errorf("a levels run header that is not one")
		}
		l.b = l.b[n:]
		if h&1 == 0 { // RLE: a count, then the value in whole bytes
			if len(l.b) < l.bytes {
				return 0, 0, fmt.Errorf("a levels run without its value")
			}
			var v uint32
			for i := 0; i < l.bytes; i++ {
				v |= uint32(l.b[i]) << (8 * i)
			}
			if uint64(v) >= 1<<l.width && l.width > 0 {
				return 0, 0, fmt.Errorf("a level of %d in a column of %d bits", v, l.width)
			}
			l.b = l.b[l.bytes:]
			l.run, l.runValue = int(h>>1), v
			continue
		}
		groups := int(h >> 1) // bit-packed: groups of 8 levels
		need := groups * l.width
		if need > len(l.b) {
			// The last group may be cut short at the data's end.
			need = len(l.b)
		}
		l.packed, l.b = l.b[:need], l.b[need:]
		l.packedN, l.packedAt = min(groups*8, need*8/max(1, l.width)), 0
		if l.width == 0 {
			l.packedN = groups * 8
		}
	}
}
