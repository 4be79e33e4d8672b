package gateway

import (
	"context"

	"github.com/brandgw/brand/internal/batch/sequences"
	"github.com/brandgw/brand/internal/batch/tensorize"
	"github.com/brandgw/brand/transform"
)

// stagePipelines are the transform stage's pipelines, the bucket
// pipelines among them, found when a batch is laid out (the stage is
// made after the orders).
type stagePipelines struct{ g *Gateway }

func (p stagePipelines) Pipeline(name string) (*transform.Pipeline, error) {
	return p.g.stage.Pipeline(name)
}

// stageOf is the gateway's pack and clip stages, found when a batch is
// made (the stages are made after the orders, whose units make batches
// through them).
type stageOf struct{ g *Gateway }

func (s stageOf) Pack(ctx context.Context, req sequences.Request) (*sequences.Output, error) {
	return s.g.packer.Pack(ctx, req)
}

func (s stageOf) PackVision(ctx context.Context, req sequences.VisionRequest) (*sequences.Output, error) {
	return s.g.packer.PackVision(ctx, req)
}

func (s stageOf) Clips(ctx context.Context, req tensorize.ClipRequest) (*tensorize.ClipOutput, error) {
	return s.g.stage.Clips(ctx, req)
}
