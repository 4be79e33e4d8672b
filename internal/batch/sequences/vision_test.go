package sequences

import (
	"errors"
	"slices"
	"testing"
)

// TestTextSample: a piece of a text document in a vision mixture is a
// sample of its tokens as int32, loss 1 on each, no image, from any
// integer dtype; a piece past the document is ErrDocument, another dtype
// than the index's ErrDocument, a token int32 cannot hold ErrTokenID.
func TestTextSample(t *testing.T) {
	for _, tc := range []struct {
		descr, dtype string
		size         int
	}{{"<u2", "uint16", 2}, {"<i4", "int32", 4}, {"<u8", "uint64", 8}, {"|u1", "uint8", 1}} {
		doc := docSample(t, "d", tc.descr, tc.size, []int64{5, 6, 7, 8, 9, 10})
		s, err := TextSample(doc, tc.dtype, 1, 4)
		if err != nil {
			t.Fatalf("%s: %v", tc.dtype, err)
		}
		if !slices.Equal(s.IDs, []int32{6, 7, 8, 9}) || !slices.Equal(s.Loss, []uint8{1, 1, 1, 1}) || len(s.Images) != 0 {
			t.Fatalf("%s: %+v", tc.dtype, s)
		}
		if s, err := TextSample(doc, "", 0, 6); err != nil || s.Tokens() != 6 {
			t.Fatalf("%s, its own dtype: %+v %v", tc.dtype, s, err)
		}
	}
	doc := docSample(t, "d", "<u2", 2, []int64{1, 2, 3})
	for _, tc := range []struct {
		dtype    string
		from, n  int
		want     error
		whatWant string
	}{
		{"uint16", 2, 2, ErrDocument, "past the document"},
		{"uint16", -1, 1, ErrDocument, "before it"},
		{"int32", 0, 3, ErrDocument, "another dtype"},
	} {
		if _, err := TextSample(doc, tc.dtype, tc.from, tc.n); !errors.Is(err, tc.want) {
			t.Errorf("%s: %v; want %v", tc.whatWant, err, tc.want)
		}
	}
	big := docSample(t, "d", "<u8", 8, []int64{1, 1 << 40})
	if _, err := TextSample(big, "uint64", 0, 2); !errors.Is(err, ErrTokenID) {
		t.Errorf("a token past int32: %v; want ErrTokenID", err)
	}
}
