// Package npy writes and reads the header of NumPy's .npy format: the one
// codec of the format in the module. The formats that serve arrays (an
// MDS ndarray column, a Megatron document's or a Parquet list's tokens),
// the transform stage's tensors, the pack stage's sequences and the Go
// client all go through it; TestNumPy holds it to numpy.
//
// A header is the magic "\x93NUMPY", the version, the length of what
// follows (a little-endian uint16 in version 1.0, a uint32 in 2.0 and
// 3.0), and a Python dict literal with the dtype's descriptor, the order
// and the shape, padded with spaces and a newline so that the data starts
// at a multiple of 64 bytes, as NumPy aligns it.
//
// The writer writes version 1.0, C order, the dict exactly as numpy.save
// spells it. Its length depends only on the descriptor and the shape's
// digits, so a caller computes it (HeaderLen) from metadata before any
// data is read. numpy.save (1.24 on) also leaves room for the first axis
// to grow to 21 digits; where that room crosses a multiple of 64 its
// header is 64 bytes longer than this one. numpy.load reads both alike.
//
// The reader reads what numpy.lib.format reads: versions 1.0, 2.0 and
// 3.0, the keys in any order, quoted with ' or ", shapes of any rank
// (Python 2's "3L" too). It declines structured dtypes (a list
// descriptor), which no Brand member holds.
package npy

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// Align is what the header pads the data's start to.
const Align = 64

const (
	magic   = "\x93NUMPY"
	v1      = magic + "\x01\x00"
	preLen  = len(v1) + 2 // magic, version, header length
	dictPre = "{'descr': '"
	dictMid = "', 'fortran_order': False, 'shape': ("
	dictEnd = "), }"
)

var (
	// ErrTooLong is a header longer than version 1.0's uint16 length
	// allows.
	ErrTooLong = errors.New("npy: header longer than 65535 bytes")
	// ErrFormat is bytes that are not a .npy array the reader reads: no
	// magic, a header cut short or not a dict numpy writes, a data
	// length that is not the shape's.
	ErrFormat = errors.New("npy: not a .npy array")
)

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

