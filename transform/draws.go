package transform

import (
	"math"

	"github.com/brandgw/brand/internal/seeded"
)

// domainTransform is the stream domain of the transform's draws: the ASCII
// bytes "brandtf" and a zero byte, big-endian. The operator at position k
// of a pipeline draws from domain domainTransform+k (k < MaxOps ≤ 256), so
// no transform stream coincides with the shuffle's ("brandchk",
// "brandwin", "brandstr", …), the importance order's ("brandim…") or
// another operator's.
const domainTransform uint64 = 0x6272616e64746600

// Key names one sample's draws: a seed (in a server, KeySeed of the job's
// seed and the sample's dataset: SampleKey), the epoch and the sample's
// ID, and nothing else — not the world size, the rank, the node or the
// time — so that every replica, a restarted gateway and a resumed job draw
// the same crops and flips for the same sample.
type Key struct {
	Seed   uint64
	Epoch  uint64
	Sample uint64
}

// stream is the draws of the operator at position op for key k.
func (k Key) stream(op int) seeded.Stream {
	return seeded.New(k.Seed, k.Epoch, domainTransform+uint64(op), k.Sample)
}

// unit is a uniform double in [0, 1): the top 53 bits of the next output,
// scaled by 2^-53 (exact).
func unit(s *seeded.Stream) float64 {
	return float64(s.Uint64()>>11) * 0x1p-53
}

// roundHalfEven is Python's round(), which torchvision's get_params uses.
func roundHalfEven(x float64) int { return int(math.RoundToEven(x)) }

// Rect is a crop box in pixels of the image it applies to: columns
// [X, X+W), rows [Y, Y+H).
type Rect struct{ X, Y, W, H int }

// cropAttempts is torchvision's number of tries before the fallback.
const cropAttempts = 10

// randomResizedCropBox draws the crop box of RandomResizedCrop on an image
// of w×h pixels exactly as torchvision's RandomResizedCrop.get_params
// decides it — ten attempts at an area fraction uniform in [scale0,
// scale1] and an aspect ratio log-uniform in [ratio0, ratio1], sides
// rounded half to even, kept if they fit, then the offsets; else the
// central fallback — with the draws of docs/transform.md §4 in place of
// torch's generator. It returns the box and the attempts used (11 for the
// fallback), which the golden vectors pin.
func randomResizedCropBox(s *seeded.Stream, w, h int, scale, ratio [2]float64) (Rect, int) {
	area := float64(w) * float64(h)
	lr0, lr1 := detLog(ratio[0]), detLog(ratio[1])
	for attempt := 1; attempt <= cropAttempts; attempt++ {
		u1 := unit(s)
		u2 := unit(s)
		target := area * (scale[0] + float64((scale[1]-scale[0])*u1))
		aspect := detExp(lr0 + float64((lr1-lr0)*u2))
		cw := roundHalfEven(math.Sqrt(target * aspect))
		ch := roundHalfEven(math.Sqrt(target / aspect))
		if 0 < cw && cw <= w && 0 < ch && ch <= h {
			top := int(s.Bounded(uint64(h - ch + 1)))
			left := int(s.Bounded(uint64(w - cw + 1)))
			return Rect{X: left, Y: top, W: cw, H: ch}, attempt
		}
	}
	// torchvision's fallback: the whole image, clipped to the nearest
	// allowed aspect ratio, centred.
	in := float64(w) / float64(h)
	cw, ch := w, h
	switch {
	case in < ratio[0]:
		ch = max(1, roundHalfEven(float64(w)/ratio[0]))
	case in > ratio[1]:
		cw = max(1, roundHalfEven(float64(h)*ratio[1]))
	}
	return Rect{X: (w - cw) / 2, Y: (h - ch) / 2, W: cw, H: ch}, cropAttempts + 1
}

// randomCropBox draws RandomCrop's box of cw×ch on an image of w×h:
// the top offset uniform over the h−ch+1 rows it fits, then the left
// over the w−cw+1 columns, as torchvision's RandomCrop.get_params, with
// the draws of docs/transform.md §4; an image smaller than the box is
// cropped at the centre (center_crop's box, padded).
func randomCropBox(s *seeded.Stream, w, h, cw, ch int) Rect {
	if cw > w || ch > h {
		return centerCropBox(w, h, cw, ch)
	}
	top := int(s.Bounded(uint64(h - ch + 1)))
	left := int(s.Bounded(uint64(w - cw + 1)))
	return Rect{X: left, Y: top, W: cw, H: ch}
}

// flipDraw is RandomHorizontalFlip's choice: flip when a unit draw is
// below p, as torchvision's torch.rand(1) < p.
func flipDraw(s *seeded.Stream, p float64) bool {
	return unit(s) < p
}
