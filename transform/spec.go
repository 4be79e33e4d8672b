package transform

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/brandgw/brand/internal/errkind"
)

// Sentinel errors. Every error the package returns wraps one of them.
var (
	// ErrSpec: a pipeline definition or a configuration is invalid.
	ErrSpec = errkind.New(errkind.Internal, "transform: invalid pipeline")
	// ErrUnknownPipeline: a job named a pipeline the server does not define.
	ErrUnknownPipeline = errkind.Named(errkind.Invalid, "unknown_pipeline", "transform: unknown pipeline")
	// ErrDecode: the image could not be decoded (malformed, truncated, or
	// a format or variant the decoders do not read).
	ErrDecode = errkind.Named(errkind.Unprocessable, "bad_image", "transform: cannot decode image")
	// ErrTooLarge: the image's header claims more pixels than the bound;
	// nothing was allocated for its pixels.
	ErrTooLarge = errkind.Named(errkind.Unprocessable, "bad_image", "transform: image larger than the pixel bound")
	// ErrNeedsTurboJPEG: a job named a pipeline that cuts JPEGs for the
	// trainer's GPU decoder (Output GPUJPEG) on a server built without
	// libjpeg-turbo (the brand_turbojpeg tag), which alone can cut one.
	ErrNeedsTurboJPEG = errkind.Named(errkind.Invalid, "needs_turbojpeg", "transform: the pipeline needs a server built with libjpeg-turbo")
)

// Operator names, as a configuration spells them.
const (
	OpResize     = "resize"
	OpCenterCrop = "center_crop"
	// OpResizeCover scales an image, aspect kept, to the smallest size
	// that covers [height, width]: the side that binds to its size, the
	// other to ⌊side·scale⌋ (as torchvision truncates Resize's longer
	// side), computed in integers. With a center_crop of the same size
	// after it, an image fills a shape bucket (package bucket).
	OpResizeCover = "resize_cover"
	// OpRandomCrop keeps a box of [height, width] at offsets drawn from
	// the sample's key, top then left, each uniform over the positions
	// the box fits (torchvision's RandomCrop, without padding); an image
	// smaller than the box is cropped at the centre, padded as
	// center_crop pads.
	OpRandomCrop        = "random_crop"
	OpRandomResizedCrop = "random_resized_crop"
	OpHFlip             = "hflip"
)

// MaxOps bounds a pipeline's operators (each has a stream domain of its
// own, domainTransform+k, and the last byte of the domain holds k).
const MaxOps = 32

// maxSide bounds an operator's output side: far beyond any training
// resolution, and small enough that a side times a side times 3 channels
// cannot overflow anything.
const maxSide = 1 << 14

// Op is one operator of a pipeline, as JSON:
//
//	{"op": "resize", "size": 256}                     shorter side to 256, aspect kept
//	{"op": "resize", "size": [336, 448]}              to 448 wide, 336 high, aspect not kept
//	{"op": "resize_cover", "size": [896, 1152]}       aspect kept, the smallest size covering 896 high, 1152 wide
//	{"op": "center_crop", "size": 224}                or "size": [h, w]
//	{"op": "random_crop", "size": [896, 1152]}        a box of that size at drawn offsets
//	{"op": "random_resized_crop", "size": 224, "scale": [0.08, 1], "ratio": [0.75, 1.3333333333333333]}
//	{"op": "hflip", "p": 0.5}
//
// Sizes are [height, width] when a list, as torchvision's. Omitted scale,
// ratio and p take torchvision's defaults.
type Op struct {
	Op string `json:"op"`
	// Size is the output size: one number (a square for the crops, the
	// shorter side for resize) or [height, width].
	Size Size `json:"size,omitzero"`
	// MaxSize bounds resize's longer side (torchvision's max_size); 0 is
	// none.
	MaxSize int `json:"max_size,omitempty"`
	// Scale is random_resized_crop's range of the crop's area as a
	// fraction of the image's.
	Scale *[2]float64 `json:"scale,omitempty"`
	// Ratio is random_resized_crop's range of the crop's aspect ratio
	// (width / height), drawn log-uniformly.
	Ratio *[2]float64 `json:"ratio,omitempty"`
	// P is hflip's probability.
	P *float64 `json:"p,omitempty"`
}

// Size is an output size: Square (one number in JSON) or [H, W].
type Size struct {
	H, W   int
	Square bool // written as one number; for resize, the shorter side
}

// IsZero reports an omitted size.
func (s Size) IsZero() bool { return s.H == 0 && s.W == 0 }

