package s3backend

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// copyTree copies the regular files under src to dst as `cp -a` and
// `rsync -a` do: same bytes and modification times, new inodes.
func copyTree(t *testing.T, src, dst string) {
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
		return os.Chtimes(to, fi.ModTime(), fi.ModTime())
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestLocalETagSurvivesCopy checks that a dataset copied with its
// modification times kept serves under the original's ETags, and that the
// ETag still tells a rewritten file (new size or mtime) apart.
func TestLocalETagSurvivesCopy(t *testing.T) {
	ctx := context.Background()
	orig := newTestLocal(t)
	infos := map[string]ObjectInfo{}
	for i, key := range []string{"index.brand", "chunks/000000.tar", "chunks/000001.tar", "a/b/c"} {
		infos[key] = mustPut(t, orig, key, randomBytes(1000+i*517, uint64(i)))
	}
	cp, err := NewLocal(filepath.Join(t.TempDir(), "copy"))
	if err != nil {
		t.Fatal(err)
	}
	copyTree(t, orig.Dir(), cp.Dir())
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
		if err := cp.ReadRange(ctx, got.Key, want.ETag, 0, make([]byte, want.Size)); err != nil {
			t.Errorf("%s: reading the copy under the original's ETag: %v", got.Key, err)
		}
	}

	// What the ETag must still detect, on the copy.
	name := filepath.Join(cp.Dir(), "a", "b", "c")
	fi, err := os.Stat(name)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name   string
		size   int64
		mtime  time.Time
		change bool
	}{
		{"untouched", fi.Size(), fi.ModTime(), false},
		{"same size, new mtime", fi.Size(), fi.ModTime().Add(time.Nanosecond), true},
		{"new size, same mtime", fi.Size() + 1, fi.ModTime(), true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := os.Truncate(name, tt.size); err != nil {
				t.Fatal(err)
			}
			if err := os.Chtimes(name, tt.mtime, tt.mtime); err != nil {
				t.Fatal(err)
			}
			err := cp.ReadRange(ctx, "a/b/c", infos["a/b/c"].ETag, 0, make([]byte, 10))
			if tt.change != errors.Is(err, ErrChanged) {
				t.Errorf("ReadRange = %v, want ErrChanged: %t", err, tt.change)
			}
		})
	}
}

// TestLocalLegacyETag checks that an index built when the ETag carried the
// inode still reads its files, by size and mtime.
func TestLocalLegacyETag(t *testing.T) {
	ctx := context.Background()
	l := newTestLocal(t)
	data := randomBytes(300, 9)
	mustPut(t, l, "obj", data)
	fi, err := os.Stat(filepath.Join(l.Dir(), "obj"))
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
		{fmt.Sprintf("%x", fi.Size()), false},
	}
	for _, tt := range tests {
		err := l.ReadRange(ctx, "obj", tt.etag, 0, make([]byte, 10))
		if (err == nil) != tt.ok {
			t.Errorf("ReadRange with ETag %s = %v, want ok=%t", tt.etag, err, tt.ok)
		}
	}
}

// TestDistinctETag checks that Put's replacement never carries the ETag
// of the file it replaces, even where timestamps are too coarse to differ
// by themselves (simulated by giving both the same mtime).
func TestDistinctETag(t *testing.T) {
	dir := t.TempDir()
	old, tmp := filepath.Join(dir, "obj"), filepath.Join(dir, tempPrefix+"1")
	same := time.Unix(1700000000, 0)
	for _, p := range []string{old, tmp} {
		if err := os.WriteFile(p, []byte(p[len(p)-1:]+"bc"), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(p, same, same); err != nil {
			t.Fatal(err)
		}
	}
	ofi, _ := os.Stat(old)
	tfi, _ := os.Stat(tmp)
	if fileETag(ofi) != fileETag(tfi) {
		t.Fatal("setup: the two files should look alike")
	}
	fi, err := distinctETag(tmp, tfi, old)
	if err != nil {
		t.Fatal(err)
	}
	if fileETag(fi) == fileETag(ofi) {
		t.Fatalf("replacement keeps the old ETag %s", fileETag(fi))
	}
	if now, _ := os.Stat(tmp); fileETag(now) != fileETag(fi) {
		t.Fatalf("returned ETag %s, file has %s", fileETag(fi), fileETag(now))
	}
	// Nothing to replace: nothing changes.
	fi2, err := distinctETag(tmp, fi, filepath.Join(dir, "absent"))
	if err != nil || fileETag(fi2) != fileETag(fi) {
		t.Fatalf("with no old file: %v, %v", fi2, err)
	}
}
