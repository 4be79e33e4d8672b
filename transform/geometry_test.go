package transform

import (
	"bytes"
	"errors"
	"testing"
)

// TestGeometryMatchesApply: a Geometry applied to an image's decoded
// pixels gives what Pipeline.Apply gives for that image and key (HWC),
// byte for byte, for pipelines that crop, pad, resize and flip, on one
// Scratch reused across images of several sizes; the image handed in is
// never written.
func TestGeometryMatchesApply(t *testing.T) {
	set := mustSet(t, `{"pipelines": {
		"train-hwc": {"ops": [{"op": "random_resized_crop", "size": [20, 28], "scale": [0.3, 1]}, {"op": "hflip"}], "layout": "hwc"},
		"eval-hwc": {"ops": [{"op": "resize", "size": 20}, {"op": "center_crop", "size": 16}], "layout": "hwc"},
		"pad-flip": {"ops": [{"op": "hflip", "p": 1}, {"op": "center_crop", "size": [40, 64]}, {"op": "hflip"}], "layout": "hwc"},
		"flip-only": {"ops": [{"op": "hflip", "p": 0.5}], "layout": "hwc"},
		"none": {"ops": [], "layout": "hwc"}}}`, Options{})
	data := readFixture(t, "photo.png")
	src, err := decodeAll(t, data, IgnoreEXIF, nil, StdJPEG{})
	if err != nil {
		t.Fatal(err)
	}
	var sc Scratch
	for _, name := range []string{"train-hwc", "eval-hwc", "pad-flip", "flip-only", "none"} {
		p := mustGet(t, set, name)
		for sample := range uint64(16) {
			key := Key{Seed: 11, Epoch: 2, Sample: sample}
			res, err := p.Apply(nil, data, key, nil)
			if err != nil {
				t.Fatal(err)
			}
			want := tensorHWC(t, res.Out, HWC)
			g, err := p.Geometry(src.w, src.h, key)
			if err != nil {
				t.Fatal(err)
			}
			in := bytes.Clone(src.pix)
			got, err := g.Apply(&sc, in)
			if err != nil {
				t.Fatal(err)
			}
			if w, h := g.Size(); w != want.w || h != want.h || !bytes.Equal(got, want.pix) {
				t.Fatalf("%s sample %d: the geometry's %d×%d output differs from Apply's %d×%d", name, sample, w, h, want.w, want.h)
			}
			if !bytes.Equal(in, src.pix) {
				t.Fatalf("%s sample %d: Apply wrote into its input", name, sample)
			}
			if g.Work() < int64(len(got)) {
				t.Fatalf("%s: Work %d under its output's %d bytes", name, g.Work(), len(got))
			}
		}
	}
	if _, err := mustGet(t, set, "none").Geometry(1<<14, 1<<14, Key{}); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("a 16k×16k geometry: %v, want ErrTooLarge", err)
	}
	if _, err := mustGet(t, set, "none").Geometry(0, 10, Key{}); !errors.Is(err, ErrDecode) {
		t.Fatalf("a 0×10 geometry: %v", err)
	}
}
