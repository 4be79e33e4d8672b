package chunkindex

import (
	"testing"

	"github.com/brandgw/brand/internal/testsupport/hubtest"
)

// TestNoHubs: no type of the package has over hubtest.MaxMethods
// methods. The Index answers queries and loads its tables; the bytes it
// encodes to are encoding's, so that the wire format does not hang its
// sizes and writers off the Index.
func TestNoHubs(t *testing.T) {
	methods := hubtest.NoHubs(t, ".", hubtest.MaxMethods)
	if len(methods["encoding"]) == 0 {
		t.Error("no methods on encoding: the index's encoding is back on the Index")
	}
}
