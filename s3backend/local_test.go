package s3backend

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

func newTestLocal(t *testing.T) *Local {
	t.Helper()
	l, err := NewLocal(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func randomBytes(n int, seed uint64) []byte {
	r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	b := make([]byte, n+7)
	for i := 0; i < n; i += 8 {
		binary.LittleEndian.PutUint64(b[i:], r.Uint64())
	}
	return b[:n]
}

func mustPut(t *testing.T, st Store, key string, data []byte) ObjectInfo {
	t.Helper()
	info, err := st.Put(context.Background(), key, bytes.NewReader(data), int64(len(data)))
	if err != nil {
		t.Fatalf("Put(%s): %v", key, err)
	}
	return info
}

func TestNewLocal(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "file")
	if err := os.WriteFile(file, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		dir string
		ok  bool
	}{
		{dir, true},
		{filepath.Join(dir, "not", "yet"), true}, // created by Put
		{file, false},
		{"", false},
	}
	for _, tt := range tests {
		l, err := NewLocal(tt.dir)
		if (err == nil) != tt.ok {
			t.Errorf("NewLocal(%q) = %v, want ok=%v", tt.dir, err, tt.ok)
		}
		if err == nil && !filepath.IsAbs(l.Dir()) {
			t.Errorf("NewLocal(%q).Dir() = %q, not absolute", tt.dir, l.Dir())
		}
	}

	// A relative directory is made absolute.
	t.Chdir(dir)
	l, err := NewLocal("rel")
	if err != nil {
		t.Fatal(err)
	}
	if want := filepath.Join(dir, "rel"); l.Dir() != want {
		t.Errorf("Dir() = %q, want %q", l.Dir(), want)
	}
}

func TestLocalPutStatReadRange(t *testing.T) {
	l := newTestLocal(t)
	ctx := context.Background()
	data := randomBytes(2*localReadSlice+17, 1) // several ReadAt slices, odd size
	info := mustPut(t, l, "chunks/000000.tar", data)
	if info.Key != "chunks/000000.tar" || info.Size != int64(len(data)) || info.ETag == "" {
		t.Fatalf("Put = %+v", info)
	}
	st, err := l.Stat(ctx, "chunks/000000.tar")
	if err != nil {
		t.Fatal(err)
	}
	if st.Key != info.Key || st.Size != info.Size || st.ETag != info.ETag || st.ModTime.IsZero() {
		t.Errorf("Stat = %+v, Put returned %+v", st, info)
	}

	tests := []struct {
		name string
		off  int64
		n    int
	}{
		{"first byte", 0, 1},
		{"last byte", int64(len(data) - 1), 1},
		{"middle", 12345, 100000},
		{"whole object", 0, len(data)},
		{"tail", int64(len(data) - 4096), 4096},
		{"empty", 100, 0},
		{"empty at end", int64(len(data)), 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, etag := range []string{"", info.ETag, `"` + info.ETag + `"`} {
				p := make([]byte, tt.n)
				if err := l.ReadRange(ctx, "chunks/000000.tar", etag, tt.off, p); err != nil {
					t.Fatalf("ReadRange(etag %q): %v", etag, err)
				}
				if !bytes.Equal(p, data[tt.off:tt.off+int64(tt.n)]) {
					t.Fatalf("ReadRange(etag %q) returned the wrong bytes", etag)
				}
			}
		})
	}
}

func TestLocalReadRangeErrors(t *testing.T) {
	l := newTestLocal(t)
	ctx := context.Background()
	info := mustPut(t, l, "a/obj", []byte("0123456789"))
	mustPut(t, l, "file", []byte("x"))
	if err := os.MkdirAll(filepath.Join(l.Dir(), "dir"), 0o755); err != nil {
		t.Fatal(err)
	}
	cancelled, cancel := context.WithCancel(ctx)
	cancel()

	tests := []struct {
		name string
		ctx  context.Context
		key  string
		etag string
		off  int64
		n    int
		want error
	}{
		{"missing", ctx, "a/missing", "", 0, 1, ErrNotFound},
		{"missing dir", ctx, "nope/obj", "", 0, 1, ErrNotFound},
		{"file as dir", ctx, "file/obj", "", 0, 1, ErrNotFound},
		{"directory", ctx, "dir", "", 0, 1, ErrNotFound},
		{"past end", ctx, "a/obj", "", 5, 6, ErrOutOfRange},
		{"beyond end", ctx, "a/obj", "", 100, 1, ErrOutOfRange},
		{"stale etag", ctx, "a/obj", "a-1-2", 0, 1, ErrChanged},
		{"invalid key", ctx, "../a/obj", "", 0, 1, ErrInvalidKey},
		{"cancelled", cancelled, "a/obj", info.ETag, 0, 1, context.Canceled},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := l.ReadRange(tt.ctx, tt.key, tt.etag, tt.off, make([]byte, tt.n))
			if !errors.Is(err, tt.want) {
				t.Errorf("ReadRange = %v, want %v", err, tt.want)
			}
		})
	}
	if err := l.ReadRange(ctx, "a/obj", "", -1, make([]byte, 1)); err == nil {
		t.Error("negative offset accepted")
	}
}

