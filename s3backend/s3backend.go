// Package s3backend is Brand's access to object storage: the small Store
// interface the rest of Brand reads and writes datasets through, an S3
// implementation on minio-go and a local-directory one.
//
// Reads are ranged and pinned to the ETag recorded in the dataset index, so a
// dataset rewritten under its index is reported as ErrChanged instead of
// silently serving bytes that no longer match the index's offsets and CRCs.
// Transient backend failures (503 SlowDown, 5xx, throttling, network errors,
// bodies cut short, bodies that stall for Config.IdleTimeout) are retried
// with exponential backoff and full jitter, a cut or stalled body resuming
// from the byte it stopped at; when the budget is spent the error wraps
// ErrUnavailable.
//
// Keys are slash-separated and relative to the root the store was opened at
// (the prefix of an s3:// URL, or a directory).
//
// # Example
//
//	st, err := s3backend.Open(ctx, "s3://datasets/imagenet", s3backend.ConfigFromEnv())
//	if err != nil {
//		return err
//	}
//	info, err := st.Stat(ctx, "chunks/000000.tar")
//	if err != nil {
//		return err
//	}
//	buf := make([]byte, 1<<20)
//	err = st.ReadRange(ctx, info.Key, info.ETag, 0, buf)
package s3backend

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"strings"
	"time"

	"github.com/brandgw/brand/internal/errkind"
)

// Errors reported by every Store; check them with errors.Is.
var (
	// ErrNotFound means the object (or its bucket) does not exist.
	ErrNotFound = errkind.Named(errkind.Upstream, "store_mismatch", "s3backend: object not found")

	// ErrNoBucket means an S3 store's bucket does not exist. An error
	// wrapping it wraps ErrNotFound too.
	ErrNoBucket = errkind.New(errkind.Internal, "no such bucket")

	// ErrChanged means the object no longer has the ETag the caller pinned
	// the read to: the dataset changed under its index, which must be rebuilt
	// (`brand index`) before the data can be served again.
	ErrChanged = errkind.Named(errkind.Upstream, "store_mismatch", "s3backend: object changed since the index was built")

	// ErrUnavailable means the backend kept failing transiently (503
	// SlowDown, other 5xx, throttling, network errors) until the retry budget
	// was spent. The last underlying error is wrapped as well.
	ErrUnavailable = errkind.Named(errkind.Unavailable, "store_unavailable", "s3backend: backend unavailable")

	// ErrInvalidKey means a key or prefix was rejected before reaching the
	// backend: empty, absolute, or with an empty, "." or ".." segment.
	ErrInvalidKey = errkind.New(errkind.Internal, "s3backend: invalid key")

	// ErrOutOfRange means a read extends past the end of the object.
	ErrOutOfRange = errkind.Named(errkind.Upstream, "store_mismatch", "s3backend: read past end of object")

	// ErrOutside means a local store's file is reached through a symbolic
	// link that leads out of the store's directory (or loops back into
	// one that holds it): nothing outside the directory is listed or read
	// (Local.List). The error names the link, never what it leads to.
	ErrOutside = errkind.Named(errkind.Upstream, "store_mismatch", "s3backend: a symbolic link out of the store's directory")

	// ErrExists means PutIfAbsent found an object under the key and wrote
	// nothing.
	ErrExists = errkind.New(errkind.Internal, "s3backend: object exists")
)

// ObjectInfo describes one stored object.
type ObjectInfo struct {
	Key  string // relative to the store's root
	Size int64
	ETag string // normalised: no surrounding quotes
	// ModTime is when the object was last written, as the store reports
	// it (S3's Last-Modified, a file's modification time); zero when the
	// operation does not report it (Put).
	ModTime time.Time
	// Unsettled marks a version that may yet hold other bytes under the
	// same ETag: a local file changed within a Live view's settle time
	// (Local.Live), or within its timestamps' settle time on an
	// IdentityETags view (SettleOf). A reader must not share such a
	// version's bytes with another read, nor an index record it.
	Unsettled bool
}

// Store is object storage as Brand needs it. Implementations are safe for
// concurrent use.
//
// PutIfAbsent and Delete serve the metadata Brand keeps beside a dataset:
// an importance epoch's pointer is written once, whichever of a cluster's
// nodes seals first, and old snapshots are collected
// (docs/importance.md). They belong to the interface rather than to an
// optional one a caller would probe for, because there is no safe
// fallback: a Stat then Put would silently lose the write-once guarantee.
// Every Store has them, and a wrapper that embeds a Store forwards them.
type Store interface {
	// ReadRange fills p with bytes [off, off+len(p)) of the object. A
	// non-empty etag pins the read to that version of the object: if the
	// object now has another ETag the read fails with ErrChanged. A read
	// extending past the end of the object fails with ErrOutOfRange.
	ReadRange(ctx context.Context, key, etag string, off int64, p []byte) error

	// Stat returns the object's size and current ETag.
	Stat(ctx context.Context, key string) (ObjectInfo, error)

	// Put stores size bytes read from r under key, replacing any previous
	// object atomically, and returns the new object's info. A size of -1
	// means unknown: r is read to EOF.
	Put(ctx context.Context, key string, r io.Reader, size int64) (ObjectInfo, error)

	// List returns every object whose key starts with prefix (a plain string
	// prefix, not only a directory), recursively, sorted by key.
	List(ctx context.Context, prefix string) ([]ObjectInfo, error)

	// PutIfAbsent is Put that never replaces: it creates the object only
	// if no object has the key, atomically, so that of writers racing on
	// one key, on one machine or many, exactly one succeeds and the others
	// fail with ErrExists. size must be known (>= 0). A call that retried
	// after its first attempt's answer was lost may find its own object and
	// report ErrExists: a caller that must know who won reads the object.
	PutIfAbsent(ctx context.Context, key string, r io.Reader, size int64) (ObjectInfo, error)

	// Delete removes the object. Deleting a key that holds no object is
	// not an error (as on S3), so a deletion retried, or raced by another,
	// succeeds.
	Delete(ctx context.Context, key string) error
}

