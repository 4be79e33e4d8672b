package client

import (
	"encoding/binary"
	"fmt"
	"strconv"
	"strings"
)

// Tensor is a .npy member read in place: what a gateway's pipeline makes
// of an image (transform=, docs/transform.md §8: uint8, C order, [3, H, W]
// unless the pipeline says "hwc"), or any array numpy.save wrote.
type Tensor struct {
	// DType is numpy's type string: "|u1" for uint8, "<f4" for
	// little-endian float32.
	DType string
	Shape []int
	// FortranOrder is true for an array stored column-major.
	FortranOrder bool
	// Data is the array's bytes: a slice of the member, not a copy (of
	// the batch's buffer: valid until Batch.Release). A gateway's
	// tensors start 64-byte aligned within their member.
	Data []byte
}

// ItemSize is the bytes of one element, from DType.
func (t Tensor) ItemSize() int {
	n, _ := strconv.Atoi(strings.TrimLeft(t.DType, "<>|=bBiufcmMOSUV"))
	return n
}

// ParseNPY reads a .npy member (format 1.0, 2.0 or 3.0) without copying
// its data: a Go trainer's way to a tensor's shape and pixels.
//
//	for _, s := range batch.Samples {
//		t, err := client.ParseNPY(s.Files["npy"]) // [3 224 224] |u1
//		...
//		use(t.Shape, t.Data)
//	}
func ParseNPY(b []byte) (Tensor, error) {
	if len(b) < 10 || string(b[:6]) != "\x93NUMPY" {
		return Tensor{}, fmt.Errorf("client: not a .npy array")
	}
	var n, start int
	switch b[6] {
	case 1:
		n, start = int(binary.LittleEndian.Uint16(b[8:])), 10
	case 2, 3:
		if len(b) < 12 {
			return Tensor{}, fmt.Errorf("client: .npy header cut short")
		}
		n, start = int(binary.LittleEndian.Uint32(b[8:])), 12
	default:
		return Tensor{}, fmt.Errorf("client: .npy format version %d.%d", b[6], b[7])
	}
	if start+n > len(b) {
		return Tensor{}, fmt.Errorf("client: .npy header of %d bytes in a member of %d", n, len(b))
	}
	dict := string(b[start : start+n])
	var t Tensor
	var err error
	if t.DType, err = npyString(dict, "descr"); err != nil {
		return Tensor{}, err
	}
	order, err := npyField(dict, "fortran_order")
	if err != nil {
		return Tensor{}, err
	}
	t.FortranOrder = strings.HasPrefix(order, "True")
	shape, err := npyField(dict, "shape")
	if err != nil {
		return Tensor{}, err
	}
	end := strings.IndexByte(shape, ')')
	if !strings.HasPrefix(shape, "(") || end < 0 {
		return Tensor{}, fmt.Errorf("client: .npy shape %q", shape)
	}
	size := 1
	for f := range strings.SplitSeq(shape[1:end], ",") {
		if f = strings.TrimSpace(f); f == "" {
			continue
		}
		d, err := strconv.Atoi(f)
		if err != nil || d < 0 {
			return Tensor{}, fmt.Errorf("client: .npy shape %q", shape[:end+1])
		}
		t.Shape = append(t.Shape, d)
		size *= d
	}
	t.Data = b[start+n:]
	if item := t.ItemSize(); item < 1 || len(t.Data) != size*item {
		return Tensor{}, fmt.Errorf("client: .npy of dtype %q and shape %v has %d data bytes", t.DType, t.Shape, len(t.Data))
	}
	return t, nil
}

// npyField is the text after 'key': in a .npy header's dictionary.
func npyField(dict, key string) (string, error) {
	i := strings.Index(dict, "'"+key+"'")
	if i < 0 {
		return "", fmt.Errorf("client: .npy header %q has no %s", dict, key)
	}
	rest := strings.TrimLeft(dict[i+len(key)+2:], " ")
	if !strings.HasPrefix(rest, ":") {
		return "", fmt.Errorf("client: .npy header %q", dict)
	}
	return strings.TrimLeft(rest[1:], " "), nil
}

// npyString is a quoted string value of a .npy header's dictionary.
func npyString(dict, key string) (string, error) {
	v, err := npyField(dict, key)
	if err != nil {
		return "", err
	}
	if len(v) < 2 || v[0] != '\'' {
		return "", fmt.Errorf("client: .npy %s %q", key, v)
	}
	end := strings.IndexByte(v[1:], '\'')
	if end < 0 {
		return "", fmt.Errorf("client: .npy %s %q", key, v)
	}
	return v[1 : 1+end], nil
}
