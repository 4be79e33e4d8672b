package s3backend

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"
)

// tempPrefix starts the name of a file Put is still writing; List skips them.
const tempPrefix = ".brand-tmp-"

// localReadSlice bounds one ReadAt so that a large read notices a cancelled
// context between slices; a read whose caller watches its bytes arrive
// reads progressPiece at a time.
const localReadSlice = 8 << 20

// Local is a Store on a local directory: key "a/b.tar" is the file
// <dir>/a/b.tar. It serves development, tests and datasets on a shared
// filesystem.
//
// A file's ETag names its content — its size and a hash of its first and
// last 64 KiB — not the file, so a copy of a dataset (`cp -r`, `cp -a`,
// `rsync -a`) and a touched file serve under the original's index, while a
// rewrite that changes the size or either end is ErrChanged; etag.go says
// what it costs and what it cannot detect. A read pinned to an identity
// ETag (IdentityETags: size and modification time) sees any write, the
// middle's included. Put replaces a file by renaming a new one over it,
// so a reader holding the old file reads it to the end.
//
// A Local opened by Open with a Config.Observer reports every file
// operation to it, as S3 reports HTTP requests.
type Local struct {
	dir string   // absolute, cleaned
	obs Observer // nil: report nothing
	// live marks a Live view: version ETags taken as settled after
	// settle, no symbolic links.
	live   bool
	settle time.Duration
	// identity marks an IdentityETags view: Stat and List report
	// identity ETags.
	identity bool
}

// NewLocal returns a store rooted at dir. dir need not exist yet (Put
// creates it), but if it exists it must be a directory.
func NewLocal(dir string) (*Local, error) {
	if dir == "" {
		return nil, errors.New("s3backend: empty directory")
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("s3backend: directory %q: %w", dir, err)
	}
	fi, err := os.Stat(abs)
	switch {
	case err == nil && !fi.IsDir():
		return nil, fmt.Errorf("s3backend: %s is not a directory", abs)
	case err != nil && !errors.Is(err, fs.ErrNotExist):
		return nil, fmt.Errorf("s3backend: directory %s: %w", abs, err)
	}
	return &Local{dir: abs}, nil
}

// newObservedLocal is NewLocal reporting to obs, if not nil.
func newObservedLocal(dir string, obs Observer) (*Local, error) {
	l, err := NewLocal(dir)
	if err != nil {
		return nil, err
	}
	l.obs = obs
	return l, nil
}

// observe reports one file operation, begun at start, to the Observer.
func (l *Local) observe(op string, start time.Time, bytes int64, err error) {
	if l.obs != nil {
		l.obs.ObserveBackend(op, bytes, time.Since(start), err)
	}
}

// String returns the store's URL, file:///dir.
func (l *Local) String() string { return "file://" + filepath.ToSlash(l.dir) }

// Dir returns the absolute directory the store is rooted at.
func (l *Local) Dir() string { return l.dir }

func (l *Local) path(key string) string { return filepath.Join(l.dir, filepath.FromSlash(key)) }

// notFound reports whether err from opening or stating a key's file means
// there is no such object: a missing file, a path component that is a
// file rather than a directory, or a name longer than the file system
// takes (no file can have it).
func notFound(err error) bool {
	return errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) || errors.Is(err, syscall.ENAMETOOLONG)
}

// Requests is how many reads a ReadRange of n bytes makes: one.
func (l *Local) Requests(n int64) int {
	if n <= 0 {
		return 0
	}
	return 1
}

// ReadRange fills p from the file at off. The etag, if any, is checked
// against the opened file, so the bytes read are from the version checked.
func (l *Local) ReadRange(ctx context.Context, key, etag string, off int64, p []byte) error {
	return l.ReadRangeProgress(ctx, key, etag, off, p, nil)
}

// ReadObject fills p with a whole file, which must be exactly len(p) bytes
// (ErrOutOfRange otherwise), reporting progress as ReadRangeProgress does.
func (l *Local) ReadObject(ctx context.Context, key, etag string, p []byte, progress func(start, end int)) error {
	return l.read(ctx, key, etag, 0, p, progress, true)
}

// ReadRangeProgress is ReadRange that calls progress(start, end), if not
// nil, after each slice p[start:end] is read, in order (see
// S3.ReadRangeProgress).
func (l *Local) ReadRangeProgress(ctx context.Context, key, etag string, off int64, p []byte, progress func(start, end int)) error {
	return l.read(ctx, key, etag, off, p, progress, false)
}

