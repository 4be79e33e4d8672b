//go:build cgo && brand_turbojpeg

package tensorize

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"image/jpeg"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"github.com/brandgw/brand/internal/gen/photos"
	"github.com/brandgw/brand/transform"
)

// newCutStage is a stage with the built-ins (imagenet-train-gpu among
// them in this build) and "tiny-gpu", whose tensors are smaller than any
// cut JPEG.
func newCutStage(t testing.TB) *Stage {
	t.Helper()
	cfg, err := transform.ParseConfig([]byte(`{"pipelines": {
		"tiny-gpu": {"ops": [{"op": "random_resized_crop", "size": [6, 8]}, {"op": "hflip"}], "output": "gpu_jpeg"},
		"tiny": {"ops": [{"op": "random_resized_crop", "size": [6, 8]}, {"op": "hflip"}]}}}`))
	if err != nil {
		t.Fatal(err)
	}
	set, err := transform.NewSet(cfg, transform.Options{MaxPixels: 4000 * 4000})
	if err != nil {
		t.Fatal(err)
	}
	s := New(Config{Pipelines: set, Workers: 2, Buffers: &budget{size: 1 << 30}, Decodes: decodes(1 << 30), MaxBytes: 1 << 30,
		Registry: prometheus.NewRegistry(), Log: zerolog.Nop()})
	t.Cleanup(s.Close)
	return s
}

// cutBox is a .cut.json member read back.
type cutBox struct {
	Box  [4]int `json:"box"`
	Flip bool   `json:"flip"`
	Size [2]int `json:"size"`
}

// TestApplyCutsForGPU: imagenet-train-gpu serves each JPEG as its cut
// (….cut, a JPEG of the cut's size) and what is left to do (….cut.json:
// imagenet-train's box moved into the cut, its flip, 224×224), a PNG as
// imagenet-train's tensor byte for byte, other members and samples as
// they came; never more bytes than imagenet-train; and the stage applied
// to its own output changes nothing (a peer's cut passes through).
func TestApplyCutsForGPU(t *testing.T) {
	s := newCutStage(t)
	gpu, train := pipeline(t, s, transform.ImagenetTrainGPU), pipeline(t, s, transform.ImagenetTrain)
	jpgs := []string{photo(t, 0, 500, 375), photo(t, 1, 333, 500), photo(t, 2, 64, 48)}
	png := fixture(t, "photo.png")
	var samples []Sample
	for i, j := range jpgs {
		name := "a/" + string(rune('0'+i))
		samples = append(samples, Sample{Name: name, Dataset: "d", Key: transform.SampleKey(7, "d", 0, uint64(i)),
			Data: sampleOf(t, name, [2]string{name + ".cls", "3"}, [2]string{name + ".jpg", j}, [2]string{name + ".json", `{}`})})
	}
	samples = append(samples,
		Sample{Name: "p", Dataset: "d", Key: transform.SampleKey(7, "d", 0, 9), Data: sampleOf(t, "p", [2]string{"p.png", png})},
		Sample{Name: "n", Dataset: "d", Key: transform.SampleKey(7, "d", 0, 10), Data: sampleOf(t, "n", [2]string{"n.cls", "1"})})
	out, err := s.Apply(context.Background(), Request{Pipeline: gpu, Samples: samples})
	if err != nil {
		t.Fatal(err)
	}
	defer out.Release()
	if len(out.Parts) != len(samples) || out.Images != 4 {
		t.Fatalf("%d parts, %d images", len(out.Parts), out.Images)
	}
	for i, j := range jpgs {
		name := samples[i].Name
		got := members(t, out.Parts[i])
		if len(got) != 4 || got[0].name != name+".cls" || got[1].name != name+".cut" || got[2].name != name+".cut.json" || got[3].name != name+".json" {
			t.Fatalf("sample %s: members %v", name, names(got))
		}
		var box cutBox
		if err := json.Unmarshal(got[2].data, &box); err != nil {
			t.Fatalf("sample %s: %q: %v", name, got[2].data, err)
		}
		cfg, err := jpeg.DecodeConfig(bytes.NewReader([]byte(j)))
		if err != nil {
			t.Fatal(err)
		}
		g, err := train.Geometry(cfg.Width, cfg.Height, samples[i].Key)
		if err != nil {
			t.Fatal(err)
		}
		d := g.Draws()
		want := d.Crops[0]
		cut, err := jpeg.DecodeConfig(bytes.NewReader(got[1].data))
		if err != nil {
			t.Fatalf("sample %s: the cut is no JPEG: %v", name, err)
		}
		x0, y0 := want.X-box.Box[0], want.Y-box.Box[1]
		if box.Box[2] != want.W || box.Box[3] != want.H || box.Flip != d.Flips[0] || box.Size != [2]int{224, 224} ||
			x0 < 0 || y0 < 0 || x0%8 != 0 || y0%8 != 0 || box.Box[0] >= 16 || box.Box[1] >= 16 ||
			cut.Width != box.Box[0]+box.Box[2] || cut.Height != box.Box[1]+box.Box[3] {
			t.Errorf("sample %s: box %+v in a %d×%d cut; imagenet-train's box %+v, flip %v", name, box, cut.Width, cut.Height, want, d.Flips[0])
		}
		if len(got[1].data) >= len(j) && want.W*want.H < cfg.Width*cfg.Height/2 {
			t.Errorf("sample %s: a cut of %d bytes from %d", name, len(got[1].data), len(j))
		}
	}
	p := members(t, out.Parts[3])
	if len(p) != 1 || p[0].name != "p.npy" || !bytes.Equal(p[0].data, tensor(t, train, png, samples[3].Key)) {
		t.Errorf("the PNG: members %v, not imagenet-train's tensor", names(p))
	}
	if !bytes.Equal(out.Parts[4], samples[4].Data) {
		t.Error("a sample without images changed")
	}
	tensors, err := s.Apply(context.Background(), Request{Pipeline: train, Samples: samples})
	if err != nil {
		t.Fatal(err)
	}
	defer tensors.Release()
	if out.Bytes > tensors.Bytes/2 {
		t.Errorf("cuts make %d bytes, imagenet-train's tensors %d", out.Bytes, tensors.Bytes)
	}
	again := make([]Sample, len(out.Parts))
	for i, part := range out.Parts {
		again[i] = Sample{Name: samples[i].Name, Dataset: "d", Key: samples[i].Key, Data: part}
	}
	again = again[:3] // the PNG's tensor is no image either; its sample has been tested above
	out2, err := s.Apply(context.Background(), Request{Pipeline: gpu, Samples: again})
	if err != nil {
		t.Fatal(err)
	}
	defer out2.Release()
	for i := range again {
		if !bytes.Equal(out2.Parts[i], again[i].Data) || out2.Images != 0 {
			t.Errorf("sample %d changed when the stage met it cut", i)
		}
	}
}

