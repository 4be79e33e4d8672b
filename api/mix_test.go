package api

import (
	"errors"
	"fmt"
	"testing"
)

func TestParseMix(t *testing.T) {
	for _, tc := range []struct {
		in, weights string
	}{
		{"web:0.7,code:0.2,books:0.1", "[7 2 1]"},
		{"a:1,b:1", "[1 1]"},
		{"a:2.5,b:5", "[1 2]"},
		{"a:0.333333,b:0.666667", "[333333 666667]"},
		{"only:3", "[1]"},
	} {
		m, err := ParseMix(tc.in)
		if err != nil {
			t.Fatalf("%s: %v", tc.in, err)
		}
		w, _ := m.IntWeights()
		if fmt.Sprint(w) != tc.weights || m.String() != tc.in {
			t.Errorf("%s: weights %v (want %s), written %q", tc.in, w, tc.weights, m.String())
		}
	}
	for _, bad := range []string{"web", "web:", ":1", "a:1,a:2", "a:0", "a:-1", "a:1e3", "a:x", "a:0.1234567", "a:1,,b:1", "a:1/2", "a:99999999999,b:0.000001", "a:0x10", "a:0b11", "a:1_0", "a:0x1p4", "a:.5", "a:1.2.3"} {
		if _, err := ParseMix(bad); !errors.Is(err, ErrMix) {
			t.Errorf("%q: err %v, want ErrMix", bad, err)
		}
	}
}
