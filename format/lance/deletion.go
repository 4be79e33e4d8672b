package lance

import (
	"context"
	"fmt"
	"slices"

	"github.com/brandgw/brand/format"
)

// ReadDeletions reads the deletion file of the fragment fr (key and size
// from the dataset's listing): the offsets of its deleted rows, sorted.
// An Arrow IPC file (one UInt32 column, its body compressed with zstd
// or not; arrowRowOffsets) or a roaring bitmap (roaringOffsets), no
// larger than fr's rows need. The
// offsets must be as many as the manifest says, distinct, and each a
// row of the fragment. The file and what it decodes to (8 bytes an
// offset at most: a decompressed buffer and the offsets) are bounded by
// limit before it is read.
func ReadDeletions(ctx context.Context, st format.Store, fr *Fragment, key, etag string, size, limit int64) ([]uint32, error) {
	d := fr.Deletion
	if d == nil {
		return nil, nil
	}
	bad := func(format_ string, a ...any) error {
		return fmt.Errorf("%w: lance deletion file %s: %s", format.ErrInvalid, key, fmt.Sprintf(format_, a...))
	}
	if d.NumDeleted > fr.PhysicalRows || fr.PhysicalRows > 1<<32 {
		return nil, bad("%d rows deleted of %d", d.NumDeleted, fr.PhysicalRows)
	}
	// An Arrow file of n offsets is its schema, footer and padding (a few
	// hundred bytes) and 4n bytes, compressed or not: twice that and 64
	// KiB holds any that Lance writes. A roaring bitmap of n values is at
	// most 8 KiB and 8 bytes a 65,536 rows, or 2n and 8 bytes a container.
	if size < 0 || size > int64(8*d.NumDeleted)+64<<10+int64(fr.PhysicalRows/8) {
		return nil, bad("%d bytes for %d deleted rows", size, d.NumDeleted)
	}
	if need := uint64(size) + 8*d.NumDeleted; need > uint64(max(limit, 0)) {
		return nil, overLimit("lance deletion file "+key, need, limit)
	}
	b := make([]byte, size)
	if err := st.ReadRange(ctx, key, etag, 0, b); err != nil {
		return nil, fmt.Errorf("lance deletion file %s: %w", key, err)
	}
	var offs []uint32
	var err error
	if d.Kind == DeletionBitmap {
		offs, err = roaringOffsets(b, d.NumDeleted)
	} else {
		offs, err = arrowRowOffsets(b, d.NumDeleted)
	}
	if err != nil {
		return nil, bad("%v", err)
	}
	if uint64(len(offs)) != d.NumDeleted {
		return nil, bad("%d offsets, the manifest says %d", len(offs), d.NumDeleted)
	}
	slices.Sort(offs)
	for i, o := range offs {
		if uint64(o) >= fr.PhysicalRows || (i > 0 && o == offs[i-1]) {
			return nil, bad("offset %d of a fragment of %d rows, or twice", o, fr.PhysicalRows)
		}
	}
	return offs, nil
}