// TestCutOverTheTensorsRoom: a cut that would take more bytes than the
// tensor (tiny-gpu's 6×8) is served as the tensor, tiny's byte for byte.
func TestCutOverTheTensorsRoom(t *testing.T) {
	s := newCutStage(t)
	jpg := photo(t, 0, 200, 150)
	smp := []Sample{{Name: "a", Dataset: "d", Key: transform.SampleKey(1, "d", 0, 1), Data: sampleOf(t, "a", [2]string{"a.jpg", jpg})}}
	out, err := s.Apply(context.Background(), Request{Pipeline: pipeline(t, s, "tiny-gpu"), Samples: smp})
	if err != nil {
		t.Fatal(err)
	}
	defer out.Release()
	got := members(t, out.Parts[0])
	if len(got) != 1 || got[0].name != "a.npy" || !bytes.Equal(got[0].data, tensor(t, pipeline(t, s, "tiny"), jpg, smp[0].Key)) {
		t.Errorf("members %v, not tiny's tensor", names(got))
	}
	if m, _ := s.Meter("tiny-gpu"); m.Images != 1 || m.CPU <= 0 {
		t.Errorf("tiny-gpu's meter: %+v", m)
	}
}

// TestCutBytesServed: over 300 ImageNet-like photos (TestGPUCropBytes's),
// each a sample of a JPEG and a class, imagenet-train-gpu serves at most
// 0.65 of the samples' bytes as stored (issue 82's goal for an epoch),
// tar headers, padding and the box members included (docs/transform.md
// §13 states the figure).
func TestCutBytesServed(t *testing.T) {
	if testing.Short() {
		t.Skip("300 photos")
	}
	s := newCutStage(t)
	var samples []Sample
	var stored int64
	for i := range 300 {
		ph, err := photos.One(2, i)
		if err != nil {
			t.Fatal(err)
		}
		name := fmt.Sprintf("n%02d/img_%05d", i%10, i)
		d := sampleOf(t, name, [2]string{name + ".cls", fmt.Sprint(i % 10)}, [2]string{name + ".jpg", string(ph.JPEG)})
		stored += int64(len(d))
		samples = append(samples, Sample{Name: name, Dataset: "d", Key: transform.SampleKey(7, "d", 0, uint64(i)), Data: d})
	}
	out, err := s.Apply(context.Background(), Request{Pipeline: pipeline(t, s, transform.ImagenetTrainGPU), Samples: samples})
	if err != nil {
		t.Fatal(err)
	}
	defer out.Release()
	r := float64(out.Bytes) / float64(stored)
	t.Logf("300 samples: %d bytes as stored, %d served: %.3f", stored, out.Bytes, r)
	if r > 0.65 {
		t.Errorf("served %.3f of the bytes as stored; the goal is at most 0.65", r)
	}
}

func names(ms []member) []string {
	var n []string
	for _, m := range ms {
		n = append(n, m.name)
	}
	return n
}

// TestCalibrateCuts: a pipeline for the GPU's decoder is calibrated as
// the stage serves it, each photo cut (so /plan prices the cut, not a
// tensor); imagenet-train is calibrated by its tensors.
func TestCalibrateCuts(t *testing.T) {
	s := newCutStage(t)
	for _, c := range []struct {
		name string
		cut  int
	}{{transform.ImagenetTrainGPU, 3}, {transform.ImagenetTrain, 0}} {
		cal, err := Calibrate(pipeline(t, s, c.name), 3)
		if err != nil {
			t.Fatal(err)
		}
		if cal.Images != 3 || cal.Cut != c.cut || cal.PerImage <= 0 {
			t.Errorf("%s: calibration %+v, want %d of 3 cut", c.name, cal, c.cut)
		}
	}
}
