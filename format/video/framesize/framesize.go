// Package framesize is the one bound on a video's frames: the index
// (format/video/mp4) refuses a file whose sample entry states frames past
// it, and the decoder (transform/video) refuses a stream past it before
// it opens a decoder, and gives libavcodec its pixel count (max_pixels)
// so that a bitstream claiming more than its index is refused before a
// frame is allocated. Both apply Default unless told otherwise: a video
// the index takes is one the decoder takes, and one it refuses is
// refused when the dataset is indexed, never at every clip later.
//
// # Why these numbers
//
// A side of 16,384 is H.265's and VP9's largest picture and past
// H.264's at its highest level; it admits panoramas and stitched camera
// rigs (16000×2000). 8192 × 4352 pixels is DCI 8K (8192×4320) in whole
// 64-pixel rows, which holds 8K UHD (7680×4320) too: the largest frames
// cameras and datasets carry, and what a node's memory for decodes is
// sized to serve (transform/video's Footprint, measured against the
// decoder's real peak, docs/transform.md §12). A 16k × 16k stream (268
// million pixels) is refused from its index entry.
package framesize

import "fmt"

// The default bound.
const (
	// MaxSide bounds either side, in pixels.
	MaxSide = 1 << 14
	// MaxPixels bounds width × height.
	MaxPixels = 8192 * 4352
)

// Bound bounds a video's frames. A zero field is the default's.
type Bound struct {
	Side   int
	Pixels int64
}

// Default is the bound the index and the decoder apply.
func Default() Bound { return Bound{Side: MaxSide, Pixels: MaxPixels} }

// WithDefaults returns b with every unset field the default's.
func (b Bound) WithDefaults() Bound {
	if b.Side <= 0 {
		b.Side = MaxSide
	}
	if b.Pixels <= 0 {
		b.Pixels = MaxPixels
	}
	return b
}

// Fits reports whether frames of w × h pixels are within b (its unset
// fields the default's). Sides of 0 or less are not frames and do not
// fit.
func (b Bound) Fits(w, h int) bool {
	b = b.WithDefaults()
	return w > 0 && h > 0 && w <= b.Side && h <= b.Side && int64(w)*int64(h) <= b.Pixels
}

// String says the bound as the errors refusing a video do.
func (b Bound) String() string {
	b = b.WithDefaults()
	return fmt.Sprintf("at most %d a side and %d pixels", b.Side, b.Pixels)
}