// UnmarshalJSON reads 224 or [224, 224].
func (s *Size) UnmarshalJSON(b []byte) error {
	var n int
	if err := json.Unmarshal(b, &n); err == nil {
		*s = Size{H: n, W: n, Square: true}
		return nil
	}
	var hw []int
	if err := json.Unmarshal(b, &hw); err != nil || len(hw) != 2 {
		return fmt.Errorf("size %s: a positive integer or [height, width]", b)
	}
	*s = Size{H: hw[0], W: hw[1]}
	return nil
}

// MarshalJSON writes a square as one number.
func (s Size) MarshalJSON() ([]byte, error) {
	if s.Square {
		return json.Marshal(s.H)
	}
	return json.Marshal([2]int{s.H, s.W})
}

// Layout is the order of a tensor's axes.
type Layout string

const (
	// CHW is channels, height, width: what torchvision's PILToTensor and
	// v2 transforms produce and a model's NCHW input stacks, so that
	// torch.from_numpy of the member is the tensor the trainer wanted.
	CHW Layout = "chw"
	// HWC is height, width, channels: the decoded image's own order
	// (PIL's, numpy.asarray(img)'s).
	HWC Layout = "hwc"
)

// Orientation says what the EXIF orientation tag of a JPEG does.
type Orientation string

const (
	// IgnoreEXIF leaves the stored pixels as they are, as torchvision's
	// default loader (PIL's Image.open, convert("RGB")) does.
	IgnoreEXIF Orientation = "ignore"
	// ApplyEXIF transposes the image as PIL's ImageOps.exif_transpose
	// would, before any other operator, so crops and sizes are those of
	// the image as a viewer shows it.
	ApplyEXIF Orientation = "apply"
)

// Spec is a named pipeline's definition: the operators after decoding,
// in order, and how decoding and output behave.
type Spec struct {
	Ops []Op `json:"ops"`
	// EXIF is "ignore" (the default, as torchvision) or "apply".
	EXIF Orientation `json:"exif,omitempty"`
	// Background, when set, is the [r, g, b] colour an image with alpha is
	// composited on; when absent alpha is dropped (the colour channels
	// kept as stored), as PIL's convert("RGB") does.
	Background *[3]uint8 `json:"background,omitempty"`
	// Layout is "chw" (the default) or "hwc".
	Layout Layout `json:"layout,omitempty"`
	// ReducedDecode lets a JPEG be decoded at 1/2, 1/4 or 1/8 of its size
	// when the first operator's output is at least that much smaller than
	// its input (libjpeg's DCT scaling, as PIL's draft), with a decoder
	// that can. The crop boxes and flips are unchanged; the pixels differ
	// from a full decode within docs/transform.md §6's bound. Absent is
	// true.
	ReducedDecode *bool `json:"reduced_decode,omitempty"`
	// Output is what the pipeline sends for an image: its tensor (absent,
	// the default) or, with "gpu_jpeg", the JPEG cut to the crop for the
	// trainer's GPU decoder and what is left to do (GPUCrop;
	// docs/transform.md §13). Absent stays absent, so that the other
	// pipelines' fingerprints do not change.
	Output Output `json:"output,omitempty"`
}

// Output is what a pipeline sends for an image.
type Output string

// GPUJPEG sends, for each JPEG the pipeline can cut (NotCut otherwise),
// the JPEG cut losslessly to its crop box and the residual box, flip and
// output size (Pipeline.GPUCrop); any other image is sent as its tensor.
const GPUJPEG Output = "gpu_jpeg"

func (s Spec) reducedDecode() bool { return s.ReducedDecode == nil || *s.ReducedDecode }

// Built-in pipelines, defined on every server without configuration.
const (
	ImagenetTrain = "imagenet-train"
	ImagenetEval  = "imagenet-eval"
	// ImagenetTrainGPU is imagenet-train's draws with Output GPUJPEG: the
	// same box and flip for every key, cut for the trainer's GPU decoder.
	// It is built in only where JPEGs can be cut (the brand_turbojpeg tag);
	// elsewhere Set.Get refuses it with ErrNeedsTurboJPEG.
	ImagenetTrainGPU = "imagenet-train-gpu"
)

