package transform

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/brandgw/brand/internal/gen/photos"
	"github.com/brandgw/brand/internal/testsupport/pythontest"
)

// pillowCase is one image through one pipeline, for pil_reference.py.
type pillowCase struct {
	Image    string `json:"image"`
	Pipeline string `json:"pipeline"`
	Seed     uint64 `json:"seed"`
	Epoch    uint64 `json:"epoch"`
	Sample   uint64 `json:"sample"`
}

// runPillow has pil_reference.py compute the cases with Pillow and
// returns each one's HWC pixels.
func runPillow(t *testing.T, python string, cases []pillowCase) [][]byte {
	t.Helper()
	dir := t.TempDir()
	in, _ := json.Marshal(cases)
	if err := os.WriteFile(filepath.Join(dir, "cases.json"), in, 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, python, "testdata/pil_reference.py", "apply", filepath.Join(dir, "cases.json"), dir)
	cmd.Env = append(os.Environ(), "PYTHONPATH="+filepath.Join("..", "python"))
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("pil_reference.py: %v\n%s", err, out)
	}
	raws := make([][]byte, len(cases))
	for i := range cases {
		b, err := os.ReadFile(filepath.Join(dir, fmt.Sprintf("%d.raw", i)))
		if err != nil {
			t.Fatal(err)
		}
		raws[i] = b
	}
	return raws
}

// Bounds of the pipelines against torchvision's with Pillow on the same
// images (docs/transform.md §6). A decoder that decodes as Pillow does
// (TurboJPEG, at full size) must match exactly; the pure-Go decoder
// differs by its IDCT; a reduced-size decode by the DCT scaling's
// averaging, which is what PIL's draft would give.
//
// mean is over every case; for a reduced decode, over the images decoded
// at reduced size (the others are full decodes, equal to Pillow's).
var pillowBounds = map[string]struct {
	max  int
	mean float64
}{
	"go":                {max: 3, mean: 0.05},
	"turbojpeg":         {max: 0, mean: 0},
	"turbojpeg-reduced": {max: 48, mean: 2},
}

// TestPillowPipelines runs imagenet-train and imagenet-eval over photo-like
// JPEGs and the lossless fixture in Go and in Pillow as torchvision does
// (with the crop boxes and flips of the Python reference of the draws,
// and eval's geometry computed by the script), and bounds the
// differences per decoder.
func TestPillowPipelines(t *testing.T) {
	python := pythontest.Need(t, "scripts/ensure-pil.sh", "PIL")
	dir := t.TempDir()
	var images []string
	ps, err := photos.Generate(11, 24)
	if err != nil {
		t.Fatal(err)
	}
	// Large photos, whose crops are often twice the output or more: the
	// reduced-size decode's cases.
	for i := range 6 {
		p, err := photos.Sized(12, i, 1100+50*i, 900-40*i, 85)
		if err != nil {
			t.Fatal(err)
		}
		ps = append(ps, p)
	}
	for _, p := range ps {
		path := filepath.Join(dir, p.Name)
		if err := os.WriteFile(path, p.JPEG, 0o644); err != nil {
			t.Fatal(err)
		}
		images = append(images, path)
	}
	images = append(images, "testdata/photo.png", "testdata/photo.jpg", "testdata/gray.jpg", "testdata/progressive.jpg", "testdata/photo422.jpg")
	var cases []pillowCase
	for i, img := range images {
		for _, name := range []string{ImagenetTrain, ImagenetEval} {
			abs, _ := filepath.Abs(img)
			cases = append(cases, pillowCase{Image: abs, Pipeline: name, Seed: 7, Epoch: uint64(i % 3), Sample: uint64(1000 + i)})
		}
	}
	want := runPillow(t, python, cases)

	for _, dec := range decoders() {
		for _, reduced := range []bool{false, true} {
			label := dec.Name()
			if reduced {
				label += "-reduced"
			}
			bound, ok := pillowBounds[label]
			if !ok {
				continue // a decoder that cannot reduce: the same as full size
			}
			t.Run(label, func(t *testing.T) {
				maxd, sum, n, scaled := 0, 0.0, 0, 0
				scaledSum := 0.0
				for i, c := range cases {
					spec := Builtins()[c.Pipeline]
					spec.Layout = HWC
					spec.ReducedDecode = &reduced
					p, err := New(c.Pipeline, spec, Options{JPEG: dec})
					if err != nil {
						t.Fatal(err)
					}
					res, err := p.Apply(nil, readFixture(t, mustRel(t, c.Image)), Key{Seed: c.Seed, Epoch: c.Epoch, Sample: c.Sample}, nil)
					if err != nil {
						t.Fatal(err)
					}
					got := tensorHWC(t, res.Out, HWC)
					d, mean := diff(t, got, image8{pix: want[i], w: 224, h: 224})
					if res.Denom > 1 {
						scaled++
						scaledSum += mean
					}
					maxd = max(maxd, d)
					sum += mean
					n++
					if !reduced && dec.Name() == "turbojpeg" && d != 0 {
						t.Errorf("%s %s: max |Δ| %d from Pillow with the same decoder, want 0", filepath.Base(c.Image), c.Pipeline, d)
					}
				}
				t.Logf("%d cases: max |Δ| %d, mean |Δ| %.4f; %d decoded at reduced size, mean |Δ| %.4f over those",
					n, maxd, sum/float64(n), scaled, scaledSum/float64(max(scaled, 1)))
				mean := sum / float64(n)
				if reduced {
					mean = scaledSum / float64(max(scaled, 1))
				}
				if maxd > bound.max || mean > bound.mean {
					t.Errorf("max |Δ| %d, mean %.4f from Pillow: beyond %d, %.4f", maxd, mean, bound.max, bound.mean)
				}
				if reduced && scaled == 0 {
					t.Error("no image was decoded at reduced size: the bound was not exercised")
				}
			})
		}
	}
}

