package imagesize

import (
	"encoding/binary"
	"errors"
	"hash/crc32"
	"reflect"
	"strings"
	"testing"
)

// TestFile: a sizes file decodes to what was encoded, each distinct
// reason stored once; one cut anywhere, with any byte changed, or of
// another layout version is refused as ErrFile and leaves the file read
// into as it was; a count past the bytes left allocates nothing, even
// under a checksum that holds.
func TestFile(t *testing.T) {
	f := &File{Index: "0123456789abcdef", MaxPixels: 1 << 27,
		Sizes: []Size{{640, 480}, {}, {28, 5000}, {}, {}, {1, 1}, {1 << 31, 3}},
		Bad:   map[int]string{1: NoImage, 3: "png: transform: not decodable: png header: unexpected EOF", 4: NoImage}}
	b, err := f.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	var got File
	if err := got.UnmarshalBinary(b); err != nil || !reflect.DeepEqual(&got, f) {
		t.Fatalf("round trip: %+v, %v; want %+v", got, err, f)
	}
	if strings.Count(string(b), NoImage) != 1 {
		t.Errorf("a reason of two samples stored %d times", strings.Count(string(b), NoImage))
	}
	for id, want := range []struct {
		s  Size
		ok bool
	}{{Size{640, 480}, true}, {}, {Size{28, 5000}, true}, {}, {}, {Size{1, 1}, true}, {Size{1 << 31, 3}, true}} {
		if s, ok := got.Of(id); s != want.s || ok != want.ok {
			t.Errorf("Of(%d) = %v, %v; want %v, %v", id, s, ok, want.s, want.ok)
		}
	}
	for _, id := range []int{-1, 7} {
		if _, ok := got.Of(id); ok {
			t.Errorf("Of(%d) of 7 samples: ok", id)
		}
	}

	kept := got
	for i := range len(b) {
		if err := got.UnmarshalBinary(b[:i]); !errors.Is(err, ErrFile) {
			t.Fatalf("cut at %d: %v; want ErrFile", i, err)
		}
		c := append([]byte(nil), b...)
		c[i] ^= 0x10
		if err := got.UnmarshalBinary(c); !errors.Is(err, ErrFile) {
			t.Fatalf("byte %d changed: %v; want ErrFile", i, err)
		}
	}
	if !reflect.DeepEqual(got, kept) {
		t.Fatalf("a refused file changed the one read into: %+v", got)
	}

	// A sample count of 2^40 over a few bytes, checksummed, is refused
	// before any allocation of it.
	huge := append([]byte(fileMagic), 0, 0, 0x80, 0x80, 0x80, 0x80, 0x80, 0x20, 0, 0)
	huge = binary.LittleEndian.AppendUint32(huge, crc32.Checksum(huge, castagnoli))
	if a := testing.AllocsPerRun(5, func() {
		if err := got.UnmarshalBinary(huge); !errors.Is(err, ErrFile) {
			t.Fatalf("a huge count: %v; want ErrFile", err)
		}
	}); a > 10 {
		t.Errorf("refusing a huge count made %.0f allocations", a)
	}

	for _, tc := range []struct {
		name string
		f    File
	}{
		{"a size of zero not bad", File{Sizes: []Size{{3, 0}}}},
		{"a bad sample past the samples", File{Sizes: []Size{{3, 4}}, Bad: map[int]string{1: NoImage}}},
		{"a negative pixel bound", File{MaxPixels: -1}},
	} {
		if _, err := tc.f.MarshalBinary(); !errors.Is(err, ErrFile) {
			t.Errorf("%s: %v; want ErrFile", tc.name, err)
		}
	}
	// An empty file, of a dataset of no samples, is a file.
	e, err := (&File{Index: "x"}).MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	if err := got.UnmarshalBinary(e); err != nil || got.Index != "x" || len(got.Sizes) != 0 {
		t.Fatalf("an empty file: %+v, %v", got, err)
	}
}
