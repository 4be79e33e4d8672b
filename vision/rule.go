package vision

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/brandgw/brand/internal/errkind"
	"github.com/brandgw/brand/internal/quote"
)

var (
	// ErrRule marks a vision= value that is not a rule: the error names
	// the parameter and the part at fault.
	ErrRule = errkind.New(errkind.Invalid, "vision: invalid rule")
	// ErrImageBounds marks an image the rule cannot size: smaller than a
	// patch after merging, or of an aspect past MaxAspect.
	ErrImageBounds = errkind.Named(errkind.Unprocessable, "bad_image", "vision: image outside the rule's bounds")
)

// MaxAspect bounds an image's longer side over its shorter one under a
// dynamic rule, as Qwen2-VL's processor does: past it, the rounding to
// patches leaves a side of one patch and the image is mostly padding.
const MaxAspect = 200

// maxSide bounds a fixed size's side and a rule's pixels: far beyond any
// vision encoder's input, and small enough that sides multiply without
// overflow.
const maxSide = 1 << 14

// A Rule is a vision job's vision side (vision=): how an image is
// resized, how many vision tokens it becomes, which token IDs stand for
// it, and how many images a sequence may hold.
//
// An image of W×H after the resize is (H/Patch)·(W/Patch) patches, which
// the encoder merges Merge×Merge into one token: (H/Patch)·(W/Patch)/Merge²
// vision tokens, so both sides are multiples of Patch·Merge.
type Rule struct {
	// Width, Height: every image resized to this (a fixed rule), aspect
	// not kept, as a SigLIP or CLIP processor does. Zero: dynamic.
	Width, Height int
	// MinPixels, MaxPixels: a dynamic rule's bounds on the resized
	// image's pixels (Qwen2-VL's smart resize, Size).
	MinPixels, MaxPixels int
	// Patch is the encoder's patch side; Merge how many patches a side
	// one token merges (1: none).
	Patch, Merge int
	// Image is the placeholder token ID, repeated once per vision token;
	// Start and End, when not -1, are IDs written before and after each
	// image's placeholders (Qwen's <|vision_start|>, <|vision_end|>).
	Image, Start, End int32
	// MaxImages caps the images of one sequence; 0 is no cap (the
	// sequence's tokens bound them).
	MaxImages int
}

// ParseRule reads a vision= value: comma-separated key:value pairs,
//
//	size:WxH         a fixed size (or min: and max:, not both)
//	min:N, max:N     a dynamic size: the resized image's pixels in [N, M]
//	patch:N          the patch side (required)
//	merge:N          patches merged a side (default 1)
//	image:ID         the placeholder token ID (required)
//	start:ID, end:ID IDs around each image's placeholders (default none)
//	images:N         at most N images a sequence (default no cap)
//
// such as size:448x448,patch:14,image:32000 or
// min:3136,max:1003520,patch:14,merge:2,image:151655,start:151652,end:151653.
// Anything else wraps ErrRule, naming vision= and the part at fault.
func ParseRule(s string) (Rule, error) {
	r := Rule{Merge: 1, Image: -1, Start: -1, End: -1}
	bad := func(format string, a ...any) (Rule, error) {
		return Rule{}, fmt.Errorf("%w: vision=%s: %s", ErrRule, quote.Input(s), fmt.Sprintf(format, a...))
	}
	seen := map[string]bool{}
	for _, part := range strings.Split(s, ",") {
		k, v, ok := strings.Cut(part, ":")
		if !ok || v == "" {
			return bad("%s is not key:value", quote.Input(part))
		}
		if seen[k] {
			return bad("%s given twice", k) // a key known here: an unknown one is refused the first time
		}
		seen[k] = true
		if k == "size" {
			ws, hs, ok := strings.Cut(v, "x")
			w, errW := strconv.Atoi(ws)
			h, errH := strconv.Atoi(hs)
			if !ok || errW != nil || errH != nil || w < 1 || h < 1 || w > maxSide || h > maxSide {
				return bad("size %s: WxH, each side 1..%d", quote.Input(v), maxSide)
			}
			r.Width, r.Height = w, h
			continue
		}
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 {
			return bad("%s %s: a non-negative integer", k, quote.Input(v))
		}
		switch k {
		case "min", "max":
			if n < 1 || n > maxSide*maxSide {
				return bad("%s %d: pixels 1..%d", k, n, maxSide*maxSide)
			}
			if k == "min" {
				r.MinPixels = int(n)
			} else {
				r.MaxPixels = int(n)
			}
		case "patch", "merge":
			if n < 1 || n > 1024 {
				return bad("%s %d: 1..1024", k, n)
			}
			if k == "patch" {
				r.Patch = int(n)
			} else {
				r.Merge = int(n)
			}
		case "image", "start", "end":
			if n > math.MaxInt32 {
				return bad("%s %d: a token ID, 0..%d", k, n, math.MaxInt32)
			}
			*map[string]*int32{"image": &r.Image, "start": &r.Start, "end": &r.End}[k] = int32(n)
		case "images":
			if n > 1<<20 {
				return bad("images %d: 0..%d", n, 1<<20)
			}
			r.MaxImages = int(n)
		default:
			return bad("unknown key %s (size, min, max, patch, merge, image, start, end, images)", quote.Input(k))
		}
	}
	if err := r.Validate(); err != nil {
		return Rule{}, fmt.Errorf("%w (vision=%s)", err, quote.Input(s))
	}
	return r, nil
}

