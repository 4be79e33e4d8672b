package dataset

import (
	"context"
	"fmt"
	"hash/crc32"
	"slices"

	"golang.org/x/sync/errgroup"

	"github.com/brandgw/brand/chunkindex"
	"github.com/brandgw/brand/format"
)

// The checksums of a dataset served in place (InPlaceOptions.Checksums,
// `brand index --checksums`): the index of a packed dataset holds every
// sample's CRC32C, which every load of a chunk checks, so bit rot and an
// edit of a chunk's middle are caught; a format's own files rarely carry
// any (Parquet's page CRCs are optional and seldom written, MDS's hashes
// are of whole shards, Megatron's .bin has none). With checksums, the
// index holds the CRC32C of every span of every chunk's object — the
// ranges its format reads it in with any of its fields, and for a format
// that confines damage each sample's (spansOf) — made
// by one full read at index time, and every read of a chunk checks the
// spans it read (stored.CheckSpans, stored.SpanChecker) before its bytes
// are decoded.

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// spansOf returns the spans of chunk c: the bytes of its object dec reads
// it in with every field and with each field alone, cut at each of those
// ranges' ends. A decoder's ranges for any fields are the ranges of each
// field merged where they touch, so every range of every selection is
// made of whole spans, and a projected job checks exactly what it reads.
func spansOf(dec format.Decoder, c int) []format.Range {
	all, _ := dec.Extent(c, nil)
	for f := range dec.Fields() {
		rs, _ := dec.Extent(c, format.Selection{f})
		all = append(all, rs...)
	}
	if cf, ok := dec.(format.Confiner); ok && cf.Confines(c) {
		// Cut at each sample's bytes too (a video's GOPs): damage is then
		// found, and confined, sample by sample.
		for _, rs := range cf.SampleRanges(c) {
			all = append(all, rs...)
		}
	}
	var cuts []int64
	for _, r := range all {
		if r.Len > 0 {
			cuts = append(cuts, r.Off, r.End())
		}
	}
	slices.Sort(cuts)
	cuts = slices.Compact(cuts)
	union := format.Merge(slices.Clone(all))
	var spans []format.Range
	for i := 0; i+1 < len(cuts); i++ {
		s := format.Range{Off: cuts[i], Len: cuts[i+1] - cuts[i]}
		if slices.ContainsFunc(union, func(u format.Range) bool { return u.Off <= s.Off && s.End() <= u.End() }) {
			spans = append(spans, s)
		}
	}
	return spans
}

// checksumPiece is how much of a span one read fetches at index time,
// and maxChecksumReads how many chunks are read at once: 64 MiB of
// buffers at most.
const (
	checksumPiece    = 4 << 20
	maxChecksumReads = 16
)

// checksums reads every span of every chunk of chunks — dec's chunks
// from first on — from st, pinned to its object's version, parallel
// chunks at once, and returns each chunk's spans with their CRC32Cs: one
// full read of what the dataset's chunks are read from.
func checksums(ctx context.Context, st format.Store, chunks []format.Chunk, first int, dec format.Decoder, parallel int) ([][]chunkindex.Span, error) {
	out := make([][]chunkindex.Span, len(chunks))
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(parallel)
	for c, ch := range chunks {
		g.Go(func() error {
			var buf []byte
			read := func(off, n int64) ([]byte, error) {
				if int64(cap(buf)) < n {
					buf = make([]byte, n)
				}
				if err := st.ReadRange(gctx, ch.Object, ch.ETag, off, buf[:n]); err != nil {
					return nil, fmt.Errorf("dataset: reading bytes %d+%d of %s for their checksum: %w", off, n, ch.Object, err)
				}
				return buf[:n], nil
			}
			spans := spansOf(dec, first+c)
			for i := 0; i < len(spans); {
				s := spans[i]
				if s.Len > checksumPiece {
					// A span larger than a piece: read piece by piece.
					crc := uint32(0)
					for at := s.Off; at < s.End(); {
						b, err := read(at, min(s.End()-at, checksumPiece))
						if err != nil {
							return err
						}
						crc = crc32.Update(crc, castagnoli, b)
						at += int64(len(b))
					}
					out[c] = append(out[c], chunkindex.Span{Off: s.Off, Len: s.Len, CRC: crc})
					i++
					continue
				}
				// Spans that follow one another (a video's GOPs) are read
				// together, a piece at most: a read a piece, not a span.
				j := i + 1
				for j < len(spans) && spans[j].Off == spans[j-1].End() && spans[j].End()-s.Off <= checksumPiece {
					j++
				}
				b, err := read(s.Off, spans[j-1].End()-s.Off)
				if err != nil {
					return err
				}
				for _, t := range spans[i:j] {
					out[c] = append(out[c], chunkindex.Span{Off: t.Off, Len: t.Len, CRC: crc32.Checksum(b[t.Off-s.Off:t.End()-s.Off], castagnoli)})
				}
				i = j
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	return out, nil
}
