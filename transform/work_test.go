package transform

import (
	"bytes"
	"context"
	"fmt"
	"image"
	"image/color"
	"image/jpeg"
	"image/png"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/brandgw/brand/internal/testsupport/cmdtest"
	"github.com/brandgw/brand/internal/testsupport/pythontest"
)

// workKinds are the kinds of image work_images.py writes, each a layout
// the decoders hold differently.
var workKinds = []string{"prog420", "prog444", "base420", "base444", "gprog", "gbase", "cmyk", "cmykprog", "rgb8png", "rgba8png", "palpng"}

// pillowImages writes w×h images of kinds with Pillow (work_images.py)
// and returns them by kind.
func pillowImages(t testing.TB, python string, w, h int, kinds ...string) map[string][]byte {
	t.Helper()
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	args := append([]string{"testdata/work_images.py", dir, strconv.Itoa(w), strconv.Itoa(h)}, kinds...)
	if out, err := exec.CommandContext(ctx, python, args...).CombinedOutput(); err != nil {
		t.Fatalf("work_images.py: %v\n%s", err, out)
	}
	imgs := map[string][]byte{}
	files, _ := filepath.Glob(filepath.Join(dir, "*"))
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		name := filepath.Base(f)
		imgs[name[:len(name)-len(filepath.Ext(name))]] = b
	}
	return imgs
}

// goImages are w×h images of the kinds Go's encoders write: a baseline
// 4:2:0 and a gray JPEG, and a PNG of every colour type image/png writes.
func goImages(t testing.TB, w, h int) map[string][]byte {
	t.Helper()
	r := image.Rect(0, 0, w, h)
	rgba, nrgba, rgba64, nrgba64 := image.NewRGBA(r), image.NewNRGBA(r), image.NewRGBA64(r), image.NewNRGBA64(r)
	gray, gray16, pal := image.NewGray(r), image.NewGray16(r), image.NewPaletted(r, color.Palette{color.Black, color.White, color.NRGBA{200, 10, 10, 128}})
	for y := range h {
		for x := range w {
			v := uint8((x*7 + y*3) % 256)
			rgba.Set(x, y, color.RGBA{v, 255 - v, v / 2, 255})
			nrgba.Set(x, y, color.NRGBA{v, 255 - v, v / 2, v | 1})
			rgba64.Set(x, y, color.RGBA64{uint16(v) << 8, 0xffff - uint16(v)<<8, 300, 0xffff})
			nrgba64.Set(x, y, color.NRGBA64{uint16(v) << 8, 7, 300, uint16(v)<<8 | 1})
			gray.SetGray(x, y, color.Gray{v})
			gray16.SetGray16(x, y, color.Gray16{uint16(v) << 8})
			pal.SetColorIndex(x, y, v%3)
		}
	}
	out := map[string][]byte{}
	enc := func(name string, f func(*bytes.Buffer) error) {
		var b bytes.Buffer
		if err := f(&b); err != nil {
			t.Fatal(err)
		}
		out[name] = b.Bytes()
	}
	enc("go-jpeg420", func(b *bytes.Buffer) error { return jpeg.Encode(b, rgba, nil) })
	enc("go-jpeggray", func(b *bytes.Buffer) error { return jpeg.Encode(b, gray, nil) })
	for name, m := range map[string]image.Image{"go-rgb8": rgba, "go-rgba8": nrgba, "go-rgb16": rgba64, "go-rgba16": nrgba64,
		"go-gray8": gray, "go-gray16": gray16, "go-pal": pal} {
		enc(name, func(b *bytes.Buffer) error { return png.Encode(b, m) })
	}
	return out
}

// workPipelines are pipelines that read an image differently: a crop
// decoded in part, a resize of the whole, the whole image kept, and the
// whole turned by its EXIF orientation.
func workPipelines(t testing.TB, dec JPEGDecoder) []*Pipeline {
	t.Helper()
	b := Builtins()
	specs := map[string]Spec{
		"imagenet-train": b[ImagenetTrain], "imagenet-eval": b[ImagenetEval], "whole": {Ops: []Op{}},
		"padded": {Ops: []Op{{Op: OpCenterCrop, Size: Size{H: 4000, W: 300}}}},
		"exif":   {Ops: []Op{{Op: OpResize, Size: Size{H: 100, W: 100, Square: true}}}, EXIF: ApplyEXIF},
	}
	var ps []*Pipeline
	for name, s := range specs {
		p, err := New(name, s, Options{JPEG: dec})
		if err != nil {
			t.Fatal(err)
		}
		ps = append(ps, p)
	}
	sort.Slice(ps, func(i, j int) bool { return ps[i].Name() < ps[j].Name() })
	return ps
}

