package s3backend

import (
	"fmt"
	"io/fs"
	"os"
	"strings"
	"time"
)

// A local file's ETag is its size and modification time (nanoseconds):
// "<size hex>-<mtime ns hex>". It names the file's content, not the file,
// so a copy that keeps both — `cp -a`, `rsync -a`, a restored backup —
// serves under the index built for the original. Not the inode: an ETag
// with one made every copied dataset fail all its reads while looking
// healthy.
//
// What it still detects: a file rewritten in place by another program
// changes its mtime (and usually its size); a file replaced by Put gets a
// new mtime, which Put makes differ from the old file's even where the
// filesystem's timestamps are coarse (see distinctETag). What it cannot:
// content changed while both size and mtime are restored (as a copy that
// sets the mtime on purpose does), and a copy onto a filesystem with
// coarser timestamps, which truncates the mtime (rebuild the index there
// with `brand index`). The chunks' CRC32Cs still catch corrupt bytes.
func fileETag(fi fs.FileInfo) string {
	return fmt.Sprintf("%x-%x", fi.Size(), fi.ModTime().UnixNano())
}

// sameLocalETag reports whether a file whose ETag is have is the version
// want names. Indexes built before ETags left out the inode carry a third
// field, "<size>-<mtime>-<inode>": they match on size and mtime, as new
// ones do.
func sameLocalETag(want, have string) bool {
	if want == have {
		return true
	}
	if strings.Count(want, "-") == 2 {
		return want[:strings.LastIndexByte(want, '-')] == have
	}
	return false
}

// distinctETag makes sure the new file tmp (fi), about to replace name,
// does not carry the ETag of the file it replaces: on a filesystem with
// coarse timestamps two writes of the same size within one tick would look
// alike. It moves tmp's mtime past the old file's by the smallest step the
// filesystem keeps, and returns tmp's final FileInfo. A writer other than
// Put racing with it can still end up with an equal ETag.
func distinctETag(tmp string, fi fs.FileInfo, name string) (fs.FileInfo, error) {
	old, err := os.Stat(name)
	if err != nil || fileETag(old) != fileETag(fi) {
		return fi, nil // nothing to replace, or already distinct
	}
	for step := time.Nanosecond; step <= 10*time.Second; step *= 10 {
		if err := os.Chtimes(tmp, time.Time{}, old.ModTime().Add(step)); err != nil {
			return nil, err
		}
		if fi, err = os.Stat(tmp); err != nil {
			return nil, err
		}
		if fileETag(fi) != fileETag(old) {
			break
		}
	}
	return fi, nil
}
