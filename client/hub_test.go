package client_test

import (
	"reflect"
	"slices"
	"testing"

	"github.com/brandgw/brand/client"
	"github.com/brandgw/brand/internal/testsupport/hubtest"
)

// TestNoHubs: no type of the package has over hubtest.MaxMethods
// methods. Client is the API; its transport (routing, retries, probes,
// the membership pin) and its pins (what answers pinned of the order)
// are types of their own, so that a method added to one concern does not
// land on a type that knows all of them.
func TestNoHubs(t *testing.T) {
	methods := hubtest.NoHubs(t, ".", hubtest.MaxMethods)
	// The source and the compiler agree on Client's API.
	var api []string
	typ := reflect.TypeFor[*client.Client]()
	for i := range typ.NumMethod() {
		api = append(api, typ.Method(i).Name)
	}
	if got := hubtest.Exported(methods["Client"]); !slices.Equal(got, api) {
		t.Errorf("Client's exported methods in the source: %v; reflect: %v", got, api)
	}
}
