package transform

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"runtime"
	"slices"
	"strings"
	"sync"
	"time"
)

// Options are a server's settings for all its pipelines.
type Options struct {
	// MaxPixels bounds an image's width × height as its header claims;
	// 0 is DefaultMaxPixels. Larger images are refused (ErrTooLarge)
	// before any pixel is allocated.
	MaxPixels int64
	// JPEG decodes JPEGs; nil is DefaultJPEGDecoder().
	JPEG JPEGDecoder
}

// Pipeline is a named, validated pipeline ready to apply. It is immutable
// and safe for concurrent use; per-call buffers live in a Scratch.
type Pipeline struct {
	name string
	spec Spec
	opt  Options
	fp   string
}

// New validates spec and returns its pipeline.
func New(name string, spec Spec, opt Options) (*Pipeline, error) {
	s, err := spec.validate()
	if err != nil {
		return nil, fmt.Errorf("pipeline %q: %w", name, err)
	}
	if opt.MaxPixels <= 0 {
		opt.MaxPixels = DefaultMaxPixels
	}
	if opt.JPEG == nil {
		opt.JPEG = DefaultJPEGDecoder()
	}
	p := &Pipeline{name: name, spec: s, opt: opt}
	p.fp = p.fingerprint()
	return p, nil
}

// Name is the pipeline's name.
func (p *Pipeline) Name() string { return p.name }

// Spec is the pipeline's definition with the defaults filled in.
func (p *Pipeline) Spec() Spec { return p.spec }

// Decoder names the JPEG decoder the pipeline uses.
func (p *Pipeline) Decoder() string { return p.opt.JPEG.Name() }

// Fingerprint names what decides the pipeline's bytes on this server: its
// spec with the defaults filled in, the JPEG decoder (another decoder's
// pixels differ by a few levels, docs/transform.md §6.2) and the pixel
// bound (which decides which images are refused). Servers whose pipelines
// of one name have one fingerprint give the same bytes for the same
// image and key; a server whose configuration changes a pipeline gives
// it another fingerprint, which a batch's ETag names. 16 hex digits.
func (p *Pipeline) Fingerprint() string { return p.fp }

func (p *Pipeline) fingerprint() string {
	spec, err := json.Marshal(p.spec)
	if err != nil {
		panic(fmt.Sprintf("transform: a validated spec does not encode: %v", err))
	}
	h := sha256.New()
	fmt.Fprintf(h, "brand-transform-v1|%s|%s|%d", spec, p.opt.JPEG.Name(), p.opt.MaxPixels)
	return hex.EncodeToString(h.Sum(nil)[:8])
}

// Size returns the length of the .npy member Apply would append for image
// and key, from the image's header and the draws alone: no pixel is
// decoded or allocated, so a server can reserve an output before it
// decodes (an image's header is parsed in microseconds). An image whose
// header Apply refuses is refused here with the same error (ErrDecode,
// ErrTooLarge); one that fails later, in its pixels, has a size here
// and fails in Apply.
func (p *Pipeline) Size(image []byte, key Key) (int, error) {
	f, err := p.Footprint(image, key)
	return f.Out, err
}

// Set is the pipelines a server defines: the built-ins and its
// configuration's. It is immutable and safe for concurrent use.
type Set struct {
	byName map[string]*Pipeline
	opt    Options
	// buckets are the shape buckets' pipelines made so far (BucketSpec),
	// by name: a job's buckets are a few dozen, each made once.
	buckets sync.Map // string → *Pipeline
}

// NewSet builds the built-ins and cfg's pipelines (which may replace a
// built-in) with opt.
func NewSet(cfg Config, opt Options) (*Set, error) {
	specs := Builtins()
	maps.Copy(specs, cfg.Pipelines)
	s := &Set{byName: make(map[string]*Pipeline, len(specs)), opt: opt}
	for name, spec := range specs {
		p, err := New(name, spec, opt)
		if err != nil {
			return nil, err
		}
		s.byName[name] = p
	}
	return s, nil
}

// Names returns the pipelines' names, sorted.
func (s *Set) Names() []string { return slices.Sorted(maps.Keys(s.byName)) }

