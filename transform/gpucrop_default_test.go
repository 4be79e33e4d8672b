//go:build !(cgo && brand_turbojpeg)

package transform

import (
	"strings"
	"testing"
)

// TestCropJPEGPureGo: the pure-Go build cuts nothing, and says which
// build does.
func TestCropJPEGPureGo(t *testing.T) {
	_, _, _, err := CropJPEG(readFixture(t, "photo.jpg"), 0, 0, 8, 8)
	if !NotCut(err) || !strings.Contains(err.Error(), "brand_turbojpeg") {
		t.Errorf("CropJPEG: %v", err)
	}
	c, err := mustGet(t, mustSet(t, `{}`, Options{}), ImagenetTrain).GPUCrop([]byte("kept"), readFixture(t, "photo.jpg"), Key{})
	if !NotCut(err) || string(c.JPEG) != "kept" {
		t.Errorf("GPUCrop: %v, dst %q", err, c.JPEG)
	}
}
