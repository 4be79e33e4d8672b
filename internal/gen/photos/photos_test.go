package photos

import (
	"bytes"
	"image/jpeg"
	"testing"
)

// TestSizes: the set has the advertised statistics — sides 300 to 500,
// quality 75 to 95, a mean file size of 77 KiB ± 10 % — and decodes.
func TestSizes(t *testing.T) {
	ps, err := Generate(1, 100)
	if err != nil {
		t.Fatal(err)
	}
	total := 0
	for _, p := range ps {
		if p.W < 300 || p.W > 500 || p.H < 300 || p.H > 500 || p.Quality < 75 || p.Quality > 95 {
			t.Errorf("%s: %d×%d at quality %d", p.Name, p.W, p.H, p.Quality)
		}
		cfg, err := jpeg.DecodeConfig(bytes.NewReader(p.JPEG))
		if err != nil || cfg.Width != p.W || cfg.Height != p.H {
			t.Errorf("%s: %+v %v", p.Name, cfg, err)
		}
		total += len(p.JPEG)
	}
	mean := float64(total) / float64(len(ps)) / 1024
	t.Logf("mean %.1f KiB", mean)
	if mean < 69 || mean > 85 {
		t.Errorf("mean file size %.1f KiB, want 77 ± 10 %%", mean)
	}
}

// TestDeterministic: the same seed and index give the same bytes.
func TestDeterministic(t *testing.T) {
	a, _ := One(3, 17)
	b, _ := One(3, 17)
	c, _ := One(3, 18)
	if !bytes.Equal(a.JPEG, b.JPEG) || bytes.Equal(a.JPEG, c.JPEG) {
		t.Error("photos are not a function of (seed, index)")
	}
}
