package transform

import (
	"bytes"
	"encoding/binary"
)

// The splice: CropJPEG's cut of a one-scan sequential JPEG without coding
// its blocks again.
//
// A sequential JPEG's scan is one bitstream of Huffman-coded blocks, MCU
// after MCU, row after row; each block's DC coefficient is coded as its
// difference from the previous block's of the same component, and
// nothing else refers across blocks. The cut region's blocks are, in
// each of its MCU rows, one contiguous run of that bitstream. So the cut
// can be had by finding where each run starts and ends (walking the
// Huffman codes down to the region's last MCU: decoding them, but storing
// and dequantizing no coefficient), and copying each run's bits, with
// only a few blocks coded again (spliceJPEG): the first of each component
// in each run gets its DC difference against the previous run's last
// block, not the source's neighbour to the left, and the blocks past the
// cut image's edges become libjpeg's dummies. The coefficients are the source's
// exactly, as in libjpeg's coefficient copy; the Huffman tables are the
// source's (libjpeg's path writes its standard ones, so the bytes of the
// two cuts are equal when the source used those). What libjpeg's path
// spends coding the region again (about 0.18 ms of an ImageNet photo's
// 0.6) is replaced by a copy of bits.
//
// The splice takes what it can take safely and declines the rest, which
// libjpeg's path then cuts (spliceJPEG's ok false): progressive,
// arithmetic-coded, lossless and hierarchical JPEGs; multi-scan ones;
// restart intervals; an Adobe marker or components named R, G, B (libjpeg
// decides their colour space); more than 3 components or samples not of
// 8 bits; a region's DC difference its table cannot code; and any Huffman
// code, table or marker out of the ordinary, or data ending before the
// region's last block, so that a damaged file gets libjpeg's answer.

// spliceComp is a frame component as the splice needs it.
type spliceComp struct {
	id, tq, td, ta byte
	h, v           int
}

// spliceHeader is a JPEG's header as the splice reads it.
type spliceHeader struct {
	w, h  int
	comps []spliceComp
	dqt   [4][]byte    // each table's body as stored (Pq/Tq, values)
	dht   [2][4][]byte // [class][id]: the table's body (Tc/Th, counts, values)
	scan  []byte       // the entropy-coded data and what follows it
	jfif  []byte       // the first JFIF APP0's body, if any
}

// readSpliceHeader reads src's markers up to its scan; ok is false for
// anything the splice declines.
func readSpliceHeader(src []byte) (j spliceHeader, ok bool) {
	i := 2
	for i+4 <= len(src) {
		if src[i] != 0xff {
			return j, false
		}
		m := src[i+1]
		if m == 0xff { // fill
			i++
			continue
		}
		n := int(binary.BigEndian.Uint16(src[i+2:]))
		if n < 2 || i+2+n > len(src) {
			return j, false
		}
		seg := src[i+4 : i+2+n]
		switch {
		case m == 0xe0 && len(seg) >= 5 && string(seg[:5]) == "JFIF\x00":
			if j.jfif == nil {
				j.jfif = seg
			}
		case m == 0xee && len(seg) >= 5 && string(seg[:5]) == "Adobe":
			return j, false
		case m >= 0xe0 && m <= 0xef || m == 0xfe: // other APPn, COM
		case m == 0xdb:
			for len(seg) > 0 {
				pq, tq := seg[0]>>4, seg[0]&15
				size := 1 + 64*(1+int(pq))
				if pq > 1 || tq > 3 || len(seg) < size {
					return j, false
				}
				j.dqt[tq] = seg[:size]
				seg = seg[size:]
			}
		case m == 0xc4:
			for len(seg) > 0 {
				if len(seg) < 17 {
					return j, false
				}
				tc, th := seg[0]>>4, seg[0]&15
				total := 0
				for _, c := range seg[1:17] {
					total += int(c)
				}
				if tc > 1 || th > 3 || total > 256 || len(seg) < 17+total {
					return j, false
				}
				j.dht[tc][th] = seg[:17+total]
				seg = seg[17+total:]
			}
		case m == 0xdd:
			if len(seg) < 2 || binary.BigEndian.Uint16(seg) != 0 {
				return j, false // restart intervals: not spliced
			}
		case m == 0xc0 || m == 0xc1:
			if j.comps != nil || len(seg) < 6 || seg[0] != 8 {
				return j, false
			}
			j.h, j.w = int(binary.BigEndian.Uint16(seg[1:])), int(binary.BigEndian.Uint16(seg[3:]))
			nc := int(seg[5])
			if j.w == 0 || j.h == 0 || nc != 1 && nc != 3 || len(seg) < 6+3*nc {
				return j, false
			}
			for c := range nc {
				b := seg[6+3*c:]
				hs, vs := int(b[1]>>4), int(b[1]&15)
				if hs < 1 || hs > 4 || vs < 1 || vs > 4 || b[2] > 3 {
					return j, false
				}
				j.comps = append(j.comps, spliceComp{id: b[0], h: hs, v: vs, tq: b[2]})
			}
			if nc == 3 && j.jfif == nil && string([]byte{j.comps[0].id, j.comps[1].id, j.comps[2].id}) == "RGB" {
				return j, false
			}
		case m == 0xda:
			if j.comps == nil || len(seg) < 1 || int(seg[0]) != len(j.comps) || len(seg) < 1+2*len(j.comps)+3 {
				return j, false
			}
			for c := range j.comps {
				b := seg[1+2*c:]
				if b[0] != j.comps[c].id || b[1]>>4 > 3 || b[1]&15 > 3 {
					return j, false
				}
				j.comps[c].td, j.comps[c].ta = b[1]>>4, b[1]&15
			}
			if t := seg[1+2*len(j.comps):]; t[0] != 0 || t[1] != 63 || t[2] != 0 {
				return j, false
			}
			j.scan = src[i+2+n:]
			return j, true
		default: // other frames (progressive, lossless, arithmetic), DAC, DNL, DHP, EXP, markers out of place
			return j, false
		}
		i += 2 + n
	}
	return j, false
}