func TestLocalChangedMessage(t *testing.T) {
	l := newTestLocal(t)
	ctx := context.Background()
	old := mustPut(t, l, "obj", []byte("version one"))
	// Same size, written immediately: only the inode (or the timestamp)
	// tells the versions apart.
	cur := mustPut(t, l, "obj", []byte("version two"))
	if old.ETag == cur.ETag {
		t.Fatalf("two versions share ETag %q", old.ETag)
	}
	err := l.ReadRange(ctx, "obj", old.ETag, 0, make([]byte, 4))
	if !errors.Is(err, ErrChanged) {
		t.Fatalf("ReadRange with the old ETag = %v, want ErrChanged", err)
	}
	for _, want := range []string{old.ETag, cur.ETag, "brand index"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %q", err, want)
		}
	}
	p := make([]byte, 11)
	if err := l.ReadRange(ctx, "obj", cur.ETag, 0, p); err != nil || string(p) != "version two" {
		t.Errorf("ReadRange with the current ETag = %q, %v", p, err)
	}
}

func TestLocalETagTracksInPlaceRewrite(t *testing.T) {
	l := newTestLocal(t)
	ctx := context.Background()
	old := mustPut(t, l, "obj", []byte("abc"))
	name := filepath.Join(l.Dir(), "obj")
	// Another program rewrites the file in place (same inode, same size).
	if err := os.WriteFile(name, []byte("xyz"), 0o644); err != nil {
		t.Fatal(err)
	}
	later := time.Now().Add(time.Second)
	if err := os.Chtimes(name, later, later); err != nil {
		t.Fatal(err)
	}
	if err := l.ReadRange(ctx, "obj", old.ETag, 0, make([]byte, 3)); !errors.Is(err, ErrChanged) {
		t.Errorf("ReadRange after an in-place rewrite = %v, want ErrChanged", err)
	}
}

func TestLocalPut(t *testing.T) {
	ctx := context.Background()
	tests := []struct {
		name    string
		r       io.Reader
		size    int64
		want    string
		wantErr bool
	}{
		{"exact", strings.NewReader("hello"), 5, "hello", false},
		{"unknown size", strings.NewReader("hello world"), -1, "hello world", false},
		{"longer reader", strings.NewReader("hello world"), 5, "hello", false},
		{"empty", strings.NewReader(""), 0, "", false},
		{"short reader", strings.NewReader("hel"), 5, "", true},
		{"failing reader", io.MultiReader(strings.NewReader("he"), errReader{}), 5, "", true},
		{"invalid size", strings.NewReader("x"), -2, "", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := newTestLocal(t)
			info, err := l.Put(ctx, "deep/er/obj", tt.r, tt.size)
			if tt.wantErr {
				if err == nil {
					t.Fatalf("Put succeeded: %+v", info)
				}
				assertNoLeftovers(t, l.Dir())
				if _, err := l.Stat(ctx, "deep/er/obj"); !errors.Is(err, ErrNotFound) {
					t.Errorf("after a failed Put, Stat = %v, want ErrNotFound", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			got, err := os.ReadFile(filepath.Join(l.Dir(), "deep", "er", "obj"))
			if err != nil || string(got) != tt.want {
				t.Fatalf("file = %q, %v; want %q", got, err, tt.want)
			}
			if info.Size != int64(len(tt.want)) {
				t.Errorf("Size = %d, want %d", info.Size, len(tt.want))
			}
			assertNoLeftovers(t, l.Dir())
		})
	}
}

type errReader struct{}

func (errReader) Read([]byte) (int, error) { return 0, errors.New("disk on fire") }

func assertNoLeftovers(t *testing.T, dir string) {
	t.Helper()
	filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err == nil && strings.HasPrefix(d.Name(), tempPrefix) {
			t.Errorf("temporary file left behind: %s", p)
		}
		return nil
	})
}

