//go:build cgo && brand_turbojpeg

package transform

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"testing"

	"github.com/brandgw/brand/internal/gen/photos"
)

// TestSpliceIsLibjpegsCut: the splice takes every sequential JPEG of the
// cut tests' layouts (4:2:0, 4:2:2, 4:4:4, gray; image/jpeg's and
// Pillow's) and declines the progressive ones; what it writes is, byte
// for byte, what libjpeg's coefficient cut writes for the same box — the
// markers, the dummy blocks past the cut's edges, the DC differences
// coded again — wherever the source was coded with libjpeg's standard
// Huffman tables; from a source with tables of its own (Pillow's
// optimize) it keeps them, and libjpeg decodes it to the coefficient
// cut's pixels exactly. Over 200 ImageNet-sized photos too, with
// imagenet-train's boxes.
func TestSpliceIsLibjpegsCut(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	files := cutFiles(t)
	files["cut420-optimized.jpg"] = readFixture(t, "cut420-optimized.jpg")
	type cut struct {
		name string
		data []byte
		box  Rect
	}
	var cuts []cut
	for name, data := range files {
		h, err := readHeader(data, DefaultMaxPixels, IgnoreEXIF)
		if err != nil {
			t.Fatal(err)
		}
		for _, b := range spliceBoxes(r, h.w, h.h, 40) {
			cuts = append(cuts, cut{name, data, b})
		}
	}
	p := mustGet(t, mustSet(t, `{}`, Options{}), ImagenetTrain)
	n := 200
	if testing.Short() {
		n = 20
	}
	for i := range n {
		ph, err := photos.One(3, i)
		if err != nil {
			t.Fatal(err)
		}
		g, err := p.GPUGeometry(ph.JPEG, Key{Seed: 9, Sample: uint64(i)})
		if err != nil {
			t.Fatal(err)
		}
		cuts = append(cuts, cut{ph.Name, ph.JPEG, g.Box})
	}
	dec := TurboJPEG{}
	spliced, equalBytes := 0, 0
	for _, c := range cuts {
		b := c.box
		f := readJPEGFrame(c.data)
		prefix := []byte("kept")
		got, ox, oy, ok := spliceJPEG(prefix, c.data, b.X, b.Y, b.W, b.H)
		if ok == f.progressive {
			t.Fatalf("%s %+v: spliced %v, progressive %v", c.name, b, ok, f.progressive)
		}
		if !ok {
			if string(got) != "kept" {
				t.Fatalf("%s: a declined splice left dst %q", c.name, got[:min(len(got), 8)])
			}
			continue
		}
		spliced++
		if string(got[:4]) != "kept" {
			t.Fatalf("%s: dst's bytes overwritten", c.name)
		}
		got = got[4:]
		want, wx, wy, err := cutCoefficients(nil, c.data, b.X, b.Y, b.W, b.H, false)
		if err != nil || ox != wx || oy != wy {
			t.Fatalf("%s %+v: splice at (%d, %d), libjpeg at (%d, %d): %v", c.name, b, ox, oy, wx, wy, err)
		}
		if c.name != "cut420-optimized.jpg" {
			if !bytes.Equal(got, want) {
				k := 0
				for k < min(len(got), len(want)) && got[k] == want[k] {
					k++
				}
				t.Fatalf("%s %+v: the splice's %d bytes differ from libjpeg's %d at byte %d", c.name, b, len(got), len(want), k)
			}
			equalBytes++
			continue
		}
		if bytes.Equal(got, want) {
			t.Fatalf("%s: the optimized tables were not kept", c.name)
		}
		h, err := readHeader(want, DefaultMaxPixels, IgnoreEXIF)
		if err != nil {
			t.Fatal(err)
		}
		a, _, errA := dec.DecodeJPEG(nil, got, h, 1, Rect{W: h.w, H: h.h})
		w, _, errW := dec.DecodeJPEG(nil, want, h, 1, Rect{W: h.w, H: h.h})
		if errA != nil || errW != nil || !bytes.Equal(a.Image.pix, w.Image.pix) {
			t.Fatalf("%s %+v: the splice decodes to other pixels than libjpeg's cut (%v, %v)", c.name, b, errA, errW)
		}
	}
	t.Logf("%d cuts: %d spliced, %d of them libjpeg's bytes exactly", len(cuts), spliced, equalBytes)
	if spliced < len(cuts)/2 {
		t.Errorf("only %d of %d cuts spliced", spliced, len(cuts))
	}
}

// withSegment is data with a marker segment inserted before its scan.
func withSegment(t *testing.T, data []byte, marker byte, body []byte) []byte {
	t.Helper()
	i := bytes.Index(data, []byte{0xff, 0xda})
	if i < 0 {
		t.Fatal("no scan")
	}
	out := append([]byte{}, data[:i]...)
	out = appendSegment(out, marker, body)
	return append(out, data[i:]...)
}

