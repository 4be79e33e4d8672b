package stored

import (
	"context"
	"fmt"

	"github.com/brandgw/brand/imagesize"
	"github.com/brandgw/brand/s3backend"
)

// SizesKey is where a dataset root keeps its samples' image sizes
// (imagesize.File, written by `brand index --sizes` or `brand pack
// --sizes`): what a job batching images by shape lays its epochs out
// from. It names the index version it is of; an append writes the new
// version's (the old samples' sizes copied), a re-index leaves it stale
// until written again. Its readers are the serving catalog
// (catalog.Dataset.LoadSizes) and an append.
const SizesKey = "_brand/image-sizes"

// maxSizesBytes bounds a sizes file: a few bytes a sample, for billions
// of samples.
const maxSizesBytes = 16 << 30

// ReadSizes reads the image sizes stored in st (SizesKey), which must be
// of index version index with n samples: a file of another version, or
// one that does not decode, is an error wrapping imagesize.ErrFile. A
// dataset with none answers an error wrapping s3backend.ErrNotFound.
func ReadSizes(ctx context.Context, st s3backend.Store, index string, n int) (*imagesize.File, error) {
	b, err := ReadWhole(ctx, st, SizesKey, maxSizesBytes, "write them with `brand index --sizes`")
	if err != nil {
		return nil, err
	}
	var f imagesize.File
	if err := f.UnmarshalBinary(b); err != nil {
		return nil, fmt.Errorf("dataset: %s: %w", SizesKey, err)
	}
	if f.Index != index || len(f.Sizes) != n {
		return nil, fmt.Errorf("dataset: %s: %w: of index %s with %d samples, read for index %s with %d", SizesKey, imagesize.ErrFile, f.Index, len(f.Sizes), index, n)
	}
	return &f, nil
}