// Get returns the pipeline of that name. An unknown name is
// ErrUnknownPipeline, with the names there are, for the 400 a client sees.
func (s *Set) Get(name string) (*Pipeline, error) {
	if p, ok := s.byName[name]; ok {
		return p, nil
	}
	if IsBucketName(name) {
		if p, ok := s.buckets.Load(name); ok {
			return p.(*Pipeline), nil
		}
		spec, err := BucketSpec(name)
		if err != nil {
			return nil, err
		}
		p, err := New(name, spec, s.opt)
		if err != nil {
			return nil, err
		}
		got, _ := s.buckets.LoadOrStore(name, p)
		return got.(*Pipeline), nil
	}
	if name == ImagenetTrainGPU && !canCut {
		return nil, fmt.Errorf("%w: pipeline %q cuts JPEGs for the trainer's GPU decoder: %w", ErrNeedsTurboJPEG, name, errNoCutBuild)
	}
	return nil, fmt.Errorf("%w %q; the pipelines are %s", ErrUnknownPipeline, name, strings.Join(s.Names(), ", "))
}

// CutsForGPU reports whether the pipeline sends JPEGs cut for the
// trainer's GPU decoder (Output GPUJPEG, GPUCrop) rather than tensors.
func (p *Pipeline) CutsForGPU() bool { return p.spec.Output == GPUJPEG }

// Scratch holds one worker's buffers between images, so that a worker
// transforming image after image allocates only what image/jpeg does. A
// Scratch is used by one goroutine at a time; the zero value is ready.
// It keeps no buffer larger than ScratchKeep bytes: a rare huge image's
// buffers go back to the garbage collector rather than staying with every
// worker.
type Scratch struct {
	decoded, oriented, view, tmp []byte
	ping, pong                   []byte
}

// ScratchKeep is the largest buffer a Scratch keeps between images:
// enough for a 2,000×2,000 decoded image (12 MB).
const ScratchKeep = 12 << 20

func (sc *Scratch) trim() {
	for _, b := range []*[]byte{&sc.decoded, &sc.oriented, &sc.view, &sc.tmp, &sc.ping, &sc.pong} {
		if cap(*b) > ScratchKeep {
			*b = nil
		}
	}
}

// Result describes one applied image.
type Result struct {
	// Out is dst with the .npy member appended.
	Out []byte
	// Shape is the tensor's shape in its layout: [3, H, W] for CHW,
	// [H, W, 3] for HWC.
	Shape [3]int
	// CPU is the thread CPU time the call took (wall time where the
	// system has no per-thread clock), for per-pipeline figures.
	CPU time.Duration
	// Denom is the JPEG's decode scale, 1/Denom (1 for a full decode or a
	// PNG).
	Denom int
	// Source is the image's size as the operators saw it.
	Source [2]int
}

// Apply decodes image (a JPEG or PNG member's bytes), runs the pipeline
// with the draws of key, and appends the tensor as a .npy member to dst,
// which a caller may pool (Result.Out is dst grown). sc may be nil. Apply
// is CPU-bound and does not block; a failed image is an error wrapping
// ErrDecode or ErrTooLarge that names what failed, and dst is returned
// unchanged in Result.Out.
func (p *Pipeline) Apply(dst, image []byte, key Key, sc *Scratch) (Result, error) {
	if sc == nil {
		sc = new(Scratch)
	}
	var res Result
	cpu := startCPU()
	defer runtime.UnlockOSThread()
	err := p.apply(dst, image, key, sc, &res)
	res.CPU = cpu.stop()
	sc.trim()
	if err != nil {
		res.Out = dst
		return res, fmt.Errorf("pipeline %q: %w", p.name, err)
	}
	return res, nil
}

