package gateway

import (
	"github.com/brandgw/brand/transform"
)

// stagePipelines are the transform stage's pipelines, the bucket
// pipelines among them, found when a batch is laid out (the stage is
// made after the orders).
type stagePipelines struct{ g *Gateway }

func (p stagePipelines) Pipeline(name string) (*transform.Pipeline, error) {
	return p.g.stage.Pipeline(name)
}
