package transform

import (
	"errors"
	"path/filepath"
	"testing"
)

// TestDisplayedDims: an image's displayed size is what Pillow shows of it
// (the shape of the fixture make_fixtures.py wrote from
// ImageOps.exif_transpose for the exif-* JPEGs, from the image as stored
// for the rest), and its stored size Dims's; an orientation of 6 or 8
// swaps them, of 3 does not. A prefix holding the header and the APP
// segments answers as the whole file does; what Dims refuses it refuses
// with the same sentinel.
func TestDisplayedDims(t *testing.T) {
	for _, tc := range []struct {
		file, pil string
		swapped   bool
	}{
		{"photo.jpg", "photo.jpg.pil.npy", false},
		{"photo.png", "photo.png.pil.npy", false},
		{"palette.png", "palette.png.pil.npy", false},
		{"exif-3.jpg", "exif-3.jpg.exif.pil.npy", false},
		{"exif-6.jpg", "exif-6.jpg.exif.pil.npy", true},
		{"exif-8.jpg", "exif-8.jpg.exif.pil.npy", true},
	} {
		img := readFixture(t, tc.file)
		want := readNPY(t, filepath.Join("testdata", tc.pil))
		w, h, err := DisplayedDims(img, 0)
		if err != nil || w != want.w || h != want.h {
			t.Errorf("%s: %d×%d, %v; Pillow shows %d×%d", tc.file, w, h, err, want.w, want.h)
		}
		sw, sh, err := Dims(img, 0)
		if err != nil || (sw != w || sh != h) != tc.swapped || tc.swapped && (sw != h || sh != w) {
			t.Errorf("%s: stored %d×%d, %v; displayed %d×%d (swapped: %v)", tc.file, sw, sh, err, w, h, tc.swapped)
		}
		// The header, with its EXIF, ends well before the first 1 KiB
		// of these fixtures' scans.
		if pw, ph, err := DisplayedDims(img[:min(len(img), 1024)], 0); err != nil || pw != w || ph != h {
			t.Errorf("%s: its first KiB: %d×%d, %v; want %d×%d", tc.file, pw, ph, err, w, h)
		}
	}
	for _, tc := range []struct {
		file     string
		sentinel error
	}{{"bomb.jpg", ErrTooLarge}, {"bomb.png", ErrTooLarge}, {"garbage.jpg", ErrDecode}} {
		if _, _, err := DisplayedDims(readFixture(t, tc.file), 0); !errors.Is(err, tc.sentinel) {
			t.Errorf("%s: %v; want %v", tc.file, err, tc.sentinel)
		}
	}
	if _, _, err := DisplayedDims(readFixture(t, "exif-6.jpg"), 48*32-1); !errors.Is(err, ErrTooLarge) {
		t.Errorf("exif-6.jpg past a bound of one pixel fewer: %v; want ErrTooLarge", err)
	}
}
