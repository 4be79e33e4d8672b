package transform

import (
	"bytes"
	"errors"
	"testing"
)

// TestSizeIsApplys: Size, from the header and the draws alone, is the
// length of the member Apply appends, for every fixture that decodes,
// through pipelines that crop, resize, pad, keep the image's own size and
// apply EXIF orientation; an image Apply refuses from its header is
// refused by Size with the same sentinel.
func TestSizeIsApplys(t *testing.T) {
	set := mustSet(t, `{"pipelines": {
		"plain": {"ops": []},
		"exif": {"ops": [], "exif": "apply", "layout": "hwc"},
		"resize": {"ops": [{"op": "resize", "size": 37, "max_size": 50}]},
		"pad": {"ops": [{"op": "center_crop", "size": [700, 90]}, {"op": "hflip", "p": 1}]}
	}}`, Options{})
	files := []string{"photo.jpg", "photo422.jpg", "photo444.jpg", "progressive.jpg", "gray.jpg", "cmyk.jpg",
		"exif-3.jpg", "exif-6.jpg", "exif-8.jpg", "photo.png", "alpha.png", "gray-alpha.png", "palette.png"}
	for _, name := range set.Names() {
		p := mustGet(t, set, name)
		for i, f := range files {
			img := readFixture(t, f)
			key := Key{Seed: 3, Epoch: 1, Sample: uint64(i)}
			n, err := p.Size(img, key)
			if err != nil {
				t.Fatalf("%s %s: Size: %v", name, f, err)
			}
			res, err := p.Apply(nil, img, key, nil)
			if err != nil {
				t.Fatalf("%s %s: Apply: %v", name, f, err)
			}
			if n != len(res.Out) {
				t.Errorf("%s %s: Size %d, Apply wrote %d bytes", name, f, n, len(res.Out))
			}
		}
	}
	p := mustGet(t, set, ImagenetTrain)
	for _, tt := range []struct {
		file     string
		sentinel error
	}{{"bomb.jpg", ErrTooLarge}, {"bomb.png", ErrTooLarge}, {"garbage.jpg", ErrDecode}} {
		if _, err := p.Size(readFixture(t, tt.file), Key{}); !errors.Is(err, tt.sentinel) {
			t.Errorf("Size of %s: %v, want %v", tt.file, err, tt.sentinel)
		}
	}
	// A truncated JPEG's header is whole: its size is known, and Apply
	// fails in its pixels.
	if _, err := p.Size(readFixture(t, "truncated.jpg"), Key{}); err != nil {
		t.Errorf("Size of truncated.jpg: %v", err)
	}
}

// TestFingerprint: what decides a pipeline's bytes — its spec, defaults
// filled in, the decoder, the pixel bound — and only that, names it.
func TestFingerprint(t *testing.T) {
	fp := func(cfg string, opt Options, name string) string {
		return mustGet(t, mustSet(t, cfg, opt), name).Fingerprint()
	}
	base := fp("", Options{}, ImagenetTrain)
	if len(base) != 16 {
		t.Fatalf("fingerprint %q, want 16 hex digits", base)
	}
	same := []struct {
		what string
		got  string
	}{
		{"the built-in again", fp("", Options{}, ImagenetTrain)},
		{"the built-in spelt out with its defaults", fp(`{"pipelines": {"imagenet-train": {"ops": [
			{"op": "random_resized_crop", "size": 224, "scale": [0.08, 1], "ratio": [0.75, 1.3333333333333333]},
			{"op": "hflip", "p": 0.5}], "exif": "ignore", "layout": "chw"}}}`, Options{}, ImagenetTrain)},
		{"the default pixel bound given", fp("", Options{MaxPixels: DefaultMaxPixels}, ImagenetTrain)},
	}
	for _, s := range same {
		if s.got != base {
			t.Errorf("%s: fingerprint %s, want %s", s.what, s.got, base)
		}
	}
	differ := []struct {
		what string
		got  string
	}{
		{"another pipeline", fp("", Options{}, ImagenetEval)},
		{"another flip probability", fp(`{"pipelines": {"imagenet-train": {"ops": [
			{"op": "random_resized_crop", "size": 224}, {"op": "hflip", "p": 0.25}]}}}`, Options{}, ImagenetTrain)},
		{"another layout", fp(`{"pipelines": {"imagenet-train": {"ops": [
			{"op": "random_resized_crop", "size": 224}, {"op": "hflip"}], "layout": "hwc"}}}`, Options{}, ImagenetTrain)},
		{"another pixel bound", fp("", Options{MaxPixels: 1 << 20}, ImagenetTrain)},
		{"another decoder", fp("", Options{JPEG: namedDecoder{StdJPEG{}, "other"}}, ImagenetTrain)},
	}
	for _, d := range differ {
		if d.got == base {
			t.Errorf("%s: the fingerprint did not change", d.what)
		}
	}
}

// namedDecoder is a decoder under another name.
type namedDecoder struct {
	JPEGDecoder
	name string
}

func (d namedDecoder) Name() string { return d.name }

// TestReducedDecodeWithoutScaling: a pipeline whose first step shrinks by
// 2 or more asks the decoder for a reduced size; a decoder that cannot
// scale (image/jpeg) answers at full size, and the pipeline's output is
// then the one it gives with reduced_decode off. (The pure-Go decoder
// once returned the region asked for in the scaled image's pixels as if
// they were full-size ones, and every such image failed.)
func TestReducedDecodeWithoutScaling(t *testing.T) {
	set := mustSet(t, `{"pipelines": {
		"small": {"ops": [{"op": "random_resized_crop", "size": 8}, {"op": "hflip"}]},
		"small-full": {"ops": [{"op": "random_resized_crop", "size": 8}, {"op": "hflip"}], "reduced_decode": false},
		"eval": {"ops": [{"op": "resize", "size": 40}, {"op": "center_crop", "size": 32}]},
		"eval-full": {"ops": [{"op": "resize", "size": 40}, {"op": "center_crop", "size": 32}], "reduced_decode": false}
	}}`, Options{JPEG: StdJPEG{}})
	for _, f := range []string{"photo.jpg", "photo422.jpg", "progressive.jpg", "gray.jpg", "exif-6.jpg"} {
		img := readFixture(t, f)
		for _, name := range []string{"small", "eval"} {
			for i := range uint64(8) {
				key := Key{Seed: 1, Sample: i}
				got, err := mustGet(t, set, name).Apply(nil, img, key, nil)
				if err != nil {
					t.Fatalf("%s %s: %v", name, f, err)
				}
				want, err := mustGet(t, set, name+"-full").Apply(nil, img, key, nil)
				if err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(got.Out, want.Out) || got.Denom != 1 {
					t.Errorf("%s %s sample %d: differs from a full decode (denom %d)", name, f, i, got.Denom)
				}
			}
		}
	}
}
