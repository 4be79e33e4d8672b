package catalog

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/brandgw/brand/chunkindex"
	"github.com/brandgw/brand/dataset/stored"
	"github.com/brandgw/brand/format"
	"github.com/brandgw/brand/internal/errkind"
	"github.com/brandgw/brand/s3backend"
	"github.com/brandgw/brand/tokenize"
	"github.com/brandgw/brand/vision"
)

// ErrNoVisionFacts marks a vision job over a dataset that has no
// image-text facts for its index version: not indexed with
// `brand index --tokenizer`, or indexed again since (400).
var ErrNoVisionFacts = errkind.New(errkind.Invalid, "no image-text facts")

// Vision is what a vision job (seq= with vision=) reads of a dataset
// beyond its index: its image-text facts (stored.VisionFactsKey) and
// the tokenizer they were counted with, which the pack stage tokenizes
// each sample with again.
type Vision struct {
	Facts *vision.FactsFile
	Model *tokenize.Model
}

// visionMemo holds a dataset version's Vision once loaded: loaded on the
// first vision job that asks (LoadVision), never for a dataset no vision
// job reads.
type visionMemo struct {
	mu sync.Mutex
	v  *Vision
}

// LoadVision loads the dataset's image-text facts and their tokenizer
// from its store, once per dataset version (a failed load is tried again
// by the next job). It is format.ErrNotImageText for a dataset served in
// place whose samples are not image-text samples, ErrNoVisionFacts for
// one without facts or with facts of another index version.
func (d *Dataset) LoadVision(ctx context.Context) (*Vision, error) {
	d.vision.mu.Lock()
	defer d.vision.mu.Unlock()
	if d.vision.v != nil {
		return d.vision.v, nil
	}
	if d.InPlace != nil {
		// Its format says whether its samples are image-text samples
		// (a Parquet row is; an MDS sample, a video's GOPs are not):
		// the refusal names the format or the fields.
		if err := format.CheckImageText(d.InPlace.Format, d.InPlace.Decoder); err != nil {
			return nil, fmt.Errorf("dataset %s: %w", d.Name, err)
		}
	}
	f, err := readVisionFacts(ctx, d.Store, d.Index)
	switch {
	case errors.Is(err, s3backend.ErrNotFound):
		return nil, fmt.Errorf("%w: dataset %s has none (%s): index it with `brand index --tokenizer FILE`", ErrNoVisionFacts, d.Name, stored.VisionFactsKey)
	case errors.Is(err, vision.ErrFactsFile):
		return nil, fmt.Errorf("%w: dataset %s: %w; write them again with `brand index --tokenizer FILE`", ErrNoVisionFacts, d.Name, err)
	case err != nil:
		return nil, err
	}
	m, err := tokenize.Load(f.Tokenizer)
	if err != nil {
		return nil, fmt.Errorf("%w: dataset %s: its facts' tokenizer: %w", ErrNoVisionFacts, d.Name, err)
	}
	d.vision.v = &Vision{Facts: f, Model: m}
	return d.vision.v, nil
}

// Vision is the dataset's image-text facts if LoadVision loaded them,
// else nil: what the layout reads, which must not wait for a store.
func (d *Dataset) Vision() *Vision {
	d.vision.mu.Lock()
	defer d.vision.mu.Unlock()
	return d.vision.v
}

// maxVisionFactsBytes bounds a facts file: a tokenizer file and some
// bytes a sample, for hundreds of millions of samples.
const maxVisionFactsBytes = 16 << 30

// readVisionFacts reads the facts stored beside ix (stored.VisionFactsKey),
// refusing facts of another index version (vision.ErrFactsFile). A
// dataset with none answers an error wrapping s3backend.ErrNotFound.
func readVisionFacts(ctx context.Context, st s3backend.Store, ix *chunkindex.Index) (*vision.FactsFile, error) {
	b, err := stored.ReadWhole(ctx, st, stored.VisionFactsKey, maxVisionFactsBytes, "index the image-text shards with `brand index --tokenizer FILE`")
	if err != nil {
		return nil, err
	}
	return vision.DecodeFacts(b, ix.ID(), ix.NumSamples())
}
