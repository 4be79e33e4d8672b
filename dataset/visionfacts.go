package dataset

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"

	"golang.org/x/sync/errgroup"

	"github.com/brandgw/brand/chunkindex"
	"github.com/brandgw/brand/dataset/stored"
	"github.com/brandgw/brand/format"
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
		return nil, fmt.Errorf("dataset: index %s is of a dataset served in place: its image-text facts are read through its format's decoder (WriteVisionFactsInPlace)", ix.ID())
	}
	return writeVisionFacts(ctx, st, ix, tarSamples(st, ix), nil, tokenizer, maxPixels, parallel)
}

// WriteVisionFactsInPlace is WriteVisionFacts of a dataset served in
// place: ix is its deferred index in st (where the facts are stored
// beside it), dec its format's decoder (of format name) and data the
// store its objects are read from. Each chunk is read and decoded with
// every field, as a gateway loads it, and each row's resident members
// read as a WebDataset sample's. A dataset whose samples are not
// image-text samples is refused before a chunk is read
// (format.CheckImageText: format.ErrNotImageText naming its fields).
func WriteVisionFactsInPlace(ctx context.Context, st, data s3backend.Store, ix *chunkindex.Index, name string, dec format.Decoder, tokenizer []byte, maxPixels int64, parallel int) (*vision.FactsFile, error) {
	if !ix.Deferred() {
		return nil, fmt.Errorf("dataset: index %s is of tar chunks: WriteVisionFacts reads them", ix.ID())
	}
	if err := format.CheckImageText(name, dec); err != nil {
		return nil, fmt.Errorf("dataset: %w", err)
	}
	it := dec.(format.ImageText) // CheckImageText: it is one
	return writeVisionFacts(ctx, st, ix, decodedSamples(data, ix, dec, nil), it.UnreadImage, tokenizer, maxPixels, parallel)
}

// A chunkSamples reads chunk c's samples, in sample order, each as its
// members as a tar (the bytes a gateway serves of it), handing each to
// each with its ID and key; the bytes are good until each returns.
// known, if not nil, is the sample's facts where the read knows them
// already: a text its decoder left unread, past the tokenizer's bound
// (vision.LongText).
type chunkSamples func(ctx context.Context, c int, each func(id int, key string, sample []byte, known *vision.Facts) error) error

// tarSamples reads a tar chunk's samples by their ranges.
func tarSamples(st s3backend.Store, ix *chunkindex.Index) chunkSamples {
	return func(ctx context.Context, c int, each func(int, string, []byte, *vision.Facts) error) error {
		ch := ix.Chunk(c)
		first, n := ix.ChunkRange(c)
		var buf []byte
		for id := first; id < first+n; id++ {
			s := ix.Sample(id)
			buf = append(buf[:0], make([]byte, s.Length)...)
			if err := st.ReadRange(ctx, ch.Key, ch.ETag, s.Offset, buf); err != nil {
				return fmt.Errorf("dataset: reading sample %s of %s: %w", s.Key, ch.Key, err)
			}
			if err := each(id, s.Key, buf, nil); err != nil {
				return err
			}
		}
		return nil
	}
}

