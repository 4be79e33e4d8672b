package disktier

import (
	"bytes"
	"testing"

	"github.com/brandgw/brand/internal/cache/chunkcache"
)

// A chunk decoded with some of its fields has a file of its own, whose
// header names the fields; a chunk read whole keeps the name and header
// it had before keys had fields.
func TestHeaderNamesTheFields(t *testing.T) {
	whole := chunkcache.Key{Dataset: "d", Object: "a.parquet#0", ETag: "e"}
	some := whole
	some.Select = "image,label"
	if fileName(whole) == fileName(some) {
		t.Fatal("one file for two selections")
	}
	// sha256("d\x00a.parquet#0\x00e\x00")[:16], as before keys had fields.
	if fileName(whole) != "59771205bc17d245532e6829ea260356.chunk" {
		t.Errorf("a whole chunk's file is renamed: %s", fileName(whole))
	}
	for _, k := range []chunkcache.Key{whole, some} {
		h := encodeHeader(k, 77)
		got, size, n, err := readHeader(bytes.NewReader(h))
		if err != nil || got != k || size != 77 || n != len(h) {
			t.Errorf("%v: read back %v %d %d %v", k, got, size, n, err)
		}
	}
}
