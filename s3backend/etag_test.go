package s3backend

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// copyTree copies the regular files under src to dst file by file, with new
// inodes and the modification times mtime gives: the old one for `cp -a`
// and `rsync -a`, a new one for `cp -r`.
func copyTree(t *testing.T, src, dst string, mtime func(fs.FileInfo) time.Time) {
	t.Helper()
	err := filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		to := filepath.Join(dst, rel)
		if err := os.MkdirAll(filepath.Dir(to), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(to, b, 0o644); err != nil {
			return err
		}
		return os.Chtimes(to, mtime(fi), mtime(fi))
	})
	if err != nil {
		t.Fatal(err)
	}
}

// keepMtime and newMtime are copyTree's two kinds of copy. newMtime moves
// the time by a fixed amount rather than taking the clock's, so the copy's
// mtimes differ from the original's however coarse the filesystem is.
func keepMtime(fi fs.FileInfo) time.Time { return fi.ModTime() }
func newMtime(fi fs.FileInfo) time.Time  { return fi.ModTime().Add(97*time.Minute + 3*time.Second) }

// etagSizes are file sizes around the ETag's blocks: hashed whole up to two
// blocks, by their first and last block beyond.
var etagSizes = []int{0, 1000, etagBlock, 2 * etagBlock, 2*etagBlock + 1, 5*etagBlock + 17}

// TestLocalETagSurvivesCopy checks that a dataset copied file by file, with
// its modification times kept or new, serves under the original's ETags,
// by ranged and whole-object reads, and lists and stats with them.
func TestLocalETagSurvivesCopy(t *testing.T) {
	ctx := context.Background()
	orig := newTestLocal(t)
	infos := map[string]ObjectInfo{}
	for i, n := range etagSizes {
		key := fmt.Sprintf("chunks/%06d.tar", i)
		infos[key] = mustPut(t, orig, key, randomBytes(n, uint64(i)))
	}
	infos["a/b/c"] = mustPut(t, orig, "a/b/c", randomBytes(517, 99))
	for _, tt := range []struct {
		name  string
		mtime func(fs.FileInfo) time.Time
	}{{"cp -a", keepMtime}, {"cp -r", newMtime}} {
		t.Run(tt.name, func(t *testing.T) {
			cp, err := NewLocal(filepath.Join(t.TempDir(), "copy"))
			if err != nil {
				t.Fatal(err)
			}
			copyTree(t, orig.Dir(), cp.Dir(), tt.mtime)
			listed, err := cp.List(ctx, "")
			if err != nil || len(listed) != len(infos) {
				t.Fatalf("List of the copy = %v, %v", listed, err)
			}
			for _, got := range listed {
				want := infos[got.Key]
				if got.ETag != want.ETag {
					t.Errorf("%s: copy listed with ETag %s, original %s", got.Key, got.ETag, want.ETag)
				}
				if st, err := cp.Stat(ctx, got.Key); err != nil || st.ETag != want.ETag {
					t.Errorf("%s: Stat of the copy = %+v, %v; want ETag %s", got.Key, st, err, want.ETag)
				}
				if err := cp.ReadRange(ctx, got.Key, want.ETag, want.Size/2, make([]byte, want.Size/3)); err != nil {
					t.Errorf("%s: ranged read of the copy under the original's ETag: %v", got.Key, err)
				}
				if err := cp.ReadObject(ctx, got.Key, want.ETag, make([]byte, want.Size), nil); err != nil {
					t.Errorf("%s: whole read of the copy under the original's ETag: %v", got.Key, err)
				}
			}
		})
	}
}

// TestLocalETagTouched checks that a file whose modification time alone
// changes (`touch`) keeps its ETag.
func TestLocalETagTouched(t *testing.T) {
	ctx := context.Background()
	for _, n := range etagSizes {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			l := newTestLocal(t)
			data := randomBytes(n, 7)
			info := mustPut(t, l, "obj", data)
			later := time.Now().Add(time.Hour)
			if err := os.Chtimes(filepath.Join(l.Dir(), "obj"), later, later); err != nil {
				t.Fatal(err)
			}
			if st, err := l.Stat(ctx, "obj"); err != nil || st.ETag != info.ETag {
				t.Errorf("Stat after touch = %+v, %v; want ETag %s", st, err, info.ETag)
			}
			if err := l.ReadRange(ctx, "obj", info.ETag, 0, make([]byte, n/2)); err != nil {
				t.Errorf("ranged read after touch: %v", err)
			}
			p := make([]byte, n)
			if err := l.ReadObject(ctx, "obj", info.ETag, p, nil); err != nil || !bytes.Equal(p, data) {
				t.Errorf("whole read after touch: %v (bytes equal %t)", err, bytes.Equal(p, data))
			}
		})
	}
}

