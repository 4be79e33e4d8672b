package chunkindex

import (
	"testing"

	"github.com/brandgw/brand/internal/testsupport/hubtest"
)

// TestNoHubs: no type of the package has over hubtest.MaxMethods
// methods. The Index answers queries; the bytes it encodes to are
// encoding's, so that the wire format does not hang its sizes and writers
// off the Index; its sample tables (loading them, what memory holds of
// them) are Tables', a whole index's columns and key lookup columns', and
// its line of versions Lineage's.
func TestNoHubs(t *testing.T) {
	methods := hubtest.NoHubs(t, ".", hubtest.MaxMethods)
	for typ, what := range map[string]string{
		"encoding": "the index's encoding",
		"Tables":   "the loading of its sample tables",
		"columns":  "a whole index's columns and key lookup",
		"Lineage":  "its lineage",
	} {
		if len(methods[typ]) == 0 {
			t.Errorf("no methods on %s: %s is back on the Index", typ, what)
		}
	}
}
