package dataset

import (
	"context"
	"time"

	"github.com/brandgw/brand/chunkindex"
	"github.com/brandgw/brand/dataset/stored"
	"github.com/brandgw/brand/format"
	"github.com/brandgw/brand/s3backend"
)

// storedVersion is what IndexInPlace keeps of a dataset's version already
// stored where it publishes: the index, and the chunk target its
// manifest records (0: the format's default, or a manifest written
// before targets were recorded).
type storedVersion struct {
	ix     *chunkindex.Index
	target int64
}

// storedOf reads the version of a dataset of format f stored at dst:
// nil if there is none, it does not read, or it is another format's (a
// re-index is how a damaged one is replaced, so none of these fails it).
func storedOf(ctx context.Context, dst s3backend.Store, f format.Format) *storedVersion {
	ix, err := stored.ReadIndex(ctx, dst)
	if err != nil || !ix.Deferred() || ix.InPlace().Format != f.Name() {
		return nil
	}
	m, err := stored.ReadManifest(ctx, dst)
	if err != nil || m.IndexID != ix.ID() {
		return &storedVersion{ix: ix}
	}
	return &storedVersion{ix: ix, target: m.ChunkTargetBytes}
}

// same is the index of lay built as the stored version's, at its
// creation time (every decoded member's), if that makes it the stored
// version itself: the same files, cut the same way, described the same.
// Otherwise nil: the new index is a new version.
func (s *storedVersion) same(f format.Format, lay *format.Layout, dec format.Decoder, spans [][]chunkindex.Span) (*chunkindex.Index, time.Time) {
	if s == nil {
		return nil, time.Time{}
	}
	created := time.Unix(s.ix.InPlace().Created, 0)
	ix, err := buildInPlace(f, lay, dec, created, spans)
	if err != nil || ix.ID() != s.ix.ID() {
		return nil, time.Time{}
	}
	return ix, created
}
