package megatron

import (
	"archive/tar"
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sync"
	"testing"

	"github.com/brandgw/brand/chunkindex"
	"github.com/brandgw/brand/format"
)

// memStore is a source in memory that counts what indexing reads.
type memStore struct {
	mu    sync.Mutex
	objs  map[string][]byte
	sizes map[string]int64 // a listed size other than len(objs[k]), for sizes no test can allocate
	read  map[string]int64
}

func newStore() *memStore {
	return &memStore{objs: map[string][]byte{}, sizes: map[string]int64{}, read: map[string]int64{}}
}

func (s *memStore) ReadRange(_ context.Context, key, etag string, off int64, p []byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	b, ok := s.objs[key]
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
	s.read[key] += int64(len(p))
	return nil
}

// list is the store's listing, sorted by key.
func (s *memStore) list() []format.Object {
	var objs []format.Object
	for k, b := range s.objs {
		size := int64(len(b))
		if n, ok := s.sizes[k]; ok {
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

// loadDir puts every file under dir into a store.
func loadDir(t testing.TB, dir string) *memStore {
	t.Helper()
	s := newStore()
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(path)
		rel, _ := filepath.Rel(dir, path)
		s.objs[filepath.ToSlash(rel)] = b
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// readChunk is what a reader of chunk c does: Extent's ranges read.
func readChunk(t testing.TB, s *memStore, lay *format.Layout, dec format.Decoder, c int, sel format.Selection) ([]byte, int64) {
	t.Helper()
	rs, resident := dec.Extent(c, sel)
	src := make([]byte, 0, format.Concat(rs))
	for _, r := range rs {
		b := s.objs[lay.Chunks[c].Object]
		if r.End() > int64(len(b)) {
			t.Fatalf("chunk %d: range %+v past %s's %d bytes", c, r, lay.Chunks[c].Object, len(b))
		}
		src = append(src, b[r.Off:r.End()]...)
	}
	return src, resident
}

// decodeAll decodes every chunk, checks each against its table, its
// keys and its bound, and returns the samples as one tar stream.
func decodeAll(t testing.TB, s *memStore, lay *format.Layout, dec format.Decoder, sel format.Selection) []byte {
	t.Helper()
	var out bytes.Buffer
	k := 0
	for c := range lay.Chunks {
		src, resident := readChunk(t, s, lay, dec, c, sel)
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

// python returns a Python 3 that imports numpy (Debian's python3-numpy,
// which scripts/ensure-numpy.sh installs), or skips; with CI=true it fails.
func python(t testing.TB) string {
	t.Helper()
	for _, p := range []string{os.Getenv("PYTHON"), "python3", "/usr/bin/python3"} {
		if p == "" {
			continue
		}
		if path, err := exec.LookPath(p); err == nil && exec.Command(path, "-c", "import numpy").Run() == nil {
			return path
		}
	}
	if os.Getenv("CI") == "true" {
		t.Fatal("no Python 3 with numpy (scripts/ensure-numpy.sh installs python3-numpy; CI=true: failing)")
	}
	t.Skip("no Python 3 with numpy (python3-numpy): the Python writer's fixtures cannot be made")
	return ""
}

// buildIdx writes an .idx as the builder does, from sequence lengths and
// the document index; ptrs, when given, replaces the pointers.
func buildIdx(code byte, sizes []int32, docIdx []int64, ptrs []int64) []byte {
	le := binary.LittleEndian
	b := []byte(idxMagic)
	b = le.AppendUint64(b, 1)
	b = append(b, code)
	b = le.AppendUint64(b, uint64(len(sizes)))
	b = le.AppendUint64(b, uint64(len(docIdx)))
	for _, n := range sizes {
		b = le.AppendUint32(b, uint32(n))
	}
	if ptrs == nil {
		var p int64
		for _, n := range sizes {
			ptrs = append(ptrs, p)
			p += int64(n) * dtypes[code].size
		}
	}
	for _, p := range ptrs {
		b = le.AppendUint64(b, uint64(p))
	}
	for _, d := range docIdx {
		b = le.AppendUint64(b, uint64(d))
	}
	return b
}
