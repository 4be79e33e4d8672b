package client

import (
	"fmt"
	"math"

	"github.com/brandgw/brand/internal/codec/npy"
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

// ItemSize is the bytes of one element, from DType: "<f4" 4, "<U3" 12.
func (t Tensor) ItemSize() int { return npy.ItemSize(t.DType) }

// ParseNPY reads a .npy member (format 1.0, 2.0 or 3.0) without copying
// its data: a Go trainer's way to a tensor's shape and pixels.
//
//	for _, s := range batch.Samples {
//		t, err := client.ParseNPY(s.Files["npy"]) // [3 224 224] |u1
//		...
//		use(t.Shape, t.Data)
//	}
func ParseNPY(b []byte) (Tensor, error) {
	h, data, err := npy.Read(b)
	if err != nil {
		return Tensor{}, fmt.Errorf("client: %w", err)
	}
	t := Tensor{DType: h.Descr, FortranOrder: h.Fortran, Data: data}
	for _, d := range h.Shape {
		if d > math.MaxInt {
			return Tensor{}, fmt.Errorf("client: .npy shape %v: a dimension past an int", h.Shape)
		}
		t.Shape = append(t.Shape, int(d))
	}
	return t, nil
}