// huffLUTBits: codes this long or shorter are decoded by one lookup.
const huffLUTBits = 10

// An AC table's lookup entry: what one run/size symbol and its bits do to
// the walk, which needs no coefficient's value. 0: no code of at most
// huffLUTBits bits (or a size no 8-bit DCT has), found by slow.
const (
	acBits    = 31      // the code's and the coefficient's bits
	acAdvance = 31 << 5 // the coefficients it moves on (run + 1; 16 for ZRL; 0 for EOB)
	acEOB     = 1 << 10 // the end of the block
	acValid   = 1 << 15
)

// acEntry is the lookup entry of the AC symbol sym coded in l bits; 0 for
// a coefficient of more than 10 bits, which no 8-bit DCT has (damage).
func acEntry(l uint, sym byte) uint16 {
	run, size := uint16(sym>>4), uint16(sym&15)
	switch {
	case size > 10:
		return 0
	case size > 0:
		return acValid | (run+1)<<5 | uint16(l) + size
	case run == 15:
		return acValid | 16<<5 | uint16(l)
	}
	return acValid | acEOB | uint16(l)
}

// huffTable decodes and encodes one Huffman table's codes.
type huffTable struct {
	// lut[the next huffLUTBits bits]: for a DC table, length<<8 | symbol
	// of a code of at most huffLUTBits bits, else 0; for an AC table,
	// acEntry's.
	lut [1 << huffLUTBits]uint16
	// maxcode[l] is the largest code of l bits (-1: none), valptr[l] the
	// index in vals of the first one, mincode[l] that code.
	maxcode [18]int32
	valptr  [17]int32
	mincode [17]int32
	vals    []byte
	// code and size of each symbol (size 0: the table has none).
	code [256]uint16
	size [256]uint8
}

// build fills t from a DHT table's body (Tc/Th, 16 counts, values); ok
// is false for counts that overflow their lengths.
func (t *huffTable) build(body []byte) bool {
	counts, vals := body[1:17], body[17:]
	ac := body[0]>>4 == 1
	t.vals = vals
	code, k := int32(0), int32(0)
	for l := 1; l <= 16; l++ {
		n := int32(counts[l-1])
		t.valptr[l], t.mincode[l] = k, code
		if n == 0 {
			t.maxcode[l] = -1
		} else {
			t.maxcode[l] = code + n - 1
		}
		for range n {
			if code >= 1<<l {
				return false
			}
			s := vals[k]
			if t.size[s] == 0 {
				t.code[s], t.size[s] = uint16(code), uint8(l)
			}
			if l <= huffLUTBits {
				e := uint16(l)<<8 | uint16(s)
				if ac {
					e = acEntry(uint(l), s)
				}
				lo := code << (huffLUTBits - l)
				for p := lo; p < lo+1<<(huffLUTBits-l); p++ {
					t.lut[p] = e
				}
			}
			code++
			k++
		}
		code <<= 1
	}
	t.maxcode[17] = 1 << 30
	return true
}

