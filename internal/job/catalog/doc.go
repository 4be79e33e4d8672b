// Package catalog holds the datasets a gateway serves: each loaded version
// of a dataset's index (Dataset), the versions held by name (Catalog), the
// reload that swaps in a new version when the stored index changes, and
// the Loader that reads a chunk from its dataset's store and checks every
// sample's CRC32C — or, for a dataset served in place, decodes it into a
// whole resident form of the index's count of samples — before the chunk
// may enter the cache.
//
// # Versions
//
// A Dataset is immutable once built, but for the damaged flags, so any
// goroutine may read it without locking. A reload builds a new one and the
// catalog keeps the version it replaced: a batch laid out on the old
// version finishes on it (its chunk keys carry the old ETags, which the
// catalog still resolves), and a client that pinned the old version (the
// index= parameter) keeps reading it while its chunks can be read. Cache
// keys include object ETags, so chunks of two versions never mix.
//
// # Errors
//
// ErrNotReady until the gateway has loaded every index; ErrUnknown for a
// dataset, chunk or version the catalog does not hold; ErrCorrupt (and
// *DamagedChunkError, which wraps it) for bytes that fail their checksum
// or do not decode, each a read's own kind of fault (Loader): a chunk
// that did not decode is never a chunk loaded. A DamagedChunkError's
// Public names the dataset, the chunk and the cause for the client. The
// gateway maps each to an HTTP status in one place.
//
// A chunk whose format confines damage to samples (format.Confiner: a
// video's GOPs, each with its own CRC32C) is not damaged as a whole when
// some of its spans fail on every read: it loads with the samples those
// spans touch written damaged, which the sample reader fails (or skips)
// by name, and serves the rest.
package catalog
