package stored

import (
	"context"
	"errors"
	"fmt"

	"github.com/brandgw/brand/chunkindex"
	"github.com/brandgw/brand/internal/errkind"
	"github.com/brandgw/brand/s3backend"
)

// ErrNoMembers reports a dataset without a member table
// (chunkindex.MembersKey): one packed or indexed before member tables.
var ErrNoMembers = errkind.New(errkind.Internal, "dataset: no member table")

// ReadIndex reads and decodes the index at chunkindex.IndexKey. The read is
// pinned to the ETag Stat returned, so an index replaced during the read is
// reported (s3backend.ErrChanged) rather than decoded from mixed bytes.
// A missing index is an error wrapping s3backend.ErrNotFound that says how
// to build one.
func ReadIndex(ctx context.Context, st s3backend.Store) (*chunkindex.Index, error) {
	b, err := readObject(ctx, st, chunkindex.IndexKey)
	if err != nil {
		return nil, err
	}
	ix, err := chunkindex.Decode(b)
	if err != nil {
		return nil, fmt.Errorf("dataset: decoding %s: %w", chunkindex.IndexKey, err)
	}
	return ix, nil
}

// ReadMembers reads and decodes the member table at
// chunkindex.MembersKey, checked against ix, the index it must describe.
// A dataset packed before member tables has none: the error then wraps
// ErrNoMembers (and s3backend.ErrNotFound) and says how to add one.
func ReadMembers(ctx context.Context, st s3backend.Store, ix *chunkindex.Index) (*chunkindex.Members, error) {
	b, err := ReadWhole(ctx, st, chunkindex.MembersKey, maxMetaBytes,
		"re-run `brand index` over the dataset's chunks to write one")
	if errors.Is(err, s3backend.ErrNotFound) {
		return nil, fmt.Errorf("%w: %w", ErrNoMembers, err)
	}
	if err != nil {
		return nil, err
	}
	m, err := chunkindex.DecodeMembers(ctx, b, ix)
	if err != nil {
		return nil, fmt.Errorf("dataset: decoding %s: %w", chunkindex.MembersKey, err)
	}
	return m, nil
}

// ReadManifest reads and parses the manifest at chunkindex.ManifestKey.
// A missing manifest is an error wrapping s3backend.ErrNotFound.
// It does not check that the manifest describes the current index; use
// Manifest.Describes for that.
func ReadManifest(ctx context.Context, st s3backend.Store) (chunkindex.Manifest, error) {
	b, err := readObject(ctx, st, chunkindex.ManifestKey)
	if err != nil {
		return chunkindex.Manifest{}, err
	}
	m, err := chunkindex.ParseManifest(b)
	if err != nil {
		return chunkindex.Manifest{}, fmt.Errorf("dataset: parsing %s: %w", chunkindex.ManifestKey, err)
	}
	return m, nil
}

// VisionFactsKey is where a dataset root of image-text samples keeps
// their facts (vision.FactsFile, written by `brand index --tokenizer`):
// what a vision job (seq= with vision=) lays its epochs out from, as a
// text token job does from its index's document token counts. It names
// the index version it is of; after a re-index or an append it is stale
// until written again. Its one reader is the serving catalog
// (catalog.Dataset.LoadVision).
const VisionFactsKey = "_brand/vision-facts"

// maxMetaBytes bounds what readObject allocates for an index or manifest
// on the word of a Stat. The index of a hundred million samples with long
// keys still fits.
const maxMetaBytes = 8 << 30

// readObject reads a whole metadata object, pinned to the version Stat saw.
func readObject(ctx context.Context, st s3backend.Store, key string) ([]byte, error) {
	return ReadWhole(ctx, st, key, maxMetaBytes, "build the dataset with `brand pack` or `brand index`")
}

// ReadWhole reads a whole object of at most limit bytes, pinned to the
// version Stat saw. A missing object's error wraps s3backend.ErrNotFound
// and says what would make one (hint).
func ReadWhole(ctx context.Context, st s3backend.Store, key string, limit int64, hint string) ([]byte, error) {
	info, err := st.Stat(ctx, key)
	if errors.Is(err, s3backend.ErrNotFound) {
		return nil, fmt.Errorf("dataset: no %s in the store (%s): %w", key, hint, err)
	}
	if err != nil {
		return nil, fmt.Errorf("dataset: stat %s: %w", key, err)
	}
	if info.Size < 0 || info.Size > limit {
		return nil, fmt.Errorf("dataset: %s has implausible size %d", key, info.Size)
	}
	b := make([]byte, info.Size)
	if err := st.ReadRange(ctx, key, info.ETag, 0, b); err != nil {
		return nil, fmt.Errorf("dataset: reading %s: %w", key, err)
	}
	return b, nil
}