// decodedSamples reads a chunk served in place whole — its ranges of
// its object, pinned to the version indexed and checked against the
// index's CRC32Cs where it has them — and decodes it with every field
// into its resident form, whose samples are tars. A decoder that can
// (format.TextBound: Parquet) leaves every text past the tokenizer's
// bound unread, its length read from the pages' headers and the value's
// length prefix, and its sample's facts are vision.LongText's: a 100 MB
// conversation costs its compressed bytes and a window, not 100 MB and
// its JSON. A selection of fields (sel, not nil) reads and decodes those
// alone, as a job that names columns reads them: their ranges of the
// object, not the chunk's.
func decodedSamples(data s3backend.Store, ix *chunkindex.Index, dec format.Decoder, sel format.Selection) chunkSamples {
	exts := map[string]string{} // a field's member extension
	for _, f := range dec.Fields() {
		exts[f.Name] = f.Ext
	}
	return func(ctx context.Context, c int, each func(int, string, []byte, *vision.Facts) error) error {
		ch := ix.Chunk(c)
		obj := stored.ChunkObject(ch.Key)
		rs, bound := dec.Extent(c, sel)
		src := make([]byte, format.Concat(rs))
		at := int64(0)
		for _, r := range rs {
			if err := data.ReadRange(ctx, obj, ch.ETag, r.Off, src[at:at+r.Len]); err != nil {
				return fmt.Errorf("dataset: reading chunk %d (%s): %w", c, obj, err)
			}
			at += r.Len
		}
		if err := stored.CheckSpans(ix, c, obj, rs, src); err != nil {
			return fmt.Errorf("dataset: chunk %d: %w", c, err)
		}
		wo := format.WriterOptions{ModTime: ix.InPlace().Created}
		var dst []byte
		var long []format.LongText
		var err error
		if tb, ok := dec.(format.TextBound); ok && sel.All() {
			dst, long, err = tb.DecodeTexts(c, src, tokenize.MaxTextBytes, wo)
		} else {
			dst = make([]byte, bound)
			err = dec.Decode(c, sel, src, dst, wo)
			if ge := (*format.GrowError)(nil); errors.As(err, &ge) {
				dst = make([]byte, ge.Need)
				err = dec.Decode(c, sel, src, dst, wo)
			}
		}
		if err != nil {
			return fmt.Errorf("dataset: decoding chunk %d (%s): %w", c, obj, err)
		}
		tab, err := format.Verify(dst)
		if err != nil {
			return fmt.Errorf("dataset: decoding chunk %d (%s): %w", c, obj, err)
		}
		first, n := ix.ChunkRange(c)
		if tab.Len() != n {
			return fmt.Errorf("dataset: chunk %d (%s) decodes into %d samples; its index says %d", c, obj, tab.Len(), n)
		}
		for i := range n {
			off, l, _ := tab.Sample(i)
			key := ix.SampleKey(first + i)
			var mine []format.LongText
			for len(long) > 0 && long[0].Sample == i {
				mine, long = append(mine, long[0]), long[1:]
			}
			if err := each(first+i, key, dst[off:off+l], unreadText(key, dst[off:off+l], mine, exts)); err != nil {
				return err
			}
		}
		return nil
	}
}

// unreadText is the facts of sample (key) whose texts long were left
// unread (exts: each field's member extension), or nil where vision
// reads none of them — a conversation (json) beside a txt is metadata,
// not the sample's text — and the sample is read as it was decoded.
func unreadText(key string, sample []byte, long []format.LongText, exts map[string]string) *vision.Facts {
	var json *format.LongText
	for i, lt := range long {
		switch exts[lt.Field] {
		case "txt":
			f := vision.LongText(key+".txt", lt.Bytes)
			return &f
		case "json":
			json = &long[i]
		}
	}
	if json == nil || hasMember(sample, key+".txt") {
		return nil
	}
	f := vision.LongText(key+".json", json.Bytes)
	return &f
}

// hasMember reports whether a sample's tar holds member name.
func hasMember(sample []byte, name string) bool {
	tr := tar.NewReader(bytes.NewReader(sample))
	for {
		h, err := tr.Next()
		if err != nil {
			return false
		}
		if h.Name == name {
			return true
		}
	}
}

// writeVisionFacts reads every sample of ix by read, chunks parallel at
// once, and stores their facts in st. unread, if not nil, tells a
// member extension of an image vision does not read (a Parquet image
// column's webp, or bytes of no image's): a sample holding one has a bad
// image (format.ImageText.UnreadImage), rather than none.
func writeVisionFacts(ctx context.Context, st s3backend.Store, ix *chunkindex.Index, read chunkSamples, unread func(ext string) bool, tokenizer []byte, maxPixels int64, parallel int) (*vision.FactsFile, error) {
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
			return read(gctx, c, func(id int, key string, sample []byte, known *vision.Facts) error {
				if known != nil {
					f.Samples[id] = *known
					return nil
				}
				facts, err := r.Facts(key, sample)
				if err != nil {
					return fmt.Errorf("dataset: %w", err)
				}
				if unread != nil && !facts.Refused() {
					if m := unreadImage(key, sample, unread); m != "" {
						facts.Images = append(facts.Images, vision.ImageFacts{Bad: fmt.Sprintf("member %s is neither a JPEG nor a PNG", m)})
					}
				}
				f.Samples[id] = facts
				return nil
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
	if _, err := st.Put(ctx, stored.VisionFactsKey, bytes.NewReader(b), int64(len(b))); err != nil {
		return nil, fmt.Errorf("dataset: storing the image-text facts: %w", err)
	}
	return f, nil
}

// unreadImage is the name of sample key's first member whose extension
// unread tells (its members are key + "." + extension), "" if none.
func unreadImage(key string, sample []byte, unread func(ext string) bool) string {
	tr := tar.NewReader(bytes.NewReader(sample))
	for {
		h, err := tr.Next()
		if err != nil {
			return "" // a sample that is not a tar is vision's fault to find
		}
		if ext, ok := strings.CutPrefix(h.Name, key+"."); ok && unread(ext) {
			return h.Name
		}
	}
}