// Observer receives one call per HTTP request the S3 backend makes,
// retries and resumed reads included, once the request has finished (for a
// GET, when its body has been read or closed), and one per file operation
// of a Local store (a read, stat, put or listing). It is the hook for
// metrics and must be safe for concurrent use and cheap; it must not block.
//
// op is one of the Op* constants. bytes counts the payload transferred: the
// request body for uploads plus the response body actually read for
// successful responses. err is nil on success; for an HTTP error status it
// wraps ErrNotFound (404) or ErrChanged (412) where that applies.
type Observer interface {
	ObserveBackend(op string, bytes int64, d time.Duration, err error)
}

// Operation names passed to Observer.ObserveBackend.
const (
	OpGet    = "get"    // object GET (ranged reads)
	OpStat   = "stat"   // HEAD object
	OpPut    = "put"    // PUT / POST: uploads, multipart steps, bucket creation
	OpList   = "list"   // bucket listing
	OpDelete = "delete" // DELETE
	OpOther  = "other"  // anything else (e.g. bucket location lookup)
)

// Open opens the store named by rawURL:
//
//   - "s3://bucket/prefix" opens an *S3 rooted at prefix (which may be empty),
//     configured by cfg;
//   - "file:///abs/dir" or a plain filesystem path opens a *Local rooted at
//     that directory, reporting to cfg.Observer; the rest of cfg is not
//     used.
//
// Open does not contact the backend: a wrong bucket or endpoint surfaces on
// the first request. ctx is reserved for backends that must.
func Open(ctx context.Context, rawURL string, cfg Config) (Store, error) {
	switch {
	case rawURL == "":
		return nil, errors.New("s3backend: empty store URL")
	case strings.HasPrefix(rawURL, "s3://"):
		u, err := url.Parse(rawURL)
		if err != nil {
			return nil, fmt.Errorf("s3backend: parse %q: %w", rawURL, err)
		}
		if u.User != nil || u.RawQuery != "" || u.Fragment != "" {
			return nil, fmt.Errorf("s3backend: %q: an s3:// URL is s3://bucket/prefix, without credentials, query or fragment", rawURL)
		}
		return NewS3(cfg, u.Host, strings.Trim(u.Path, "/"))
	case strings.HasPrefix(rawURL, "file://"):
		u, err := url.Parse(rawURL)
		if err != nil {
			return nil, fmt.Errorf("s3backend: parse %q: %w", rawURL, err)
		}
		if u.Host != "" && u.Host != "localhost" {
			return nil, fmt.Errorf("s3backend: %q: a file:// URL must name a local absolute path (file:///dir)", rawURL)
		}
		if u.Path == "" {
			return nil, fmt.Errorf("s3backend: %q: no directory", rawURL)
		}
		return newObservedLocal(u.Path, cfg.Observer)
	case strings.Contains(rawURL, "://"):
		return nil, fmt.Errorf("s3backend: %q: unsupported scheme (want s3://, file:// or a path)", rawURL)
	default:
		return newObservedLocal(rawURL, cfg.Observer)
	}
}

// checkKey validates an object key at the edge, so that a key can never
// escape the store's root (a ".." segment in a Local store) and means the
// same object on every backend.
func checkKey(key string) error {
	if key == "" {
		return fmt.Errorf("%w: empty key", ErrInvalidKey)
	}
	if strings.HasSuffix(key, "/") {
		return fmt.Errorf("%w %q: ends with /", ErrInvalidKey, key)
	}
	return checkPath(key)
}

// checkPrefix validates a List prefix: like a key, but it may be empty and
// may end with "/".
func checkPrefix(prefix string) error {
	p := strings.TrimSuffix(prefix, "/")
	if p == "" {
		if prefix != "" {
			return fmt.Errorf("%w %q: prefix is only /", ErrInvalidKey, prefix)
		}
		return nil
	}
	return checkPath(p)
}

func checkPath(p string) error {
	if strings.HasPrefix(p, "/") {
		return fmt.Errorf("%w %q: starts with /", ErrInvalidKey, p)
	}
	if strings.ContainsRune(p, 0) {
		return fmt.Errorf("%w %q: contains a NUL byte", ErrInvalidKey, p)
	}
	for seg := range strings.SplitSeq(p, "/") {
		switch seg {
		case "":
			return fmt.Errorf("%w %q: empty path segment", ErrInvalidKey, p)
		case ".", "..":
			return fmt.Errorf("%w %q: %q segment", ErrInvalidKey, p, seg)
		}
	}
	return nil
}

// normalizeETag strips the quotes (and a weak-validator prefix) HTTP puts
// around an ETag, so ETags from headers, listings and callers compare equal.
func normalizeETag(etag string) string {
	etag = strings.TrimSpace(etag)
	etag = strings.TrimPrefix(etag, "W/")
	return strings.Trim(etag, `"`)
}

// changedError reports a read whose pinned ETag no longer matches. have is
// empty when the backend only said "precondition failed".
func changedError(target, want, have string) error {
	if have == "" {
		return fmt.Errorf("%w: %s: indexed ETag %q no longer matches the stored object; the dataset changed under its index, rebuild it with `brand index`",
			ErrChanged, target, want)
	}
	return fmt.Errorf("%w: %s: indexed ETag %q, stored object has ETag %q; the dataset changed under its index, rebuild it with `brand index`",
		ErrChanged, target, want, have)
}
