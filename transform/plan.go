package transform

import "fmt"

// A plan is a pipeline's geometry for one image: what every operator
// does, decided from the image's size and the sample's draws alone,
// before any pixel is decoded. The same plan is computed whichever
// decoder runs, which is why decoders may differ in pixels but never in
// crop boxes or flips.
//
// Operators are lowered to steps. A step resizes a box of its input to an
// output size and keeps a window of the result; crops, resizes and a crop
// after a resize fuse into one step (torchvision's crop-then-resize, and
// resize-then-crop computed only where the crop keeps), so that an image
// is resampled once per resize its pipeline names, never more.
type plan struct {
	steps []step
	// mirror flips the final image left to right as it is written out.
	mirror bool
	// Draws, for tests and the golden vectors: each random operator's
	// crop box (on its input) and flip, in operator order.
	crops []cropDraw
	flips []bool
	// outW×outH is the output image's size.
	outW, outH int
}

type cropDraw struct {
	Box      Rect
	Attempts int
}

// step is one resampling, or (flip) a mirror of the current image.
type step struct {
	flip bool
	// src is the box of the input resized; it may extend outside the
	// input (a crop larger than the image), where pixels are 0 as
	// torchvision pads.
	src Rect
	// outW×outH is the size src is resized to; equal to src's for a crop.
	outW, outH int
	// win is the part of the resized image kept.
	win Rect
}

func (s step) resizes() bool { return s.outW != s.src.W || s.outH != s.src.H }

// inside reports whether r lies within a w×h image.
func (r Rect) inside(w, h int) bool {
	return r.X >= 0 && r.Y >= 0 && r.X+r.W <= w && r.Y+r.H <= h
}

// makePlan lowers the pipeline's operators for an image of w×h pixels
// (as the operators see it: after EXIF orientation) and the key's draws.
func (p *Pipeline) makePlan(w, h int, key Key) plan {
	var pl plan
	var open *step // the step being fused into, not yet emitted
	emit := func() {
		if open != nil {
			pl.steps = append(pl.steps, *open)
			open = nil
		}
	}
	// settle applies a pending mirror before a geometric operator: a
	// mirror commutes with nothing that follows it, bit for bit.
	settle := func() {
		if pl.mirror {
			emit()
			pl.steps = append(pl.steps, step{flip: true})
			pl.mirror = false
		}
	}
	// cropTo keeps box r of the current w×h image.
	cropTo := func(r Rect) {
		settle()
		switch {
		case open == nil:
			open = &step{src: r, outW: r.W, outH: r.H, win: Rect{W: r.W, H: r.H}}
		case r.inside(w, h) && !open.resizes():
			// A crop of a crop: one box (the padding, if any, is where
			// the first box left the input, and stays there).
			open.src.X += open.win.X + r.X
			open.src.Y += open.win.Y + r.Y
			open.src.W, open.src.H = r.W, r.H
			open.outW, open.outH = r.W, r.H
			open.win = Rect{W: r.W, H: r.H}
		case r.inside(w, h):
			// A crop of a resize: a smaller window of the same resize.
			open.win = Rect{X: open.win.X + r.X, Y: open.win.Y + r.Y, W: r.W, H: r.H}
		default:
			emit()
			open = &step{src: r, outW: r.W, outH: r.H, win: Rect{W: r.W, H: r.H}}
		}
		w, h = r.W, r.H
	}
	// resizeTo scales the current image to nw×nh.
	resizeTo := func(nw, nh int) {
		settle()
		if nw == w && nh == h {
			return
		}
		if open != nil && (open.resizes() || open.win != (Rect{W: open.src.W, H: open.src.H})) {
			emit()
		}
		if open == nil {
			open = &step{src: Rect{W: w, H: h}}
		}
		open.outW, open.outH = nw, nh
		open.win = Rect{W: nw, H: nh}
		w, h = nw, nh
	}
	for i, op := range p.spec.Ops {
		switch op.Op {
		case OpResize:
			if !op.Size.Square { // torchvision's Resize([h, w]): that size, aspect not kept
				resizeTo(op.Size.W, op.Size.H)
				continue
			}
			resizeTo(resizedSize(w, h, op.Size.H, op.MaxSize))
		case OpResizeCover:
			resizeTo(coverSize(w, h, op.Size.W, op.Size.H))
		case OpCenterCrop:
			cropTo(centerCropBox(w, h, op.Size.W, op.Size.H))
		case OpRandomCrop:
			s := key.stream(i)
			box := randomCropBox(&s, w, h, op.Size.W, op.Size.H)
			pl.crops = append(pl.crops, cropDraw{Box: box, Attempts: 1})
			cropTo(box)
		case OpRandomResizedCrop:
			s := key.stream(i)
			box, attempts := randomResizedCropBox(&s, w, h, *op.Scale, *op.Ratio)
			pl.crops = append(pl.crops, cropDraw{Box: box, Attempts: attempts})
			cropTo(box)
			resizeTo(op.Size.W, op.Size.H)
		case OpHFlip:
			s := key.stream(i)
			f := flipDraw(&s, *op.P)
			pl.flips = append(pl.flips, f)
			if f {
				pl.mirror = !pl.mirror
			}
		default:
			panic(fmt.Sprintf("transform: operator %q passed validation", op.Op))
		}
	}
	emit()
	pl.outW, pl.outH = w, h
	return pl
}

// resizedSize is torchvision's Resize(size) of an int: the shorter side to
// size, the longer int(size·long/short) (truncated), then, with max_size,
// both scaled down so the longer is max_size.
func resizedSize(w, h, size, maxSize int) (int, int) {
	short, long := w, h
	if w > h {
		short, long = h, w
	}
	ns, nl := size, int(float64(size)*float64(long)/float64(short))
	if maxSize > 0 && nl > maxSize {
		ns, nl = int(float64(maxSize)*float64(ns)/float64(nl)), maxSize
	}
	if w <= h {
		return ns, nl
	}
	return nl, ns
}

// coverSize is the smallest size, aspect kept, that covers cw×ch: when
// the width binds (cw/w ≥ ch/h), cw by ⌊h·cw/w⌋, else ⌊w·ch/h⌋ by ch. In
// integers, so that every implementation agrees on every image.
func coverSize(w, h, cw, ch int) (int, int) {
	if int64(cw)*int64(h) >= int64(ch)*int64(w) {
		return cw, int(int64(h) * int64(cw) / int64(w))
	}
	return int(int64(w) * int64(ch) / int64(h)), ch
}

// centerCropBox is torchvision's center_crop: offsets round((in−out)/2)
// half to even, and a crop larger than the image padded with zeros on
// both sides, the odd pixel at the end.
func centerCropBox(w, h, cw, ch int) Rect {
	off := func(in, out int) int {
		if out > in {
			return -((out - in) / 2)
		}
		return roundHalfEven(float64(in-out) / 2)
	}
	return Rect{X: off(w, cw), Y: off(h, ch), W: cw, H: ch}
}