func TestLocalPutReplacesAtomically(t *testing.T) {
	l := newTestLocal(t)
	ctx := context.Background()
	mustPut(t, l, "obj", []byte("old contents"))
	// A reader holding the old file keeps reading the old bytes.
	f, err := os.Open(filepath.Join(l.Dir(), "obj"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	info := mustPut(t, l, "obj", []byte("new"))
	old, err := io.ReadAll(f)
	if err != nil || string(old) != "old contents" {
		t.Errorf("open handle reads %q, %v", old, err)
	}
	p := make([]byte, 3)
	if err := l.ReadRange(ctx, "obj", info.ETag, 0, p); err != nil || string(p) != "new" {
		t.Errorf("ReadRange = %q, %v", p, err)
	}
	if fi, err := os.Stat(filepath.Join(l.Dir(), "obj")); err != nil || fi.Mode().Perm() != 0o644 {
		t.Errorf("mode = %v, %v; want 0644", fi.Mode(), err)
	}
}

func TestLocalPutCancelled(t *testing.T) {
	l := newTestLocal(t)
	ctx, cancel := context.WithCancel(context.Background())
	r := &cancelAfterReader{data: randomBytes(1<<20, 2), cancel: cancel, after: 64 << 10}
	_, err := l.Put(ctx, "obj", r, int64(len(r.data)))
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Put = %v, want context.Canceled", err)
	}
	assertNoLeftovers(t, l.Dir())
	if _, err := l.Stat(context.Background(), "obj"); !errors.Is(err, ErrNotFound) {
		t.Errorf("Stat after a cancelled Put = %v, want ErrNotFound", err)
	}
}

// cancelAfterReader cancels its context once after bytes have been read.
type cancelAfterReader struct {
	data   []byte
	off    int
	after  int
	cancel context.CancelFunc
}

func (r *cancelAfterReader) Read(p []byte) (int, error) {
	if r.off >= len(r.data) {
		return 0, io.EOF
	}
	n := copy(p[:min(len(p), 4096)], r.data[r.off:])
	r.off += n
	if r.off >= r.after {
		r.cancel()
	}
	return n, nil
}

func TestLocalList(t *testing.T) {
	l := newTestLocal(t)
	ctx := context.Background()
	keys := []string{
		"a/b", "a-b", "a/c/d", "a.x", "b", "chunks/000001.tar", "chunks/000000.tar",
		"chunks/sub/000002.tar", "_brand/index",
	}
	for i, k := range keys {
		mustPut(t, l, k, randomBytes(i+1, uint64(i)))
	}
	// Not objects: an unfinished Put, an empty directory, a dangling link.
	if err := os.WriteFile(filepath.Join(l.Dir(), "chunks", tempPrefix+"123"), []byte("partial"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(l.Dir(), "emptydir"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("nowhere", filepath.Join(l.Dir(), "dangling")); err != nil {
		t.Fatal(err)
	}
	// A link to a regular file is listed as that file.
	if err := os.Symlink(filepath.Join(l.Dir(), "b"), filepath.Join(l.Dir(), "link")); err != nil {
		t.Fatal(err)
	}

	tests := []struct {
		prefix string
		want   []string
	}{
		{"", []string{"_brand/index", "a-b", "a.x", "a/b", "a/c/d", "b", "chunks/000000.tar", "chunks/000001.tar", "chunks/sub/000002.tar", "link"}},
		{"a", []string{"a-b", "a.x", "a/b", "a/c/d"}},
		{"a/", []string{"a/b", "a/c/d"}},
		{"a/c", []string{"a/c/d"}},
		{"chunks/0000", []string{"chunks/000000.tar", "chunks/000001.tar"}},
		{"chunks/", []string{"chunks/000000.tar", "chunks/000001.tar", "chunks/sub/000002.tar"}},
		{"nothing", nil},
		{"nothing/here/", nil},
		{"b/under-a-file", nil},
	}
	for _, tt := range tests {
		t.Run(tt.prefix, func(t *testing.T) {
			got, err := l.List(ctx, tt.prefix)
			if err != nil {
				t.Fatal(err)
			}
			var gotKeys []string
			for _, o := range got {
				gotKeys = append(gotKeys, o.Key)
				st, err := l.Stat(ctx, o.Key)
				if err != nil || st != o {
					t.Errorf("List entry %+v, Stat = %+v, %v", o, st, err)
				}
			}
			if !slices.Equal(gotKeys, tt.want) {
				t.Errorf("List(%q) = %q, want %q", tt.prefix, gotKeys, tt.want)
			}
		})
	}

	if _, err := l.List(ctx, "../"); !errors.Is(err, ErrInvalidKey) {
		t.Errorf("List(../) = %v, want ErrInvalidKey", err)
	}
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := l.List(cancelled, ""); !errors.Is(err, context.Canceled) {
		t.Errorf("List with a cancelled context = %v, want context.Canceled", err)
	}
}

func TestLocalListMissingRoot(t *testing.T) {
	l, err := NewLocal(filepath.Join(t.TempDir(), "absent"))
	if err != nil {
		t.Fatal(err)
	}
	got, err := l.List(context.Background(), "")
	if err != nil || len(got) != 0 {
		t.Errorf("List of a missing root = %v, %v; want empty", got, err)
	}
	if _, err := l.Stat(context.Background(), "x"); !errors.Is(err, ErrNotFound) {
		t.Errorf("Stat in a missing root = %v, want ErrNotFound", err)
	}
}

func TestLocalConcurrentReadRange(t *testing.T) {
	l := newTestLocal(t)
	data := randomBytes(1<<20, 3)
	info := mustPut(t, l, "obj", data)
	errs := make(chan error, 8)
	for g := range 8 {
		go func() {
			r := rand.New(rand.NewPCG(uint64(g), 7))
			for range 50 {
				off := r.IntN(len(data))
				n := r.IntN(len(data) - off)
				p := make([]byte, n)
				if err := l.ReadRange(context.Background(), "obj", info.ETag, int64(off), p); err != nil {
					errs <- err
					return
				}
				if !bytes.Equal(p, data[off:off+n]) {
					errs <- errors.New("wrong bytes")
					return
				}
			}
			errs <- nil
		}()
	}
	for range 8 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
}

func BenchmarkLocalReadRange(b *testing.B) {
	dir := b.TempDir()
	l, err := NewLocal(dir)
	if err != nil {
		b.Fatal(err)
	}
	data := randomBytes(16<<20, 4)
	info, err := l.Put(context.Background(), "obj", bytes.NewReader(data), int64(len(data)))
	if err != nil {
		b.Fatal(err)
	}
	p := make([]byte, len(data))
	b.SetBytes(int64(len(p)))
	for b.Loop() {
		if err := l.ReadRange(context.Background(), "obj", info.ETag, 0, p); err != nil {
			b.Fatal(err)
		}
	}
}

func TestLocalReadObject(t *testing.T) {
	l := newTestLocal(t)
	ctx := context.Background()
	data := bytes.Repeat([]byte("0123456789"), 3000)
	info, err := l.Put(ctx, "obj", bytes.NewReader(data), int64(len(data)))
	if err != nil {
		t.Fatal(err)
	}
	p := make([]byte, len(data))
	var reported int
	if err := l.ReadObject(ctx, "obj", info.ETag, p, func(start, end int) { reported += end - start }); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(p, data) || reported != len(data) {
		t.Fatalf("bytes equal %t, %d of %d bytes reported", bytes.Equal(p, data), reported, len(data))
	}
	for _, n := range []int{len(data) - 1, len(data) + 1} {
		if err := l.ReadObject(ctx, "obj", info.ETag, make([]byte, n), nil); !errors.Is(err, ErrOutOfRange) {
			t.Errorf("ReadObject into %d bytes of %d: %v, want ErrOutOfRange", n, len(data), err)
		}
	}
}

// TestLocalProgressPieces checks that a read whose caller watches its
// bytes arrive hands them over in pieces of at most progressPiece, in
// order, while they are in the processor's cache (S3's testProgressPieces).
func TestLocalProgressPieces(t *testing.T) {
	l := newTestLocal(t)
	ctx := context.Background()
	data := bytes.Repeat([]byte("0123456789abcdef"), 1<<20/16*3+5)
	info, err := l.Put(ctx, "obj", bytes.NewReader(data), int64(len(data)))
	if err != nil {
		t.Fatal(err)
	}
	p := make([]byte, len(data))
	var most, next int
	err = l.ReadObject(ctx, "obj", info.ETag, p, func(start, end int) {
		if start != next {
			t.Errorf("a piece starts at %d, want %d", start, next)
		}
		next, most = end, max(most, end-start)
	})
	if err != nil || !bytes.Equal(p, data) {
		t.Fatalf("%v, bytes equal %t", err, bytes.Equal(p, data))
	}
	if next != len(data) || most > progressPiece {
		t.Errorf("pieces of up to %d bytes covering %d; want at most %d covering %d", most, next, progressPiece, len(data))
	}
}
