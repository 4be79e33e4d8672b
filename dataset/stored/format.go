package stored

import (
	"context"
	"crypto/sha256"
	"fmt"
	"strings"

	"github.com/brandgw/brand/chunkindex"
	"github.com/brandgw/brand/s3backend"
)

// ChunkObject returns the object a deferred index's chunk key names
// (dataset.BuildInPlace): the key up to its last "#".
func ChunkObject(chunkKey string) string {
	if i := strings.LastIndexByte(chunkKey, '#'); i >= 0 {
		return chunkKey[:i]
	}
	return chunkKey
}

// ReadFormat reads the description of the chunks of the deferred index
// ix from st (the dataset's root) and checks it against the digest the
// index holds.
func ReadFormat(ctx context.Context, st s3backend.Store, ix *chunkindex.Index) ([]byte, error) {
	key := chunkindex.FormatKey(ix.ID())
	b, err := ReadWhole(ctx, st, key, maxFormatMeta, "the format's description of the chunks")
	if err != nil {
		return nil, err
	}
	if sha256.Sum256(b) != ix.InPlace().Meta {
		return nil, fmt.Errorf("%w: %s is not the description index %s was built with (its SHA-256 differs)", chunkindex.ErrCorrupt, key, ix.ID())
	}
	return b, nil
}

// maxFormatMeta bounds the description of a dataset's chunks that a
// gateway reads: a few hundred bytes a chunk.
const maxFormatMeta = 1 << 30
