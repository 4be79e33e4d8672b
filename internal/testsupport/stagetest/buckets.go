package stagetest

import (
	"context"

	"github.com/brandgw/brand/internal/job/catalog"
	"github.com/brandgw/brand/transform"
)

// catalogSizes are the datasets' image sizes as their catalog loads
// them, for the bucket unit: gateway/buckets.go's.
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

// setPipelines are the transform stage's pipelines (the set it is made
// with), the bucket pipelines among them.
type setPipelines struct{ s *transform.Set }

func (p setPipelines) Pipeline(name string) (*transform.Pipeline, error) { return p.s.Get(name) }
