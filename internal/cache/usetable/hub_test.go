package usetable

import (
	"testing"

	"github.com/brandgw/brand/internal/testsupport/hubtest"
)

// TestNoHubs: no type of the package has over hubtest.MaxMethods
// methods. The Table keeps the streams and the chunk-use table built
// from them; the line for turns (line) and the time frame (frame) are
// types of their own, so that a turn's rule or the clock does not hang
// another method off the table.
func TestNoHubs(t *testing.T) {
	methods := hubtest.NoHubs(t, ".", hubtest.MaxMethods)
	for _, typ := range []string{"line", "frame"} {
		if len(methods[typ]) == 0 {
			t.Errorf("no methods on %s: the turns or the clock are back on the Table", typ)
		}
	}
}
