package transform

import "encoding/binary"

// jpegOrientation returns the EXIF orientation (1–8) of a JPEG, or 1 when
// it has none or the tag is unreadable: a broken EXIF block never fails a
// sample whose pixels decode, as PIL's exif_transpose leaves such an image
// alone.
//
// It reads only what the tag needs — the markers before the first SOS,
// the APP1 "Exif" segment's TIFF header, IFD0's entries — within the
// segment's own length, so a hostile segment cannot make it read out of
// bounds or allocate. An EXIF library would parse every IFD and
// maker-note for one 16-bit value.
func jpegOrientation(b []byte) int {
	if len(b) < 4 || b[0] != 0xff || b[1] != 0xd8 {
		return 1
	}
	i := 2
	for i+4 <= len(b) {
		if b[i] != 0xff {
			return 1
		}
		marker := b[i+1]
		if marker == 0xff { // fill byte
			i++
			continue
		}
		if marker == 0xda || marker == 0xd9 { // SOS, EOI: no EXIF before the data
			return 1
		}
		if marker >= 0xd0 && marker <= 0xd7 || marker == 0x01 { // no length
			i += 2
			continue
		}
		n := int(binary.BigEndian.Uint16(b[i+2:]))
		if n < 2 || i+2+n > len(b) {
			return 1
		}
		seg := b[i+4 : i+2+n]
		if marker == 0xe1 && len(seg) >= 6 && string(seg[:6]) == "Exif\x00\x00" {
			if o := tiffOrientation(seg[6:]); o != 0 {
				return o
			}
		}
		i += 2 + n
	}
	return 1
}

// tiffOrientation reads tag 0x0112 of IFD0 of a TIFF block, 0 when absent
// or invalid.
func tiffOrientation(t []byte) int {
	if len(t) < 8 {
		return 0
	}
	var bo binary.ByteOrder
	switch string(t[:2]) {
	case "II":
		bo = binary.LittleEndian
	case "MM":
		bo = binary.BigEndian
	default:
		return 0
	}
	if bo.Uint16(t[2:]) != 42 {
		return 0
	}
	off := int64(bo.Uint32(t[4:]))
	if off < 8 || off+2 > int64(len(t)) {
		return 0
	}
	n := int64(bo.Uint16(t[off:]))
	for e := range n {
		p := off + 2 + 12*e
		if p+12 > int64(len(t)) {
			return 0
		}
		if bo.Uint16(t[p:]) != 0x0112 {
			continue
		}
		// SHORT, count 1: the value sits in the entry's first two bytes.
		if bo.Uint16(t[p+2:]) != 3 || bo.Uint32(t[p+4:]) != 1 {
			return 0
		}
		if v := int(bo.Uint16(t[p+8:])); v >= 1 && v <= 8 {
			return v
		}
		return 0
	}
	return 0
}

// swapsAxes reports the orientations that transpose width and height.
func swapsAxes(o int) bool { return o >= 5 && o <= 8 }

// orient returns the image as a viewer shows it given EXIF orientation o,
// into dst's storage when large enough (dst must not alias src). For each
// displayed pixel (x, y) it takes the stored pixel below (w×h stored):
//
//	2 (x, y) ← (w−1−x, y)        mirror
//	3 (x, y) ← (w−1−x, h−1−y)    rotate 180
//	4 (x, y) ← (x, h−1−y)        flip
//	5 (x, y) ← (y, x)            transpose
//	6 (x, y) ← (y, h−1−x)        rotate 90 clockwise
//	7 (x, y) ← (w−1−y, h−1−x)    transverse
//	8 (x, y) ← (w−1−y, x)        rotate 90 counter-clockwise
//
// which is what PIL's ImageOps.exif_transpose does.
func orient(dst []byte, src image8, o int) image8 {
	if o <= 1 || o > 8 {
		return src
	}
	w, h := src.w, src.h
	ow, oh := w, h
	if swapsAxes(o) {
		ow, oh = h, w
	}
	out := image8{w: ow, h: oh, pix: grow(dst, ow*oh*3)}
	for y := range oh {
		row := out.pix[y*ow*3 : (y+1)*ow*3]
		for x := range ow {
			var sx, sy int
			switch o {
			case 2:
				sx, sy = w-1-x, y
			case 3:
				sx, sy = w-1-x, h-1-y
			case 4:
				sx, sy = x, h-1-y
			case 5:
				sx, sy = y, x
			case 6:
				sx, sy = y, h-1-x
			case 7:
				sx, sy = w-1-y, h-1-x
			case 8:
				sx, sy = w-1-y, x
			}
			p := (sy*w + sx) * 3
			copy(row[x*3:x*3+3], src.pix[p:p+3])
		}
	}
	return out
}
