package lance

import (
	"encoding/binary"
	"slices"
	"strings"
	"testing"
)

// A roaring bitmap with run flags, an array container and a run
// container (the fixtures' bitmap holds one bitmap container) reads;
// malformed ones are refused.
func TestRoaring(t *testing.T) {
	le16 := func(b []byte, vs ...uint16) []byte {
		for _, v := range vs {
			b = binary.LittleEndian.AppendUint16(b, v)
		}
		return b
	}
	// Cookie 12347, two containers (count less one: 1), run flags 0b10.
	b := le16(nil, 12347, 1)
	b = append(b, 0b10)
	b = le16(b, 0, 2, 3, 4)  // key 0: 3 values; key 3: 5 values
	b = le16(b, 1, 7, 65535) // the array
	b = le16(b, 1, 10, 4)    // one run: 10 to 14
	got, err := roaringOffsets(b, 100)
	want := []uint32{1, 7, 65535, 3<<16 | 10, 3<<16 | 11, 3<<16 | 12, 3<<16 | 13, 3<<16 | 14}
	if err != nil || !slices.Equal(got, want) {
		t.Fatalf("%v %v", got, err)
	}
	for _, tt := range []struct {
		name string
		b    []byte
		most uint64
		want string
	}{
		{"more than asked", b, 7, "more than 7"},
		{"cut", b[:len(b)-2], 100, "past the end"},
		{"trailing bytes", append(slices.Clone(b), 0), 100, "after a roaring bitmap"},
		{"no cookie", le16(nil, 1, 2), 100, "cookie"},
		{"a billion containers", binary.LittleEndian.AppendUint32(le16(nil, 12346, 0), 1<<30), 100, "containers"},
		{"keys out of order", func() []byte {
			c := slices.Clone(b)
			binary.LittleEndian.PutUint16(c[5+4:], 0)
			return c
		}(), 100, "out of order"},
	} {
		if _, err := roaringOffsets(tt.b, tt.most); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: %v, want %q", tt.name, err, tt.want)
		}
	}
}
