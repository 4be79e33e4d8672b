package mds

import (
	"encoding/binary"
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/brandgw/brand/format"
	"github.com/brandgw/brand/internal/codec/npy"
)

// kind is how a column's stored bytes become its member's.
type kind int

const (
	raw     kind = iota // the bytes as stored: bytes, str, jpeg, png, json, str_*, pkl
	intText             // a little-endian integer as decimal text
	uintText
	floatText // a little-endian float as JSON number text
	ndarray   // MDS's ndarray encoding as a .npy
)

// encoding is what Brand knows of one MDS column encoding.
type encoding struct {
	kind kind
	ext  string // the member's default extension
	// size is the stored value's fixed size (0: variable, with a u32
	// size before the sample's data, as MDS stores it).
	size int64
	// text is the most bytes a scalar's text takes.
	text int64
	// bits of a scalar; for an ndarray the dtype and shape when fixed.
	bits  int
	dtype *arrayType
	shape []int64
}

// arrayType is an ndarray value dtype.
type arrayType struct {
	name  string
	descr string // .npy descriptor
	size  int64
}

// arrayTypes by MDS's ndarray dtype code.
var arrayTypes = map[byte]arrayType{
	8:  {"uint8", "|u1", 1},
	9:  {"int8", "|i1", 1},
	16: {"uint16", "<u2", 2},
	17: {"int16", "<i2", 2},
	18: {"float16", "<f2", 2},
	32: {"uint32", "<u4", 4},
	33: {"int32", "<i4", 4},
	34: {"float32", "<f4", 4},
	64: {"uint64", "<u8", 8},
	65: {"int64", "<i8", 8},
	66: {"float64", "<f8", 8},
}

func arrayTypeNamed(name string) (arrayType, bool) {
	for _, t := range arrayTypes {
		if t.name == name {
			return t, true
		}
	}
	return arrayType{}, false
}

// maxNpyHeader bounds the .npy header of any array whose data fits a
// shard (a product of dimensions ≤ 2^32, at most 63 of them): base 66
// bytes, at most 8+3·63 for the shape, padded to 64. See npyHeaderBound.
const maxNpyHeader = 320

// parseEncoding reads an MDS column encoding ("int64", "ndarray:uint8:3,4").
// pkl is known, served raw only when the column's member is named
// (Options.Members); the rest of MDS's encodings are unsupported.
func parseEncoding(s string) (encoding, error) {
	ints := map[string]int{"int8": 8, "int16": 16, "int32": 32, "int64": 64, "int": 64}
	uints := map[string]int{"uint8": 8, "uint16": 16, "uint32": 32, "uint64": 64}
	floats := map[string]int{"float16": 16, "float32": 32, "float64": 64}
	switch {
	case s == "bytes":
		return encoding{kind: raw, ext: "bin"}, nil
	case s == "str":
		return encoding{kind: raw, ext: "txt"}, nil
	case s == "str_int":
		return encoding{kind: raw, ext: "cls"}, nil
	case s == "str_float", s == "str_decimal":
		return encoding{kind: raw, ext: "txt"}, nil
	case s == "jpeg":
		return encoding{kind: raw, ext: "jpg"}, nil
	case s == "png":
		return encoding{kind: raw, ext: "png"}, nil
	case s == "json":
		return encoding{kind: raw, ext: "json"}, nil
	case s == "pkl":
		return encoding{kind: raw, ext: "pkl"}, nil
	case ints[s] > 0:
		b := ints[s]
		return encoding{kind: intText, ext: "cls", size: int64(b / 8), bits: b, text: int64(len(strconv.FormatInt(math.MinInt64>>(64-b), 10)))}, nil
	case uints[s] > 0:
		b := uints[s]
		return encoding{kind: uintText, ext: "cls", size: int64(b / 8), bits: b, text: int64(len(strconv.FormatUint(math.MaxUint64>>(64-b), 10)))}, nil
	case floats[s] > 0:
		// At most 24 bytes ("-2.2250738585072014e-308"); a float32's at
		// most 19 ("-1000000000000000.0"). float16 prints as float32.
		b := floats[s]
		return encoding{kind: floatText, ext: "json", size: int64(b / 8), bits: b, text: 24}, nil
	case s == "ndarray" || strings.HasPrefix(s, "ndarray:"):
		return parseNDArray(s)
	}
	return encoding{}, fmt.Errorf("encoding %q", s)
}