// allocated is what Apply allocates for image: all of the pure-Go
// decoder's memory (the collector may take some back before the call
// ends; none of it is counted twice).
func allocated(t *testing.T, p *Pipeline, img []byte, key Key, out int) uint64 {
	t.Helper()
	dst := make([]byte, 0, out)
	runtime.GC()
	var m0, m1 runtime.MemStats
	runtime.ReadMemStats(&m0)
	_, err := p.Apply(dst, img, key, new(Scratch))
	runtime.ReadMemStats(&m1)
	if err != nil {
		t.Fatal(err)
	}
	return m1.TotalAlloc - m0.TotalAlloc
}

// TestWorkBound: Footprint.Work is at least what the pure-Go decoder
// allocates for every kind of image and pipeline — what a server admits
// a decode by — and not much more (a quarter, and 2 MiB), so that it
// does not hold decodes back for memory they never take.
func TestWorkBound(t *testing.T) {
	check := func(t *testing.T, imgs map[string][]byte) {
		for _, p := range workPipelines(t, StdJPEG{}) {
			// A second key draws other crops and flips; a pipeline that
			// draws none does the same work for every key, so one is
			// enough for it.
			keys := []Key{{Seed: 1}}
			if pl := p.makePlan(1200, 900, keys[0]); len(pl.crops)+len(pl.flips) > 0 {
				keys = append(keys, Key{Seed: 2, Sample: 9})
			}
			for _, name := range sortedKeys(imgs) {
				img := imgs[name]
				for _, key := range keys {
					f, err := p.Footprint(img, key)
					if err != nil {
						t.Fatal(err)
					}
					got := allocated(t, p, img, key, f.Out)
					if int64(got) > f.Work || f.Work > int64(got)*5/4+2<<20 {
						t.Errorf("%s with %s, key %v: Apply allocated %.2f MB, Work says %.2f MB", name, p.Name(), key, float64(got)/1e6, float64(f.Work)/1e6)
					}
				}
			}
		}
	}
	t.Run("go-encoded", func(t *testing.T) {
		imgs := goImages(t, 1200, 900)
		for _, f := range []string{"exif-6.jpg", "exif-3.jpg", "cmyk.jpg", "progressive.jpg", "photo444.jpg", "gray-alpha.png", "alpha.png"} {
			imgs[f] = readFixture(t, f)
		}
		check(t, imgs)
	})
	t.Run("pillow", func(t *testing.T) {
		check(t, pillowImages(t, pythontest.Need(t, "scripts/ensure-pil.sh", "PIL"), 1200, 900, workKinds...))
	})
}

func sortedKeys(m map[string][]byte) []string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}

// TestMaxWork: the set's bound covers every kind at the pixel bound, and
// the worst kind for the pure-Go decoder (a progressive CMYK JPEG: 27
// bytes a pixel) decides it.
func TestMaxWork(t *testing.T) {
	const px = DefaultMaxPixels
	set, err := NewSet(Config{}, Options{MaxPixels: px, JPEG: StdJPEG{}})
	if err != nil {
		t.Fatal(err)
	}
	most := set.MaxWork()
	if most < 27*px || most > 28*px {
		t.Errorf("MaxWork at %d pixels: %d bytes, want about 27 a pixel", px, most)
	}
	for _, name := range set.Names() {
		p, _ := set.Get(name)
		for _, hdr := range worstHeaders(8192, 8192) {
			if w := p.work(hdr, p.makePlan(8192, 8192, Key{})); w > most {
				t.Errorf("%s: %d bytes for a worst header, over MaxWork's %d", name, w, most)
			}
		}
	}
}

