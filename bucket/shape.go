package bucket

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/brandgw/brand/internal/errkind"
	"github.com/brandgw/brand/internal/quote"
)

// ErrSpec marks a bucket list, budget or resume point that is not valid
// (400).
var ErrSpec = errkind.New(errkind.Invalid, "invalid buckets")

// Shape is a bucket: the height and width every image of its batches is
// resized to cover and cropped to, and for a clip bucket (T > 0) the
// frames every clip of its batches holds. A list's buckets are all of
// images (T = 0) or all of clips.
type Shape struct{ H, W, T int }

// String is "HxW", or "HxWxT" for a clip bucket.
func (s Shape) String() string {
	out := strconv.Itoa(s.H) + "x" + strconv.Itoa(s.W)
	if s.T > 0 {
		out += "x" + strconv.Itoa(s.T)
	}
	return out
}

// Pixels is the shape's area: one frame's.
func (s Shape) Pixels() int64 { return int64(s.H) * int64(s.W) }

// Frames is the frames a sample of the bucket holds: T, or 1 for an
// image.
func (s Shape) Frames() int { return max(s.T, 1) }

// Clips reports whether shapes are clip buckets (HxWxT).
func Clips(shapes []Shape) bool { return len(shapes) > 0 && shapes[0].T > 0 }

// MaxSide bounds a bucket's side: far beyond any model's resolution.
const MaxSide = 8192

// MaxBuckets bounds a bucket list.
const MaxBuckets = 256

// MaxFrames bounds a clip bucket's frames (package clips' bound on a
// clip).
const MaxFrames = 4096

// sdxl is SDXL's aspect buckets of about 1024² pixels, (height, width)
// as its paper's appendix lists them: sides multiples of 64, aspect
// ratios from 1:4 to 4:1.
func sdxl() []Shape {
	return shapesOf([][2]int{
		{512, 2048}, {512, 1984}, {512, 1920}, {512, 1856}, {576, 1792}, {576, 1728}, {576, 1664},
		{640, 1600}, {640, 1536}, {704, 1472}, {704, 1408}, {704, 1344}, {768, 1344}, {768, 1280},
		{832, 1216}, {832, 1152}, {896, 1152}, {896, 1088}, {960, 1088}, {960, 1024}, {1024, 1024},
		{1024, 960}, {1088, 960}, {1088, 896}, {1152, 896}, {1152, 832}, {1216, 832}, {1280, 768},
		{1344, 768}, {1344, 704}, {1408, 704}, {1472, 704}, {1536, 640}, {1600, 640}, {1664, 576},
		{1728, 576}, {1792, 576}, {1856, 512}, {1920, 512}, {1984, 512}, {2048, 512},
	}, 0)
}

// shapesOf is the (height, width) pairs as shapes of t frames.
func shapesOf(hw [][2]int, t int) []Shape {
	out := make([]Shape, len(hw))
	for i, p := range hw {
		out[i] = Shape{H: p[0], W: p[1], T: t}
	}
	return out
}

// video is a clip preset: at each of frames (longest first), the same
// (height, width) list. The sides are multiples of 16 (a VAE's 8 times a
// patch of 2) and the frame counts 4k+1, as a causal video VAE with a
// temporal factor of 4 takes them (its first frame apart; CogVideoX's 49,
// HunyuanVideo's 129, Wan's 81 frames).
func video(hw [][2]int, frames ...int) []Shape {
	var out []Shape
	for _, t := range frames {
		out = append(out, shapesOf(hw, t)...)
	}
	return out
}

// video480 is Mochi 1's 480×848 (16:9, 407,040 pixels) and its portrait
// twin, with 4:3, 3:4 and 1:1 at about its area; video720 HunyuanVideo's
// and Wan's 720×1280 likewise.
var (
	video480 = [][2]int{{480, 848}, {848, 480}, {528, 704}, {704, 528}, {640, 640}}
	video720 = [][2]int{{720, 1280}, {1280, 720}, {832, 1104}, {1104, 832}, {960, 960}}
)

