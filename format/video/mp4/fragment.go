package mp4

import "encoding/binary"

// The tfhd and trun flags FFmpeg reads (ISO/IEC 14496-12 §8.8.7, §8.8.8).
const (
	tfhdBaseOffset   = 0x000001
	tfhdStsd         = 0x000002
	tfhdDuration     = 0x000008
	tfhdSize         = 0x000010
	tfhdFlags        = 0x000020
	tfhdBaseIsMoof   = 0x020000
	trunDataOffset   = 0x000001
	trunFirstFlags   = 0x000004
	trunDuration     = 0x000100
	trunSize         = 0x000200
	trunFlags        = 0x000400
	trunCTS          = 0x000800
	sampleNonSync    = 0x00010000
	sampleDependsYes = 0x01000000
)

// fragments accumulates the video track's samples from moof boxes, as
// FFmpeg's mov_read_tfhd, mov_read_tfdt and mov_read_trun do.
type fragments struct {
	track      uint32
	trex       map[uint32]trex
	timeOffset int64
	sidx       map[int64]int64 // a moof's offset → its time from a sidx, in the track's timescale
	timescale  uint32
	dtsShift   int64
	trackEnd   int64
	samples    []Sample
	ctts       []int64 // each sample's composition offset, for its PTS
	limit      int
	fileSize   int64
}

// moof reads one moof box's payload; the box starts at off.
func (fs *fragments) moof(body []byte, off int64) error {
	implicit := off // where data continues when a tfhd names no base
	first := len(fs.samples)
	err := eachBox(body, off+8, "moof", func(t box) error {
		if t.typ != "traf" {
			return nil
		}
		var (
			found      bool
			id         uint32
			base       int64
			stsd       uint32
			dur, size  uint32
			flags      uint32
			tfdt       int64
			hasTfdt    bool
			nextTrun   int64
			continuing bool
		)
		return eachBox(t.body, t.off+8, "traf", func(c box) error {
			switch c.typ {
			case "tfhd":
				r := reader{b: c.body}
				_, fl := r.full()
				id = r.u32()
				if r.short || id == 0 {
					return errorf(ErrInvalid, "tfhd box at %d is cut off or names track 0", c.off)
				}
				tx, ok := fs.trex[id]
				if !ok {
					return errorf(ErrInvalid, "the fragment at %d is of track %d, which has no trex defaults in the moov", off, id)
				}
				switch {
				case fl&tfhdBaseOffset != 0:
					base = int64(r.u64())
				case fl&tfhdBaseIsMoof != 0:
					base = off
				default:
					base = implicit
				}
				stsd, dur, size, flags = tx.stsd, tx.duration, tx.size, tx.flags
				if fl&tfhdStsd != 0 {
					stsd = r.u32()
				}
				if fl&tfhdDuration != 0 {
					dur = r.u32()
				}
				if fl&tfhdSize != 0 {
					size = r.u32()
				}
				if fl&tfhdFlags != 0 {
					flags = r.u32()
				}
				if r.short {
					return errorf(ErrInvalid, "tfhd box at %d is cut off", c.off)
				}
				found, continuing = true, false
			case "tfdt":
				r := reader{b: c.body}
				v, _ := r.full()
				if v == 1 {
					tfdt = int64(r.u64())
				} else {
					tfdt = int64(r.u32())
				}
				if r.short || tfdt < 0 {
					return errorf(ErrInvalid, "tfdt box at %d is cut off or out of range", c.off)
				}
				hasTfdt = true
				if found && id == fs.track {
					fs.trackEnd = tfdt
				}
			case "trun":
				if !found {
					return errorf(ErrInvalid, "trun box at %d comes before its tfhd", c.off)
				}
				video := id == fs.track
				if video && stsd != 1 {
					return errorf(ErrUnsupported, "the video track's fragment at %d uses sample description %d; Brand reads tracks of one", off, stsd)
				}
				var dts int64
				switch st, ok := fs.sidx[off]; {
				case continuing:
					dts = nextTrun - fs.timeOffset
				case hasTfdt:
					dts = tfdt - fs.timeOffset
				case ok:
					dts = st - fs.timeOffset
				default:
					dts = fs.trackEnd - fs.timeOffset
				}
				end, next, err := fs.trun(c, base, dts, dur, size, flags, video)
				if err != nil {
					return err
				}
				implicit = end
				if video {
					nextTrun, continuing = next+fs.timeOffset, true
					fs.trackEnd = next + fs.timeOffset
				}
			}
			return nil
		})
	})
	if err != nil {
		return err
	}
	// A packet's PTS takes the shift known when its fragment is read.
	for i := first; i < len(fs.samples); i++ {
		fs.samples[i].PTS = fs.samples[i].DTS + fs.dtsShift + fs.ctts[i]
	}
	return nil
}

