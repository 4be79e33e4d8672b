package dataset

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"

	"golang.org/x/sync/errgroup"

	"github.com/brandgw/brand/chunkindex"
	"github.com/brandgw/brand/dataset/stored"
	"github.com/brandgw/brand/format"
	"github.com/brandgw/brand/imagesize"
	"github.com/brandgw/brand/s3backend"
	"github.com/brandgw/brand/vision"
)

// WriteSizes reads every sample's image size of ix (a dataset of tar
// chunks in st) — its first JPEG or PNG member's header, EXIF applied —
// and decodes the image whole (imagesize.DecodedTar), and stores them at
// stored.SizesKey. maxPixels bounds an image's stored pixels as its
// header claims them (0: transform's default); parallel chunks are read
// at once. A sample without an image, whose image's header does not
// read, or whose data does not decode, is no error: its reason is in the
// file, so that a job batching by shape knows it before its step.
// A store's error fails the call.
//
// Each sample is read whole, one at a time a chunk read at once, and
// its image decoded: an image that would fail at its step (cut short
// after its header, damaged) is found here, for one decode of each.
func WriteSizes(ctx context.Context, st s3backend.Store, ix *chunkindex.Index, maxPixels int64, parallel int) (*imagesize.File, error) {
	if ix.Deferred() {
		return nil, fmt.Errorf("dataset: index %s is of a dataset served in place: its image sizes are read through its format's decoder (WriteSizesInPlace)", ix.ID())
	}
	return writeSizes(ctx, st, ix, nil, tarSizes(st, ix, maxPixels), maxPixels, parallel)
}

// WriteSizesInPlace is WriteSizes of a dataset served in place: ix is its
// deferred index in st (where the sizes are stored beside it), dec its
// format's decoder and data the store its objects are read from. Each
// chunk is read with its image fields alone (format.Field.Ext a JPEG's
// or PNG's, or decided by each value's bytes: a Parquet image column) —
// their ranges of the object, as a job that names those columns reads
// them — decoded, and each sample's size read from its members. A
// dataset without an image field is refused before a chunk is read.
func WriteSizesInPlace(ctx context.Context, st, data s3backend.Store, ix *chunkindex.Index, dec format.Decoder, maxPixels int64, parallel int) (*imagesize.File, error) {
	read, err := inPlaceSizes(data, ix, dec, maxPixels)
	if err != nil {
		return nil, err
	}
	return writeSizes(ctx, st, ix, nil, read, maxPixels, parallel)
}

