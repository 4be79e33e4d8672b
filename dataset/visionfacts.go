package dataset

import (
	"bytes"
	"context"
	"fmt"

	"golang.org/x/sync/errgroup"

	"github.com/brandgw/brand/chunkindex"
	"github.com/brandgw/brand/dataset/stored"
	"github.com/brandgw/brand/s3backend"
	"github.com/brandgw/brand/tokenize"
	"github.com/brandgw/brand/vision"
)

// WriteVisionFacts reads every sample of ix (a dataset of tar chunks in
// st) once — its members, its images' headers, its text tokenized with
// the tokenizer file's model — and stores their facts at
// stored.VisionFactsKey. maxPixels bounds an image's pixels as its header
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
	if _, err := st.Put(ctx, stored.VisionFactsKey, bytes.NewReader(b), int64(len(b))); err != nil {
		return nil, fmt.Errorf("dataset: storing the image-text facts: %w", err)
	}
	return f, nil
}
