package s3backend

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strings"
)

// A local file's ETag names its content: "<size hex>-h<hash hex>", the
// hash being the first 128 bits of the SHA-256 of the file's first and last
// etagBlock bytes (of the whole file when it is no larger than two blocks).
// A copy of a dataset — `cp -r`, which gives every file a new mtime, as
// much as `cp -a` or `rsync -a` — and a touched file keep their ETags and
// serve under the index built for the original. Neither the inode nor the
// modification time is part of it: with either, every chunk read of a
// copied or touched dataset failed with ErrChanged while the bytes were
// the ones indexed.
//
// What it detects: a rewrite — by Put or by another program, in place or
// by rename — that changes the size, or any byte of the first or last
// block. What it cannot: a same-size change confined to the middle of a
// file larger than two blocks. A chunk changed that way reads under its old
// ETag, and the samples' CRC32Cs, which the gateway checks on every chunk
// it loads, report the changed bytes as damaged. The index does not change
// that way unseen: its last four bytes are a CRC32C of all the others.
//
// Equal content has an equal ETag wherever and whenever it was written, as
// on S3, so Put no longer moves a new file's mtime to make its ETag differ
// from the replaced file's: storing the same bytes again keeps the ETag,
// which is right, since a read pinned to it gets the bytes it names; other
// bytes get another ETag unless they differ from the old only in the
// middle, as above, which no ETag computed from the bytes by Stat alone
// could tell apart without reading them all.
//
// Why 64 KiB: hashing whole chunks (64 MiB by default) would make Stat,
// List and every ranged read cost a chunk's read; two blocks are 0.2 % of
// one, and small files (indexes of small datasets, manifests, snapshots)
// are still hashed whole.
//
// Cost: the ETag reads at most 2 × etagBlock bytes. Stat and List read them
// for each file (List of a directory of N chunks reads N × 128 KiB); a
// ranged read pinned to an ETag reads them besides its range; a whole-file
// read (ReadObject, the gateway's path) reads them into the caller's
// buffer first and checks them before reading the rest, so no byte is read
// twice and no progress is reported for a file that changed.
const etagBlock = 64 << 10

// etagSpans returns the byte ranges of a size-byte file its ETag hashes,
// [0, head) and [tail, size): the first and last blocks, or the whole file
// (tail == head) when it is no larger than two blocks.
func etagSpans(size int64) (head, tail int64) {
	head = min(size, etagBlock)
	return head, max(head, size-etagBlock)
}

// readETag returns the ETag of the size-byte file r. It reads the spans
// the ETag hashes into whole, at their offsets, if whole is size bytes (a
// whole-file read's buffer, so they need not be read again), into a
// scratch buffer otherwise. A file shorter than size gives an error
// wrapping io.ErrUnexpectedEOF.
func readETag(r io.ReaderAt, size int64, whole []byte) (string, error) {
	head, tail := etagSpans(size)
	var first, last []byte
	if int64(len(whole)) == size {
		first, last = whole[:head], whole[tail:]
	} else {
		buf := make([]byte, head+size-tail)
		first, last = buf[:head], buf[head:]
	}
	if err := readFullAt(r, first, 0); err != nil {
		return "", err
	}
	if err := readFullAt(r, last, tail); err != nil {
		return "", err
	}
	return contentETag(size, first, last), nil
}

// readFullAt fills p from r at off; io.EOF before p is full is
// io.ErrUnexpectedEOF.
func readFullAt(r io.ReaderAt, p []byte, off int64) error {
	if len(p) == 0 {
		return nil
	}
	n, err := r.ReadAt(p, off)
	switch {
	case n == len(p):
		return nil // io.EOF with a full p only says p reached the end
	case errors.Is(err, io.EOF):
		return io.ErrUnexpectedEOF
	}
	return err
}

// fileETag opens the regular file name and returns its size and ETag. Both
// come from the file opened, so they describe one version even if name is
// replaced meanwhile.
func fileETag(name string) (size int64, etag string, err error) {
	f, err := os.Open(name)
	if err != nil {
		return 0, "", err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return 0, "", err
	}
	if etag, err = readETag(f, fi.Size(), nil); err != nil {
		return 0, "", fmt.Errorf("read %s: %w", name, err)
	}
	return fi.Size(), etag, nil
}

// matchETag reports whether the open file r (fi) is the version want
// names, and returns the file's ETag in want's form: a content ETag, read
// as readETag does (into whole, if it is the file's size), or for an index
// built before content ETags the legacy one, which reads nothing. A Live
// view's version ETag is matched on fi alone ("" for have).
func matchETag(r io.ReaderAt, fi fs.FileInfo, want string, whole []byte) (have string, ok bool, err error) {
	if isVersionETag(want) {
		// A Live view's (live.go): the file's version, read from fi alone.
		return "", sameVersion(fi, want), nil
	}
	if !isContentETag(want) {
		have = legacyETag(fi)
		return have, sameLegacyETag(want, have), nil
	}
	have, err = readETag(r, fi.Size(), whole)
	return have, err == nil && have == want, err
}

// contentETag is the ETag of a size-byte file whose hashed spans are first
// and last.
func contentETag(size int64, first, last []byte) string {
	h := sha256.New()
	h.Write(first)
	h.Write(last)
	return fmt.Sprintf("%x-h%x", size, h.Sum(nil)[:16])
}

// isContentETag reports whether etag has contentETag's form, rather than
// one of the size-and-mtime forms indexes built before it carry (all hex
// digits and dashes).
func isContentETag(etag string) bool { return strings.Contains(etag, "-h") }

// legacyETag is the ETag a local file had before ETags named content: its
// size and modification time in nanoseconds, "<size hex>-<mtime ns hex>".
// Indexes that carry it are matched by it, as they always were: a copy
// that keeps mtimes reads under them; a touch or a copy with new mtimes
// does not (rebuild the index with `brand index` to get content ETags).
func legacyETag(fi fs.FileInfo) string {
	return fmt.Sprintf("%x-%x", fi.Size(), fi.ModTime().UnixNano())
}

// sameLegacyETag reports whether a file whose legacyETag is have is the
// version want, a legacy ETag, names. The oldest indexes carry a third
// field, "<size>-<mtime>-<inode>": they match on size and mtime, so a copy
// with its mtimes kept still reads.
func sameLegacyETag(want, have string) bool {
	if want == have {
		return true
	}
	if strings.Count(want, "-") == 2 {
		return want[:strings.LastIndexByte(want, '-')] == have
	}
	return false
}
