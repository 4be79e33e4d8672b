package stored

import (
	"context"

	"github.com/brandgw/brand/chunkindex"
	"github.com/brandgw/brand/s3backend"
	"github.com/brandgw/brand/vision"
)

// VisionFactsKey is where a dataset root of image-text samples keeps
// their facts (vision.FactsFile, written by `brand index --tokenizer`):
// what a vision job (seq= with vision=) lays its epochs out from, as a
// text token job does from its index's document token counts. It names
// the index version it is of; after a re-index or an append it is stale
// until written again.
const VisionFactsKey = "_brand/vision-facts"

// maxVisionFactsBytes bounds a facts file: a tokenizer file and some
// bytes a sample, for hundreds of millions of samples.
const maxVisionFactsBytes = 16 << 30

// ReadVisionFacts reads the facts stored beside ix, refusing facts of
// another index version (vision.ErrFactsFile). A dataset with none
// answers an error wrapping s3backend.ErrNotFound.
func ReadVisionFacts(ctx context.Context, st s3backend.Store, ix *chunkindex.Index) (*vision.FactsFile, error) {
	b, err := ReadWhole(ctx, st, VisionFactsKey, maxVisionFactsBytes, "index the image-text shards with `brand index --tokenizer FILE`")
	if err != nil {
		return nil, err
	}
	return vision.DecodeFacts(b, ix.ID(), ix.NumSamples())
}