// Builtins returns the built-in pipelines' specs: torchvision's standard
// ImageNet recipes,
//
//	imagenet-train: RandomResizedCrop(224, scale=(0.08, 1), ratio=(3/4, 4/3)), RandomHorizontalFlip(0.5)
//	imagenet-eval:  Resize(256), CenterCrop(224)
//
// as uint8 CHW tensors (the trainer converts to float and normalises on
// its accelerator, where that is nearly free); and, in a build with the
// brand_turbojpeg tag, imagenet-train-gpu: imagenet-train's operators
// with Output GPUJPEG.
func Builtins() map[string]Spec {
	scale := [2]float64{0.08, 1}
	ratio := [2]float64{3.0 / 4.0, 4.0 / 3.0}
	p := 0.5
	train := []Op{
		{Op: OpRandomResizedCrop, Size: Size{H: 224, W: 224, Square: true}, Scale: &scale, Ratio: &ratio},
		{Op: OpHFlip, P: &p},
	}
	b := map[string]Spec{
		ImagenetTrain: {Ops: train},
		ImagenetEval: {Ops: []Op{
			{Op: OpResize, Size: Size{H: 256, W: 256, Square: true}},
			{Op: OpCenterCrop, Size: Size{H: 224, W: 224, Square: true}},
		}},
	}
	if canCut {
		b[ImagenetTrainGPU] = Spec{Ops: slices.Clone(train), Output: GPUJPEG}
	}
	return b
}

// validate checks a spec and fills torchvision's defaults into its
// operators, returning the completed copy.
func (s Spec) validate() (Spec, error) {
	if len(s.Ops) > MaxOps {
		return s, fmt.Errorf("%w: %d operators, at most %d", ErrSpec, len(s.Ops), MaxOps)
	}
	switch s.EXIF {
	case "":
		s.EXIF = IgnoreEXIF
	case IgnoreEXIF, ApplyEXIF:
	default:
		return s, fmt.Errorf("%w: exif %q: %q or %q", ErrSpec, s.EXIF, IgnoreEXIF, ApplyEXIF)
	}
	switch s.Layout {
	case "":
		s.Layout = CHW
	case CHW, HWC:
	default:
		return s, fmt.Errorf("%w: layout %q: %q or %q", ErrSpec, s.Layout, CHW, HWC)
	}
	switch s.Output {
	case "":
	case GPUJPEG:
		if !canCut {
			return s, fmt.Errorf("%w: output %q: %w", ErrSpec, s.Output, errNoCutBuild)
		}
	default:
		return s, fmt.Errorf("%w: output %q: absent (tensors) or %q", ErrSpec, s.Output, GPUJPEG)
	}
	ops := make([]Op, len(s.Ops))
	for i, op := range s.Ops {
		op, err := op.validate()
		if err != nil {
			return s, fmt.Errorf("%w: operator %d: %w", ErrSpec, i, err)
		}
		ops[i] = op
	}
	s.Ops = ops
	return s, nil
}

func (op Op) validate() (Op, error) {
	sizeOK := func() error {
		if op.Size.H < 1 || op.Size.W < 1 || op.Size.H > maxSide || op.Size.W > maxSide {
			return fmt.Errorf("%s: size must be 1 to %d pixels a side", op.Op, maxSide)
		}
		return nil
	}
	only := func(allowed ...string) error {
		set := map[string]bool{
			"max_size": op.MaxSize != 0, "scale": op.Scale != nil, "ratio": op.Ratio != nil, "p": op.P != nil,
			"size": !op.Size.IsZero(),
		}
		for name, present := range set {
			if present && !slices.Contains(allowed, name) {
				return fmt.Errorf("%s takes no %q", op.Op, name)
			}
		}
		return nil
	}
	switch op.Op {
	case OpResize:
		if err := only("size", "max_size"); err != nil {
			return op, err
		}
		if err := sizeOK(); err != nil {
			return op, err
		}
		if !op.Size.Square && op.MaxSize != 0 {
			return op, fmt.Errorf("resize: max_size applies to a size of one number (the shorter side), not [height, width]")
		}
		if op.MaxSize != 0 && (op.MaxSize <= op.Size.H || op.MaxSize > maxSide) {
			return op, fmt.Errorf("resize: max_size %d must exceed size %d and be at most %d", op.MaxSize, op.Size.H, maxSide)
		}
	case OpCenterCrop, OpResizeCover, OpRandomCrop:
		if err := only("size"); err != nil {
			return op, err
		}
		if err := sizeOK(); err != nil {
			return op, err
		}
	case OpRandomResizedCrop:
		if err := only("size", "scale", "ratio"); err != nil {
			return op, err
		}
		if err := sizeOK(); err != nil {
			return op, err
		}
		if op.Scale == nil {
			op.Scale = &[2]float64{0.08, 1}
		}
		if op.Ratio == nil {
			op.Ratio = &[2]float64{3.0 / 4.0, 4.0 / 3.0}
		}
		sc, r := *op.Scale, *op.Ratio
		if !(sc[0] > 0 && sc[0] <= sc[1] && sc[1] <= 1) {
			return op, fmt.Errorf("random_resized_crop: scale %v: 0 < low <= high <= 1", sc)
		}
		// Ratios far from 1 would make detExp's squarings overflow long
		// before a crop could fit; 1/1000 to 1000 covers every recipe.
		if !(r[0] >= 1e-3 && r[0] <= r[1] && r[1] <= 1e3) {
			return op, fmt.Errorf("random_resized_crop: ratio %v: 0.001 <= low <= high <= 1000", r)
		}
	case OpHFlip:
		if err := only("p"); err != nil {
			return op, err
		}
		if op.P == nil {
			p := 0.5
			op.P = &p
		}
		if p := *op.P; !(p >= 0 && p <= 1) || math.IsNaN(p) {
			return op, fmt.Errorf("hflip: p %v: 0 <= p <= 1", p)
		}
	case "":
		return op, errors.New(`no "op"`)
	default:
		return op, fmt.Errorf("unknown operator %q; the operators are %s", op.Op,
			strings.Join([]string{OpResize, OpResizeCover, OpCenterCrop, OpRandomCrop, OpRandomResizedCrop, OpHFlip}, ", "))
	}
	return op, nil
}

