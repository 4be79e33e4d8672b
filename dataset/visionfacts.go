package dataset

import (
	"bytes"
	"context"
	"fmt"

	"golang.org/x/sync/errgroup"

	"github.com/brandgw/brand/chunkindex"
	"github.com/brandgw/brand/s3backend"
	"github.com/brandgw/brand/tokenize"
	"github.com/brandgw/brand/vision"
)

// VisionFactsKey is where a dataset root of image-text samples keeps
// their facts (vision.FactsFile): what a vision job (seq= with vision=)
// lays its epochs out from, as a text token job does from its index's
// document token counts. It names the index version it is of; after a
// re-index or an append it is stale until written again.
const VisionFactsKey = "_brand/vision-facts"

// WriteVisionFacts reads every sample of ix (a dataset of tar chunks in
// st) once — its members, its images' headers, its text tokenized with
// the tokenizer file's model — and stores their facts at
// VisionFactsKey. maxPixels bounds an image's pixels as its header
// claims them (0: transform's default); parallel chunks are read at
// once. A sample that is not a good image-text pair is no error: its
// fault is in its facts, for each job's --on-bad-image rule to fail or
// skip; a store's error or a tokenizer's own fails the call.
func WriteVisionFacts(ctx context.Context, st s3backend.Store, ix *chunkindex.Index, tokenizer []byte, maxPixels int64, parallel int) (*vision.FactsFile, error) {
	if ix.Deferred() {
		return nil, fmt.Errorf("dataset: image-text facts are of a dataset of tar chunks (WebDataset pairs), not of one served in place")
	}
	model, err := tokenize.Load(tokenizer)
	if err != nil {
		return nil, fmt.Errorf("dataset: the tokenizer: %w", err)
	}
	r := &vision.Reader{Encoder: model, MaxPixels: maxPixels}
	f := &vision.FactsFile{Index: ix.ID(), Tokenizer: tokenizer, MaxPixels: maxPixels, Samples: make([]vision.Facts, ix.NumSamples())}
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(max(1, parallel))
	for c := range ix.NumChunks() {
		g.Go(func() error {
			ch := ix.Chunk(c)
			first, n := ix.ChunkRange(c)
			var buf []byte
			for id := first; id < first+n; id++ {
				s := ix.Sample(id)
				buf = append(buf[:0], make([]byte, s.Length)...)
				if err := st.ReadRange(gctx, ch.Key, ch.ETag, s.Offset, buf); err != nil {
					return fmt.Errorf("dataset: reading sample %s of %s: %w", s.Key, ch.Key, err)
				}
				facts, err := r.Facts(s.Key, buf)
				if err != nil {
					return fmt.Errorf("dataset: %w", err)
				}
				f.Samples[id] = facts
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	b, err := f.MarshalBinary()
	if err != nil {
		return nil, err
	}
	if _, err := st.Put(ctx, VisionFactsKey, bytes.NewReader(b), int64(len(b))); err != nil {
		return nil, fmt.Errorf("dataset: storing the image-text facts: %w", err)
	}
	return f, nil
}

// ReadVisionFacts reads the facts stored beside ix, refusing facts of
// another index version (vision.ErrFactsFile). A dataset with none
// answers the store's not-found error.
func ReadVisionFacts(ctx context.Context, st s3backend.Store, ix *chunkindex.Index) (*vision.FactsFile, error) {
	info, err := st.Stat(ctx, VisionFactsKey)
	if err != nil {
		return nil, err
	}
	b := make([]byte, info.Size)
	if err := st.ReadRange(ctx, VisionFactsKey, info.ETag, 0, b); err != nil {
		return nil, err
	}
	return vision.DecodeFacts(b, ix.ID(), ix.NumSamples())
}