func (p *Pipeline) apply(dst, data []byte, key Key, sc *Scratch, res *Result) error {
	hdr, err := readHeader(data, p.opt.MaxPixels, p.spec.EXIF)
	if err != nil {
		return err
	}
	w, h := hdr.size()
	res.Source = [2]int{w, h}
	pl := p.makePlan(w, h, key)

	// Decode, at reduced size and in part when the first step allows.
	var reg Region
	denom := 1
	if hdr.format == formatJPEG {
		want := 1
		if p.spec.reducedDecode() && !hdr.cmyk {
			want = decodeDenom(pl, w, h)
		}
		need := Rect{W: ceilDiv(hdr.w, want), H: ceilDiv(hdr.h, want)}
		if hdr.orientation == 1 {
			need = firstNeed(pl, w, h, want)
		}
		reg, denom, err = p.opt.JPEG.DecodeJPEG(sc.decoded, data, hdr, want, need)
		if err != nil {
			return err
		}
		full := Rect{W: ceilDiv(hdr.w, denom), H: ceilDiv(hdr.h, denom)}
		got := Rect{X: reg.X, Y: reg.Y, W: reg.Image.w, H: reg.Image.h}
		if denom != 1 && denom != want || !got.inside(full.W, full.H) || denom == want && !need.within(got) || denom != want && got != full {
			return fmt.Errorf("%w: decoder %s gave %+v at 1/%d, asked %+v at 1/%d", ErrDecode, p.opt.JPEG.Name(), got, denom, need, want)
		}
	} else {
		reg.Image, err = decodePNG(sc.decoded, data, p.spec.Background)
		if err != nil {
			return err
		}
		if reg.Image.w != hdr.w || reg.Image.h != hdr.h {
			return fmt.Errorf("%w: png decoded %d×%d pixels, header says %d×%d", ErrDecode, reg.Image.w, reg.Image.h, hdr.w, hdr.h)
		}
	}
	img := reg.Image
	sc.decoded = img.pix
	if hdr.orientation != 1 {
		img = orient(sc.oriented, img, hdr.orientation)
		sc.oriented, sc.decoded = sc.decoded, img.pix // swap: the next image reuses both
	}
	res.Denom = denom

	for i, st := range pl.steps {
		if st.flip {
			mirror(img)
			continue
		}
		// The step's input, in the (scaled) image of fw×fh full-size
		// pixels of which img holds the part at (ox, oy).
		d, ox, oy, fw, fh := 1, 0, 0, img.w, img.h
		if i == 0 {
			d, ox, oy, fw, fh = denom, reg.X, reg.Y, w, h
		}
		job, in, padded := stepJob(st, d, fw, fh)
		src := img
		if padded {
			src = padCrop(sc.view, img, st.src)
			sc.view = src.pix
		} else {
			job.dx, job.dy = in.X-ox, in.Y-oy
		}
		var out image8
		out, sc.tmp = resample(sc.ping, sc.tmp, src, job)
		sc.ping, sc.pong = sc.pong, out.pix
		img = out
	}
	res.Out, res.Shape = writeNPY(dst, img, p.spec.Layout, pl.mirror)
	return nil
}

// decodeDenom is the largest of 8, 4, 2 by which the JPEG can be decoded
// smaller with the first step still downscaling (or keeping its size),
// as PIL's draft chooses: never so small that the step would upscale.
func decodeDenom(pl plan, w, h int) int {
	if len(pl.steps) == 0 {
		return 1
	}
	s := pl.steps[0]
	if s.flip || !s.resizes() || !s.src.inside(w, h) {
		return 1
	}
	for d := 8; d >= 2; d /= 2 {
		if s.src.W >= s.outW*d && s.src.H >= s.outH*d {
			return d
		}
	}
	return 1
}

func ceilDiv(a, b int) int { return (a + b - 1) / b }

// scaledRect is the whole pixels of an image decoded at 1/d that box src
// (in full-size pixels, inside a w×h image) touches.
func scaledRect(src Rect, d, w, h int) Rect {
	r := Rect{X: src.X / d, Y: src.Y / d}
	r.W = min(ceilDiv(src.X+src.W, d), ceilDiv(w, d)) - r.X
	r.H = min(ceilDiv(src.Y+src.H, d), ceilDiv(h, d)) - r.Y
	return r
}

