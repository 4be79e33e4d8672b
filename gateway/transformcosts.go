package gateway

import (
	"time"

	"context"
	"sync"

	"github.com/brandgw/brand/api"
	"github.com/brandgw/brand/internal/batch/tensorize"
	"github.com/brandgw/brand/transform"
)

// minMeasuredImages is how many images a pipeline must have transformed
// on this node before a plan takes its measured cost over a calibration.
const minMeasuredImages = 100

// DefaultTransformCalibration is Config.TransformCalibration when zero:
// the generated photos a calibration runs, about a second of one core
// with the pure-Go decoder.
const DefaultTransformCalibration = 40

// pipelineCosts answers what a pipeline costs on this node, for /plan:
// the transform stage's measured CPU per image once it has transformed
// enough images, else a calibration on generated photos; decoding alone
// and a decoded image's weight always from a calibration, made once per
// pipeline and kept.
type pipelineCosts struct {
	stage   *tensorize.Stage
	workers int
	photos  int // a calibration's

	mu           sync.Mutex
	calibrations map[string]tensorize.Calibration
}

func newPipelineCosts(stage *tensorize.Stage, workers, photos int) *pipelineCosts {
	return &pipelineCosts{stage: stage, workers: workers, photos: photos, calibrations: map[string]tensorize.Calibration{}}
}

// Costs returns pipeline name's costs; an unknown name is
// transform.ErrUnknownPipeline. A first calibration costs about a second
// of one core; ctx is checked before it.
func (c *pipelineCosts) Costs(ctx context.Context, name string) (api.TransformCosts, error) {
	p, err := c.stage.Pipeline(name)
	if err != nil {
		return api.TransformCosts{}, err
	}
	cal, err := c.calibration(ctx, p)
	if err != nil {
		return api.TransformCosts{}, err
	}
	costs := api.TransformCosts{Pipeline: name, CPUPerImage: int64(cal.PerImage), DecodePerImage: int64(cal.DecodePerImage),
		DecodedFactor: cal.DecodedFactor, Workers: c.workers}
	if st, ok := c.stage.Meter(name); ok && st.Images >= minMeasuredImages {
		costs.CPUPerImage, costs.Measured = int64(st.PerImage()), true
	}
	return costs, nil
}

func (c *pipelineCosts) calibration(ctx context.Context, p *transform.Pipeline) (tensorize.Calibration, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if cal, ok := c.calibrations[p.Name()]; ok {
		return cal, nil
	}
	if err := ctx.Err(); err != nil {
		return tensorize.Calibration{}, err
	}
	cal, err := tensorize.Calibrate(p, c.photos)
	if err != nil {
		return cal, err
	}
	c.calibrations[p.Name()] = cal
	return cal, nil
}

// frameCost is this node's CPU a decoded video frame (decoding,
// converting and resampling), measured over the clips it has served,
// and whether it has decoded any.
func (c *pipelineCosts) frameCost() (time.Duration, bool) {
	f := c.stage.ClipFigures()
	if f.Decoded == 0 {
		return 0, false
	}
	return f.CPU / time.Duration(f.Decoded), true
}
