package mp4

import (
	"encoding/binary"
	"math"
	"math/bits"
)

// entry is one sample as FFmpeg's mov demuxer indexes it (an
// AVIndexEntry and its composition offset), before the edit list.
type entry struct {
	off     int64
	size    uint32
	ts      int64 // the decode timestamp
	ctts    int64 // the composition offset, when hasCtts
	hasCtts bool
	key     bool
	discard bool
}

// maxSampleSize is the largest sample FFmpeg indexes (0x3FFFFFFF).
const maxSampleSize = 1<<30 - 1

// table is a full box holding a count and then count entries of size
// bytes each: its entries, checked to fit the box.
func table(name string, body []byte, skip, size int) (n int, rows []byte, err error) {
	r := reader{b: body}
	r.full()
	r.take(skip)
	c := r.u32()
	if r.short {
		return 0, nil, errorf(ErrInvalid, "the video track's %s box is cut off", name)
	}
	if int64(c)*int64(size) > int64(r.left()) {
		return 0, nil, errorf(ErrInvalid, "the video track's %s box states %d entries in %d bytes", name, c, r.left())
	}
	return int(c), r.b[:int(c)*size], nil
}

// sampleCount reads the number of samples from stsz or stz2, refusing
// more than lim.Samples before anything is allocated for them.
func (t *trak) sampleCount(lim Limits) (n int, size func(i int) uint32, err error) {
	switch {
	case t.stsz != nil:
		r := reader{b: t.stsz}
		r.full()
		constant := r.u32()
		c := r.u32()
		if r.short {
			return 0, nil, errorf(ErrInvalid, "the video track's stsz box is cut off")
		}
		if int64(c) > int64(lim.Samples) {
			return 0, nil, errorf(ErrLimit, "the video track has %d samples; at most %d are read", c, lim.Samples)
		}
		if constant != 0 {
			return int(c), func(int) uint32 { return constant }, nil
		}
		if int64(c)*4 > int64(r.left()) {
			return 0, nil, errorf(ErrInvalid, "the video track's stsz box states %d sizes in %d bytes", c, r.left())
		}
		rows := r.b
		return int(c), func(i int) uint32 { return binary.BigEndian.Uint32(rows[4*i:]) }, nil
	case t.stz2 != nil:
		r := reader{b: t.stz2}
		r.full()
		r.take(3)
		field := r.u8()
		c := r.u32()
		if r.short {
			return 0, nil, errorf(ErrInvalid, "the video track's stz2 box is cut off")
		}
		if int64(c) > int64(lim.Samples) {
			return 0, nil, errorf(ErrLimit, "the video track has %d samples; at most %d are read", c, lim.Samples)
		}
		if field != 4 && field != 8 && field != 16 {
			return 0, nil, errorf(ErrInvalid, "the video track's stz2 box has fields of %d bits", field)
		}
		if (int64(c)*int64(field)+7)/8 > int64(r.left()) {
			return 0, nil, errorf(ErrInvalid, "the video track's stz2 box states %d sizes in %d bytes", c, r.left())
		}
		rows := r.b
		switch field {
		case 4:
			return int(c), func(i int) uint32 {
				b := rows[i/2]
				if i%2 == 0 {
					return uint32(b >> 4)
				}
				return uint32(b & 15)
			}, nil
		case 8:
			return int(c), func(i int) uint32 { return uint32(rows[i]) }, nil
		default:
			return int(c), func(i int) uint32 { return uint32(binary.BigEndian.Uint16(rows[2*i:])) }, nil
		}
	}
	return 0, func(int) uint32 { return 0 }, nil
}

