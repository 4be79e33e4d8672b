// Package npy writes the header of NumPy's .npy format (version 1.0),
// which the formats that serve arrays (an MDS ndarray column, a Megatron
// document's tokens) put before an array's raw little-endian bytes, so a
// member opens with numpy.load as it is.
//
// The header is the magic "\x93NUMPY", the version 1.0, its length as a
// little-endian uint16, and a Python dict literal with the dtype, the
// order (C) and the shape, padded with spaces and a newline so that the
// data starts at a multiple of 64 bytes, as NumPy aligns it. Its length
// depends only on the dtype's descriptor and the shape's digits, so a
// format computes it, exactly, from metadata before any data is read.
package npy

import (
	"strconv"

	"github.com/brandgw/brand/internal/errkind"
)

// Align is what the header pads the data's start to.
const Align = 64

const (
	magic   = "\x93NUMPY\x01\x00"
	preLen  = len(magic) + 2 // magic, version, header length
	dictPre = "{'descr': '"
	dictMid = "', 'fortran_order': False, 'shape': ("
	dictEnd = "), }"
)

// ErrTooLong is a header longer than version 1.0's uint16 length allows.
var ErrTooLong = errkind.New(errkind.Internal, "npy: header longer than 65535 bytes")

// HeaderLen is the length of the header of an array of descriptor descr
// (e.g. "<i4") and shape shape: where its data starts.
func HeaderLen(descr string, shape []int64) int {
	n := preLen + len(dictPre) + len(descr) + len(dictMid) + len(dictEnd) + 1 // the newline
	for i, d := range shape {
		if i > 0 {
			n += 2 // ", "
		}
		n += digits(d)
	}
	if len(shape) == 1 {
		n++ // "(N,)"
	}
	return (n + Align - 1) / Align * Align
}

// AppendHeader appends the header of an array of descriptor descr and
// shape shape to b: exactly HeaderLen bytes.
func AppendHeader(b []byte, descr string, shape []int64) ([]byte, error) {
	n := HeaderLen(descr, shape)
	if n-preLen > 0xffff {
		return b, ErrTooLong
	}
	start := len(b)
	b = append(b, magic...)
	b = append(b, byte(n-preLen), byte((n-preLen)>>8))
	b = append(b, dictPre...)
	b = append(b, descr...)
	b = append(b, dictMid...)
	for i, d := range shape {
		if i > 0 {
			b = append(b, ", "...)
		}
		b = strconv.AppendInt(b, d, 10)
	}
	if len(shape) == 1 {
		b = append(b, ',')
	}
	b = append(b, dictEnd...)
	for len(b)-start < n-1 {
		b = append(b, ' ')
	}
	return append(b, '\n'), nil
}

func digits(d int64) int {
	n := 1
	if d < 0 {
		n++
		d = -d
	}
	for d >= 10 {
		d /= 10
		n++
	}
	return n
}