// AppendHeader appends the version 1.0 header of a C-order array of
// descriptor descr and shape shape to b: exactly HeaderLen bytes. It
// writes in place when b has the room, as a caller that lays out a
// member in a buffer of its own wants.
func AppendHeader(b []byte, descr string, shape []int64) ([]byte, error) {
	n := HeaderLen(descr, shape)
	if n-preLen > 0xffff {
		return b, ErrTooLong
	}
	start := len(b)
	b = append(b, v1...)
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

// Header is what a .npy header says of its array.
type Header struct {
	// Descr is numpy's type string: "|u1" for uint8, "<i4" for
	// little-endian int32, "<f4" for float32.
	Descr string
	// Fortran is true for an array stored column-major.
	Fortran bool
	// Shape is the array's dimensions; empty for a scalar.
	Shape []int64
}

// Count is the number of elements the shape holds (1 for a scalar), or
// -1 if it overflows an int64.
func (h Header) Count() int64 {
	n := int64(1)
	for _, d := range h.Shape {
		if d != 0 && n > (1<<63-1)/d {
			return -1
		}
		n *= d
	}
	return n
}

// ItemSize is the bytes of one element of descriptor descr, as numpy
// counts them: the digits after the byte order and the kind ("<i4": 4),
// four a character for a Unicode string ("<U3": 12), eight for a date or
// a time delta ("<M8[ns]"); 0 for what has no fixed size in place (an
// object, an unknown kind).
func ItemSize(descr string) int {
	s := strings.TrimLeft(descr, "<>|=")
	if s == "" {
		return 0
	}
	kind, rest := s[0], s[1:]
	if i := strings.IndexByte(rest, '['); i >= 0 && (kind == 'm' || kind == 'M') {
		rest = rest[:i]
	}
	n, err := strconv.Atoi(rest)
	if err != nil || n < 1 {
		return 0
	}
	switch kind {
	case 'b', 'i', 'u', 'f', 'c', 'S', 'a', 'V', 'm', 'M':
		return n
	case 'U':
		return 4 * n
	}
	return 0
}

// ReadHeader reads the header at the start of b and returns it with
// where the data starts.
func ReadHeader(b []byte) (Header, int, error) {
	if len(b) < preLen || string(b[:len(magic)]) != magic {
		return Header{}, 0, fmt.Errorf("%w: no \\x93NUMPY magic", ErrFormat)
	}
	var n, start int
	switch b[6] {
	case 1:
		n, start = int(b[8])|int(b[9])<<8, preLen
	case 2, 3:
		if len(b) < preLen+2 {
			return Header{}, 0, fmt.Errorf("%w: a header cut short", ErrFormat)
		}
		n, start = int(b[8])|int(b[9])<<8|int(b[10])<<16|int(b[11])<<24, preLen+2
	default:
		return Header{}, 0, fmt.Errorf("%w: format version %d.%d", ErrFormat, b[6], b[7])
	}
	if n < 0 || n > len(b)-start {
		return Header{}, 0, fmt.Errorf("%w: a header of %d bytes in %d", ErrFormat, n, len(b)-start)
	}
	h, err := parseDict(string(b[start : start+n]))
	if err != nil {
		return Header{}, 0, err
	}
	return h, start + n, nil
}

// Read reads the .npy array b holds whole, without copying: its header
// and its data, which must be exactly the shape's elements of the
// descriptor's size.
func Read(b []byte) (Header, []byte, error) {
	h, off, err := ReadHeader(b)
	if err != nil {
		return Header{}, nil, err
	}
	data := b[off:]
	size, count := int64(ItemSize(h.Descr)), h.Count()
	if size < 1 || count < 0 || count > int64(len(data))/size || count*size != int64(len(data)) {
		return Header{}, nil, fmt.Errorf("%w: dtype %q and shape %v in %d data bytes", ErrFormat, h.Descr, h.Shape, len(data))
	}
	return h, data, nil
}

// parseDict reads the header's dict literal: the three keys numpy
// requires, each once, and nothing else, then spaces and a newline.
func parseDict(s string) (Header, error) {
	bad := func(why string) (Header, error) {
		return Header{}, fmt.Errorf("%w: header %q: %s", ErrFormat, s, why)
	}
	p := lexer{s: s}
	if !p.take('{') {
		return bad("not a dict")
	}
	var h Header
	var seen [3]bool
	for !p.take('}') {
		key, ok := p.str()
		if !ok || !p.take(':') {
			return bad("not a dict of quoted keys")
		}
		var i int
		switch key {
		case "descr":
			if h.Descr, ok = p.str(); !ok {
				return bad("descr is not a string (a structured dtype?)")
			}
		case "fortran_order":
			i = 1
			if h.Fortran, ok = p.boolean(); !ok {
				return bad("fortran_order is neither True nor False")
			}
		case "shape":
			i = 2
			if h.Shape, ok = p.tuple(); !ok {
				return bad("shape is not a tuple of sizes")
			}
		default:
			return bad("key " + strconv.Quote(key))
		}
		if seen[i] {
			return bad("key " + strconv.Quote(key) + " twice")
		}
		seen[i] = true
		if !p.take(',') && !p.peek('}') {
			return bad("no comma between entries")
		}
	}
	if seen != [3]bool{true, true, true} {
		return bad("descr, fortran_order or shape missing")
	}
	if strings.TrimRight(p.s[p.i:], " \t\r\n\x00") != "" {
		return bad("more after the dict")
	}
	return h, nil
}

// lexer reads the Python literals a header's dict holds.
type lexer struct {
	s string
	i int
}

func (p *lexer) space() {
	for p.i < len(p.s) && (p.s[p.i] == ' ' || p.s[p.i] == '\t' || p.s[p.i] == '\n' || p.s[p.i] == '\r') {
		p.i++
	}
}

// peek reports whether c is next, past spaces.
func (p *lexer) peek(c byte) bool {
	p.space()
	return p.i < len(p.s) && p.s[p.i] == c
}

// take consumes c if it is next, past spaces.
func (p *lexer) take(c byte) bool {
	if !p.peek(c) {
		return false
	}
	p.i++
	return true
}

// str reads a string quoted with ' or " (no escapes: numpy's
// descriptors and keys have none).
func (p *lexer) str() (string, bool) {
	p.space()
	if p.i >= len(p.s) || (p.s[p.i] != '\'' && p.s[p.i] != '"') {
		return "", false
	}
	q := p.s[p.i]
	end := strings.IndexByte(p.s[p.i+1:], q)
	if end < 0 || strings.IndexByte(p.s[p.i+1:p.i+1+end], '\\') >= 0 {
		return "", false
	}
	v := p.s[p.i+1 : p.i+1+end]
	p.i += end + 2
	return v, true
}

func (p *lexer) boolean() (bool, bool) {
	p.space()
	for _, w := range [...]string{"False", "True"} {
		if strings.HasPrefix(p.s[p.i:], w) {
			p.i += len(w)
			return w == "True", true
		}
	}
	return false, false
}

// tuple reads a tuple of non-negative integers: "()", "(5,)", "(2, 3)".
func (p *lexer) tuple() ([]int64, bool) {
	if !p.take('(') {
		return nil, false
	}
	shape := []int64{}
	comma := false
	for !p.take(')') {
		p.space()
		j := p.i
		for j < len(p.s) && p.s[j] >= '0' && p.s[j] <= '9' {
			j++
		}
		d, err := strconv.ParseInt(p.s[p.i:j], 10, 64)
		if err != nil {
			return nil, false
		}
		p.i = j
		if p.i < len(p.s) && p.s[p.i] == 'L' { // Python 2's long
			p.i++
		}
		shape = append(shape, d)
		if comma = p.take(','); !comma && !p.peek(')') {
			return nil, false
		}
	}
	// "(5)" is a number in Python, not a tuple: numpy refuses it.
	return shape, len(shape) != 1 || comma
}