// parseNDArray reads "ndarray[:dtype[:d0,d1,...]]", as NDArray.from_str.
func parseNDArray(s string) (encoding, error) {
	e := encoding{kind: ndarray, ext: "npy"}
	args := strings.Split(strings.TrimPrefix(strings.TrimPrefix(s, "ndarray"), ":"), ":")
	if s == "ndarray" {
		return e, nil
	}
	if len(args) > 2 {
		return e, fmt.Errorf("encoding %q", s)
	}
	t, ok := arrayTypeNamed(args[0])
	if !ok {
		return e, fmt.Errorf("encoding %q: dtype %q", s, args[0])
	}
	e.dtype = &t
	if len(args) == 2 {
		dims := strings.Split(args[1], ",")
		if len(dims) > 63 {
			return e, fmt.Errorf("encoding %q: %d dimensions", s, len(dims))
		}
		n := t.size
		for _, d := range dims {
			v, err := strconv.ParseInt(strings.TrimSpace(d), 10, 64)
			if err != nil || v < 1 || v > math.MaxUint32 || n > math.MaxUint32/v {
				return e, fmt.Errorf("encoding %q: shape", s)
			}
			n *= v
			e.shape = append(e.shape, v)
		}
		e.size = n
	}
	return e, nil
}

// memberBound is the most bytes a value stored in n bytes becomes as a
// member; fixed encodings ignore n.
func (e encoding) memberBound(n int64) int64 {
	switch e.kind {
	case intText, uintText, floatText:
		return e.text
	case ndarray:
		if e.size > 0 {
			return int64(npy.HeaderLen(e.dtype.descr, e.shape)) + e.size
		}
		return n + maxNpyHeader
	}
	return n
}

// member writes the stored value v as its member (ext) with w.
func (e encoding) member(w *format.Writer, ext string, v []byte, scratch []byte) ([]byte, error) {
	le := binary.LittleEndian
	switch e.kind {
	case raw:
		return scratch, w.Add(ext, v)
	case intText:
		var x int64
		switch e.bits {
		case 8:
			x = int64(int8(v[0]))
		case 16:
			x = int64(int16(le.Uint16(v)))
		case 32:
			x = int64(int32(le.Uint32(v)))
		default:
			x = int64(le.Uint64(v))
		}
		scratch = strconv.AppendInt(scratch[:0], x, 10)
	case uintText:
		var x uint64
		switch e.bits {
		case 8:
			x = uint64(v[0])
		case 16:
			x = uint64(le.Uint16(v))
		case 32:
			x = uint64(le.Uint32(v))
		default:
			x = le.Uint64(v)
		}
		scratch = strconv.AppendUint(scratch[:0], x, 10)
	case floatText:
		var f float64
		bits := 32
		switch e.bits {
		case 16:
			f = float64(half(le.Uint16(v)))
		case 32:
			f = float64(math.Float32frombits(le.Uint32(v)))
		default:
			f, bits = math.Float64frombits(le.Uint64(v)), 64
		}
		scratch = appendFloat(scratch[:0], f, bits)
	case ndarray:
		return e.ndarray(w, ext, v, scratch)
	}
	return scratch, w.Add(ext, scratch)
}

// appendFloat writes f as Python's json module writes a float (its
// repr): the shortest decimal that reads back as the column's float
// (bits wide), with ".0" when it is whole, an exponent below 1e-4 or from
// 1e16 on, and NaN, Infinity, -Infinity. So the text reads back as a
// float, not an integer, and "-0.0" keeps its sign.
func appendFloat(b []byte, f float64, bits int) []byte {
	switch {
	case math.IsNaN(f):
		return append(b, "NaN"...)
	case math.IsInf(f, 1):
		return append(b, "Infinity"...)
	case math.IsInf(f, -1):
		return append(b, "-Infinity"...)
	}
	var buf [32]byte
	e := strconv.AppendFloat(buf[:0], f, 'e', -1, bits) // [-]d[.ddd]e±XX
	if e[0] == '-' {
		b = append(b, '-')
		e = e[1:]
	}
	mant, exp, _ := strings.Cut(string(e), "e")
	digits := strings.Replace(mant, ".", "", 1)
	x, _ := strconv.Atoi(exp)
	decpt := x + 1 // digits before the point
	switch {
	case decpt <= -4 || decpt > 16:
		b = append(b, digits[0])
		if len(digits) > 1 {
			b = append(append(b, '.'), digits[1:]...)
		}
		b = append(b, 'e')
		if x < 0 {
			b, x = append(b, '-'), -x
		} else {
			b = append(b, '+')
		}
		if x < 10 {
			b = append(b, '0')
		}
		return strconv.AppendInt(b, int64(x), 10)
	case decpt <= 0:
		b = append(b, "0."...)
		for range -decpt {
			b = append(b, '0')
		}
		return append(b, digits...)
	case decpt >= len(digits):
		b = append(b, digits...)
		for range decpt - len(digits) {
			b = append(b, '0')
		}
		return append(b, ".0"...)
	}
	return append(append(append(b, digits[:decpt]...), '.'), digits[decpt:]...)
}

