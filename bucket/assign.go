package bucket

import (
	"fmt"
	"math/bits"
)

// Nearest is the bucket of an image of width w and height h (displayed,
// EXIF orientation applied): the one whose aspect ratio is nearest the
// image's on a log scale, |ln(w/h) − ln(W/H)|, and of two equally near,
// the first listed. The comparison is exact (in integers), so any
// implementation that compares the same ratios agrees on every image:
// for image (w, h) and bucket (H, W), the distance is the ratio
// max(w·H, h·W) / min(w·H, h·W) ≥ 1. shapes is not empty; w, h > 0.
func Nearest(w, h int, shapes []Shape) int {
	best := 0
	bp, bq := ratio(w, h, shapes[0])
	for i := 1; i < len(shapes); i++ {
		p, q := ratio(w, h, shapes[i])
		if less(p, q, bp, bq) {
			best, bp, bq = i, p, q
		}
	}
	return best
}

// NearestClip is the bucket of a clip of a video of width w and height
// h whose frames (at the job's rate) are frames, its clip's frames
// stride apart: of the buckets whose clip it is long enough for (T
// frames span (T−1)·stride + 1 of its frames), the one whose aspect
// ratio is nearest its own (as Nearest compares them, exactly); of
// equally near, the one of most frames (the longest clip the video
// holds); of those, the first listed. false when the video is too short
// for every bucket. shapes are clip buckets; w, h > 0, stride ≥ 1.
func NearestClip(w, h, frames, stride int, shapes []Shape) (int, bool) {
	best := -1
	var bp, bq uint64
	for i, s := range shapes {
		if (int64(s.T)-1)*int64(stride)+1 > int64(frames) {
			continue
		}
		p, q := ratio(w, h, s)
		if best < 0 || less(p, q, bp, bq) || !less(bp, bq, p, q) && s.T > shapes[best].T {
			best, bp, bq = i, p, q
		}
	}
	return best, best >= 0
}

// ratio is the distance of image (w, h) to shape s as a fraction p/q ≥ 1.
func ratio(w, h int, s Shape) (p, q uint64) {
	a, b := uint64(w)*uint64(s.H), uint64(h)*uint64(s.W)
	if a < b {
		a, b = b, a
	}
	return a, b
}

// less reports p1/q1 < p2/q2 for positive fractions, exactly.
func less(p1, q1, p2, q2 uint64) bool {
	h1, l1 := bits.Mul64(p1, q2)
	h2, l2 := bits.Mul64(p2, q1)
	return h1 < h2 || h1 == h2 && l1 < l2
}

// Fit is what becomes of an image in its bucket.
type Fit uint8

const (
	// Fits: the image is resized to cover its bucket (at most the
	// upscale limit) and cropped to it.
	Fits Fit = iota
	// TooSmall: covering its bucket would upscale the image by more than
	// the limit.
	TooSmall
	// NoImage: the sample has no image whose size the index holds (none,
	// or a header that does not read).
	NoImage
	// TooShort: the video is too short for a clip of every bucket's
	// frames.
	TooShort
)

func (f Fit) String() string {
	switch f {
	case Fits:
		return "fits"
	case TooSmall:
		return "too small"
	case TooShort:
		return "too short"
	}
	return "no image"
}

// Cover is the scale that makes an image of width w and height h cover
// shape s: max(H/h, W/w).
func Cover(w, h int, s Shape) float64 {
	return max(float64(s.H)/float64(h), float64(s.W)/float64(w))
}

// FitOf is the fit of an image of width w and height h (0 for none) in
// shape s under an upscale limit (≥ 1): TooSmall when covering s would
// scale it up by more than maxUpscale.
func FitOf(w, h int, s Shape, maxUpscale float64) Fit {
	switch {
	case w <= 0 || h <= 0:
		return NoImage
	case Cover(w, h, s) > maxUpscale:
		return TooSmall
	}
	return Fits
}

