package mp4

import (
	"slices"
	"strings"
)

// movie is what a moov box holds that indexing needs.
type movie struct {
	timescale uint32 // mvhd: the unit of edit durations
	video     *trak  // the first track whose handler is "vide"
	handlers  []string
	mvex      bool            // fragments follow
	trex      map[uint32]trex // fragment defaults by track ID
}

// trex is a track's fragment defaults (mvex/trex).
type trex struct {
	stsd, duration, size, flags uint32
}

// trak is the video track's boxes, its sample tables kept as the
// payloads they are in (sliced from the moov bytes) until their counts
// are checked against the limits.
type trak struct {
	id        uint32
	matrix    [9]int32
	edits     []Edit
	timescale uint32
	handler   string
	entry     sampleEntry
	entries   int // sample entries in stsd
	drefs     []bool
	// The sample tables' payloads, nil when absent.
	stts, ctts, stss, stps, stsz, stz2, stsc, stco, co64 []byte
}

// parseMoov reads a moov box's payload (at off in the file).
func parseMoov(body []byte, off int64, lim Limits) (*movie, error) {
	mv := &movie{trex: map[uint32]trex{}}
	err := eachBox(body, off+8, "moov", func(bx box) error {
		switch bx.typ {
		case "mvhd":
			r := reader{b: bx.body}
			v, _ := r.full()
			if v == 1 {
				r.take(16)
			} else {
				r.take(8)
			}
			mv.timescale = r.u32()
			if r.short {
				return errorf(ErrInvalid, "mvhd box at %d is cut off", bx.off)
			}
		case "trak":
			t, err := parseTrak(bx, mv.video == nil, lim)
			if err != nil {
				return err
			}
			mv.handlers = append(mv.handlers, t.handler)
			if t.handler == "vide" && mv.video == nil {
				mv.video = t
			}
		case "mvex":
			mv.mvex = true
			return eachBox(bx.body, bx.off+8, "mvex", func(c box) error {
				if c.typ != "trex" {
					return nil
				}
				r := reader{b: c.body}
				r.full()
				id := r.u32()
				t := trex{stsd: r.u32(), duration: r.u32(), size: r.u32(), flags: r.u32()}
				if r.short {
					return errorf(ErrInvalid, "trex box at %d is cut off", c.off)
				}
				mv.trex[id] = t
				return nil
			})
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if mv.video == nil {
		have := "none"
		if len(mv.handlers) > 0 {
			hs := slices.Clone(mv.handlers)
			for i, h := range hs {
				hs[i] = describeHandler(h)
			}
			have = strings.Join(hs, ", ")
		}
		return nil, errorf(ErrNoVideo, "the file's tracks are: %s", have)
	}
	return mv, nil
}

// describeHandler names a track's handler type for an error.
func describeHandler(h string) string {
	switch h {
	case "soun":
		return "audio (soun)"
	case "sbtl", "subt", "text":
		return "subtitles (" + h + ")"
	case "tmcd":
		return "timecode (tmcd)"
	case "hint":
		return "hint (hint)"
	case "meta":
		return "metadata (meta)"
	case "":
		return "a track without a handler"
	}
	return "\"" + h + "\""
}

// parseTrak reads a trak box: its handler always, everything else only
// when it may be the video track (video is false once one was found).
func parseTrak(bx box, video bool, lim Limits) (*trak, error) {
	t := &trak{}
	// The handler decides whether the rest matters; it is in mdia, after
	// tkhd and edts, so the track is read in two passes over its boxes.
	err := eachBox(bx.body, bx.off+8, "trak", func(c box) error {
		if c.typ != "mdia" {
			return nil
		}
		return eachBox(c.body, c.off+8, "mdia", func(m box) error {
			if m.typ == "hdlr" {
				r := reader{b: m.body}
				r.full()
				r.u32() // pre_defined (QuickTime: component type)
				h := r.take(4)
				if r.short {
					return errorf(ErrInvalid, "hdlr box at %d is cut off", m.off)
				}
				t.handler = fourcc(h)
			}
			return nil
		})
	})
	if err != nil || !video || t.handler != "vide" {
		return t, err
	}
	err = eachBox(bx.body, bx.off+8, "trak", func(c box) error {
		switch c.typ {
		case "tkhd":
			return t.parseTkhd(c)
		case "edts":
			return eachBox(c.body, c.off+8, "edts", func(e box) error {
				if e.typ == "elst" {
					return t.parseElst(e)
				}
				return nil
			})
		case "mdia":
			return eachBox(c.body, c.off+8, "mdia", func(m box) error {
				switch m.typ {
				case "mdhd":
					r := reader{b: m.body}
					v, _ := r.full()
					if v == 1 {
						r.take(16)
					} else {
						r.take(8)
					}
					t.timescale = r.u32()
					if r.short {
						return errorf(ErrInvalid, "mdhd box at %d is cut off", m.off)
					}
				case "minf":
					return t.parseMinf(m, lim)
				}
				return nil
			})
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if t.timescale == 0 {
		return nil, errorf(ErrInvalid, "the video track (trak at %d) has no mdhd timescale", bx.off)
	}
	return t, nil
}

func (t *trak) parseTkhd(c box) error {
	r := reader{b: c.body}
	v, _ := r.full()
	if v == 1 {
		r.take(16)
		t.id = r.u32()
		r.take(4 + 8)
	} else {
		r.take(8)
		t.id = r.u32()
		r.take(4 + 4)
	}
	r.take(8 + 2 + 2 + 2 + 2) // reserved, layer, alternate group, volume, reserved
	for i := range t.matrix {
		t.matrix[i] = int32(r.u32())
	}
	if r.short {
		return errorf(ErrInvalid, "tkhd box at %d is cut off", c.off)
	}
	return nil
}

func (t *trak) parseElst(e box) error {
	r := reader{b: e.body}
	v, _ := r.full()
	n := r.u32()
	size := 12
	if v == 1 {
		size = 20
	}
	// FFmpeg reads as many entries as the box holds when the count
	// disagrees; so does this, so that the same files play.
	if int64(n)*int64(size) != int64(r.left()) {
		n = uint32(r.left() / size)
	}
	t.edits = make([]Edit, 0, n)
	for range n {
		var ed Edit
		if v == 1 {
			ed.Duration = int64(r.u64())
			ed.MediaTime = int64(r.u64())
		} else {
			ed.Duration = int64(r.u32())
			ed.MediaTime = int64(int32(r.u32()))
		}
		r.u32() // media_rate: FFmpeg ignores it, and so does this
		if r.short {
			return errorf(ErrInvalid, "elst box at %d is cut off", e.off)
		}
		t.edits = append(t.edits, ed)
	}
	return nil
}

func (t *trak) parseMinf(m box, lim Limits) error {
	return eachBox(m.body, m.off+8, "minf", func(c box) error {
		switch c.typ {
		case "dinf":
			return eachBox(c.body, c.off+8, "dinf", func(d box) error {
				if d.typ != "dref" {
					return nil
				}
				r := reader{b: d.body}
				r.full()
				r.u32()
				return eachBox(r.b, d.off+16, "dref", func(e box) error {
					er := reader{b: e.body}
					_, flags := er.full()
					// Flag 1 of a url, urn or alis entry: the media
					// data is in this file.
					t.drefs = append(t.drefs, flags&1 != 0)
					return nil
				})
			})
		case "stbl":
			return eachBox(c.body, c.off+8, "stbl", func(s box) error {
				switch s.typ {
				case "stsd":
					return t.parseStsd(s, lim)
				case "stts":
					t.stts = s.body
				case "ctts":
					t.ctts = s.body
				case "stss":
					t.stss = s.body
				case "stps":
					t.stps = s.body
				case "stsz":
					t.stsz = s.body
				case "stz2":
					t.stz2 = s.body
				case "stsc":
					t.stsc = s.body
				case "stco":
					t.stco = s.body
				case "co64":
					t.co64 = s.body
				}
				return nil
			})
		}
		return nil
	})
}

// rotation is the clockwise display rotation a tkhd matrix states, or
// -1 when it is not a rotation by a multiple of 90 degrees. A matrix of
// zeros, which some writers leave, is no rotation.
func rotation(m [9]int32) int {
	a, b, c, d := m[0], m[1], m[3], m[4]
	switch {
	case a > 0 && b == 0 && c == 0 && d > 0, a == 0 && b == 0 && c == 0 && d == 0:
		return 0
	case a == 0 && b > 0 && c < 0 && d == 0:
		return 90
	case a < 0 && b == 0 && c == 0 && d < 0:
		return 180
	case a == 0 && b < 0 && c > 0 && d == 0:
		return 270
	}
	return -1
}