// buildSamples builds the track's samples from its sample tables in
// decode order, with their timestamps before the edit list, as FFmpeg's
// mov_build_index does (package doc, "Timestamps"). dtsShift is FFmpeg's
// shift of the decode timeline for negative composition offsets; ctts
// reports whether the track has composition offsets at all.
func (t *trak) buildSamples(fileSize int64, lim Limits) (es []entry, dtsShift int64, ctts bool, err error) {
	n, sizeOf, err := t.sampleCount(lim)
	if err != nil {
		return nil, 0, false, err
	}
	if t.stsz == nil && t.stz2 == nil {
		return nil, 0, false, nil
	}
	if n == 0 {
		return nil, 0, false, nil
	}

	// Chunks and the samples in each.
	var chunks int
	var offOf func(i int) int64
	switch {
	case t.co64 != nil:
		c, rows, err := table("co64", t.co64, 0, 8)
		if err != nil {
			return nil, 0, false, err
		}
		chunks = c
		offOf = func(i int) int64 { return int64(binary.BigEndian.Uint64(rows[8*i:])) }
	case t.stco != nil:
		c, rows, err := table("stco", t.stco, 0, 4)
		if err != nil {
			return nil, 0, false, err
		}
		chunks = c
		offOf = func(i int) int64 { return int64(binary.BigEndian.Uint32(rows[4*i:])) }
	default:
		return nil, 0, false, errorf(ErrInvalid, "the video track has %d samples and no chunk offsets (stco, co64)", n)
	}
	nsc, stsc, err := table("stsc", t.stsc, 0, 12)
	if err != nil {
		return nil, 0, false, err
	}
	if nsc == 0 {
		return nil, 0, false, errorf(ErrInvalid, "the video track has %d samples and an empty stsc box", n)
	}
	stscAt := func(i int) (first, count, desc uint32) {
		return binary.BigEndian.Uint32(stsc[12*i:]), binary.BigEndian.Uint32(stsc[12*i+4:]), binary.BigEndian.Uint32(stsc[12*i+8:])
	}
	// The runs of chunks must start at chunk 1, ascend, stay within the
	// chunks, and hold exactly the samples stsz counts: counted in 64
	// bits and stopped as soon as they pass it.
	var total uint64
	for i := range nsc {
		first, count, desc := stscAt(i)
		next := uint64(chunks) + 1
		if i+1 < nsc {
			f, _, _ := stscAt(i + 1)
			next = uint64(f)
		}
		switch {
		case i == 0 && first != 1:
			return nil, 0, false, errorf(ErrInvalid, "the video track's stsc box starts at chunk %d, not 1", first)
		case uint64(first) >= next || uint64(first) > uint64(chunks):
			return nil, 0, false, errorf(ErrInvalid, "the video track's stsc entry %d (chunk %d) is out of order or past its %d chunks", i, first, chunks)
		case count == 0:
			return nil, 0, false, errorf(ErrInvalid, "the video track's stsc entry %d puts no sample in its chunks", i)
		case desc != 1:
			return nil, 0, false, errorf(ErrUnsupported, "the video track's samples use sample description %d of %d; Brand reads tracks of one", desc, t.entries)
		}
		total += (next - uint64(first)) * uint64(count)
		if total > uint64(n) {
			break
		}
	}
	if total != uint64(n) {
		return nil, 0, false, errorf(ErrInvalid, "the video track's chunks (stsc, stco) hold %d samples, its stsz %d", total, n)
	}

	// Decode times.
	nstts, stts, err := table("stts", t.stts, 0, 8)
	if err != nil {
		return nil, 0, false, err
	}
	var timed uint64
	for i := range nstts {
		c := binary.BigEndian.Uint32(stts[8*i:])
		d := binary.BigEndian.Uint32(stts[8*i+4:])
		if d > math.MaxInt32 {
			return nil, 0, false, errorf(ErrInvalid, "the video track's stts entry %d has a sample duration of %d", i, d)
		}
		if c == 0 {
			// FFmpeg would give every later sample this entry's
			// duration; the spec, the next entry's. Neither is sure.
			return nil, 0, false, errorf(ErrInvalid, "the video track's stts entry %d times no sample", i)
		}
		timed += uint64(c)
	}
	if timed != uint64(n) {
		return nil, 0, false, errorf(ErrInvalid, "the video track's stts times %d samples, its stsz has %d", timed, n)
	}

	// Composition offsets, read as FFmpeg's mov_read_ctts reads them:
	// signed whatever the version, entries of no samples skipped, the
	// decode timeline shifted by the most negative offset but for the
	// last two entries', and the table dropped when one is absurd.
	var offsets []int64 // one per run kept
	var counts []uint32
	if t.ctts != nil {
		nc, rows, err := table("ctts", t.ctts, 0, 8)
		if err != nil {
			return nil, 0, false, err
		}
		// Runs past the samples are never used: the slices hold at most
		// one run a sample.
		offsets = make([]int64, 0, min(nc, n))
		counts = make([]uint32, 0, min(nc, n))
		var covered uint64
		for i := range nc {
			c := int32(binary.BigEndian.Uint32(rows[8*i:]))
			d := int32(binary.BigEndian.Uint32(rows[8*i+4:]))
			if c <= 0 {
				continue
			}
			if covered < uint64(n) {
				offsets = append(offsets, int64(d))
				counts = append(counts, uint32(c))
				covered += uint64(c)
			}
			nabs := min(int64(d), -int64(d))
			if nabs < -(1<<28) && i+2 < nc {
				// FFmpeg drops the table but keeps the shift so far.
				offsets, counts = nil, nil
				break
			}
			if i+2 < nc && d < 0 {
				if d == math.MinInt32 {
					d++
				}
				dtsShift = max(dtsShift, -int64(d))
			}
		}
		ctts = len(offsets) > 0
	}

	// The samples, in chunk order, as mov_build_index walks them.
	es = make([]entry, n)
	stssN, stss, err := optionalTable("stss", t.stss)
	if err != nil {
		return nil, 0, false, err
	}
	stpsN, stps, err := optionalTable("stps", t.stps)
	if err != nil {
		return nil, 0, false, err
	}
	keyAt := func(rows []byte, i int) uint32 { return binary.BigEndian.Uint32(rows[4*i:]) }
	keyOff := uint32(0)
	if stssN > 0 && keyAt(stss, 0) > 0 || stpsN > 0 && keyAt(stps, 0) > 0 {
		keyOff = 1
	}
	noneKey := t.stss != nil && stssN == 0 // an empty stss: only the first sample is a sync sample
	var stssI, stpsI int
	sample := 0
	si := 0 // stsc entry
	var ts int64 = -dtsShift
	sttsI, sttsLeft := 0, uint32(0)
	if nstts > 0 {
		sttsLeft = binary.BigEndian.Uint32(stts)
	}
	cttsI, cttsLeft := 0, uint32(0)
	if ctts {
		cttsLeft = counts[0]
	}
	for ch := range chunks {
		for si+1 < nsc {
			f, _, _ := stscAt(si + 1)
			if int(f) != ch+1 {
				break
			}
			si++
		}
		_, count, _ := stscAt(si)
		off := offOf(ch)
		for range count {
			size := sizeOf(sample)
			if size > maxSampleSize {
				return nil, 0, false, errorf(ErrInvalid, "the video track's sample %d is %d bytes", sample, size)
			}
			key := false
			switch {
			case noneKey:
				key = sample == 0 && stpsN == 0
			case stssN == 0 && t.stss == nil:
				key = true
			case stssN > 0 && uint32(sample)+keyOff == keyAt(stss, stssI):
				key = true
				if stssI+1 < stssN {
					stssI++
				}
			}
			if !key && stpsN > 0 && uint32(sample)+keyOff == keyAt(stps, stpsI) {
				key = true
				if stpsI+1 < stpsN {
					stpsI++
				}
			}
			e := entry{off: off, size: size, ts: ts, key: key}
			if ctts && cttsI < len(counts) {
				e.ctts, e.hasCtts = offsets[cttsI], true
				if cttsLeft--; cttsLeft == 0 {
					cttsI++
					if cttsI < len(counts) {
						cttsLeft = counts[cttsI]
					}
				}
			}
			if off < 0 || off > fileSize || int64(size) > fileSize-off {
				return nil, 0, false, errorf(ErrInvalid, "the video track's sample %d (%d bytes at %d) lies past the end of the file (%d bytes): the file is truncated or its moov is damaged", sample, size, off, fileSize)
			}
			es[sample] = e
			off += int64(size)
			// stts has been checked to time every sample, each entry at
			// least one.
			ts += int64(binary.BigEndian.Uint32(stts[8*sttsI+4:]))
			if sttsLeft--; sttsLeft == 0 && sttsI+1 < nstts {
				sttsI++
				sttsLeft = binary.BigEndian.Uint32(stts[8*sttsI:])
			}
			sample++
		}
	}
	return es, dtsShift, ctts, nil
}

// optionalTable is table for a box that may be absent (rows nil, n 0).
func optionalTable(name string, body []byte) (int, []byte, error) {
	if body == nil {
		return 0, nil, nil
	}
	return table(name, body, 0, 4)
}

// rescale is FFmpeg's av_rescale(a, b, c) for a ≥ 0, b ≥ 0, c > 0: a×b/c
// rounded to the nearest, halves away from zero, in 128 bits; ok is
// false when the result does not fit an int64.
func rescale(a, b, c int64) (int64, bool) {
	if a < 0 || b < 0 || c <= 0 {
		return 0, false
	}
	hi, lo := bits.Mul64(uint64(a), uint64(b))
	lo, carry := bits.Add64(lo, uint64(c)/2, 0)
	hi += carry
	if hi >= uint64(c) {
		return 0, false
	}
	q, _ := bits.Div64(hi, lo, uint64(c))
	if q > math.MaxInt64 {
		return 0, false
	}
	return int64(q), true
}
