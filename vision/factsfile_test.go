package vision

import (
	"errors"
	"reflect"
	"testing"
)

// TestFactsFile: a facts file decodes to what was encoded; one of
// another index or sample count, cut anywhere, or with a byte changed
// in a count is refused as ErrFactsFile (or decodes to a file that
// differs, never panics); a count past the bytes left allocates nothing.
func TestFactsFile(t *testing.T) {
	f := &FactsFile{Index: "0123456789abcdef", Tokenizer: []byte(`{"model": {}}`), MaxPixels: 1 << 27, Samples: []Facts{
		{Text: 12, Images: []ImageFacts{{W: 640, H: 480}, {W: 28, H: 5000}}},
		{},
		{Fault: FaultPlaceholders, Why: "2 <image> in the text, 1 images"},
		{Text: 3, Images: []ImageFacts{{W: 10, H: 10}, {Bad: "member x.1.png: not an image"}}},
		{Fault: FaultText, Why: "tokenizing: too long", Images: []ImageFacts{{W: 1, H: 1}}},
	}}
	b, err := f.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	got, err := DecodeFacts(b, f.Index, len(f.Samples))
	if err != nil || !reflect.DeepEqual(got, f) {
		t.Fatalf("round trip: %+v, %v; want %+v", got, err, f)
	}
	for _, tc := range []struct {
		name  string
		index string
		n     int
	}{{"another index", "fedcba9876543210", 5}, {"another count", f.Index, 4}} {
		if _, err := DecodeFacts(b, tc.index, tc.n); !errors.Is(err, ErrFactsFile) {
			t.Errorf("%s: %v; want ErrFactsFile", tc.name, err)
		}
	}
	for i := range len(b) {
		if _, err := DecodeFacts(b[:i], f.Index, len(f.Samples)); !errors.Is(err, ErrFactsFile) {
			t.Fatalf("cut at %d: %v; want ErrFactsFile", i, err)
		}
	}
	for i := range len(b) {
		c := append([]byte(nil), b...)
		c[i] ^= 0xff
		if got, err := DecodeFacts(c, f.Index, len(f.Samples)); err == nil && reflect.DeepEqual(got, f) {
			t.Fatalf("byte %d changed: decodes to the same file", i)
		}
	}
	// A sample count of 2^40 over a few bytes is refused before any
	// allocation of it.
	huge := append([]byte(factsMagic), 0, 0, 0, 0x80, 0x80, 0x80, 0x80, 0x80, 0x20)
	if _, err := DecodeFacts(huge, "", 1<<40); !errors.Is(err, ErrFactsFile) {
		t.Fatalf("a huge count: %v; want ErrFactsFile", err)
	}
	bad := &FactsFile{Samples: []Facts{{Text: -1}}}
	if _, err := bad.MarshalBinary(); !errors.Is(err, ErrFactsFile) {
		t.Fatalf("negative text: %v; want ErrFactsFile", err)
	}
}
