package stagetest

import (
	"github.com/brandgw/brand/transform"
)

// setPipelines are the transform stage's pipelines (the set it is made
// with), the bucket pipelines among them.
type setPipelines struct{ s *transform.Set }

func (p setPipelines) Pipeline(name string) (*transform.Pipeline, error) { return p.s.Get(name) }
