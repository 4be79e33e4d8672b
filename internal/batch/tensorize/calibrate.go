package tensorize

import (
	"fmt"
	"time"

	"github.com/brandgw/brand/internal/gen/photos"
	"github.com/brandgw/brand/transform"
)

// Calibration is what a pipeline costs on this machine, measured on
// generated photos of ImageNet-like sizes (internal/gen/photos: 300 to 500
// pixels a side, about 77 KiB): what a plan uses before the node has
// transformed images of its own.
type Calibration struct {
	// PerImage is the pipeline's thread CPU per image; DecodePerImage
	// that of decoding alone (a pipeline of no operator, decoded whole).
	PerImage, DecodePerImage time.Duration
	// DecodedFactor is a decoded image's bytes (3 a pixel) per byte of
	// its JPEG.
	DecodedFactor float64
	Images        int
	// Cut is how many of the Images a pipeline for the GPU's decoder
	// (Pipeline.CutsForGPU) cut, as the stage serves them: PerImage is
	// then the cut's CPU, not a tensor's.
	Cut int
}

// CalibrationSeed seeds the calibration's photos: the same photos on
// every node and run.
const CalibrationSeed = 1

// Calibrate runs p, and decoding alone, over n generated photos on the
// calling goroutine (a core), and returns the costs. A pipeline for the
// GPU's decoder is run as the stage serves it: each photo cut, and
// transformed where the cut refuses it.
func Calibrate(p *transform.Pipeline, n int) (Calibration, error) {
	decode, err := transform.New("decode", transform.Spec{Ops: []transform.Op{}, ReducedDecode: new(bool)}, transform.Options{})
	if err != nil {
		return Calibration{}, err
	}
	var c Calibration
	var decoded, stored float64
	sc := new(transform.Scratch)
	var out []byte
	for i := range n {
		ph, err := photos.One(CalibrationSeed, i)
		if err != nil {
			return Calibration{}, err
		}
		key := transform.Key{Seed: CalibrationSeed, Sample: uint64(i)}
		cut := false
		if p.CutsForGPU() {
			g, err := p.GPUCrop(out[:0], ph.JPEG, key)
			out, cut = g.JPEG, err == nil
			c.PerImage += g.CPU
			if cut {
				c.Cut++
			} else if !transform.NotCut(err) {
				return Calibration{}, fmt.Errorf("calibrating pipeline %q: %w", p.Name(), err)
			}
		}
		if !cut { // a tensor, as the stage makes of what it does not cut
			res, err := p.Apply(out[:0], ph.JPEG, key, sc)
			if err != nil {
				return Calibration{}, fmt.Errorf("calibrating pipeline %q: %w", p.Name(), err)
			}
			out = res.Out
			c.PerImage += res.CPU
		}
		res, err := decode.Apply(out[:0], ph.JPEG, key, sc)
		if err != nil {
			return Calibration{}, fmt.Errorf("calibrating the decoder: %w", err)
		}
		out = res.Out
		c.DecodePerImage += res.CPU
		decoded += float64(3 * ph.W * ph.H)
		stored += float64(len(ph.JPEG))
	}
	if n > 0 {
		c.PerImage /= time.Duration(n)
		c.DecodePerImage /= time.Duration(n)
		c.DecodedFactor = decoded / stored
	}
	c.Images = n
	return c, nil
}