// slow decodes a code longer than huffLUTBits at the top of acc: its
// length and symbol, or length 0 for no code.
func (t *huffTable) slow(acc uint64) (uint, byte) {
	for l := huffLUTBits + 1; l <= 16; l++ {
		c := int32(acc >> (64 - l))
		if c <= t.maxcode[l] {
			return uint(l), t.vals[t.valptr[l]+c-t.mincode[l]]
		}
	}
	return 0, 0
}

// bitWriter codes bits into a scan: msb first, each 0xff byte followed
// by a stuffed 0x00.
type bitWriter struct {
	out []byte
	acc uint64 // the low n bits are pending
	n   uint
}

// put appends the low l bits of v (l ≤ 32).
func (w *bitWriter) put(v uint64, l uint) {
	w.acc = w.acc<<l | v&(1<<l-1)
	w.n += l
	for w.n >= 8 {
		w.n -= 8
		b := byte(w.acc >> w.n)
		w.out = append(w.out, b)
		if b == 0xff {
			w.out = append(w.out, 0)
		}
	}
}

// copyBits appends bits [p, q) of data (unstuffed, followed by at least
// 8 bytes of padding).
func (w *bitWriter) copyBits(data []byte, p, q uint) {
	for p < q {
		l := min(q-p, 32)
		v := binary.BigEndian.Uint64(data[p/8:]) << (p % 8) >> (64 - l)
		w.put(v, l)
		p += l
	}
}

// unstuff appends to dst the entropy-coded data at the start of scan,
// its stuffed zeros removed, up to the marker that ends it; ok is false
// at a restart marker (the splice takes no restart intervals).
func unstuff(dst, scan []byte) ([]byte, bool) {
	for {
		i := bytes.IndexByte(scan, 0xff)
		if i < 0 {
			return append(dst, scan...), true
		}
		dst = append(dst, scan[:i]...)
		k := i + 1
		for k < len(scan) && scan[k] == 0xff {
			k++
		}
		switch {
		case k == len(scan):
			return dst, true
		case scan[k] == 0:
			dst = append(dst, 0xff)
			scan = scan[k+1:]
		case scan[k] >= 0xd0 && scan[k] <= 0xd7:
			return dst, false
		default:
			return dst, true
		}
	}
}