// Presets names the bucket lists a job may name instead of writing one:
// SDXL's 41 buckets at 1024², and the same scaled to 768² and 512² (each
// side times 3/4 or 1/2: multiples of 48 and 32); and two clip presets
// (video), each five aspect ratios (16:9, 9:16, 4:3, 3:4, 1:1) at three
// lengths: video-480 at about 480×848 (Mochi 1's) of 49, 33 and 17
// frames, video-720 at about 720×1280 (HunyuanVideo's) of 129, 65 and
// 33 frames.
func Presets() []string {
	return []string{"sdxl", "sdxl-768", "sdxl-512", "video-480", "video-720"}
}

// Preset returns a preset's buckets, false if name is none.
func Preset(name string) ([]Shape, bool) {
	num, den := 0, 0
	switch name {
	case "video-480":
		return video(video480, 49, 33, 17), true
	case "video-720":
		return video(video720, 129, 65, 33), true
	case "sdxl", "sdxl-1024":
		num, den = 1, 1
	case "sdxl-768":
		num, den = 3, 4
	case "sdxl-512":
		num, den = 1, 2
	default:
		return nil, false
	}
	s := sdxl()
	for i := range s {
		s[i] = Shape{H: s[i].H * num / den, W: s[i].W * num / den}
	}
	return s, true
}

// Parse reads a job's buckets: a preset's name (Presets), or a comma
// list of HxW (height by width, as torchvision writes sizes) or of HxWxT
// (clip buckets, T frames), not both, in the order whose first of two
// equally near buckets wins (Nearest, NearestClip). No two buckets may
// be the same; at most MaxBuckets, sides in [1, MaxSide], frames in [1,
// MaxFrames].
func Parse(s string) ([]Shape, error) {
	if p, ok := Preset(s); ok {
		return p, nil
	}
	if s == "" {
		return nil, fmt.Errorf("%w: no buckets: name a preset (%s) or list HxW sizes", ErrSpec, strings.Join(Presets(), ", "))
	}
	parts := strings.Split(s, ",")
	if len(parts) > MaxBuckets {
		return nil, fmt.Errorf("%w: %d buckets, more than %d", ErrSpec, len(parts), MaxBuckets)
	}
	out := make([]Shape, 0, len(parts))
	seen := make(map[Shape]bool, len(parts))
	for _, p := range parts {
		sh, err := parseShape(strings.TrimSpace(p))
		if err != nil {
			return nil, err
		}
		if seen[sh] {
			return nil, fmt.Errorf("%w: bucket %s is listed twice", ErrSpec, sh)
		}
		if len(out) > 0 && (sh.T > 0) != (out[0].T > 0) {
			return nil, fmt.Errorf("%w: bucket %s and bucket %s: a list is of images (HxW) or of clips (HxWxT), not both", ErrSpec, out[0], sh)
		}
		seen[sh] = true
		out = append(out, sh)
	}
	return out, nil
}

func parseShape(p string) (Shape, error) {
	parts := strings.Split(p, "x")
	if len(parts) < 2 || len(parts) > 3 {
		return Shape{}, fmt.Errorf("%w: bucket %s is not HxW or HxWxT (nor a preset: %s)", ErrSpec, quote.Input(p), strings.Join(Presets(), ", "))
	}
	var n [3]int
	for i, s := range parts {
		var err error
		if n[i], err = strconv.Atoi(s); err != nil {
			// strconv's error would quote s whole.
			return Shape{}, fmt.Errorf("%w: bucket %s is not HxW or HxWxT: %s is not a whole number", ErrSpec, quote.Input(p), quote.Input(s))
		}
	}
	if n[0] < 1 || n[1] < 1 || n[0] > MaxSide || n[1] > MaxSide {
		return Shape{}, fmt.Errorf("%w: bucket %s: sides are 1..%d", ErrSpec, quote.Input(p), MaxSide)
	}
	if len(parts) == 3 && (n[2] < 1 || n[2] > MaxFrames) {
		return Shape{}, fmt.Errorf("%w: bucket %s: frames are 1..%d", ErrSpec, quote.Input(p), MaxFrames)
	}
	return Shape{H: n[0], W: n[1], T: n[2]}, nil
}

// Format writes shapes as Parse reads them.
func Format(shapes []Shape) string {
	b := make([]string, len(shapes))
	for i, s := range shapes {
		b[i] = s.String()
	}
	return strings.Join(b, ",")
}
