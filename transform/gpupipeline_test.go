package transform

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

// TestGPUPipelineBuild: imagenet-train-gpu is imagenet-train's operators
// sending cuts, where a build can cut; the pure-Go build refuses it by
// name with ErrNeedsTurboJPEG naming the build tag, and refuses a
// configured pipeline of Output GPUJPEG as an invalid spec.
func TestGPUPipelineBuild(t *testing.T) {
	s := mustSet(t, `{}`, Options{})
	p, err := s.Get(ImagenetTrainGPU)
	if canCut {
		if err != nil || !p.CutsForGPU() || mustGet(t, s, ImagenetTrain).CutsForGPU() {
			t.Fatalf("Get(%q) in a build that cuts: %v", ImagenetTrainGPU, err)
		}
		train := mustGet(t, s, ImagenetTrain)
		if p.Fingerprint() == train.Fingerprint() {
			t.Error("imagenet-train-gpu has imagenet-train's fingerprint: its bytes are not imagenet-train's")
		}
		if got, want := p.Spec().Ops, train.Spec().Ops; len(got) != len(want) {
			t.Errorf("imagenet-train-gpu's operators %v, imagenet-train's %v", got, want)
		}
		return
	}
	if !errors.Is(err, ErrNeedsTurboJPEG) || !strings.Contains(err.Error(), "brand_turbojpeg") {
		t.Errorf("Get(%q) in the pure-Go build: %v", ImagenetTrainGPU, err)
	}
	c, err := ParseConfig([]byte(`{"pipelines": {"g": {"ops": [{"op": "resize", "size": 8}], "output": "gpu_jpeg"}}}`))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := NewSet(c, Options{}); !errors.Is(err, ErrSpec) || !strings.Contains(err.Error(), "brand_turbojpeg") {
		t.Errorf("a gpu_jpeg pipeline configured in the pure-Go build: %v", err)
	}
}

// TestOutputSpec: an output other than absent or gpu_jpeg is refused.
func TestOutputSpec(t *testing.T) {
	c, err := ParseConfig([]byte(`{"pipelines": {"g": {"ops": [], "output": "png"}}}`))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := NewSet(c, Options{}); !errors.Is(err, ErrSpec) || !strings.Contains(err.Error(), `output "png"`) {
		t.Errorf("output png: %v", err)
	}
}

// TestCutNames: an image member's cut and box members, neither an
// image's name.
func TestCutNames(t *testing.T) {
	for _, tt := range []struct{ in, jpeg, box string }{
		{"n01/img_13.jpg", "n01/img_13.cut", "n01/img_13.cut.json"},
		{"a.b/c.JPEG", "a.b/c.cut", "a.b/c.cut.json"},
		{"x.png", "x.cut", "x.cut.json"},
		{"x.txt", "", ""},
	} {
		j, b, ok := CutNames(tt.in)
		if j != tt.jpeg || b != tt.box || ok != (tt.jpeg != "") {
			t.Errorf("CutNames(%q) = %q, %q, %v", tt.in, j, b, ok)
		}
		for _, n := range []string{j, b} {
			if _, img := OutputName(n); img {
				t.Errorf("CutNames(%q) gives %q, an image's name", tt.in, n)
			}
		}
	}
}

// TestAppendBox: the box member is the JSON documented, fields in order,
// read back by encoding/json.
func TestAppendBox(t *testing.T) {
	c := GPUCrop{Crop: Rect{X: 3, Y: 15, W: 180, H: 201}, Flip: true, Out: [2]int{224, 160}}
	got := string(c.AppendBox([]byte("x")))
	if want := `x{"box":[3,15,180,201],"flip":true,"size":[160,224]}`; got != want {
		t.Fatalf("AppendBox = %s, want %s", got, want)
	}
	var v struct {
		Box  [4]int
		Flip bool
		Size [2]int
	}
	if err := json.Unmarshal([]byte(got[1:]), &v); err != nil || v.Box != [4]int{3, 15, 180, 201} || !v.Flip || v.Size != [2]int{160, 224} {
		t.Errorf("read back: %+v, %v", v, err)
	}
	big := GPUCrop{Crop: Rect{X: 1 << 14, Y: 1 << 14, W: 1 << 14, H: 1 << 14}, Out: [2]int{1 << 14, 1 << 14}}
	if n := len(big.AppendBox(nil)); n > 80 {
		t.Errorf("a box of %d bytes, over the 80 documented", n)
	}
}
