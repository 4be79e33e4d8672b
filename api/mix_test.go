package api

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
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

// TestIntWeightsSmallEqualsBig: the 64-bit path of IntWeights gives the
// arbitrary-precision path's weights for every mixture it takes, and
// leaves every one that path refuses to it.
func TestIntWeightsSmallEqualsBig(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	digits := func(n int) string {
		b := make([]byte, n)
		for i := range b {
			b[i] = byte('0' + rng.IntN(10))
		}
		return string(b)
	}
	weight := func() string {
		switch rng.IntN(8) {
		case 0:
			return digits(1 + rng.IntN(3))
		case 1:
			return digits(1+rng.IntN(20)) + "." + digits(rng.IntN(8)) // long: past 18 digits, or 7 decimals
		case 2:
			return "0"
		case 3:
			return digits(1) + "."
		default:
			return digits(1+rng.IntN(2)) + "." + digits(1+rng.IntN(6))
		}
	}
	small := 0
	for range 20000 {
		var m Mix
		for i := range 1 + rng.IntN(4) {
			m = append(m, MixComponent{Dataset: string(rune('a' + i)), Weight: weight()})
		}
		want, err := m.intWeightsBig()
		got, ok := m.intWeightsSmall()
		if !ok {
			continue
		}
		small++
		if err != nil || !slices.Equal(got, want) {
			t.Fatalf("%s: the 64-bit path gives %v, the exact one %v (%v)", m, got, want, err)
		}
	}
	if small < 10000 {
		t.Fatalf("only %d of 20000 mixtures took the 64-bit path", small)
	}
	for _, s := range []string{"a:0.7,b:0.2,c:0.1", "a:1,b:1", "a:0.5,b:0.50", "a:3,b:0.000001", "a:007.50,b:2.5"} {
		m, err := ParseMix(s)
		if err != nil {
			t.Fatal(err)
		}
		got, ok := m.intWeightsSmall()
		want, _ := m.intWeightsBig()
		if !ok || !slices.Equal(got, want) {
			t.Errorf("%s: %v %t, want %v", s, got, ok, want)
		}
	}
}