// AppendSizes writes the image sizes of ix, a version of a dataset served
// in place that AppendInPlace extended from its parent, when the sizes
// stored beside it (in st) are the parent's: the parent's samples' sizes
// copied, the appended chunks' samples read as WriteSizesInPlace reads
// them, under the parent's pixel bound. It returns nil and no error when
// the dataset has no sizes, and an error wrapping imagesize.ErrFile when
// the ones it has are not the parent's (written for an older version,
// or damaged): write them with WriteSizesInPlace.
func AppendSizes(ctx context.Context, st, data s3backend.Store, ix *chunkindex.Index, dec format.Decoder, parallel int) (*imagesize.File, error) {
	line := ix.Lineage().Ancestors()
	if len(line) == 0 {
		return nil, fmt.Errorf("dataset: index %s extends no other: its sizes are written whole (WriteSizesInPlace)", ix.ID())
	}
	parent := line[0]
	n, _ := ix.ChunkRange(parent.Chunks)
	old, err := stored.ReadSizes(ctx, st, parent.ID, n)
	if errors.Is(err, s3backend.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	read, err := inPlaceSizes(data, ix, dec, old.MaxPixels)
	if err != nil {
		return nil, err
	}
	return writeSizes(ctx, st, ix, old, read, old.MaxPixels, parallel)
}

// A chunkSizes reads chunk c's samples' sizes, handing each to each with
// its sample ID: its size, or why it has none.
type chunkSizes func(ctx context.Context, c int, each func(id int, s imagesize.Size, bad string)) error

// tarSizes reads a tar chunk's samples by their ranges, each whole, and
// decodes each one's image.
func tarSizes(st s3backend.Store, ix *chunkindex.Index, maxPixels int64) chunkSizes {
	return func(ctx context.Context, c int, each func(int, imagesize.Size, string)) error {
		ch := ix.Chunk(c)
		first, n := ix.ChunkRange(c)
		var buf []byte
		for id := first; id < first+n; id++ {
			s := ix.Sample(id)
			buf = slices.Grow(buf[:0], int(s.Length))[:s.Length]
			if err := st.ReadRange(ctx, ch.Key, ch.ETag, s.Offset, buf); err != nil {
				return fmt.Errorf("dataset: reading sample %s of %s: %w", s.Key, ch.Key, err)
			}
			size, bad := imagesize.DecodedTar(buf, maxPixels)
			each(id, size, bad)
		}
		return nil
	}
}

// inPlaceSizes reads a chunk of a dataset served in place with its image
// fields alone (decodedSamples) and each sample's size from its members.
func inPlaceSizes(data s3backend.Store, ix *chunkindex.Index, dec format.Decoder, maxPixels int64) (chunkSizes, error) {
	if !ix.Deferred() {
		return nil, fmt.Errorf("dataset: index %s is of tar chunks: WriteSizes reads them", ix.ID())
	}
	fields := dec.Fields()
	var images, names []string
	for _, f := range fields {
		names = append(names, f.Name)
		if f.Ext == "" || imagesize.IsImage("."+f.Ext) {
			images = append(images, f.Name)
		}
	}
	if len(images) == 0 {
		return nil, fmt.Errorf("dataset: index %s: %w: no field holds images (its fields: %s); a video's clips have their size, frame rate and length in its description",
			ix.ID(), format.ErrInvalid, strings.Join(names, ", "))
	}
	sel, err := format.Select(fields, images)
	if err != nil {
		return nil, fmt.Errorf("dataset: %w", err)
	}
	read := decodedSamples(data, ix, dec, sel)
	return func(ctx context.Context, c int, each func(int, imagesize.Size, string)) error {
		return read(ctx, c, func(id int, _ string, sample []byte, _ *vision.Facts) error {
			size, bad := imagesize.DecodedTar(sample, maxPixels)
			each(id, size, bad)
			return nil
		})
	}, nil
}

// writeSizes reads the sizes of the samples of ix that base (if not nil:
// the sizes of the version ix extends) does not hold by read, chunks
// parallel at once, and stores them in st.
func writeSizes(ctx context.Context, st s3backend.Store, ix *chunkindex.Index, base *imagesize.File, read chunkSizes, maxPixels int64, parallel int) (*imagesize.File, error) {
	f := &imagesize.File{Index: ix.ID(), MaxPixels: maxPixels, Sizes: make([]imagesize.Size, ix.NumSamples())}
	from := 0 // the first chunk to read
	if base != nil {
		copy(f.Sizes, base.Sizes)
		for id, why := range base.Bad {
			setBad(f, id, why)
		}
		for from < ix.NumChunks() {
			if first, _ := ix.ChunkRange(from); first >= len(base.Sizes) {
				break
			}
			from++
		}
	}
	var mu sync.Mutex // f.Bad
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(max(1, parallel))
	for c := from; c < ix.NumChunks(); c++ {
		g.Go(func() error {
			return read(gctx, c, func(id int, s imagesize.Size, bad string) {
				if bad == "" {
					f.Sizes[id] = s
					return
				}
				mu.Lock()
				setBad(f, id, bad)
				mu.Unlock()
			})
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	b, err := f.MarshalBinary()
	if err != nil {
		return nil, err
	}
	if _, err := st.Put(ctx, stored.SizesKey, bytes.NewReader(b), int64(len(b))); err != nil {
		return nil, fmt.Errorf("dataset: storing the image sizes: %w", err)
	}
	return f, nil
}

// setBad records why sample id of f has no size.
func setBad(f *imagesize.File, id int, why string) {
	if f.Bad == nil {
		f.Bad = map[int]string{}
	}
	f.Bad[id] = why
}