// spliceJPEG appends to dst the cut of src to the smallest iMCU-aligned
// region holding the box at (x, y) of w×h pixels, as cutCoefficients'
// (above); ok is false where it declines, and dst is then returned as it
// came.
//
// Each block of the region is copied but for three kinds, coded as
// libjpeg's path codes them: the first block of each component in each
// of the region's MCU rows, and any block after a dummy, get their DC
// difference again (against the block before them in the cut); and the
// blocks of the region's last MCU column and row that lie past the cut
// image's edge, which libjpeg's compressor writes as dummies (no AC
// coefficients, the DC of the block before), are written so instead of
// the source's blocks there. The cut's coefficients, markers and (for a
// source coded with libjpeg's standard tables, canonically) its bytes
// are then libjpeg's path's.
func spliceJPEG(dst, src []byte, x, y, w, h int) (out []byte, ox, oy int, ok bool) {
	j, ok := readSpliceHeader(src)
	if !ok || x < 0 || y < 0 || w < 1 || h < 1 || x+w > j.w || y+h > j.h {
		return dst, 0, 0, false
	}
	nc := len(j.comps)
	var dc, ac [3]huffTable
	// The iMCU and each component's blocks in an MCU (hs×vs); one
	// component is coded block by block whatever its factors.
	hmax, vmax := 1, 1
	var hs, vs, blocks [3]int
	for k, c := range j.comps {
		hs[k], vs[k] = c.h, c.v
		if nc == 1 {
			hs[k], vs[k] = 1, 1
		}
		hmax, vmax = max(hmax, hs[k]), max(vmax, vs[k])
		blocks[k] = hs[k] * vs[k]
		if j.dqt[c.tq] == nil || j.dht[0][c.td] == nil || j.dht[1][c.ta] == nil ||
			!dc[k].build(j.dht[0][c.td]) || !ac[k].build(j.dht[1][c.ta]) || ac[k].size[0] == 0 || dc[k].size[0] == 0 {
			return dst, 0, 0, false
		}
	}
	if blocks[0]+blocks[1]+blocks[2] > 10 { // the standard's limit on an MCU's blocks
		return dst, 0, 0, false
	}
	iw, ih := 8*hmax, 8*vmax
	cols := (j.w + iw - 1) / iw
	x0, y0 := x-x%iw, y-y%ih
	cw, ch := x+w-x0, y+h-y0
	c0, r0 := x0/iw, y0/ih
	c1, r1 := c0+(cw+iw-1)/iw, r0+(ch+ih-1)/ih // past the region's last MCU
	// In the region's last MCU column (row), a component's blocks from
	// lastCol (lastRow) on lie past the cut image: libjpeg's dummies.
	var lastCol, lastRow [3]int
	for k := range nc {
		wib, hib := (cw*hs[k]+8*hmax-1)/(8*hmax), (ch*vs[k]+8*vmax-1)/(8*vmax)
		lastCol[k], lastRow[k] = (wib-1)%hs[k]+1, (hib-1)%vs[k]+1
	}

	// The data and 16 bytes of zeros: a refill loads 8 bytes, up to 8
	// past those read.
	data, ok := unstuff(make([]byte, 0, len(j.scan)+16), j.scan)
	if !ok {
		return dst, 0, 0, false
	}
	end := uint(len(data)) * 8
	data = append(data, make([]byte, 16)...)

	start := len(dst)
	bw := bitWriter{out: writeSpliceHeader(dst, &j, cw, ch)}
	var acc uint64 // the next bits of data, msb first
	var nbits uint // how many of acc's bits are data's
	var pos int    // the next byte of data to load
	var pred, outPred [3]int32
	var from uint // the first bit of the region not yet written
	for r := 0; r < r1; r++ {
		inRows, lastR := r >= r0, r == r1-1
		for c := 0; c < cols; c++ {
			in, lastC := inRows && c >= c0 && c < c1, c == c1-1
			if in && c == c0 {
				from = uint(pos)*8 - nbits
			}
			for k := range nc {
				dt, at := &dc[k], &ac[k]
				for b := range blocks[k] {
					// Refilled without a branch: acc's bits below the
					// nbits it holds are ORed with the same bits again.
					if pos > len(data)-8 {
						return dst[:start], 0, 0, false
					}
					acc |= binary.BigEndian.Uint64(data[pos:]) >> nbits
					pos += int(63-nbits) >> 3
					nbits |= 56
					at0 := uint(pos)*8 - nbits
					// DC: a size s and s bits of difference.
					var l uint
					var s byte
					if e := dt.lut[acc>>(64-huffLUTBits)]; e != 0 {
						l, s = uint(e>>8), byte(e)
					} else if l, s = dt.slow(acc); l == 0 {
						return dst[:start], 0, 0, false
					}
					if s > 11 {
						return dst[:start], 0, 0, false
					}
					acc <<= l
					v := int32(acc >> (64 - uint(s)))
					if s > 0 && v < 1<<(s-1) {
						v -= 1<<s - 1
					}
					acc <<= s
					nbits -= l + uint(s)
					before := pred[k]
					if pred[k] += v; pred[k] > 2047 || pred[k] < -2048 {
						return dst[:start], 0, 0, false // no 8-bit DCT's DC: damaged
					}
					dcEnd := uint(pos)*8 - nbits
					// AC: run/size symbols up to the 63rd coefficient or
					// an end of block, two a refill (26 bits at most each).
					i := uint16(1)
					for half := 0; ; half ^= 1 {
						if half == 0 {
							if pos > len(data)-8 {
								return dst[:start], 0, 0, false
							}
							acc |= binary.BigEndian.Uint64(data[pos:]) >> nbits
							pos += int(63-nbits) >> 3
							nbits |= 56
						}
						e := at.lut[acc>>(64-huffLUTBits)]
						if e == 0 {
							l, s := at.slow(acc)
							if e = acEntry(l, s); l == 0 || e == 0 {
								return dst[:start], 0, 0, false
							}
						}
						n := uint(e & acBits)
						acc <<= n
						nbits -= n
						i += e & acAdvance >> 5
						if e&acEOB != 0 || i >= 64 {
							break
						}
					}
					if i > 64 { // a run past the block's end: damaged
						return dst[:start], 0, 0, false
					}
					if !in {
						continue
					}
					switch {
					case lastC && b%hs[k] >= lastCol[k] || lastR && b/hs[k] >= lastRow[k]:
						// A dummy: DC difference 0, end of block.
						bw.copyBits(data, from, at0)
						bw.put(uint64(dt.code[0]), uint(dt.size[0]))
						bw.put(uint64(at.code[0]), uint(at.size[0]))
						from = uint(pos)*8 - nbits
					case outPred[k] != before:
						bw.copyBits(data, from, at0)
						if !bw.putDC(dt, pred[k]-outPred[k]) {
							return dst[:start], 0, 0, false
						}
						from, outPred[k] = dcEnd, pred[k]
					default:
						outPred[k] = pred[k]
					}
				}
			}
			if uint(pos)*8-nbits > end {
				return dst[:start], 0, 0, false // the data ends before the region's last block
			}
			if in && lastC {
				bw.copyBits(data, from, uint(pos)*8-nbits)
				if lastR {
					break // the region's last block: the rest of the scan is not read
				}
			}
		}
	}
	if bw.n > 0 { // pad the last byte with ones
		bw.put(1<<(8-bw.n)-1, 8-bw.n)
	}
	return append(bw.out, 0xff, 0xd9), x - x0, y - y0, true
}

