package layout

import (
	"testing"

	"github.com/brandgw/brand/internal/testsupport/hubtest"
)

// TestNoHubs: no type of the package has over hubtest.MaxMethods
// methods. Orders lays out every kind of job; balancing a job's global
// batches across its ranks (balance=) is the balancer's, so that a cost
// or a rule of shares does not hang another method off Orders (38
// methods with the balancer's nine on it).
func TestNoHubs(t *testing.T) {
	methods := hubtest.NoHubs(t, ".", hubtest.MaxMethods)
	if len(methods["balancer"]) == 0 {
		t.Errorf("no methods on balancer: balancing is back on Orders")
	}
}
