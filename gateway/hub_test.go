package gateway

import (
	"reflect"
	"slices"
	"testing"

	"github.com/brandgw/brand/internal/testsupport/hubtest"
)

// TestNoHubs: no type of the package has over hubtest.MaxMethods
// methods. The *Gateway wires the parts and serves the API's
// entry points; readiness, the listings and the peers' and importance
// endpoints are parts of their own, so that a feature does not hang
// another method off the hub.
func TestNoHubs(t *testing.T) {
	methods := hubtest.NoHubs(t, ".", hubtest.MaxMethods)
	// The source and the compiler agree on Gateway's API.
	var api []string
	typ := reflect.TypeFor[*Gateway]()
	for i := range typ.NumMethod() {
		api = append(api, typ.Method(i).Name)
	}
	if got := hubtest.Exported(methods["Gateway"]); !slices.Equal(got, api) {
		t.Errorf("Gateway's exported methods in the source: %v; reflect: %v", got, api)
	}
}
