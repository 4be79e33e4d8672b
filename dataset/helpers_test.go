package dataset

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"hash/crc32"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/brandgw/brand/chunkindex"
	"github.com/brandgw/brand/internal/gen/synth"
	"github.com/brandgw/brand/s3backend"
)

// testSpec is a small class-folder dataset: 400 samples (800 files) of
// about 4 KiB, about 2.3 MB in all.
func testSpec() synth.Spec {
	return synth.Spec{Samples: 400, MeanBytes: 4 << 10, Classes: 8, Seed: 3}
}

// writeTree writes spec under a fresh directory and returns it.
func writeTree(t testing.TB, spec synth.Spec) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "train")
	if err := spec.WriteTree(dir); err != nil {
		t.Fatal(err)
	}
	return dir
}

func newLocal(t testing.TB) *s3backend.Local {
	t.Helper()
	st, err := s3backend.NewLocal(filepath.Join(t.TempDir(), "store"))
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// readTree returns every file under dir by slash-separated relative path.
func readTree(t testing.TB, dir string) map[string][]byte {
	t.Helper()
	files := map[string][]byte{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		files[filepath.ToSlash(rel)] = b
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}

// sampleMembers parses one sample's byte range, as the gateway would serve
// it (followed by the end-of-archive marker), into its members.
func sampleMembers(t testing.TB, b []byte) map[string][]byte {
	t.Helper()
	tr := tar.NewReader(io.MultiReader(bytes.NewReader(b), bytes.NewReader(chunkindex.EndOfArchive[:])))
	out := map[string][]byte{}
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatalf("sample range is not a valid tar: %v", err)
		}
		if hdr.Typeflag != tar.TypeReg {
			t.Fatalf("member %q has type %q", hdr.Name, hdr.Typeflag)
		}
		body, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		out[hdr.Name] = body
	}
}

// checkSamples reads every sample of ix from st with a ranged read and
// checks that, together, the samples hold exactly the files of want, each
// member under its sample's key and the range matching its CRC32C.
func checkSamples(t testing.TB, st s3backend.Store, ix *chunkindex.Index, want map[string][]byte) {
	t.Helper()
	ctx := context.Background()
	seen := map[string]bool{}
	for id := range ix.NumSamples() {
		c, off, n, crc := ix.SampleRange(id)
		ch := ix.Chunk(c)
		b := make([]byte, n)
		if err := st.ReadRange(ctx, ch.Key, ch.ETag, off, b); err != nil {
			t.Fatalf("sample %d: %v", id, err)
		}
		if got := crc32c(b); got != crc {
			t.Fatalf("sample %d (%s): CRC32C %08x, index says %08x", id, ix.SampleKey(id), got, crc)
		}
		for name, body := range sampleMembers(t, b) {
			if k, _ := chunkindex.SplitKey(name); k != ix.SampleKey(id) {
				t.Fatalf("sample %d (%s) holds member %q", id, ix.SampleKey(id), name)
			}
			w, ok := want[name]
			if !ok {
				t.Fatalf("sample %d holds %q, which is not a source file", id, name)
			}
			if !bytes.Equal(body, w) {
				t.Fatalf("member %q: %d bytes differ from the %d-byte source", name, len(body), len(w))
			}
			if seen[name] {
				t.Fatalf("member %q packed twice", name)
			}
			seen[name] = true
		}
	}
	for name := range want {
		if !seen[name] {
			t.Fatalf("source file %q is in no sample", name)
		}
	}
}

// recordingStore records the keys Put stores, in order.
type recordingStore struct {
	s3backend.Store
	mu   sync.Mutex
	puts []string
}

func (r *recordingStore) Put(ctx context.Context, key string, rd io.Reader, size int64) (s3backend.ObjectInfo, error) {
	info, err := r.Store.Put(ctx, key, rd, size)
	if err == nil {
		r.mu.Lock()
		r.puts = append(r.puts, key)
		r.mu.Unlock()
	}
	return info, err
}

var errInjected = errors.New("injected failure")

func crc32c(b []byte) uint32 {
	return crc32.Checksum(b, crc32.MakeTable(crc32.Castagnoli))
}
