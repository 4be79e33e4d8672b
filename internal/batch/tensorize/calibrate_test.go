package tensorize

import "testing"

// TestCalibrate: a calibration runs the pipeline and decoding alone over
// the photos it is asked for and reports their CPU per image, and a
// decoded image's bytes per byte of its JPEG, which a plan weighs the
// cache against (a photo's JPEG is several times smaller than its
// pixels).
func TestCalibrate(t *testing.T) {
	s := newStage(t, &budget{size: 1 << 20}, 1, 1<<20)
	c, err := Calibrate(pipeline(t, s, "tiny"), 2)
	if err != nil {
		t.Fatal(err)
	}
	if c.Images != 2 || c.PerImage <= 0 || c.DecodePerImage <= 0 || c.DecodedFactor < 2 {
		t.Errorf("calibration %+v", c)
	}
}
