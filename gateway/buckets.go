package gateway

import (
	"context"

	"github.com/brandgw/brand/internal/job/catalog"
	"github.com/brandgw/brand/transform"
)

// catalogSizes are the datasets' image sizes as their catalog loads
// them (catalog.Dataset.LoadSizes), for the bucket unit.
type catalogSizes struct{}

func (catalogSizes) Load(ctx context.Context, ds *catalog.Dataset) error {
	_, err := ds.LoadSizes(ctx)
	return err
}

func (catalogSizes) Of(ds *catalog.Dataset, id int) (w, h int, ok bool) {
	f := ds.Sizes()
	if f == nil {
		return 0, 0, false
	}
	s, _ := f.Of(id)
	return int(s.W), int(s.H), true
}

// stagePipelines are the transform stage's pipelines, the bucket
// pipelines among them, found when a batch is laid out (the stage is
// made after the orders).
type stagePipelines struct{ g *Gateway }

func (p stagePipelines) Pipeline(name string) (*transform.Pipeline, error) {
	return p.g.stage.Pipeline(name)
}