// TestSpliceDeclines: what the splice does not take — a restart
// interval, an Adobe marker, data that ends or is damaged before the
// region's last block — goes to libjpeg's path, which answers as it
// always did; a restart interval of 0 and data ending below the region
// are spliced.
func TestSpliceDeclines(t *testing.T) {
	ph, err := photos.Sized(4, 1, 400, 300, 90)
	if err != nil {
		t.Fatal(err)
	}
	src := ph.JPEG
	box := Rect{X: 100, Y: 50, W: 150, H: 100}
	want, _, _, err := cutCoefficients(nil, src, box.X, box.Y, box.W, box.H, false)
	if err != nil {
		t.Fatal(err)
	}
	scan := bytes.Index(src, []byte{0xff, 0xda})
	cases := []struct {
		name    string
		data    []byte
		spliced bool
		err     error // cutJPEG's; nil: want's bytes
	}{
		{"as written", src, true, nil},
		{"a restart interval", withSegment(t, src, 0xdd, []byte{0xff, 0xff}), false, nil},
		{"a restart interval of 0", withSegment(t, src, 0xdd, []byte{0, 0}), true, nil},
		{"an Adobe marker", withSegment(t, src, 0xee, []byte("Adobe\x00\x64\x00\x00\x00\x00\x01")), false, nil},
		{"cut inside the region", src[:scan+(len(src)-scan)/3], false, ErrDecode},
		{"cut below the region", src[:scan+(len(src)-scan)*9/10], true, nil},
	}
	for _, c := range cases {
		_, _, _, ok := spliceJPEG(nil, c.data, box.X, box.Y, box.W, box.H)
		got, _, _, err := cutJPEG(nil, c.data, box.X, box.Y, box.W, box.H, false)
		switch {
		case ok != c.spliced:
			t.Errorf("%s: spliced %v, want %v", c.name, ok, c.spliced)
		case c.err != nil && !errors.Is(err, c.err):
			t.Errorf("%s: %v, want %v", c.name, err, c.err)
		case c.err == nil && (err != nil || !bytes.Equal(got, want)):
			t.Errorf("%s: not the source's cut (%v)", c.name, err)
		}
	}
}

// TestSpliceDamaged: bytes of the scan changed at random, the splice
// declines or writes libjpeg's cut exactly: whatever it takes, libjpeg
// reads as it does.
func TestSpliceDamaged(t *testing.T) {
	r := rand.New(rand.NewPCG(11, 12))
	ph, err := photos.Sized(4, 2, 320, 240, 85)
	if err != nil {
		t.Fatal(err)
	}
	scan := bytes.Index(ph.JPEG, []byte{0xff, 0xda}) + 14
	spliced := 0
	for i := range 400 {
		data := append([]byte{}, ph.JPEG...)
		for range 1 + i%3 {
			data[scan+r.IntN(len(data)-scan-2)] = byte(r.Uint32())
		}
		b := spliceBoxes(r, 320, 240, 1)[0]
		got, _, _, ok := spliceJPEG(nil, data, b.X, b.Y, b.W, b.H)
		if !ok {
			continue
		}
		spliced++
		want, _, _, err := cutCoefficients(nil, data, b.X, b.Y, b.W, b.H, false)
		if err != nil || !bytes.Equal(got, want) {
			t.Fatalf("damage %d, box %+v: spliced, but libjpeg's cut is other bytes or fails (%v)", i, b, err)
		}
	}
	t.Logf("400 damaged copies: %d spliced, the rest declined", spliced)
	if spliced == 0 || spliced == 400 {
		t.Errorf("%d of 400 damaged copies spliced: the test shows nothing", spliced)
	}
}

// BenchmarkSplice is BenchmarkGPUCrop's cuts by the splice alone, beside
// BenchmarkSpliceLibjpeg, the same cuts by libjpeg's coefficients.
func BenchmarkSplice(b *testing.B) { benchSplice(b, true) }

// BenchmarkSpliceLibjpeg: BenchmarkSplice's cuts by cutCoefficients.
func BenchmarkSpliceLibjpeg(b *testing.B) { benchSplice(b, false) }

func benchSplice(b *testing.B, splice bool) {
	p, err := New(ImagenetTrain, Builtins()[ImagenetTrain], Options{})
	if err != nil {
		b.Fatal(err)
	}
	type cut struct {
		data []byte
		box  Rect
	}
	set := make([]cut, 300)
	for i := range set {
		ph, err := photos.One(1, i)
		if err != nil {
			b.Fatal(err)
		}
		g, err := p.GPUGeometry(ph.JPEG, Key{Seed: 7, Sample: uint64(i)})
		if err != nil {
			b.Fatal(err)
		}
		set[i] = cut{ph.JPEG, g.Box}
	}
	var out []byte
	for i := 0; b.Loop(); i++ {
		c := set[i%len(set)]
		if splice {
			var ok bool
			if out, _, _, ok = spliceJPEG(out[:0], c.data, c.box.X, c.box.Y, c.box.W, c.box.H); !ok {
				b.Fatal("declined")
			}
			continue
		}
		if out, _, _, err = cutCoefficients(out[:0], c.data, c.box.X, c.box.Y, c.box.W, c.box.H, false); err != nil {
			b.Fatal(err)
		}
	}
}
