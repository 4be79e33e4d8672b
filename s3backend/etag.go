package s3backend

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strconv"
	"strings"
	"time"
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
// A file whose middle nothing checks — one served in place (Parquet, MDS,
// Megatron), whose index holds no CRC32C of its samples unless it was
// built with checksums — is pinned by its identity instead (identityETag,
// Local.IdentityETags).
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
// as readETag does (into whole, if it is the file's size), or an identity
// ETag, which reads nothing. A Live view's version ETag is matched on fi
// alone ("" for have).
func matchETag(r io.ReaderAt, fi fs.FileInfo, want string, whole []byte) (have string, ok bool, err error) {
	if isVersionETag(want) {
		// A Live view's (live.go): the file's version, read from fi alone.
		return "", sameVersion(fi, want), nil
	}
	if !isContentETag(want) {
		have = identityETag(fi)
		return have, sameIdentity(want, have), nil
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
// an identity ETag's (all hex digits and dashes) or a Live view's.
func isContentETag(etag string) bool { return strings.Contains(etag, "-h") }

// An identity ETag names a file by its size and modification time in
// nanoseconds, "<size hex>-<mtime ns hex>", and is matched on a stat
// alone: what a same-size edit of a file's middle changes, which its
// content ETag cannot see. It is what an index of files served in place
// records (Local.IdentityETags, dataset.IndexInPlace), since nothing else
// checks their middles, and what local indexes built before content
// ETags carry.
//
// What it detects: any write through the file system, in place or by
// rename, a byte of the middle included — every write sets the mtime to
// the clock of its moment, and a read pinned to the ETag checks the open
// file's identity before it reads and again after, so the bytes it
// returns are all of the version named. A write within the same timestamp
// tick as the identity was taken would keep it: the identity of a file
// changed less than its settle time before (SettleOf) is Unsettled, and
// an index waits for it to settle before it records it.
//
// What it cannot: a change whose writer sets the modification time back
// to the old one to the nanosecond (`touch -d`, `touch -r`, or a copy
// keeping times from a same-size source that already differed). Where
// that matters, an index with checksums checks the bytes themselves.
//
// What it refuses that has the indexed bytes: a touched file, and a copy
// made with new modification times (`cp -r`); a copy keeping them (`cp -p`,
// `cp -a`, `rsync -a`), on any file system, reads under it. The inode is
// deliberately not part of it: every copy has a new one, and a dataset
// copied to each node's disk would read nowhere but where it was indexed.
// The oldest indexes carry it as a third field, which is ignored.
func identityETag(fi fs.FileInfo) string {
	return fmt.Sprintf("%x-%x", fi.Size(), uint64(fi.ModTime().UnixNano()))
}

// isIdentityETag reports whether etag (normalized) is an identity ETag.
func isIdentityETag(etag string) bool {
	return etag != "" && !isContentETag(etag) && !isVersionETag(etag)
}

// sameIdentity reports whether a file whose identityETag is have is the
// version want, an identity ETag, names. The oldest indexes carry a third
// field, "<size>-<mtime>-<inode>": they match on size and mtime, so a copy
// with its mtimes kept still reads.
func sameIdentity(want, have string) bool {
	if want == have {
		return true
	}
	if strings.Count(want, "-") == 2 {
		return want[:strings.LastIndexByte(want, '-')] == have
	}
	return false
}

// identityChanged reports a read of the file name (now fi) pinned to the
// identity ETag want, which it no longer has, saying what changed and
// when.
func identityChanged(name, want string, fi fs.FileInfo, when string) error {
	size, mtime := parseIdentity(want)
	what := fmt.Sprintf("modified at %s, indexed as of %s", fi.ModTime().UTC().Format(time.RFC3339Nano), mtime.UTC().Format(time.RFC3339Nano))
	if size != fi.Size() {
		what = fmt.Sprintf("%d bytes, indexed at %d", fi.Size(), size)
	}
	return fmt.Errorf("%w: %s changed %s (%s); the dataset changed under its index, rebuild it with `brand index`",
		ErrChanged, name, when, what)
}

// parseIdentity returns the size and modification time an identity ETag
// names (zero for what does not parse).
func parseIdentity(etag string) (size int64, mtime time.Time) {
	parts := strings.Split(etag, "-")
	if len(parts) < 2 {
		return 0, time.Time{}
	}
	s, _ := strconv.ParseInt(parts[0], 16, 64)
	m, _ := strconv.ParseUint(parts[1], 16, 64)
	return s, time.Unix(0, int64(m))
}
