package transform

import (
	"errors"
	"fmt"

	"github.com/brandgw/brand/internal/errkind"
)

// errNotCut: the image is not cut for the GPU — a PNG, a CMYK, YCCK,
// RGB-coded or 12-bit JPEG, a pipeline not of imagenet-train's shape, or
// a build without libjpeg — though Apply may well transform it. The
// caller falls back to Apply (the tensor path). It is unexported so that
// no answer to a client is ever built from it (NotCut asks for it).
var errNotCut = errkind.New(errkind.Unprocessable, "transform: not cut for the GPU")

// errNoCutBuild is why a build without libjpeg cuts nothing.
var errNoCutBuild = errors.New("this binary was built without the brand_turbojpeg tag (cgo and libjpeg-turbo; " +
	"scripts/install-turbojpeg.sh), and Go's image/jpeg cannot cut a JPEG losslessly")

// NotCut reports whether err is CropJPEG's or Pipeline.GPUCrop's refusal
// of an image or pipeline it does not cut, for which the caller uses
// Apply instead; other errors are the image's (ErrDecode, ErrTooLarge).
func NotCut(err error) bool { return errors.Is(err, errNotCut) }

// CropJPEG cuts src, a JPEG, losslessly to the smallest region whose
// top-left corner lies on an iMCU boundary (a multiple of 8 pixels times
// the largest sampling factor each way: 16×16 for 4:2:0, 16×8 for 4:2:2,
// 8×8 for 4:4:4 and grayscale) and that holds the box of w×h pixels at
// (x, y), as jpegtran -crop does: the blocks covering the region, their
// DCT coefficients untouched (no inverse transform, no requantizing), in
// a baseline JPEG without the source's markers (EXIF, ICC, comments):
// spliced from the source's scan where it is one sequential scan (the
// source's Huffman tables kept; splice.go), else entropy-coded again by
// libjpeg with its standard tables. It returns
// the cut JPEG and the box's offset (ox, oy) in it: the cut image is
// (ox+w)×(oy+h) pixels, and ox, oy are less than the iMCU's sides.
//
// Decoded by libjpeg, the cut image's pixels are the source's in that
// region, except within a pixel of its edges inside the source where the
// chroma is subsampled (libjpeg's fancy upsampling reads the chroma
// beyond; docs/transform.md §13). A box outside the image is ErrDecode;
// YCbCr and grayscale JPEGs of 8-bit samples are cut, anything else
// (PNG, CMYK, YCCK, RGB-coded, 12-bit) is refused with an error for
// which NotCut is true, as is every image in a build without the
// brand_turbojpeg tag.
func CropJPEG(src []byte, x, y, w, h int) (out []byte, ox, oy int, err error) {
	return cutJPEG(nil, src, x, y, w, h, false)
}

// cuttable sorts out what is not a JPEG before libjpeg is asked.
func cuttable(src []byte) error {
	switch {
	case len(src) >= 3 && src[0] == 0xff && src[1] == 0xd8 && src[2] == 0xff:
		return nil
	case len(src) >= 8 && string(src[:8]) == "\x89PNG\r\n\x1a\n":
		return fmt.Errorf("%w: a PNG; only JPEGs are cut", errNotCut)
	}
	return fmt.Errorf("%w: not a JPEG (first bytes %q)", ErrDecode, src[:min(len(src), 8)])
}