// Budget sets a bucket's batch size: the samples of one rank's batch of
// a step are at most Pixels pixels (a clip's: each frame's, H×W×T), or,
// with Tokens set, at most Tokens latent tokens, an image of H×W being
// ⌈H/f⌉·⌈W/f⌉ tokens for f = VAE × Patch (a VAE's spatial factor, 8 for
// SD's, and the model's patch, 2 for DiT's), and a clip of T frames
// that many times 1 + ⌈(T−1)/VAET⌉, its latent frames under a causal
// video VAE of temporal factor VAET (4 for CogVideoX's, HunyuanVideo's
// and Wan's: 49 frames are 13 latent ones), patched by 1 in time.
type Budget struct {
	Pixels     int64
	Tokens     int64
	VAE, Patch int
	VAET       int
}

// Cost is a sample's cost in s under the budget's measure.
func (b Budget) Cost(s Shape) int64 {
	if b.Tokens > 0 {
		f := b.VAE * b.Patch
		c := int64((s.H+f-1)/f) * int64((s.W+f-1)/f)
		if s.T > 0 {
			c *= 1 + int64((s.T-1+b.VAET-1)/b.VAET)
		}
		return c
	}
	return s.Pixels() * int64(s.Frames())
}

// Limit is the budget in its measure.
func (b Budget) Limit() int64 {
	if b.Tokens > 0 {
		return b.Tokens
	}
	return b.Pixels
}

// Unit names the budget's measure.
func (b Budget) Unit() string {
	if b.Tokens > 0 {
		return "latent tokens"
	}
	return "pixels"
}

// MaxBatch bounds a bucket's batch size a rank: a budget that holds more
// is refused (a gateway refuses more than its own --max-batch-size
// before).
const MaxBatch = 1 << 20

// Sizes returns each bucket's batch size a rank and step: as many of its
// images as the budget holds. A bucket of which the budget holds none, or
// more than MaxBatch, is refused.
func (b Budget) Sizes(shapes []Shape) ([]int, error) {
	if b.Tokens > 0 && (b.VAE < 1 || b.Patch < 1) {
		return nil, fmt.Errorf("%w: a budget in latent tokens needs the VAE's factor and the patch (≥ 1)", ErrSpec)
	}
	if b.Tokens > 0 && Clips(shapes) && b.VAET < 1 {
		return nil, fmt.Errorf("%w: a budget in latent tokens of clips needs the VAE's temporal factor (≥ 1)", ErrSpec)
	}
	if b.Limit() <= 0 {
		return nil, fmt.Errorf("%w: no budget: give one rank's step a budget in pixels or latent tokens", ErrSpec)
	}
	out := make([]int, len(shapes))
	for i, s := range shapes {
		c := b.Cost(s)
		n := b.Limit() / c
		if n > MaxBatch {
			return nil, fmt.Errorf("%w: a budget of %d %s holds %d samples of bucket %s, over the most a batch of one bucket holds (%d)", ErrSpec, b.Limit(), b.Unit(), n, s, MaxBatch)
		}
		out[i] = int(n)
		if out[i] == 0 {
			return nil, fmt.Errorf("%w: a budget of %d %s holds no sample of bucket %s (%d)", ErrSpec, b.Limit(), b.Unit(), s, c)
		}
	}
	return out, nil
}

// Fill is the share of the budget a batch of bucket s of k samples uses.
func (b Budget) Fill(s Shape, k int) float64 {
	return float64(b.Cost(s)) * float64(k) / float64(b.Limit())
}

// Crop is where an image of w×h lands in shape s: resized, aspect kept,
// to nw×nh, the smallest size covering s (the side that binds to s's,
// the other to ⌊side·scale⌋, in integers), and s's box at (left, top)
// of that kept: the centre, offsets (nw−W)/2 and (nh−H)/2 rounded half
// to even (torchvision's center_crop). It is transform's resize_cover
// and center_crop, and SDXL's crop coordinates.
func Crop(w, h int, s Shape) (nw, nh, left, top int) {
	if int64(s.W)*int64(h) >= int64(s.H)*int64(w) {
		nw, nh = s.W, int(int64(h)*int64(s.W)/int64(w))
	} else {
		nw, nh = int(int64(w)*int64(s.H)/int64(h)), s.H
	}
	half := func(d int) int {
		if d%2 == 1 && (d/2)%2 == 1 {
			return d/2 + 1 // x.5 up to the even
		}
		return d / 2
	}
	return nw, nh, half(nw - s.W), half(nh - s.H)
}