// Validate reports whether r is usable, as an error wrapping ErrRule
// naming what is wrong.
func (r Rule) Validate() error {
	bad := func(format string, a ...any) error { return fmt.Errorf("%w: %s", ErrRule, fmt.Sprintf(format, a...)) }
	switch {
	case r.Patch < 1 || r.Merge < 1:
		return bad("patch and merge must be given, each at least 1")
	case r.Image < 0:
		return bad("image: the placeholder token ID must be given")
	case (r.Width > 0) == (r.MinPixels > 0 || r.MaxPixels > 0):
		return bad("give size:WxH, or min: and max: (pixels), not both or neither")
	case r.Width > 0 && (r.Width%r.factor() != 0 || r.Height%r.factor() != 0):
		return bad("size %dx%d: each side a multiple of patch×merge (%d)", r.Width, r.Height, r.factor())
	case r.Width == 0 && (r.MinPixels < 1 || r.MaxPixels < r.MinPixels):
		return bad("min %d, max %d: a dynamic rule needs 1 ≤ min ≤ max", r.MinPixels, r.MaxPixels)
	case r.Width == 0 && r.MaxPixels < r.factor()*r.factor():
		return bad("max %d: less than one token's pixels (%d)", r.MaxPixels, r.factor()*r.factor())
	case (r.Start < 0) != (r.End < 0):
		return bad("start and end are given together")
	}
	return nil
}

// factor is the side of one vision token's pixels.
func (r Rule) factor() int { return r.Patch * r.Merge }

// Size returns the size an image of w×h is resized to. A fixed rule's is
// its size. A dynamic rule's is Qwen2-VL's smart_resize (transformers'
// image_processing_qwen2_vl.py): each side rounded to a multiple of
// f = Patch·Merge (half to even, as Python's round), then, if the pixels
// are past MaxPixels, both sides scaled by √(w·h/MaxPixels) and floored
// to multiples of f; if under MinPixels, scaled by √(MinPixels/(w·h))
// and ceiled. An image with a side under f or an aspect past MaxAspect
// wraps ErrImageBounds.
func (r Rule) Size(w, h int) (outW, outH int, err error) {
	if w < 1 || h < 1 {
		return 0, 0, fmt.Errorf("%w: %d×%d", ErrImageBounds, w, h)
	}
	if r.Width > 0 {
		return r.Width, r.Height, nil
	}
	f := r.factor()
	if w < f || h < f {
		return 0, 0, fmt.Errorf("%w: %d×%d has a side under %d pixels (patch %d × merge %d)", ErrImageBounds, w, h, f, r.Patch, r.Merge)
	}
	if max(w, h) > MaxAspect*min(w, h) {
		return 0, 0, fmt.Errorf("%w: %d×%d: aspect past %d", ErrImageBounds, w, h, MaxAspect)
	}
	ff := float64(f)
	hb := max(f, int(math.RoundToEven(float64(h)/ff))*f)
	wb := max(f, int(math.RoundToEven(float64(w)/ff))*f)
	switch {
	case hb*wb > r.MaxPixels:
		beta := math.Sqrt(float64(h) * float64(w) / float64(r.MaxPixels))
		hb = max(f, int(math.Floor(float64(h)/beta/ff))*f)
		wb = max(f, int(math.Floor(float64(w)/beta/ff))*f)
	case hb*wb < r.MinPixels:
		beta := math.Sqrt(float64(r.MinPixels) / (float64(h) * float64(w)))
		hb = int(math.Ceil(float64(h)*beta/ff)) * f
		wb = int(math.Ceil(float64(w)*beta/ff)) * f
	}
	return wb, hb, nil
}

// Tokens is the vision tokens of an image resized to w×h (Size's):
// (h/Patch)·(w/Patch)/Merge².
func (r Rule) Tokens(w, h int) int {
	return (h / r.Patch) * (w / r.Patch) / (r.Merge * r.Merge)
}

// span is the tokens an image of n vision tokens takes in a sample: its
// placeholders and, if the rule has them, its start and end.
func (r Rule) span(n int) int {
	if r.Start >= 0 {
		return n + 2
	}
	return n
}
