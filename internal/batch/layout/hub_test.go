package layout

import (
	"testing"

	"github.com/brandgw/brand/internal/testsupport/hubtest"
)

// TestNoHubs: no type of the package has over hubtest.MaxMethods
// methods. Orders lays out every kind of job; assigning a job's global
// batches to its ranks (locality, balance=) is the assigner's, and a
// job's chain of edits is Edits', so that a cost, a rule of shares or an
// edit does not hang another method off Orders (38 methods with the
// balancing alone on it).
func TestNoHubs(t *testing.T) {
	methods := hubtest.NoHubs(t, ".", hubtest.MaxMethods)
	for _, part := range []string{"assigner", "Edits"} {
		if len(methods[part]) == 0 {
			t.Errorf("no methods on %s: its work is back on Orders", part)
		}
	}
}