// TestLocalETagDetects checks which rewrites of a file change its ETag.
// Each rewrite keeps the file's modification time, so only the content
// can tell. A same-size change confined to the middle of a file larger
// than two blocks is the one it cannot see (the samples' CRC32Cs do).
func TestLocalETagDetects(t *testing.T) {
	ctx := context.Background()
	big, small := 5*etagBlock+17, 2*etagBlock
	flip := func(at int) func([]byte) []byte {
		return func(b []byte) []byte { b[at] ^= 1; return b }
	}
	tests := []struct {
		name    string
		size    int
		rewrite func([]byte) []byte
		changed bool
	}{
		{"untouched", big, func(b []byte) []byte { return b }, false},
		{"first byte", big, flip(0), true},
		{"end of the first block", big, flip(etagBlock - 1), true},
		{"start of the last block", big, flip(big - etagBlock), true},
		{"last byte", big, flip(big - 1), true},
		{"one byte longer", big, func(b []byte) []byte { return append(b, 0) }, true},
		{"one byte shorter", big, func(b []byte) []byte { return b[:len(b)-1] }, true},
		{"same size, middle only", big, flip(big / 2), false},
		{"just past the first block", big, flip(etagBlock), false},
		{"middle of a file of two blocks", small, flip(small / 2), true},
		{"empty to one byte", 0, func(b []byte) []byte { return append(b, 0) }, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := newTestLocal(t)
			data := randomBytes(tt.size, 5)
			info := mustPut(t, l, "obj", data)
			name := filepath.Join(l.Dir(), "obj")
			fi, err := os.Stat(name)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(name, tt.rewrite(bytes.Clone(data)), 0o644); err != nil {
				t.Fatal(err)
			}
			if err := os.Chtimes(name, fi.ModTime(), fi.ModTime()); err != nil {
				t.Fatal(err)
			}
			err = l.ReadRange(ctx, "obj", info.ETag, 0, make([]byte, min(tt.size, 10)))
			if errors.Is(err, ErrChanged) != tt.changed {
				t.Errorf("ranged read = %v, want ErrChanged: %t", err, tt.changed)
			}
			var reported int
			err = l.ReadObject(ctx, "obj", info.ETag, make([]byte, tt.size), func(start, end int) { reported += end - start })
			if errors.Is(err, ErrChanged) != tt.changed {
				t.Errorf("whole read = %v, want ErrChanged: %t", err, tt.changed)
			}
			if tt.changed && reported != 0 {
				t.Errorf("a whole read of a changed file reported %d bytes before failing", reported)
			}
			st, err := l.Stat(ctx, "obj")
			if err != nil || (st.ETag != info.ETag) != tt.changed {
				t.Errorf("Stat = %+v, %v; ETag was %s, want changed: %t", st, err, info.ETag, tt.changed)
			}
		})
	}
}

// TestLocalIdentityETagForms checks that identity ETags — the size and
// modification time, which indexes of files served in place record and
// local indexes built before content ETags carry — and the oldest form,
// those and the inode, read their files matched by size and mtime, so a
// touch is a change to them and a copy keeping times is not.
func TestLocalIdentityETagForms(t *testing.T) {
	ctx := context.Background()
	l := newTestLocal(t)
	data := randomBytes(3*etagBlock, 9)
	mustPut(t, l, "obj", data)
	name := filepath.Join(l.Dir(), "obj")
	fi, err := os.Stat(name)
	if err != nil {
		t.Fatal(err)
	}
	var ino uint64 = 12345
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		ino = uint64(st.Ino)
	}
	mt := fi.ModTime().UnixNano()
	tests := []struct {
		etag string
		ok   bool
	}{
		{fmt.Sprintf("%x-%x-%x", fi.Size(), mt, ino), true},
		{fmt.Sprintf("%x-%x-%x", fi.Size(), mt, ino+1), true}, // a copy
		{fmt.Sprintf("%x-%x-%x", fi.Size(), mt+1, ino), false},
		{fmt.Sprintf("%x-%x-%x", fi.Size()+1, mt, ino), false},
		{fmt.Sprintf("%x-%x", fi.Size(), mt), true},
		{fmt.Sprintf("%x-%x", fi.Size(), mt+1), false},
		{fmt.Sprintf("%x", fi.Size()), false},
	}
	for _, tt := range tests {
		err := l.ReadRange(ctx, "obj", tt.etag, 0, make([]byte, 10))
		if (err == nil) != tt.ok {
			t.Errorf("ReadRange with ETag %s = %v, want ok=%t", tt.etag, err, tt.ok)
		}
		p := make([]byte, len(data))
		err = l.ReadObject(ctx, "obj", tt.etag, p, nil)
		if (err == nil) != tt.ok || (err == nil && !bytes.Equal(p, data)) {
			t.Errorf("ReadObject with ETag %s = %v, want ok=%t", tt.etag, err, tt.ok)
		}
	}
	// A touch changes an identity ETag.
	later := fi.ModTime().Add(time.Second)
	if err := os.Chtimes(name, later, later); err != nil {
		t.Fatal(err)
	}
	if err := l.ReadRange(ctx, "obj", tests[0].etag, 0, make([]byte, 10)); !errors.Is(err, ErrChanged) {
		t.Errorf("identity ETag after a touch: %v, want ErrChanged", err)
	}
}

