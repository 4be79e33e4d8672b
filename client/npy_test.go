package client_test

import (
	"encoding/binary"
	"math"
	"os"
	"slices"
	"testing"

	"github.com/brandgw/brand/client"
	"github.com/brandgw/brand/transform"
)

// TestParseNPY: the tensors a gateway's pipeline writes, and arrays
// numpy.save wrote (testdata/*.npy, numpy 1.24), are read in place — Data
// is the member's own bytes — with their dtype and shape; malformed
// members are refused.
func TestParseNPY(t *testing.T) {
	img, err := os.ReadFile("../transform/testdata/photo.jpg")
	if err != nil {
		t.Fatal(err)
	}
	p, err := transform.New("eval", transform.Builtins()[transform.ImagenetEval], transform.Options{})
	if err != nil {
		t.Fatal(err)
	}
	res, err := p.Apply(nil, img, transform.Key{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	tensor, err := client.ParseNPY(res.Out)
	if err != nil {
		t.Fatal(err)
	}
	if tensor.DType != "|u1" || !slices.Equal(tensor.Shape, []int{3, 224, 224}) || tensor.FortranOrder || tensor.ItemSize() != 1 {
		t.Errorf("tensor %s %v fortran=%t", tensor.DType, tensor.Shape, tensor.FortranOrder)
	}
	if off := len(res.Out) - len(tensor.Data); &tensor.Data[0] != &res.Out[off] || off%64 != 0 {
		t.Errorf("Data is not the member's own bytes, 64-byte aligned (offset %d)", off)
	}
	f4, err := os.ReadFile("testdata/f4.npy")
	if err != nil {
		t.Fatal(err)
	}
	a, err := client.ParseNPY(f4)
	if err != nil {
		t.Fatal(err)
	}
	if a.DType != "<f4" || !slices.Equal(a.Shape, []int{2, 3}) || a.ItemSize() != 4 ||
		math.Float32frombits(binary.LittleEndian.Uint32(a.Data[20:])) != 5 {
		t.Errorf("f4.npy: %s %v %v", a.DType, a.Shape, a.Data)
	}
	fo, err := os.ReadFile("testdata/fortran.npy")
	if err != nil {
		t.Fatal(err)
	}
	if b, err := client.ParseNPY(fo); err != nil || !b.FortranOrder || !slices.Equal(b.Data, []byte{0, 3, 1, 4, 2, 5}) {
		t.Errorf("fortran.npy: %+v %v", b, err)
	}
	sc, err := os.ReadFile("testdata/scalar.npy")
	if err != nil {
		t.Fatal(err)
	}
	if s, err := client.ParseNPY(sc); err != nil || len(s.Shape) != 0 || len(s.Data) != 8 {
		t.Errorf("scalar.npy: %+v %v", s, err)
	}
	for name, bad := range map[string][]byte{
		"not npy":    []byte("\x89PNG\r\n\x1a\nxxxxxx"),
		"cut data":   res.Out[:len(res.Out)-1],
		"cut header": res.Out[:40],
		"version 9":  append([]byte("\x93NUMPY\x09\x00"), res.Out[8:]...),
	} {
		if _, err := client.ParseNPY(bad); err == nil {
			t.Errorf("%s: parsed", name)
		}
	}
}