// putDC codes a DC difference d with t; false when t has no code for
// its size.
func (w *bitWriter) putDC(t *huffTable, d int32) bool {
	s, m := dcSize(d)
	if t.size[s] == 0 {
		return false
	}
	w.put(uint64(t.code[s]), uint(t.size[s]))
	if s > 0 {
		w.put(uint64(m), uint(s))
	}
	return true
}

// dcSize is a DC difference's size category and the bits that code it.
func dcSize(d int32) (byte, uint32) {
	a := d
	if a < 0 {
		a = -a
	}
	s := byte(0)
	for a > 0 {
		s++
		a >>= 1
	}
	if d < 0 {
		d += 1<<s - 1
	}
	return s, uint32(d)
}

// writeSpliceHeader appends the cut's markers as libjpeg's path writes
// them: SOI; JFIF's APP0 (the source's version and density where it had
// one, else 1.01 and 1:1); the quantization tables its components use (8
// bits a value where they fit); the frame, at the region's size (one
// component written at 1×1); the Huffman tables; the scan's header.
func writeSpliceHeader(dst []byte, j *spliceHeader, w, h int) []byte {
	jfif := [9]byte{1, 1, 0, 0, 1, 0, 1}
	if len(j.jfif) >= 14 {
		if j.jfif[5] == 1 || j.jfif[5] == 2 {
			jfif[0], jfif[1] = j.jfif[5], j.jfif[6]
		}
		copy(jfif[2:7], j.jfif[7:12])
	}
	dst = append(dst, 0xff, 0xd8, 0xff, 0xe0, 0, 16, 'J', 'F', 'I', 'F', 0)
	dst = append(dst, jfif[:]...)
	// Baseline (SOF0) unless a table needs what only SOF1 allows: 16-bit
	// quantization values or a Huffman table numbered over 1.
	sof := byte(0xc0)
	var qdone [4]bool
	for _, c := range j.comps {
		if c.td > 1 || c.ta > 1 {
			sof = 0xc1
		}
		if qdone[c.tq] {
			continue
		}
		qdone[c.tq] = true
		q := j.dqt[c.tq]
		if q[0]>>4 == 0 {
			dst = appendSegment(dst, 0xdb, q)
			continue
		}
		var q8 [65]byte // 16-bit values that fit in 8, written as libjpeg writes them
		q8[0] = c.tq
		for i := range 64 {
			if q[1+2*i] != 0 {
				q8[0] = 1<<4 | c.tq
				break
			}
			q8[1+i] = q[2+2*i]
		}
		if q8[0]>>4 == 0 {
			q = q8[:]
		} else {
			sof = 0xc1
		}
		dst = appendSegment(dst, 0xdb, q)
	}
	nc := len(j.comps)
	dst = append(dst, 0xff, sof, 0, byte(8+3*nc), 8, byte(h>>8), byte(h), byte(w>>8), byte(w), byte(nc))
	for _, c := range j.comps {
		hv := byte(c.h<<4 | c.v)
		if nc == 1 {
			hv = 0x11
		}
		dst = append(dst, c.id, hv, c.tq)
	}
	var hdone [2][4]bool
	for _, c := range j.comps {
		for class, id := range [2]byte{c.td, c.ta} {
			if !hdone[class][id] {
				hdone[class][id] = true
				dst = appendSegment(dst, 0xc4, j.dht[class][id])
			}
		}
	}
	dst = append(dst, 0xff, 0xda, 0, byte(6+2*nc), byte(nc))
	for _, c := range j.comps {
		dst = append(dst, c.id, c.td<<4|c.ta)
	}
	return append(dst, 0, 63, 0)
}

// appendSegment appends a marker segment of body.
func appendSegment(dst []byte, marker byte, body []byte) []byte {
	n := len(body) + 2
	dst = append(dst, 0xff, marker, byte(n>>8), byte(n))
	return append(dst, body...)
}
