package catalog

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/brandgw/brand/dataset/stored"
	"github.com/brandgw/brand/imagesize"
	"github.com/brandgw/brand/internal/errkind"
	"github.com/brandgw/brand/s3backend"
)

// ErrNoSizes marks a job that batches by image shape over a dataset
// that has no image sizes for its index version: not indexed with
// `brand index --sizes`, or indexed again since (400).
var ErrNoSizes = errkind.New(errkind.Invalid, "no image sizes")

// sizesMemo holds a dataset version's image sizes once loaded: loaded on
// the first job that asks (LoadSizes), never for a dataset no such job
// reads. A view of some fields (Select) shares its dataset's: the sizes
// are of the samples, whichever fields a job reads. An ancestor's view
// (Ancestor) loads its descendant's and keeps their prefix: its samples
// are the first ones, under the same IDs.
type sizesMemo struct {
	mu sync.Mutex
	f  *imagesize.File
	// of, for an ancestor's view, is the dataset whose sizes it takes
	// the prefix of; nil for a dataset loaded from its own index.
	of *Dataset
}

// LoadSizes loads the dataset's image sizes (stored.SizesKey) from its
// store, once per dataset version (a failed load is tried again by the
// next job). It is ErrNoSizes, saying to write them with `brand index
// --sizes`, for a dataset without sizes or with sizes of another index
// version (or damaged ones); a store's error as it is.
func (d *Dataset) LoadSizes(ctx context.Context) (*imagesize.File, error) {
	m := d.sizes
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.f != nil {
		return m.f, nil
	}
	if m.of != nil {
		f, err := m.of.LoadSizes(ctx)
		if err != nil {
			return nil, err
		}
		m.f = prefix(f, d.Index.ID(), d.Index.NumSamples())
		return m.f, nil
	}
	f, err := stored.ReadSizes(ctx, d.Store, d.Index.ID(), d.Index.NumSamples())
	switch {
	case errors.Is(err, s3backend.ErrNotFound):
		return nil, fmt.Errorf("%w: dataset %s has none (%s): write them with `brand index --sizes`", ErrNoSizes, d.Name, stored.SizesKey)
	case errors.Is(err, imagesize.ErrFile):
		return nil, fmt.Errorf("%w: dataset %s: %w; write them again with `brand index --sizes`", ErrNoSizes, d.Name, err)
	case err != nil:
		return nil, err
	}
	m.f = f
	return f, nil
}

// Sizes is the dataset's image sizes if LoadSizes loaded them, else nil:
// what a layout reads, which must not wait for a store.
func (d *Dataset) Sizes() *imagesize.File {
	m := d.sizes
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.f == nil && m.of != nil {
		if f := m.of.Sizes(); f != nil {
			m.f = prefix(f, d.Index.ID(), d.Index.NumSamples())
		}
	}
	return m.f
}

// prefix is the sizes of f's first n samples, as the sizes of index id.
func prefix(f *imagesize.File, id string, n int) *imagesize.File {
	p := &imagesize.File{Index: id, MaxPixels: f.MaxPixels, Sizes: f.Sizes[:n:n]}
	for s, why := range f.Bad {
		if s < n {
			if p.Bad == nil {
				p.Bad = map[int]string{}
			}
			p.Bad[s] = why
		}
	}
	return p
}