// half is the float32 of IEEE 754 binary16 bits h (exactly).
func half(h uint16) float32 {
	sign := uint32(h>>15) << 31
	exp := uint32(h>>10) & 0x1f
	frac := uint32(h) & 0x3ff
	switch {
	case exp == 0x1f: // Inf, NaN
		return math.Float32frombits(sign | 0xff<<23 | frac<<13)
	case exp == 0 && frac == 0:
		return math.Float32frombits(sign)
	case exp == 0: // subnormal: frac·2^-24
		f := float32(frac) / (1 << 24)
		if sign != 0 {
			f = -f
		}
		return f
	}
	return math.Float32frombits(sign | (exp+127-15)<<23 | frac<<13)
}

// ndarray writes MDS's ndarray value v ([dtype u8] [ndim<<2|shape type,
// shape] values) as a .npy.
func (e encoding) ndarray(w *format.Writer, ext string, v, scratch []byte) ([]byte, error) {
	dt := e.dtype
	if dt == nil {
		if len(v) < 1 {
			return scratch, fmt.Errorf("%w: an ndarray value without its dtype", format.ErrDamaged)
		}
		t, ok := arrayTypes[v[0]]
		if !ok {
			return scratch, fmt.Errorf("%w: ndarray dtype code %d", format.ErrDamaged, v[0])
		}
		dt, v = &t, v[1:]
	}
	shape := e.shape
	if shape == nil {
		if len(v) < 1 {
			return scratch, fmt.Errorf("%w: an ndarray value without its shape", format.ErrDamaged)
		}
		ndim, width := int(v[0]>>2), 1<<(v[0]&3)
		v = v[1:]
		if len(v) < ndim*width {
			return scratch, fmt.Errorf("%w: an ndarray shape of %d dimensions in %d bytes", format.ErrDamaged, ndim, len(v))
		}
		shape = make([]int64, ndim)
		for i := range shape {
			var d uint64
			switch width {
			case 1:
				d = uint64(v[i])
			case 2:
				d = uint64(binary.LittleEndian.Uint16(v[2*i:]))
			case 4:
				d = uint64(binary.LittleEndian.Uint32(v[4*i:]))
			default:
				d = binary.LittleEndian.Uint64(v[8*i:])
			}
			// 0 is NumPy's empty array (an empty document of tokens),
			// which Streaming writes and reads.
			if d > math.MaxUint32 {
				return scratch, fmt.Errorf("%w: an ndarray dimension of %d", format.ErrDamaged, d)
			}
			shape[i] = int64(d)
		}
		v = v[ndim*width:]
	}
	// The values must be exactly the shape's.
	n := dt.size
	for _, d := range shape {
		if d == 0 {
			n = 0
			break
		}
		if n > int64(len(v))/d {
			n = -1
			break
		}
		n *= d
	}
	if n != int64(len(v)) {
		return scratch, fmt.Errorf("%w: an ndarray of shape %v %s in %d bytes", format.ErrDamaged, shape, dt.name, len(v))
	}
	h, err := npy.AppendHeader(scratch[:0], dt.descr, shape)
	if err != nil {
		return h, fmt.Errorf("%w: %v", format.ErrDamaged, err)
	}
	out, err := w.Member(ext, int64(len(h))+n)
	if err != nil {
		return h, err
	}
	copy(out[copy(out, h):], v)
	return h, nil
}
