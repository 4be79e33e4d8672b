// Package decodetest holds what the formats' tests share: a source in
// memory that counts what indexing reads, reading and decoding every
// chunk as a reader would (checked against the resident form's table and
// the layout's keys). The Python that writes their fixtures is
// pythontest's.
package decodetest

import (
	"archive/tar"
	"bytes"
	"context"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"

	"github.com/brandgw/brand/chunkindex"
	"github.com/brandgw/brand/format"
)

// Store is a source in memory that counts what indexing reads.
type Store struct {
	mu    sync.Mutex
	Objs  map[string][]byte
	Sizes map[string]int64 // a listed size other than len(objs[k]), for sizes no test can allocate
	Read  map[string]int64
}

func NewStore() *Store {
	return &Store{Objs: map[string][]byte{}, Sizes: map[string]int64{}, Read: map[string]int64{}}
}

func (s *Store) ReadRange(_ context.Context, key, etag string, off int64, p []byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	b, ok := s.Objs[key]
	if !ok {
		return fmt.Errorf("%s: %w", key, fs.ErrNotExist)
	}
	if etag != "e-"+key {
		return fmt.Errorf("%s: etag %q", key, etag)
	}
	if off < 0 || off+int64(len(p)) > int64(len(b)) {
		return fmt.Errorf("%s: range %d+%d past %d", key, off, len(p), len(b))
	}
	copy(p, b[off:])
	s.Read[key] += int64(len(p))
	return nil
}

// List is the store's listing, sorted by key.
func (s *Store) List() []format.Object {
	var objs []format.Object
	for k, b := range s.Objs {
		size := int64(len(b))
		if n, ok := s.Sizes[k]; ok {
			size = n
		}
		objs = append(objs, format.Object{Key: k, Size: size, ETag: "e-" + k})
	}
	slices.SortFunc(objs, func(a, b format.Object) int { return cmpString(a.Key, b.Key) })
	return objs
}

func cmpString(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// LoadDir puts every file under dir into a store.
func LoadDir(t testing.TB, dir string) *Store {
	t.Helper()
	s := NewStore()
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(path)
		rel, _ := filepath.Rel(dir, path)
		s.Objs[filepath.ToSlash(rel)] = b
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// ReadChunk is what a reader of chunk c does: Extent's ranges read.
func ReadChunk(t testing.TB, s *Store, lay *format.Layout, dec format.Decoder, c int, sel format.Selection) ([]byte, int64) {
	t.Helper()
	rs, resident := dec.Extent(c, sel)
	src := make([]byte, 0, format.Concat(rs))
	for _, r := range rs {
		b := s.Objs[lay.Chunks[c].Object]
		if r.End() > int64(len(b)) {
			t.Fatalf("chunk %d: range %+v past %s's %d bytes", c, r, lay.Chunks[c].Object, len(b))
		}
		src = append(src, b[r.Off:r.End()]...)
	}
	return src, resident
}

// DecodeAll decodes every chunk, checks each against its table, its
// keys and its bound, and returns the samples as one tar stream.
func DecodeAll(t testing.TB, s *Store, lay *format.Layout, dec format.Decoder, sel format.Selection) []byte {
	t.Helper()
	var out bytes.Buffer
	k := 0
	for c := range lay.Chunks {
		src, resident := ReadChunk(t, s, lay, dec, c, sel)
		dst := make([]byte, resident)
		if err := dec.Decode(c, sel, src, dst, format.WriterOptions{ModTime: 1700000000}); err != nil {
			t.Fatalf("chunk %d: %v", c, err)
		}
		tab, err := format.Verify(dst)
		if err != nil {
			t.Fatalf("chunk %d: %v", c, err)
		}
		if tab.Len() != lay.Chunks[c].Samples {
			t.Fatalf("chunk %d: %d samples, layout says %d", c, tab.Len(), lay.Chunks[c].Samples)
		}
		for i := range tab.Len() {
			off, n, _ := tab.Sample(i)
			tr := tar.NewReader(bytes.NewReader(dst[off : off+n]))
			for {
				h, err := tr.Next()
				if err == io.EOF {
					break
				}
				if err != nil {
					t.Fatalf("chunk %d sample %d: %v", c, i, err)
				}
				if key, ext := chunkindex.SplitKey(h.Name); key != lay.Keys[k] || ext == "" {
					t.Fatalf("chunk %d sample %d: member %q, key %q", c, i, h.Name, lay.Keys[k])
				}
			}
			out.Write(dst[off : off+n])
			k++
		}
	}
	if k != len(lay.Keys) {
		t.Fatalf("%d samples decoded, %d keys", k, len(lay.Keys))
	}
	out.Write(make([]byte, 2*format.Block)) // the tar's end
	return out.Bytes()
}
