package catalog

import (
	"errors"
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

// DamagedChunkError is a chunk whose stored bytes fail their checksum, or
// for a dataset served in place do not decode, the same way on every
// read: the object was damaged at rest (or rewritten with its old ETag
// kept). It wraps ErrCorrupt.
type DamagedChunkError struct {
	Key chunkcache.Key
	// Reads is how many reads failed alike; 0 when another node read it
	// (the reader of a cluster, told by the chunk's owner).
	Reads int
	Err   error
	// Cause is why, in words a client may be told (Public): the sample
	// that failed its CRC32C, or the decoder's reason, which names
	// objects by their keys in the dataset and never a store's endpoint
	// or a local path.
	Cause string
	// InPlace is whether the chunk is of a dataset served in place, whose
	// index is made from the files themselves: what to do is index them
	// again, not re-pack them.
	InPlace bool
}

func (e *DamagedChunkError) Error() string {
	if e.Reads == 0 {
		return fmt.Sprintf("%v: %s", e.Err, e.remedy())
	}
	return fmt.Sprintf("%v, the same on all %d reads: %s", e.Err, e.Reads, e.remedy())
}

// remedy is what the operator does about the damage.
func (e *DamagedChunkError) remedy() string {
	if e.InPlace {
		return "the stored file is damaged or changed since it was indexed; repair it, or index it again (brand index)"
	}
	return "the stored object is damaged; repair or re-pack it"
}

// Public is what a client is told of the damage: the dataset, the chunk
// and the cause.
func (e *DamagedChunkError) Public() string {
	reads := ""
	if e.Reads > 0 {
		reads = fmt.Sprintf(", the same on all %d reads", e.Reads)
	}
	todo := "repair the object, or re-pack the dataset without it"
	if e.InPlace {
		todo = "repair the file, or index the dataset again (brand index)"
	}
	return fmt.Sprintf("chunk %s of dataset %s is damaged at rest%s: %s; %s",
		e.Key.Object, e.Key.Dataset, reads, e.Cause, todo)
}

// Name is what the server's metrics count the answers to it under
// (errkind.Names): a chunk damaged at rest is repaired, not re-indexed,
// and so is told apart from the store's other mismatches.
func (e *DamagedChunkError) Name() string { return "damaged_chunk" }

func (e *DamagedChunkError) Unwrap() error { return e.Err }

// LostChunkError is a chunk whose object is no longer in the store —
// deleted, or moved to another key, since its dataset was indexed or
// packed: lost at rest, as a DamagedChunkError is damaged at rest, and
// left out as one is by skip mode (--on-damaged-chunk=skip). It wraps
// the store's error (s3backend.ErrNotFound), whose kind the HTTP mapping
// answers (502). Nothing remembers it: the object may be put back, and
// the next read of the chunk asks the store again.
type LostChunkError struct {
	Key chunkcache.Key
	Err error
	// InPlace is whether the chunk is of a dataset served in place: the
	// object is one of its files.
	InPlace bool
}

func (e *LostChunkError) Error() string { return e.Err.Error() }

func (e *LostChunkError) Unwrap() error { return e.Err }

// Public is what a client is told of the loss: the dataset, the chunk,
// and what the operator may do, in words that name no store.
func (e *LostChunkError) Public() string {
	what, todo := "its object", "put it back, or re-pack the dataset"
	if e.InPlace {
		what, todo = "its file", "put it back, or index the dataset again (brand index)"
	}
	return fmt.Sprintf("chunk %s of dataset %s is lost: %s is no longer in the store (deleted or moved since the index was made); %s, or serve with --on-damaged-chunk=skip to leave its samples out",
		e.Key.Object, e.Key.Dataset, what, todo)
}

// AtRest reports whether err is a chunk damaged (DamagedChunkError) or
// lost (LostChunkError) at rest, and which: the one rule of what skip
// mode (--on-damaged-chunk=skip) leaves out.
func AtRest(err error) (chunkcache.Key, bool) {
	if dce, ok := errors.AsType[*DamagedChunkError](err); ok {
		return dce.Key, true
	}
	if lce, ok := errors.AsType[*LostChunkError](err); ok {
		return lce.Key, true
	}
	return chunkcache.Key{}, false
}