// TestWorkPeak: Footprint.Work bounds the real peak of an Apply — the
// process's resident memory, which counts libjpeg-turbo's own (C)
// allocations that TestWorkBound cannot see — for every decoder this
// build has and every kind of image. Each Apply runs in a process of its
// own (this test binary again), which resets its peak (VmHWM) before the
// call and reads it after. BRAND_WORK_PEAK_SIDE sets the images' side
// (default 2048; docs/transform.md §10's table is 8192), and -v logs
// every figure.
func TestWorkPeak(t *testing.T) {
	if run := os.Getenv("BRAND_WORK_PEAK_CHILD"); run != "" {
		workPeakChild(t, run)
		return
	}
	if runtime.GOOS != "linux" {
		t.Skip("reads /proc/self/status")
	}
	side := 2048
	if s := os.Getenv("BRAND_WORK_PEAK_SIDE"); s != "" {
		side, _ = strconv.Atoi(s)
	}
	imgs := pillowImages(t, pythontest.Need(t, "scripts/ensure-pil.sh", "PIL"), side, side, workKinds...)
	dir := t.TempDir()
	child := peakChild(t)
	for _, dec := range decoders() {
		for _, p := range workPipelines(t, dec) {
			if p.Name() != "imagenet-train" && p.Name() != "whole" {
				continue // a crop decoded in part, and the whole image
			}
			for _, kind := range sortedKeys(imgs) {
				file := filepath.Join(dir, kind)
				if err := os.WriteFile(file, imgs[kind], 0o644); err != nil {
					t.Fatal(err)
				}
				f, err := p.Footprint(imgs[kind], Key{Seed: 3})
				if err != nil {
					t.Fatal(err)
				}
				cmd := exec.Command(child, "-test.run", "^TestWorkPeak$")
				cmd.Env = append(os.Environ(), "BRAND_WORK_PEAK_CHILD="+dec.Name()+","+p.Name()+","+file)
				out, err := cmd.CombinedOutput()
				if err != nil {
					t.Fatalf("%s %s %s: %v\n%s", dec.Name(), p.Name(), kind, err, out)
				}
				var peak int64
				if _, err := fmt.Sscanf(string(out[bytes.Index(out, []byte("peak "))+5:]), "%d", &peak); err != nil {
					t.Fatalf("child said %q", out)
				}
				t.Logf("%-9s %-14s %-9s peak %7.1f MB  Work %7.1f MB", dec.Name(), p.Name(), kind, float64(peak)/1e6, float64(f.Work)/1e6)
				// The runtime's own growth (span metadata, a thread) is
				// beside the image's memory.
				if peak > f.Work+4<<20 {
					t.Errorf("%s %s %s: peak %.1f MB over Work %.1f MB", dec.Name(), p.Name(), kind, float64(peak)/1e6, float64(f.Work)/1e6)
				}
			}
		}
	}
}

// peakChild is the test binary the peaks are measured in: this one, or,
// under the race detector, whose shadow memory would be most of a peak,
// this package's tests built without it (with the same decoders).
func peakChild(t *testing.T) string {
	if !raceEnabled {
		return os.Args[0]
	}
	bin := filepath.Join(t.TempDir(), "transform.test")
	args := []string{"test", "-c", "-o", bin}
	if len(decoders()) > 1 {
		args = append(args, "-tags", "brand_turbojpeg")
	}
	cmdtest.Go(t, append(args, "github.com/brandgw/brand/transform")...)
	return bin
}

// workPeakChild applies one pipeline to one image and prints the growth
// of the process's peak resident memory over the call.
func workPeakChild(t *testing.T, run string) {
	parts := strings.SplitN(run, ",", 3)
	var dec JPEGDecoder
	for _, d := range decoders() {
		if d.Name() == parts[0] {
			dec = d
		}
	}
	var p *Pipeline
	for _, q := range workPipelines(t, dec) {
		if q.Name() == parts[1] {
			p = q
		}
	}
	img, err := os.ReadFile(parts[2])
	if err != nil {
		t.Fatal(err)
	}
	f, err := p.Footprint(img, Key{Seed: 3})
	if err != nil {
		t.Fatal(err)
	}
	dst := make([]byte, 0, f.Out)
	for i := 0; i < f.Out; i += 4096 {
		dst[:f.Out][i] = 0 // the output's pages are the output's, not Work's
	}
	runtime.GC()
	debug.FreeOSMemory()
	if err := os.WriteFile("/proc/self/clear_refs", []byte("5"), 0); err != nil {
		t.Fatal(err)
	}
	before := procStatus(t, "VmRSS")
	if _, err := p.Apply(dst, img, Key{Seed: 3}, new(Scratch)); err != nil {
		t.Fatal(err)
	}
	fmt.Printf("peak %d\n", procStatus(t, "VmHWM")-before)
}

// procStatus reads a field of /proc/self/status, in bytes.
func procStatus(t *testing.T, field string) int64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, field+":"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return kb << 10
		}
	}
	t.Fatalf("no %s in /proc/self/status", field)
	return 0
}
