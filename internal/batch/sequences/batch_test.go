package sequences

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"image"
	"image/color"
	"image/png"
	"strings"
	"testing"

	"github.com/brandgw/brand/internal/codec/ustar"
	"github.com/brandgw/brand/vision"
)

// pngOf is a w×h PNG of a gradient.
func pngOf(t *testing.T, w, h int) []byte {
	t.Helper()
	img := image.NewRGBA(image.Rect(0, 0, w, h))
	for y := range h {
		for x := range w {
			img.Set(x, y, color.RGBA{uint8(x * 7), uint8(y * 13), uint8(x + y), 255})
		}
	}
	var b bytes.Buffer
	if err := png.Encode(&b, img); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// TestPackVisionIsWrite: a vision batch's sequences, written by the
// batch writer through internal/codec/ustar, are byte for byte what
// vision.Writer.Write writes through archive/tar (as the stage wrote
// them before): sequences with images, without, and with two.
func TestPackVisionIsWrite(t *testing.T) {
	wr := &vision.Writer{Seq: 40, Pad: 5}
	keys := []string{Key(1, 0), Key(1, 1), Key(1, 2)}
	samples := [][]vision.Sample{
		{
			{IDs: []int32{1, 2, 3, 9, 9, 9, 4}, Loss: []uint8{1, 1, 0, 0, 0, 0, 1},
				Images: []vision.Image{{Member: "x.png", Data: pngOf(t, 30, 20), W: 30, H: 20, OutW: 16, OutH: 12, Span: vision.Span{Start: 3, Len: 3}}}},
			{IDs: []int32{7, 8}, Loss: []uint8{1, 1}},
		},
		{{IDs: []int32{1}, Loss: []uint8{1}}},
		{{IDs: []int32{9, 9, 1, 9}, Loss: []uint8{0, 0, 1, 0}, Images: []vision.Image{
			{Member: "y.png", Data: pngOf(t, 11, 40), W: 11, H: 40, OutW: 8, OutH: 28, Span: vision.Span{Start: 0, Len: 2}},
			{Member: "z.png", Data: pngOf(t, 9, 9), W: 9, H: 9, OutW: 4, OutH: 4, Span: vision.Span{Start: 3, Len: 1}},
		}}},
	}
	w := &inline{}
	s := New(Config{Workers: w, MaxBytes: 1 << 24})
	out, err := s.PackVision(context.Background(), VisionRequest{Writer: wr, Keys: keys, Samples: samples})
	if err != nil {
		t.Fatal(err)
	}
	defer out.Release()
	for i, key := range keys {
		var want bytes.Buffer
		tw := tar.NewWriter(&want)
		if err := wr.Write(tw, key, samples[i]); err != nil {
			t.Fatal(err)
		}
		if err := tw.Flush(); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(out.Parts[i], want.Bytes()) {
			t.Errorf("sequence %s: %d bytes, not archive/tar's %d", key, len(out.Parts[i]), want.Len())
		}
	}
	if f := s.Figures(); f.Sequences != 3 || f.Tokens != 120 || f.NonPad != 14 || out.Bytes != w.held {
		t.Errorf("figures %+v, %d bytes of %d held", f, out.Bytes, w.held)
	}
}

// lying is a kind whose sequences are sized one way and written
// another.
type lying struct{ sized, written int }

func (k lying) size(int) int64 { return int64(k.sized) }

func (k lying) write(_ int, w *ustar.Writer) error {
	_, err := w.Member(k.written, "k.bin")
	return err
}

// TestBatchSizedAsWritten: a kind whose write does not fill the bytes it
// sized, short or past them, fails its batch naming the sequence, and
// nothing is held; a batch over the bound is the kind's ErrTooLarge.
func TestBatchSizedAsWritten(t *testing.T) {
	for _, k := range []lying{{2048, 100}, {1024, 600}} { // short, past
		w := &inline{}
		s := New(Config{Workers: w, MaxBytes: 1 << 20})
		b, err := s.sized([]string{"seq/0/0"}, memberHeader(), k, nil)
		if err != nil {
			t.Fatal(err)
		}
		_, err = s.write(context.Background(), b, false)
		if err == nil || !strings.Contains(err.Error(), "sequence seq/0/0") || w.held != 0 {
			t.Errorf("%+v: %v, %d bytes held", k, err, w.held)
		}
		if short := int64(k.sized) > ustar.BlockSize+ustar.Padded(int64(k.written)); short && !errors.Is(err, errSized) {
			t.Errorf("%+v: %v, want errSized", k, err)
		}
	}
	s := New(Config{Workers: &inline{}, MaxBytes: 1000})
	tooLarge := func(total int64) error { return ErrTooLarge }
	if _, err := s.sized([]string{"a"}, memberHeader(), lying{1024, 100}, tooLarge); !errors.Is(err, ErrTooLarge) {
		t.Errorf("over the bound: %v", err)
	}
}
