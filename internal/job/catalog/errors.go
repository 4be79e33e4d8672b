package catalog

import (
	"fmt"

	"github.com/brandgw/brand/internal/cache/chunkcache"
	"github.com/brandgw/brand/internal/errkind"
)

var (
	// ErrNotReady means the indexes are not loaded yet. The catalog wraps
	// it with what loading is doing.
	ErrNotReady = errkind.Named(errkind.Busy, "not_ready", "not ready")
	// ErrUnknown marks a dataset, chunk or index version the catalog does
	// not hold.
	ErrUnknown = errkind.New(errkind.NotFound, "not found")
	// ErrVersion marks a request for an index version of a dataset that
	// this node does not hold (it reloaded past it, or never loaded it).
	ErrVersion = errkind.Named(errkind.Conflict, "index_version", "index version not held")
	// ErrCorrupt means a chunk's bytes did not match the index's CRC32C.
	ErrCorrupt = errkind.Named(errkind.Corrupt, "store_mismatch", "chunk failed its checksum")
)

// DamagedChunkError is a chunk whose stored bytes fail their checksum on
// every read: the object was damaged at rest (or rewritten with its old
// ETag kept). It wraps ErrCorrupt.
type DamagedChunkError struct {
	Key   chunkcache.Key
	Reads int
	Err   error
}

func (e *DamagedChunkError) Error() string {
	return fmt.Sprintf("%v, the same on all %d reads: the stored object is damaged; repair or re-pack it", e.Err, e.Reads)
}

func (e *DamagedChunkError) Unwrap() error { return e.Err }
