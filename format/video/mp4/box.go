package mp4

import "encoding/binary"

// box is one box in a buffer read from the file.
type box struct {
	typ  string // its four-character type
	off  int64  // where it starts in the file
	body []byte // its payload, after the header
}

// eachBox calls fn for each box in b, which starts at off in the file and
// is the payload of a box of type parent. A box's size of 0 means "to the
// end of the parent", 1 a 64-bit size after the type. Fewer than 8 bytes
// left after the last box are ignored (QuickTime ends some lists with a
// 32-bit zero); a box running past the parent is ErrInvalid.
func eachBox(b []byte, off int64, parent string, fn func(bx box) error) error {
	for len(b) >= 8 {
		size := uint64(binary.BigEndian.Uint32(b))
		typ := fourcc(b[4:8])
		hdr := uint64(8)
		switch size {
		case 0:
			size = uint64(len(b))
		case 1:
			if len(b) < 16 {
				return errorf(ErrInvalid, "box %q at %d in %q: its 64-bit size is cut off", typ, off, parent)
			}
			size = binary.BigEndian.Uint64(b[8:])
			hdr = 16
		}
		if size < hdr || size > uint64(len(b)) {
			return errorf(ErrInvalid, "box %q at %d of %d bytes runs past its parent %q (%d bytes left)", typ, off, size, parent, len(b))
		}
		if err := fn(box{typ: typ, off: off, body: b[hdr:size]}); err != nil {
			return err
		}
		b = b[size:]
		off += int64(size)
	}
	return nil
}

// fourcc is a box or sample entry type as a string (errors quote it with
// %q, which escapes bytes that are not printable).
func fourcc(b []byte) string { return string(b[:4]) }

// reader reads big-endian fields from a box's payload. Reading past its
// end sets short and returns zeros, so a parser reads its fields and then
// checks short once.
type reader struct {
	b     []byte
	short bool
}

func (r *reader) take(n int) []byte {
	if n < 0 || n > len(r.b) {
		r.short = true
		r.b = nil
		return nil
	}
	p := r.b[:n:n]
	r.b = r.b[n:]
	return p
}

func (r *reader) u8() uint8 {
	if p := r.take(1); p != nil {
		return p[0]
	}
	return 0
}

func (r *reader) u16() uint16 {
	if p := r.take(2); p != nil {
		return binary.BigEndian.Uint16(p)
	}
	return 0
}

func (r *reader) u24() uint32 {
	if p := r.take(3); p != nil {
		return uint32(p[0])<<16 | uint32(p[1])<<8 | uint32(p[2])
	}
	return 0
}

func (r *reader) u32() uint32 {
	if p := r.take(4); p != nil {
		return binary.BigEndian.Uint32(p)
	}
	return 0
}

func (r *reader) u64() uint64 {
	if p := r.take(8); p != nil {
		return binary.BigEndian.Uint64(p)
	}
	return 0
}

// full reads a full box's version and flags.
func (r *reader) full() (version uint8, flags uint32) {
	return r.u8(), r.u24()
}

func (r *reader) left() int { return len(r.b) }
