package transform

import (
	"fmt"
	"strconv"
	"strings"
)

// bucketPrefix begins the name of a shape bucket's pipeline.
const bucketPrefix = "bucket:"

// BucketName names the pipeline of a shape bucket of h×w whose images
// are cropped at the centre, or at random offsets (random), and flipped
// with probability flip: "bucket:HxW", then ":crop=random" and
// ":flip=P" where they apply. A server makes it on demand (BucketSpec);
// no configuration defines it.
func BucketName(h, w int, random bool, flip float64) string {
	n := bucketPrefix + strconv.Itoa(h) + "x" + strconv.Itoa(w)
	if random {
		n += ":crop=random"
	}
	if flip > 0 {
		n += ":flip=" + strconv.FormatFloat(flip, 'g', -1, 64)
	}
	return n
}

// IsBucketName reports whether name is a bucket pipeline's name.
func IsBucketName(name string) bool { return strings.HasPrefix(name, bucketPrefix) }

// BucketSpec is the pipeline a bucket name names: the image oriented by
// its EXIF tag (as its size in the index is), decoded at full size,
// resized to cover h×w with
// its aspect kept (resize_cover), cropped to h×w at the centre
// (center_crop) or at drawn offsets (random_crop), flipped with the
// probability named, written as uint8 CHW.
func BucketSpec(name string) (Spec, error) {
	rest, ok := strings.CutPrefix(name, bucketPrefix)
	if !ok {
		return Spec{}, fmt.Errorf("%w %q: not a bucket pipeline", ErrUnknownPipeline, name)
	}
	size, flipPart, hasFlip := strings.Cut(rest, ":flip=")
	size, random := strings.CutSuffix(size, ":crop=random")
	hs, ws, ok := strings.Cut(size, "x")
	h, err1 := strconv.Atoi(hs)
	w, err2 := strconv.Atoi(ws)
	if !ok || err1 != nil || err2 != nil || h < 1 || w < 1 || h > maxSide || w > maxSide {
		return Spec{}, fmt.Errorf("%w %q: a bucket is HxW, sides 1..%d", ErrUnknownPipeline, name, maxSide)
	}
	sz := Size{H: h, W: w}
	crop := OpCenterCrop
	if random {
		crop = OpRandomCrop
	}
	// Decoded at full size: a bucket's image is Pillow's resize to cover
	// of the whole decode, byte for byte with libjpeg-turbo (a reduced
	// decode, libjpeg's DCT scaling, differs by up to 29 levels, §6.2).
	full := false
	s := Spec{EXIF: ApplyEXIF, ReducedDecode: &full, Ops: []Op{{Op: OpResizeCover, Size: sz}, {Op: crop, Size: sz}}}
	if hasFlip {
		p, err := strconv.ParseFloat(flipPart, 64)
		if err != nil || !(p > 0 && p <= 1) {
			return Spec{}, fmt.Errorf("%w %q: flip is a probability in (0, 1]", ErrUnknownPipeline, name)
		}
		s.Ops = append(s.Ops, Op{Op: OpHFlip, P: &p})
	}
	if BucketName(h, w, random, flipOf(s)) != name {
		return Spec{}, fmt.Errorf("%w %q: not as BucketName writes it", ErrUnknownPipeline, name)
	}
	return s, nil
}

func flipOf(s Spec) float64 {
	for _, op := range s.Ops {
		if op.Op == OpHFlip {
			return *op.P
		}
	}
	return 0
}