// mustRel makes an absolute path relative to testdata for readFixture.
func mustRel(t *testing.T, abs string) string {
	t.Helper()
	td, _ := filepath.Abs("testdata")
	rel, err := filepath.Rel(td, abs)
	if err != nil {
		t.Fatal(err)
	}
	return rel
}

// TestPillowBuckets holds the shape buckets' pipelines (resize to cover,
// centre crop; BucketSpec) to Pillow's resize and crop computed
// independently by pil_reference.py, over photos of many aspect ratios,
// each into buckets wider, taller and square, within each decoder's
// bound at full-size decode.
func TestPillowBuckets(t *testing.T) {
	python := pythontest.Need(t, "scripts/ensure-pil.sh", "PIL")
	dir := t.TempDir()
	sides := [][2]int{{320, 200}, {200, 320}, {257, 255}, {401, 133}, {150, 600}, {333, 250}}
	buckets := [][2]int{{96, 96}, {64, 128}, {128, 64}, {72, 120}}
	var cases []pillowCase
	for i, s := range sides {
		p, err := photos.Sized(13, i, s[0], s[1], 90)
		if err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(dir, p.Name)
		if err := os.WriteFile(path, p.JPEG, 0o644); err != nil {
			t.Fatal(err)
		}
		for _, b := range buckets {
			cases = append(cases, pillowCase{Image: path, Pipeline: BucketName(b[0], b[1], false, 0)})
		}
	}
	want := runPillow(t, python, cases)
	for _, dec := range decoders() {
		bound, ok := pillowBounds[dec.Name()]
		if !ok {
			continue
		}
		t.Run(dec.Name(), func(t *testing.T) {
			maxd, sum := 0, 0.0
			for i, c := range cases {
				spec, err := BucketSpec(c.Pipeline)
				if err != nil {
					t.Fatal(err)
				}
				full := false
				spec.Layout, spec.ReducedDecode = HWC, &full
				p, err := New(c.Pipeline, spec, Options{JPEG: dec})
				if err != nil {
					t.Fatal(err)
				}
				data, err := os.ReadFile(c.Image)
				if err != nil {
					t.Fatal(err)
				}
				res, err := p.Apply(nil, data, Key{}, nil)
				if err != nil {
					t.Fatal(err)
				}
				h, w := spec.Ops[0].Size.H, spec.Ops[0].Size.W
				d, mean := diff(t, tensorHWC(t, res.Out, HWC), image8{pix: want[i], w: w, h: h})
				maxd, sum = max(maxd, d), sum+mean
			}
			mean := sum / float64(len(cases))
			t.Logf("%d cases: max |Δ| %d, mean |Δ| %.4f", len(cases), maxd, mean)
			if maxd > bound.max || mean > bound.mean {
				t.Errorf("max |Δ| %d, mean %.4f from Pillow: beyond %d, %.4f", maxd, mean, bound.max, bound.mean)
			}
		})
	}
}
