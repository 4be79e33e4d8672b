package transform

import (
	"encoding/binary"
	"fmt"
	"strings"
)

// npyAlign is the alignment of a .npy member's data offset: numpy pads its
// header so that the data starts at a multiple of 64 bytes, and a tar
// member starts at a multiple of 512, so the tensor's bytes are 64-byte
// aligned in a batch read whole into an aligned buffer (what
// numpy.frombuffer and torch.from_numpy view without copying).
const npyAlign = 64

// npyHeader returns the .npy (format 1.0) header of a C-order uint8 array
// of the given shape, exactly as numpy.save writes it: the magic, the
// version, the little-endian header length, then the dictionary padded
// with spaces and ended by a newline to a multiple of 64 bytes.
func npyHeader(shape []int) []byte {
	dims := make([]string, len(shape))
	for i, d := range shape {
		dims[i] = fmt.Sprint(d)
	}
	tuple := strings.Join(dims, ", ")
	if len(shape) == 1 {
		tuple += ","
	}
	dict := fmt.Sprintf("{'descr': '|u1', 'fortran_order': False, 'shape': (%s), }", tuple)
	const prefix = 6 + 2 + 2 // magic, version, header length
	total := (prefix + len(dict) + 1 + npyAlign - 1) / npyAlign * npyAlign
	h := make([]byte, 0, total)
	h = append(h, "\x93NUMPY\x01\x00"...)
	h = binary.LittleEndian.AppendUint16(h, uint16(total-prefix))
	h = append(h, dict...)
	for len(h) < total-1 {
		h = append(h, ' ')
	}
	return append(h, '\n')
}

// NPYDataOffset returns where a .npy member's array data starts and its
// shape, for a reader that views the bytes in place (the Go client, a test).
// It reads only headers this package writes: version 1.0, '|u1', C order.
func NPYDataOffset(b []byte) (offset int, shape []int, err error) {
	if len(b) < 10 || string(b[:8]) != "\x93NUMPY\x01\x00" {
		return 0, nil, fmt.Errorf("%w: not a .npy 1.0 array", ErrDecode)
	}
	n := int(binary.LittleEndian.Uint16(b[8:]))
	if 10+n > len(b) {
		return 0, nil, fmt.Errorf("%w: .npy header of %d bytes in %d", ErrDecode, n, len(b))
	}
	dict := string(b[10 : 10+n])
	const lead = "{'descr': '|u1', 'fortran_order': False, 'shape': ("
	if !strings.HasPrefix(dict, lead) {
		return 0, nil, fmt.Errorf("%w: .npy header %q: not a C-order uint8 array", ErrDecode, dict)
	}
	rest := dict[len(lead):]
	end := strings.IndexByte(rest, ')')
	if end < 0 {
		return 0, nil, fmt.Errorf("%w: .npy header %q", ErrDecode, dict)
	}
	size := 1
	for f := range strings.SplitSeq(rest[:end], ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		var d int
		if _, err := fmt.Sscan(f, &d); err != nil || d < 0 {
			return 0, nil, fmt.Errorf("%w: .npy shape %q", ErrDecode, rest[:end])
		}
		shape = append(shape, d)
		size *= d
	}
	if 10+n+size != len(b) {
		return 0, nil, fmt.Errorf("%w: .npy of shape %v has %d data bytes", ErrDecode, shape, len(b)-10-n)
	}
	return 10 + n, shape, nil
}