// trun reads one trun box whose data starts from base; its samples start
// at decode time dts. It returns where its data ends and the decode time
// after its last sample; samples are kept only for the video track.
func (fs *fragments) trun(c box, base, dts int64, dur, size, flags uint32, video bool) (end, next int64, err error) {
	r := reader{b: c.body}
	_, fl := r.full()
	n := r.u32()
	var dataOffset int32
	if fl&trunDataOffset != 0 {
		dataOffset = int32(r.u32())
	}
	firstFlags := flags
	if fl&trunFirstFlags != 0 {
		firstFlags = r.u32()
	}
	if r.short {
		return 0, 0, errorf(ErrInvalid, "trun box at %d is cut off", c.off)
	}
	per := 0
	for _, f := range []uint32{trunDuration, trunSize, trunFlags, trunCTS} {
		if fl&f != 0 {
			per += 4
		}
	}
	if int64(n)*int64(per) > int64(r.left()) {
		return 0, 0, errorf(ErrInvalid, "trun box at %d states %d samples in %d bytes", c.off, n, r.left())
	}
	if video && int64(len(fs.samples))+int64(n) > int64(fs.limit) {
		return 0, 0, errorf(ErrLimit, "the video track has more than %d samples; at most %d are read", fs.limit, fs.limit)
	}
	off := base + int64(dataOffset)
	rows := r.b
	if !video && fl&trunSize == 0 {
		// Another track's samples matter only for where its data ends, and
		// a count with no per-sample sizes costs no bytes: no loop over it.
		end := off + int64(n)*int64(size)
		if size == 0 || size > maxSampleSize || off < 0 || end > fs.fileSize {
			return 0, 0, errorf(ErrInvalid, "the trun at %d (%d samples of %d bytes at %d) lies past the end of the file (%d bytes)", c.off, n, size, off, fs.fileSize)
		}
		return end, dts, nil
	}
	for i := range int(n) {
		d, s, f := dur, size, firstFlags
		if i > 0 {
			f = flags
		}
		var cts int32
		if fl&trunDuration != 0 {
			d, rows = binary.BigEndian.Uint32(rows), rows[4:]
		}
		if fl&trunSize != 0 {
			s, rows = binary.BigEndian.Uint32(rows), rows[4:]
		}
		if fl&trunFlags != 0 {
			f, rows = binary.BigEndian.Uint32(rows), rows[4:]
		}
		if fl&trunCTS != 0 {
			cts, rows = int32(binary.BigEndian.Uint32(rows)), rows[4:]
		}
		if s == 0 || s > maxSampleSize {
			return 0, 0, errorf(ErrInvalid, "sample %d of the trun at %d is %d bytes", i, c.off, s)
		}
		if off < 0 || off > fs.fileSize || int64(s) > fs.fileSize-off {
			return 0, 0, errorf(ErrInvalid, "sample %d of the trun at %d (%d bytes at %d) lies past the end of the file (%d bytes): the file is truncated or its moof is damaged", i, c.off, s, off, fs.fileSize)
		}
		if video {
			if cts < 0 {
				shift := -int64(cts)
				if cts == -1<<31 {
					shift--
				}
				fs.dtsShift = max(fs.dtsShift, shift)
			}
			smp := Sample{Off: off, Size: s, DTS: dts, Key: f&(sampleNonSync|sampleDependsYes) == 0}
			// Fragments may overlap in time: FFmpeg discards a sample that
			// does not come after the one before it.
			if k := len(fs.samples); k > 0 && fs.samples[k-1].DTS >= dts {
				smp.Discard = true
			}
			fs.samples = append(fs.samples, smp)
			fs.ctts = append(fs.ctts, int64(cts))
		}
		if dts > 1<<62 || int64(d) > 1<<62-dts {
			return 0, 0, errorf(ErrInvalid, "the trun at %d runs its decode times out of range", c.off)
		}
		dts += int64(d)
		off += int64(s)
	}
	return off, dts, nil
}

// parseSidx reads a sidx box (at off, ending at end) into the times of the
// moof boxes it references, in the track's timescale, as FFmpeg's
// mov_read_sidx does; a sidx of another track is ignored.
func (fs *fragments) parseSidx(body []byte, off, end int64) error {
	r := reader{b: body}
	v, _ := r.full()
	if v > 1 {
		return nil
	}
	id := r.u32()
	scale := r.u32()
	var pts, add int64
	if v == 0 {
		pts, add = int64(r.u32()), int64(r.u32())
	} else {
		pts, add = int64(r.u64()), int64(r.u64())
	}
	r.u16()
	n := r.u16()
	if r.short || scale == 0 || pts < 0 || add < 0 || add > fs.fileSize {
		return errorf(ErrInvalid, "sidx box at %d is cut off or out of range", off)
	}
	if id != fs.track {
		return nil
	}
	if int(n)*12 > r.left() {
		return errorf(ErrInvalid, "sidx box at %d states %d references in %d bytes", off, n, r.left())
	}
	at := end + add
	for range n {
		size, dur := r.u32(), r.u32()
		r.u32()
		if size&0x80000000 != 0 {
			return errorf(ErrUnsupported, "sidx box at %d references another sidx", off)
		}
		if t, ok := rescale(pts, int64(fs.timescale), int64(scale)); ok {
			fs.sidx[at] = t
		}
		at += int64(size)
		pts += int64(dur)
		if at > fs.fileSize || pts > 1<<62 {
			return errorf(ErrInvalid, "sidx box at %d references bytes past the end of the file", off)
		}
	}
	return nil
}
