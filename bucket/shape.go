package bucket

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/brandgw/brand/internal/errkind"
)

// ErrSpec marks a bucket list, budget or resume point that is not valid
// (400).
var ErrSpec = errkind.New(errkind.Invalid, "invalid buckets")

// Shape is a bucket: the height and width every image of its batches is
// resized to cover and cropped to.
type Shape struct{ H, W int }

func (s Shape) String() string { return strconv.Itoa(s.H) + "x" + strconv.Itoa(s.W) }

// Pixels is the shape's area.
func (s Shape) Pixels() int64 { return int64(s.H) * int64(s.W) }

// MaxSide bounds a bucket's side: far beyond any model's resolution.
const MaxSide = 8192

// MaxBuckets bounds a bucket list.
const MaxBuckets = 256

// sdxl is SDXL's aspect buckets of about 1024² pixels, (height, width)
// as its paper's appendix lists them: sides multiples of 64, aspect
// ratios from 1:4 to 4:1.
func sdxl() []Shape {
	return []Shape{
		{512, 2048}, {512, 1984}, {512, 1920}, {512, 1856}, {576, 1792}, {576, 1728}, {576, 1664},
		{640, 1600}, {640, 1536}, {704, 1472}, {704, 1408}, {704, 1344}, {768, 1344}, {768, 1280},
		{832, 1216}, {832, 1152}, {896, 1152}, {896, 1088}, {960, 1088}, {960, 1024}, {1024, 1024},
		{1024, 960}, {1088, 960}, {1088, 896}, {1152, 896}, {1152, 832}, {1216, 832}, {1280, 768},
		{1344, 768}, {1344, 704}, {1408, 704}, {1472, 704}, {1536, 640}, {1600, 640}, {1664, 576},
		{1728, 576}, {1792, 576}, {1856, 512}, {1920, 512}, {1984, 512}, {2048, 512},
	}
}

// Presets names the bucket lists a job may name instead of writing one:
// SDXL's 41 buckets at 1024², and the same scaled to 768² and 512² (each
// side times 3/4 or 1/2: multiples of 48 and 32).
func Presets() []string { return []string{"sdxl", "sdxl-768", "sdxl-512"} }

// Preset returns a preset's buckets, false if name is none.
func Preset(name string) ([]Shape, bool) {
	num, den := 0, 0
	switch name {
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
		s[i] = Shape{s[i].H * num / den, s[i].W * num / den}
	}
	return s, true
}

// Parse reads a job's buckets: a preset's name (Presets), or a comma
// list of HxW (height by width, as torchvision writes sizes), in the
// order whose first of two equally near buckets wins (Nearest). No two
// buckets may be the same; at most MaxBuckets, sides in [1, MaxSide].
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
		seen[sh] = true
		out = append(out, sh)
	}
	return out, nil
}

func parseShape(p string) (Shape, error) {
	h, w, ok := strings.Cut(p, "x")
	if !ok {
		return Shape{}, fmt.Errorf("%w: bucket %q is not HxW (nor a preset: %s)", ErrSpec, p, strings.Join(Presets(), ", "))
	}
	hi, err1 := strconv.Atoi(h)
	wi, err2 := strconv.Atoi(w)
	if err := errors.Join(err1, err2); err != nil {
		return Shape{}, fmt.Errorf("%w: bucket %q is not HxW: %v", ErrSpec, p, err)
	}
	if hi < 1 || wi < 1 || hi > MaxSide || wi > MaxSide {
		return Shape{}, fmt.Errorf("%w: bucket %q: sides are 1..%d", ErrSpec, p, MaxSide)
	}
	return Shape{hi, wi}, nil
}

// Format writes shapes as Parse reads them.
func Format(shapes []Shape) string {
	b := make([]string, len(shapes))
	for i, s := range shapes {
		b[i] = s.String()
	}
	return strings.Join(b, ",")
}