// read is ReadRangeProgress; whole says p must be the whole file, which is
// checked on the file opened for the read. The read is reported to the
// Observer as one OpGet of the bytes read.
func (l *Local) read(ctx context.Context, key, etag string, off int64, p []byte, progress func(start, end int), whole bool) error {
	if err := checkKey(key); err != nil {
		return err
	}
	name := l.path(key)
	if off < 0 {
		return fmt.Errorf("s3backend: read %s: negative offset %d", name, off)
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("s3backend: read %s: %w", name, err)
	}
	start := time.Now()
	n, err := l.readFile(ctx, key, etag, off, p, progress, whole)
	l.observe(OpGet, start, int64(n), err)
	return err
}

// readFile is read after the checks, returning the bytes read. A read
// pinned to a version ETag (a Live view's) or an identity ETag checks the
// file again once it has read: the bytes are all of the version checked
// before, or none is returned.
func (l *Local) readFile(ctx context.Context, key, etag string, off int64, p []byte, progress func(start, end int), whole bool) (int, error) {
	name := l.path(key)
	f, err := l.open(key)
	if err != nil {
		if notFound(err) {
			return 0, fmt.Errorf("%w: %s", ErrNotFound, name)
		}
		return 0, fmt.Errorf("s3backend: read %w", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return 0, fmt.Errorf("s3backend: read %w", err)
	}
	if !fi.Mode().IsRegular() {
		return 0, fmt.Errorf("%w: %s is not a regular file", ErrNotFound, name)
	}
	n, err := readVersion(ctx, f, fi, name, etag, off, p, progress, whole)
	want := normalizeETag(etag)
	if err != nil || !isVersionETag(want) && !isIdentityETag(want) {
		return n, err
	}
	after, err := f.Stat()
	if err != nil {
		return 0, fmt.Errorf("s3backend: read %w", err)
	}
	switch {
	case isVersionETag(want) && !sameVersion(after, want):
		return 0, changedError(name, etag, "")
	case isIdentityETag(want) && !sameIdentity(want, identityETag(after)):
		return 0, identityChanged(name, want, after, "while it was read")
	}
	return n, nil
}

// readVersion is readFile on the open file r (fi): it checks that r is the
// version etag names, if etag is not "", then fills p from off, returning
// the bytes put in p.
//
// A whole-file read under a content ETag reads the ETag's spans straight
// into p and checks them before anything else, so no byte is read twice
// and a changed file reports no progress; the rest follows in order.
func readVersion(ctx context.Context, r io.ReaderAt, fi fs.FileInfo, name, etag string, off int64, p []byte, progress func(start, end int), whole bool) (int, error) {
	size := fi.Size()
	var into []byte // where the ETag's spans go: p if p is the whole file
	if whole && size == int64(len(p)) {
		into = p
	}
	checked := false // p holds the ETag's spans, checked
	if etag = normalizeETag(etag); etag != "" {
		have, ok, err := matchETag(r, fi, etag, into)
		switch {
		case errors.Is(err, io.ErrUnexpectedEOF):
			return 0, changedError(name, etag, "") // truncated while read
		case err != nil:
			return 0, fmt.Errorf("s3backend: read %w", err)
		case !ok && isIdentityETag(etag):
			return 0, identityChanged(name, etag, fi, "since it was indexed")
		case !ok:
			return 0, changedError(name, etag, have)
		}
		checked = into != nil && isContentETag(etag)
	}
	if whole && size != int64(len(p)) {
		return 0, fmt.Errorf("%w: %s is %d bytes, expected %d", ErrOutOfRange, name, size, len(p))
	}
	if !checked {
		return readSlices(ctx, r, name, off, p, 0, len(p), size, progress)
	}
	head, tail := etagSpans(size)
	report := func(start, end int64) {
		if start < end && progress != nil {
			progress(int(start), int(end))
		}
	}
	report(0, head)
	n, err := readSlices(ctx, r, name, 0, p, int(head), int(tail), size, progress)
	if err != nil {
		return int(head) + n, err
	}
	report(tail, size)
	return len(p), nil
}

// readSlices fills p[from:to] from r at off+from, localReadSlice bytes at a
// time, checking ctx before each slice and calling progress after it. It
// returns the bytes read; size is the file's, for the error of a read past
// its end.
func readSlices(ctx context.Context, r io.ReaderAt, name string, off int64, p []byte, from, to int, size int64, progress func(start, end int)) (int, error) {
	at := from
	for at < to {
		if err := ctx.Err(); err != nil {
			return at - from, fmt.Errorf("s3backend: read %s: %w", name, err)
		}
		slice := localReadSlice
		if progress != nil {
			slice = progressPiece
		}
		end := min(at+slice, to)
		n, err := r.ReadAt(p[at:end], off+int64(at))
		if n > 0 && progress != nil {
			progress(at, at+n)
		}
		at += n
		switch {
		case errors.Is(err, io.EOF) && at < end:
			return at - from, fmt.Errorf("%w: %s: bytes [%d, %d) of a %d-byte file", ErrOutOfRange, name, off, off+int64(len(p)), size)
		case err != nil && !errors.Is(err, io.EOF):
			return at - from, fmt.Errorf("s3backend: read %w", err)
		}
	}
	return at - from, nil
}

// Stat returns the file's size and ETag, reading the blocks the ETag
// hashes.
func (l *Local) Stat(ctx context.Context, key string) (_ ObjectInfo, err error) {
	if err := checkKey(key); err != nil {
		return ObjectInfo{}, err
	}
	start := time.Now()
	defer func() { l.observe(OpStat, start, 0, err) }()
	if err := ctx.Err(); err != nil {
		return ObjectInfo{}, fmt.Errorf("s3backend: stat %s: %w", l.path(key), err)
	}
	if l.live || l.identity {
		return l.statOpen(key)
	}
	if err := l.inside(key); err != nil && !notFound(err) {
		return ObjectInfo{}, fmt.Errorf("s3backend: stat %w", err)
	}
	fi, err := os.Stat(l.path(key))
	if err != nil {
		if notFound(err) {
			return ObjectInfo{}, fmt.Errorf("%w: %s", ErrNotFound, l.path(key))
		}
		return ObjectInfo{}, fmt.Errorf("s3backend: stat %w", err)
	}
	if !fi.Mode().IsRegular() {
		return ObjectInfo{}, fmt.Errorf("%w: %s is not a regular file", ErrNotFound, l.path(key))
	}
	size, etag, err := fileETag(l.path(key))
	if err != nil {
		if notFound(err) {
			return ObjectInfo{}, fmt.Errorf("%w: %s", ErrNotFound, l.path(key))
		}
		return ObjectInfo{}, fmt.Errorf("s3backend: stat %w", err)
	}
	return ObjectInfo{Key: key, Size: size, ETag: etag, ModTime: fi.ModTime().UTC()}, nil
}

// statOpen is Stat on a Live view — the version of the regular file key
// names, reached through no symbolic link — or on an IdentityETags view:
// its identity. Nothing is read.
func (l *Local) statOpen(key string) (ObjectInfo, error) {
	f, err := l.open(key)
	if err != nil {
		if notFound(err) {
			return ObjectInfo{}, fmt.Errorf("%w: %s", ErrNotFound, l.path(key))
		}
		return ObjectInfo{}, fmt.Errorf("s3backend: stat %w", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return ObjectInfo{}, fmt.Errorf("s3backend: stat %w", err)
	}
	if !fi.Mode().IsRegular() {
		return ObjectInfo{}, fmt.Errorf("%w: %s is not a regular file", ErrNotFound, l.path(key))
	}
	if l.identity {
		return identityInfo(key, fi, time.Now()), nil
	}
	return l.liveInfo(key, fi, time.Now()), nil
}

// Put writes r to a temporary file beside the destination, syncs it and
// renames it into place, so readers see the old file or the complete new
// one, never a partial write. Parent directories are created as needed.
// The ETag returned is the new file's, read back from it before the
// rename: the same bytes stored again keep their ETag, as on S3.
func (l *Local) Put(ctx context.Context, key string, r io.Reader, size int64) (info ObjectInfo, err error) {
	if err := checkKey(key); err != nil {
		return ObjectInfo{}, err
	}
	start := time.Now()
	defer func() { l.observe(OpPut, start, info.Size, err) }()
	return l.place(ctx, key, r, size, os.Rename)
}

// PutIfAbsent writes r to a temporary file as Put does and hard-links it
// to the key, which fails if any file has the name: the link is the
// atomic create-if-absent a rename is not. A filesystem without hard
// links cannot hold objects written this way.
func (l *Local) PutIfAbsent(ctx context.Context, key string, r io.Reader, size int64) (info ObjectInfo, err error) {
	if err := checkKey(key); err != nil {
		return ObjectInfo{}, err
	}
	start := time.Now()
	defer func() { l.observe(OpPut, start, info.Size, err) }()
	if size < 0 {
		return ObjectInfo{}, fmt.Errorf("s3backend: put %s if absent: the size must be known, not %d", l.path(key), size)
	}
	return l.place(ctx, key, r, size, func(tmp, name string) error {
		err := os.Link(tmp, name)
		os.Remove(tmp)
		if errors.Is(err, fs.ErrExist) {
			return fmt.Errorf("%w: %s", ErrExists, name)
		}
		return err
	})
}

// place writes r to a temporary file beside key's, synced, and moves it
// to key's name with move(temporary, name); the temporary is removed if
// anything fails.
func (l *Local) place(ctx context.Context, key string, r io.Reader, size int64, move func(tmp, name string) error) (_ ObjectInfo, err error) {
	name := l.path(key)
	if size < -1 {
		return ObjectInfo{}, fmt.Errorf("s3backend: put %s: invalid size %d", name, size)
	}
	if err := ctx.Err(); err != nil {
		return ObjectInfo{}, fmt.Errorf("s3backend: put %s: %w", name, err)
	}
	if err := os.MkdirAll(filepath.Dir(name), 0o755); err != nil {
		return ObjectInfo{}, fmt.Errorf("s3backend: put %s: %w", name, err)
	}
	tmp, err := os.CreateTemp(filepath.Dir(name), tempPrefix+"*")
	if err != nil {
		return ObjectInfo{}, fmt.Errorf("s3backend: put %s: %w", name, err)
	}
	defer func() {
		if err != nil {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()

	src := &ctxReader{ctx: ctx, r: r}
	var n int64
	if size >= 0 {
		n, err = io.CopyN(tmp, src, size)
		if errors.Is(err, io.EOF) {
			err = fmt.Errorf("reader ended after %d of %d bytes: %w", n, size, io.ErrUnexpectedEOF)
		}
	} else {
		n, err = io.Copy(tmp, src)
	}
	if err != nil {
		return ObjectInfo{}, fmt.Errorf("s3backend: put %s: %w", name, err)
	}
	if err = tmp.Sync(); err != nil {
		return ObjectInfo{}, fmt.Errorf("s3backend: put %s: %w", name, err)
	}
	if err = tmp.Chmod(0o644); err != nil {
		return ObjectInfo{}, fmt.Errorf("s3backend: put %s: %w", name, err)
	}
	// The ETag comes from the new file itself: stating the destination
	// after the move could see a concurrent writer's file instead.
	etag, err := readETag(tmp, n, nil)
	if err != nil {
		return ObjectInfo{}, fmt.Errorf("s3backend: put %s: %w", name, err)
	}
	if err = tmp.Close(); err != nil {
		return ObjectInfo{}, fmt.Errorf("s3backend: put %s: %w", name, err)
	}
	if err = move(tmp.Name(), name); err != nil {
		if errors.Is(err, ErrExists) {
			return ObjectInfo{}, err
		}
		return ObjectInfo{}, fmt.Errorf("s3backend: put %s: %w", name, err)
	}
	return ObjectInfo{Key: key, Size: n, ETag: etag}, nil
}

// Delete removes the file. A missing file, or a name that is a directory
// rather than an object, is not an error: there is no object to delete.
func (l *Local) Delete(ctx context.Context, key string) (err error) {
	if err := checkKey(key); err != nil {
		return err
	}
	start := time.Now()
	defer func() { l.observe(OpDelete, start, 0, err) }()
	name := l.path(key)
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("s3backend: delete %s: %w", name, err)
	}
	fi, err := os.Lstat(name)
	switch {
	case notFound(err):
		return nil
	case err != nil:
		return fmt.Errorf("s3backend: delete %w", err)
	case fi.IsDir():
		return nil
	}
	if err := os.Remove(name); err != nil && !notFound(err) {
		return fmt.Errorf("s3backend: delete %w", err)
	}
	return nil
}

// ctxReader stops a copy when its context ends.
type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

func (c *ctxReader) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.r.Read(p)
}

// List walks the directory tree under prefix, reading the blocks each
// listed file's ETag hashes. Files Put is still writing,
// non-regular files and names that are not valid keys are skipped. A
// symbolic link is followed, to a file or a directory alike, where it
// leads inside the store's directory, and listed under its own name (a
// tree of links into a pool within it); one that leads out of it fails
// the listing (ErrOutside, naming the link), so that nothing outside the
// directory is indexed or served through it; a dangling link is skipped.
// On a Live view no link is listed or followed, and nothing is listed
// under a prefix through a link to a directory.
func (l *Local) List(ctx context.Context, prefix string) (_ []ObjectInfo, err error) {
	if err := checkPrefix(prefix); err != nil {
		return nil, err
	}
	began := time.Now()
	defer func() { l.observe(OpList, began, 0, err) }()
	// Walk only the deepest directory the prefix names in full.
	start, base := l.dir, ""
	if i := strings.LastIndex(prefix, "/"); i >= 0 {
		start, base = l.path(prefix[:i]), prefix[:i]
		if l.live {
			switch ok, err := linkFree(l.dir, prefix[:i]); {
			case notFound(err), err == nil && !ok:
				return nil, nil
			case err != nil:
				return nil, fmt.Errorf("s3backend: list %s: %w", l.String()+"/"+prefix, err)
			}
		}
	}
	w := &walk{l: l, ctx: ctx, prefix: prefix, now: time.Now()}
	if !l.live {
		// The prefix's directory may be reached through links itself.
		if w.root, err = filepath.EvalSymlinks(l.dir); err != nil && !notFound(err) {
			return nil, fmt.Errorf("s3backend: list %s: %w", l.String()+"/"+prefix, err)
		}
		real, err := filepath.EvalSymlinks(start)
		switch {
		case notFound(err):
			return nil, nil // nothing stored under this prefix
		case err != nil:
			return nil, fmt.Errorf("s3backend: list %s: %w", l.String()+"/"+prefix, err)
		case !within(w.root, real):
			return nil, fmt.Errorf("s3backend: list %s: %w: %s", l.String()+"/"+prefix, ErrOutside, base)
		}
		start = real
	}
	if err := w.dir(start, base, nil); err != nil {
		return nil, fmt.Errorf("s3backend: list %s: %w", l.String()+"/"+prefix, err)
	}
	out := w.out
	// Walk order is per directory; S3 order is by the whole key's bytes
	// ("a-b" sorts before "a/b").
	slices.SortFunc(out, func(a, b ObjectInfo) int { return strings.Compare(a.Key, b.Key) })
	return out, nil
}

// walk is one List's walk of the store's tree: root is the store's
// directory with its links resolved; out what it lists.
type walk struct {
	l      *Local
	ctx    context.Context
	prefix string
	now    time.Time
	root   string
	out    []ObjectInfo
}

// dir lists the tree at start (a directory, its links resolved but on a
// Live view), its files' keys under base; chain is the directories whose
// links led here, so that a link back up one of them is a loop.
func (w *walk) dir(start, base string, chain []string) error {
	l := w.l
	return filepath.WalkDir(start, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if p == start && notFound(err) {
				return fs.SkipAll // nothing stored under this prefix
			}
			return err
		}
		if err := w.ctx.Err(); err != nil {
			return err
		}
		if strings.HasPrefix(d.Name(), tempPrefix) || d.IsDir() {
			return nil
		}
		rel, err := filepath.Rel(start, p)
		if err != nil {
			return err
		}
		key := path.Join(base, filepath.ToSlash(rel))
		if !strings.HasPrefix(key, w.prefix) || checkKey(key) != nil {
			return nil
		}
		var fi fs.FileInfo
		switch {
		case d.Type()&fs.ModeSymlink != 0 && l.live:
			return nil
		case d.Type()&fs.ModeSymlink != 0:
			target, err := filepath.EvalSymlinks(p)
			if notFound(err) {
				return nil // a dangling link
			}
			if err != nil {
				return err
			}
			if !within(w.root, target) {
				return fmt.Errorf("%w: %s", ErrOutside, key)
			}
			if fi, err = os.Stat(target); err != nil {
				if notFound(err) {
					return nil
				}
				return err
			}
			if fi.IsDir() {
				for _, c := range append(chain, start) {
					if within(target, c) {
						return fmt.Errorf("%w: %s leads to a directory that holds it (a loop)", ErrOutside, key)
					}
				}
				return w.dir(target, key, append(chain, start))
			}
		default:
			fi, err = d.Info()
		}
		if err != nil {
			if notFound(err) {
				return nil // removed during the walk, or a dangling link
			}
			return err
		}
		if !fi.Mode().IsRegular() {
			return nil
		}
		switch {
		case l.live:
			w.out = append(w.out, l.liveInfo(key, fi, w.now))
			return nil
		case l.identity:
			w.out = append(w.out, identityInfo(key, fi, w.now))
			return nil
		}
		size, etag, err := fileETag(p)
		if err != nil {
			if notFound(err) {
				return nil // removed since
			}
			return err
		}
		w.out = append(w.out, ObjectInfo{Key: key, Size: size, ETag: etag, ModTime: fi.ModTime().UTC()})
		return nil
	})
}

// within reports whether the path p is dir or under it (both cleaned,
// their links resolved).
func within(dir, p string) bool {
	rel, err := filepath.Rel(dir, p)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator)) && !filepath.IsAbs(rel)
}
