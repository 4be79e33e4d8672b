package framesize

import "testing"

// TestFits: the bound's edges, a side and the pixels, each alone.
func TestFits(t *testing.T) {
	cases := []struct {
		w, h int
		fits bool
	}{
		{7680, 4320, true},    // 8K UHD
		{8192, 4320, true},    // DCI 8K
		{8192, 4352, true},    // the pixel bound exactly
		{8192, 4354, false},   // two rows over it
		{16000, 2000, true},   // a panorama: 32 M pixels
		{16384, 2176, true},   // the side bound exactly, pixels exactly
		{16385, 2, false},     // a side over
		{2, 16385, false},     // the other side over
		{16384, 16384, false}, // 16k × 16k
		{0, 48, false},        // no pixels
		{64, -1, false},       // no pixels
	}
	for _, c := range cases {
		if got := Default().Fits(c.w, c.h); got != c.fits {
			t.Errorf("%d×%d: fits %v, want %v", c.w, c.h, got, c.fits)
		}
	}
	if b := (Bound{Pixels: 64 * 47}); b.Fits(64, 48) || !b.Fits(64, 47) || b.WithDefaults().Side != MaxSide {
		t.Errorf("a smaller pixel bound: %+v", b.WithDefaults())
	}
	if got, want := Default().String(), "at most 16384 a side and 35651584 pixels"; got != want {
		t.Errorf("%q, want %q", got, want)
	}
}
