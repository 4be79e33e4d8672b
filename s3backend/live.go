package s3backend

import (
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// DefaultSettle is the settle time of Local.Live: longer than the
// coarsest timestamps a local or network file system keeps (one or two
// seconds on some; a clock tick on Linux's own without fine-grained
// timestamps).
const DefaultSettle = 2 * time.Second

// Live returns a view of the directory for serving its files as they are
// while other programs may change them — the S3 face's read-through
// buckets — rather than a dataset's chunks, which an index describes and
// whose content ETags the index records (the receiver is unchanged).
//
// Its ETags name a file's version, not its content: "<size hex>-v<hash>",
// the hash of the file's device, inode, size and modification and change
// times. Every write changes the change time, which no program can set
// back, so a same-size rewrite of a file's middle — which the content
// ETag of its first and last 64 KiB cannot see — gives it another ETag,
// in place or by rename. A read pinned to such an ETag checks the open
// file's version before and after it reads, so all the bytes it returns
// are of that version, or it fails with ErrChanged. Stat and List read no
// file's bytes.
//
// A file changed less than settle before its version is taken could be
// changed again within the same timestamp tick, keeping its version: Stat
// and List mark it ObjectInfo.Unsettled, and a caller must not let one
// reader's bytes of it serve another's read. A settled version cannot
// recur: any later change is stamped later. Its ETag is the same either
// way, so that a client's If-Match holds while the file does not change.
//
// A Live view follows no symbolic link: a file or directory that is one
// is neither listed nor read, and a key through one is not found, so
// nothing outside the directory is ever served.
func (l *Local) Live(settle time.Duration) *Local {
	v := *l
	v.live, v.settle = true, settle
	return &v
}

// liveInfo is a Live view's ObjectInfo of the file fi describes, as of
// now.
func (l *Local) liveInfo(key string, fi fs.FileInfo, now time.Time) ObjectInfo {
	id := fileIdentity(fi)
	return ObjectInfo{Key: key, Size: fi.Size(), ETag: fmt.Sprintf("%x-v%s", fi.Size(), id.hash(fi.Size())),
		ModTime: fi.ModTime().UTC(), Unsettled: now.Sub(id.changed) < l.settle}
}

// identity is what names a file's version besides its size.
type identity struct {
	dev, ino          uint64
	modified, changed time.Time
}

func (id identity) hash(size int64) string {
	var b [40]byte
	binary.LittleEndian.PutUint64(b[0:], id.dev)
	binary.LittleEndian.PutUint64(b[8:], id.ino)
	binary.LittleEndian.PutUint64(b[16:], uint64(size))
	binary.LittleEndian.PutUint64(b[24:], uint64(id.modified.UnixNano()))
	binary.LittleEndian.PutUint64(b[32:], uint64(id.changed.UnixNano()))
	h := sha256.Sum256(b[:])
	return fmt.Sprintf("%x", h[:8])
}

// versionHash is the hash of a version ETag; ok is false for any other
// ETag.
func versionHash(etag string) (hash string, ok bool) {
	size, rest, found := strings.Cut(etag, "-")
	if !found || size == "" || len(rest) != 17 || rest[0] != 'v' || !isHex(size) || !isHex(rest[1:]) {
		return "", false
	}
	return rest[1:], true
}

func isHex(s string) bool {
	for i := range len(s) {
		c := s[i]
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// isVersionETag reports whether etag has a Live view's form.
func isVersionETag(etag string) bool {
	_, ok := versionHash(etag)
	return ok
}

// sameVersion reports whether the file fi describes is the version the
// version ETag want names.
func sameVersion(fi fs.FileInfo, want string) bool {
	hash, _ := versionHash(want)
	return strings.HasPrefix(want, fmt.Sprintf("%x-", fi.Size())) && fileIdentity(fi).hash(fi.Size()) == hash
}

// open opens key's file for reading: through symbolic links that stay
// inside the directory on a plain view (ErrOutside for one that leads
// out of it), through none on a Live one.
func (l *Local) open(key string) (*os.File, error) {
	if !l.live {
		if err := l.inside(key); err != nil {
			return nil, err
		}
		return os.Open(l.path(key))
	}
	return openNoFollow(l.dir, key)
}

// inside checks that key's path, its symbolic links resolved, is in the
// store's directory: an error wrapping ErrOutside naming key if not (and
// the file system's error if it cannot be resolved).
func (l *Local) inside(key string) error {
	real, err := filepath.EvalSymlinks(l.path(key))
	if err != nil {
		return err
	}
	root, err := filepath.EvalSymlinks(l.dir)
	if err != nil {
		return err
	}
	if !within(root, real) {
		return fmt.Errorf("%w: %s", ErrOutside, key)
	}
	return nil
}

// linkFree reports whether no component of the directory dir/rel is a
// symbolic link (rel "" is dir itself, which the store was opened at).
// Each component is looked at in turn: what List lists is checked again
// when it is read.
func linkFree(dir, rel string) (bool, error) {
	if rel == "" {
		return true, nil
	}
	p := dir
	for part := range strings.SplitSeq(rel, "/") {
		p = filepath.Join(p, part)
		fi, err := os.Lstat(p)
		if err != nil {
			return false, err
		}
		if fi.Mode()&fs.ModeSymlink != 0 {
			return false, nil
		}
	}
	return true, nil
}