// Config is a server's pipeline configuration file:
//
//	{"pipelines": {"name": Spec, …}}
//
// Its pipelines are defined beside the built-ins, and may replace one.
type Config struct {
	Pipelines map[string]Spec `json:"pipelines"`
}

// ParseConfig reads a configuration, refusing unknown fields (a misspelt
// "ratio" would otherwise silently take the default) and a name given
// twice in one object: a pipeline defined twice, or an operator's field
// given twice, would otherwise silently take the last.
func ParseConfig(b []byte) (Config, error) {
	var c Config
	d := json.NewDecoder(bytes.NewReader(b))
	d.DisallowUnknownFields()
	if err := d.Decode(&c); err != nil {
		return c, fmt.Errorf("%w: configuration: %w", ErrSpec, err)
	}
	if d.More() {
		return c, fmt.Errorf("%w: configuration: data after the object", ErrSpec)
	}
	if err := repeatedName(b); err != nil {
		return c, fmt.Errorf("%w: configuration: %w", ErrSpec, err)
	}
	for name := range c.Pipelines {
		if !ValidName(name) {
			return c, fmt.Errorf("%w: pipeline name %q: 1 to 64 of a-z, 0-9, '-', '_', '.'", ErrSpec, name)
		}
	}
	return c, nil
}

// repeatedName reports a member name given twice in one object of the
// JSON value b holds (RFC 7493 §2.3), naming where; encoding/json keeps
// the last and drops the first. b has been decoded already: a syntax
// error is not its to report.
func repeatedName(b []byte) error {
	// frame is an object or an array being read: an object's names so
	// far and whether its next token is a name, an array's elements so
	// far, and where it is in the value.
	type frame struct {
		names  map[string]bool
		isName bool
		n      int
		at     string
	}
	var stack []*frame
	where := "" // where the value after an object's name is
	d := json.NewDecoder(bytes.NewReader(b))
	for {
		tok, err := d.Token()
		if err != nil {
			return nil // the end, or an error the decoder named already
		}
		var top *frame
		if len(stack) > 0 {
			top = stack[len(stack)-1]
		}
		if top != nil && top.names != nil && top.isName {
			name, ok := tok.(string)
			if !ok { // '}'
				stack = stack[:len(stack)-1]
				continue
			}
			if top.names[name] {
				if top.at == ".pipelines" {
					return fmt.Errorf("pipeline %q is defined twice; define each pipeline once", name)
				}
				return fmt.Errorf("%q is given twice in one object (at %s)", name, strings.TrimPrefix(top.at+"."+name, "."))
			}
			top.names[name], top.isName = true, false
			where = top.at + "." + name
			continue
		}
		if tok == json.Delim(']') {
			stack = stack[:len(stack)-1]
			continue
		}
		// A value: an array's next element, or the value of the name
		// just read (after which the object's next token is a name).
		at := where
		switch {
		case top != nil && top.names == nil:
			at = fmt.Sprintf("%s[%d]", top.at, top.n)
			top.n++
		case top != nil:
			top.isName = true
		}
		switch tok {
		case json.Delim('{'):
			stack = append(stack, &frame{names: map[string]bool{}, isName: true, at: at})
		case json.Delim('['):
			stack = append(stack, &frame{at: at})
		}
	}
}

// ValidName reports whether name is a valid pipeline name: 1 to 64 of
// a-z, 0-9, '-', '_', '.', safe in a query parameter, a metric label and a
// log line.
func ValidName(name string) bool {
	if name == "" || len(name) > 64 {
		return false
	}
	for _, r := range name {
		if !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-' || r == '_' || r == '.') {
			return false
		}
	}
	return true
}