// TestLocalPutETag checks the ETag Put leaves: the same content stored
// again keeps it, and different content gets another, so a read pinned to
// the replaced version fails.
func TestLocalPutETag(t *testing.T) {
	ctx := context.Background()
	l := newTestLocal(t)
	data := randomBytes(3*etagBlock, 11)
	first := mustPut(t, l, "obj", data)
	if st, err := l.Stat(ctx, "obj"); err != nil || st.ETag != first.ETag {
		t.Fatalf("Stat after Put = %+v, %v; Put said %s", st, err, first.ETag)
	}
	again := mustPut(t, l, "obj", data)
	if again.ETag != first.ETag {
		t.Errorf("the same content stored again has ETag %s, was %s", again.ETag, first.ETag)
	}
	other := bytes.Clone(data)
	other[len(other)-1] ^= 1
	replaced := mustPut(t, l, "obj", other)
	if replaced.ETag == first.ETag {
		t.Fatalf("different content keeps ETag %s", first.ETag)
	}
	if err := l.ReadRange(ctx, "obj", first.ETag, 0, make([]byte, 1)); !errors.Is(err, ErrChanged) {
		t.Errorf("read pinned to the replaced version = %v, want ErrChanged", err)
	}
}

// countingFile counts the bytes read from a file.
type countingFile struct {
	io.ReaderAt
	n int64
}

func (c *countingFile) ReadAt(p []byte, off int64) (int, error) {
	n, err := c.ReaderAt.ReadAt(p, off)
	c.n += int64(n)
	return n, err
}

// TestLocalReadCost checks what a read of a file under a content ETag
// costs: a whole-object read reads each byte once, the ETag's blocks
// included; a ranged read reads its range and the two blocks.
func TestLocalReadCost(t *testing.T) {
	ctx := context.Background()
	size := 5*etagBlock + 17
	l := newTestLocal(t)
	data := randomBytes(size, 13)
	info := mustPut(t, l, "obj", data)
	tests := []struct {
		name      string
		off, n    int
		whole     bool
		wantBytes int64
	}{
		{"whole object", 0, size, true, int64(size)},
		{"range", etagBlock, 100, false, 2*etagBlock + 100},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, err := os.Open(filepath.Join(l.Dir(), "obj"))
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			fi, err := f.Stat()
			if err != nil {
				t.Fatal(err)
			}
			cf := &countingFile{ReaderAt: f}
			p := make([]byte, tt.n)
			var reported []int
			progress := func(start, end int) { reported = append(reported, start, end) }
			if _, err := readVersion(ctx, cf, fi, "obj", info.ETag, int64(tt.off), p, progress, tt.whole); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(p, data[tt.off:tt.off+tt.n]) {
				t.Fatal("wrong bytes")
			}
			if cf.n != tt.wantBytes {
				t.Errorf("read %d bytes from the file, want %d", cf.n, tt.wantBytes)
			}
			for i, at := 0, 0; i < len(reported); i += 2 {
				if reported[i] != at || reported[i+1] <= at {
					t.Fatalf("progress %v: not in order from 0", reported)
				}
				at = reported[i+1]
			}
			if len(reported) == 0 || reported[len(reported)-1] != tt.n {
				t.Errorf("progress %v does not end at %d", reported, tt.n)
			}
		})
	}
}