// stepJob is step st's resampling of an image of w×h full-size pixels
// decoded at 1/d, and where its input lies in that (scaled) image. The
// input is st's box — what torchvision crops before it resizes, so the
// filters clamp at its edges — or, at reduced size, the whole pixels the
// box touches, with the box in fractional coordinates. A box reaching
// outside the image (a center crop larger than it) is padded: the caller
// copies it with zeros, and the input is that copy.
func stepJob(st step, d, w, h int) (resampleJob, Rect, bool) {
	job := resampleJob{outW: st.outW, outH: st.outH, win: st.win}
	if d > 1 {
		r := scaledRect(st.src, d, w, h)
		fd := float64(d)
		job.inW, job.inH = r.W, r.H
		job.x0, job.y0 = float64(st.src.X)/fd-float64(r.X), float64(st.src.Y)/fd-float64(r.Y)
		job.x1 = float64(st.src.X+st.src.W)/fd - float64(r.X)
		job.y1 = float64(st.src.Y+st.src.H)/fd - float64(r.Y)
		return job, r, false
	}
	job.inW, job.inH = st.src.W, st.src.H
	job.x1, job.y1 = float64(st.src.W), float64(st.src.H)
	return job, st.src, !st.src.inside(w, h)
}

// firstNeed is the part of the image, decoded at 1/d, that the plan's
// first step reads: the pixels under its window's filters, or all of it
// when the step pads.
func firstNeed(pl plan, w, h, d int) Rect {
	full := Rect{W: ceilDiv(w, d), H: ceilDiv(h, d)}
	if len(pl.steps) == 0 || pl.steps[0].flip {
		return full
	}
	job, in, padded := stepJob(pl.steps[0], d, w, h)
	if padded {
		return full
	}
	r := job.reads()
	r.X += in.X
	r.Y += in.Y
	return r
}

// within reports whether r lies inside o.
func (r Rect) within(o Rect) bool {
	return r.X >= o.X && r.Y >= o.Y && r.X+r.W <= o.X+o.W && r.Y+r.H <= o.Y+o.H
}

// padCrop copies box r, which extends outside img, into buf, with zeros
// where it does.
func padCrop(buf []byte, img image8, r Rect) image8 {
	out := image8{pix: grow(buf, r.W*r.H*3), w: r.W, h: r.H}
	clear(out.pix)
	x0, x1 := max(r.X, 0), min(r.X+r.W, img.w)
	for y := max(r.Y, 0); y < min(r.Y+r.H, img.h); y++ {
		if x1 <= x0 {
			break
		}
		s := (y*img.w + x0) * 3
		d := ((y-r.Y)*r.W + x0 - r.X) * 3
		copy(out.pix[d:d+(x1-x0)*3], img.pix[s:s+(x1-x0)*3])
	}
	return out
}

// mirror flips img left to right in place.
func mirror(img image8) {
	for y := range img.h {
		row := img.pix[y*img.w*3 : (y+1)*img.w*3]
		for i, j := 0, img.w-1; i < j; i, j = i+1, j-1 {
			a, b := row[i*3:i*3+3], row[j*3:j*3+3]
			a[0], a[1], a[2], b[0], b[1], b[2] = b[0], b[1], b[2], a[0], a[1], a[2]
		}
	}
}

// writeNPY appends img as a .npy array in the layout, mirrored when asked.
func writeNPY(dst []byte, img image8, layout Layout, mirrored bool) ([]byte, [3]int) {
	shape := [3]int{3, img.h, img.w}
	if layout == HWC {
		shape = [3]int{img.h, img.w, 3}
	}
	dst = appendNPYHeader(dst, shape[:]...)
	n := len(dst)
	dst = slices.Grow(dst, len(img.pix))[:n+len(img.pix)]
	out := dst[n:]
	w, h := img.w, img.h
	for y := range h {
		row := img.pix[y*w*3 : (y+1)*w*3]
		if layout == HWC {
			o := out[y*w*3 : (y+1)*w*3]
			if !mirrored {
				copy(o, row)
				continue
			}
			for x := range w {
				s := (w - 1 - x) * 3
				o[x*3], o[x*3+1], o[x*3+2] = row[s], row[s+1], row[s+2]
			}
			continue
		}
		r := out[(0*h+y)*w : (0*h+y+1)*w]
		g := out[(1*h+y)*w : (1*h+y+1)*w]
		b := out[(2*h+y)*w : (2*h+y+1)*w]
		for x := range w {
			s := x * 3
			if mirrored {
				s = (w - 1 - x) * 3
			}
			r[x], g[x], b[x] = row[s], row[s+1], row[s+2]
		}
	}
	return dst, shape
}
