package imagesize

import (
	"reflect"
	"testing"
)

// FuzzFile: any bytes either decode to a file that encodes and decodes
// again to itself, or are refused; nothing panics, and nothing allocates
// past what the bytes can hold.
func FuzzFile(f *testing.F) {
	good := &File{Index: "0123456789abcdef", Sizes: []Size{{640, 480}, {}, {3, 4}}, Bad: map[int]string{1: NoImage}}
	b, err := good.MarshalBinary()
	if err != nil {
		f.Fatal(err)
	}
	f.Add(b)
	f.Add([]byte(fileMagic))
	f.Fuzz(func(t *testing.T, p []byte) {
		var g File
		if g.UnmarshalBinary(p) != nil {
			return
		}
		again, err := g.MarshalBinary()
		if err != nil {
			t.Fatalf("a decoded file does not encode: %v", err)
		}
		var h File
		if err := h.UnmarshalBinary(again); err != nil || !reflect.DeepEqual(g, h) {
			t.Fatalf("encoded again: %+v, %v; want %+v", h, err, g)
		}
	})
}
