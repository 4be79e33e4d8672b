package transform

import (
	"bytes"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/brandgw/brand/bucket"
	"github.com/brandgw/brand/internal/gen/photos"
)

func TestBucketNames(t *testing.T) {
	for _, tc := range []struct {
		h, w   int
		random bool
		flip   float64
		name   string
		crop   string
	}{
		{32, 48, false, 0, "bucket:32x48", OpCenterCrop},
		{32, 48, true, 0, "bucket:32x48:crop=random", OpRandomCrop},
		{32, 48, true, 0.5, "bucket:32x48:crop=random:flip=0.5", OpRandomCrop},
		{1024, 1024, false, 1, "bucket:1024x1024:flip=1", OpCenterCrop},
	} {
		if got := BucketName(tc.h, tc.w, tc.random, tc.flip); got != tc.name {
			t.Errorf("BucketName = %q, want %q", got, tc.name)
		}
		s, err := BucketSpec(tc.name)
		if err != nil || s.Ops[0].Op != OpResizeCover || s.Ops[1].Op != tc.crop || s.EXIF != ApplyEXIF ||
			(tc.flip > 0) != (len(s.Ops) == 3) {
			t.Errorf("BucketSpec(%q) = %+v, %v", tc.name, s, err)
		}
	}
	for _, bad := range []string{"bucket:32", "bucket:0x4", "bucket:32x48:flip=0", "bucket:32x48:flip=0.50", "bucket:32x48:crop=center", "imagenet-train"} {
		if _, err := BucketSpec(bad); err == nil {
			t.Errorf("BucketSpec(%q) took it", bad)
		}
	}
}

// TestRandomCropBucket: a bucket cropped at random offsets is the image
// resized to cover the bucket (the pipeline of resize_cover alone) cut at
// the box its draws give, each offset within the positions the box fits,
// the same for the same key and spread over them across keys.
func TestRandomCropBucket(t *testing.T) {
	p, err := photos.Sized(5, 1, 150, 60, 90)
	if err != nil {
		t.Fatal(err)
	}
	const h, w = 32, 48
	random, err := BucketSpec(BucketName(h, w, true, 0))
	if err != nil {
		t.Fatal(err)
	}
	random.Layout = HWC
	rp, err := New("r", random, Options{})
	if err != nil {
		t.Fatal(err)
	}
	cover := Spec{EXIF: ApplyEXIF, Layout: HWC, Ops: []Op{{Op: OpResizeCover, Size: Size{H: h, W: w}}}}
	cp, err := New("c", cover, Options{})
	if err != nil {
		t.Fatal(err)
	}
	whole, err := cp.Apply(nil, p.JPEG, Key{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	full := tensorHWC(t, whole.Out, HWC)
	cw, ch := coverSize(150, 60, w, h)
	if full.w != cw || full.h != ch {
		t.Fatalf("cover of 150×60 into %d×%d: %d×%d, want %d×%d", h, w, full.w, full.h, cw, ch)
	}
	lefts := map[int]bool{}
	for s := range uint64(200) {
		key := Key{Seed: 3, Epoch: 1, Sample: s}
		g, err := rp.Geometry(150, 60, key)
		if err != nil {
			t.Fatal(err)
		}
		box := g.Draws().Crops[0]
		if box.X < 0 || box.Y < 0 || box.X+w > cw || box.Y+h > ch || box.W != w || box.H != h {
			t.Fatalf("key %d: box %+v outside the %d×%d image", s, box, cw, ch)
		}
		lefts[box.X] = true
		if s >= 8 {
			continue
		}
		res, err := rp.Apply(nil, p.JPEG, key, nil)
		if err != nil {
			t.Fatal(err)
		}
		got := tensorHWC(t, res.Out, HWC)
		for y := range h {
			row := full.pix[((box.Y+y)*cw+box.X)*3 : ((box.Y+y)*cw+box.X+w)*3]
			if !bytes.Equal(got.pix[y*w*3:(y+1)*w*3], row) {
				t.Fatalf("key %d: row %d is not the covered image's at %+v", s, y, box)
			}
		}
		again, _ := rp.Apply(nil, p.JPEG, key, nil)
		if !slices.Equal(again.Out, res.Out) {
			t.Fatalf("key %d: two applications differ", s)
		}
	}
	if len(lefts) < (cw-w+1)/2 {
		t.Errorf("200 keys drew %d distinct left offsets of %d", len(lefts), cw-w+1)
	}
}

// TestBucketCropIsThePipelines holds package bucket's Crop, which the
// gateway's Brand-Bucket-Geometry reports, to the geometry the bucket
// pipeline cuts: resize_cover's size and center_crop's offsets.
func TestBucketCropIsThePipelines(t *testing.T) {
	r := rand.New(rand.NewPCG(8, 9))
	for range 20000 {
		w, h := 1+r.IntN(5000), 1+r.IntN(5000)
		s := bucket.Shape{H: 8 + r.IntN(2048), W: 8 + r.IntN(2048)}
		nw, nh, left, top := bucket.Crop(w, h, s)
		cw, ch := coverSize(w, h, s.W, s.H)
		box := centerCropBox(cw, ch, s.W, s.H)
		if nw != cw || nh != ch || left != box.X || top != box.Y {
			t.Fatalf("%d×%d into %v: bucket.Crop %d×%d at (%d, %d), the pipeline %d×%d at (%d, %d)", w, h, s, nw, nh, left, top, cw, ch, box.X, box.Y)
		}
	}
}
