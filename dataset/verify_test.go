package dataset

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/brandgw/brand/chunkindex"
	"github.com/brandgw/brand/internal/gen/synth"
	"github.com/brandgw/brand/internal/testsupport/s3test"
	"github.com/brandgw/brand/s3backend"
)

// packedLocal packs a small dataset into a local store.
func packedLocal(t *testing.T) (*s3backend.Local, *chunkindex.Index) {
	t.Helper()
	st := newLocal(t)
	res, err := Pack(context.Background(), writeTree(t, synth.Spec{Samples: 200, MeanBytes: 2000, Classes: 4, Seed: 8}), st,
		PackOptions{ChunkSize: 64 << 10, Shuffle: true, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	if res.Index.NumChunks() < 5 {
		t.Fatalf("%d chunks; the test needs several", res.Index.NumChunks())
	}
	return st, res.Index
}

// corruptInPlace flips one byte of a file and restores its modification
// time: silent corruption. The local store's ETag names content, so the
// chunks here (no larger than two of its blocks) change ETag too; Verify
// still reads them and names the damaged sample.
func corruptInPlace(t *testing.T, path string, off int64) {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	b := make([]byte, 1)
	if _, err := f.ReadAt(b, off); err != nil {
		t.Fatal(err)
	}
	b[0] ^= 0xff
	if _, err := f.WriteAt(b, off); err != nil {
		t.Fatal(err)
	}
	must(t, f.Close())
	must(t, os.Chtimes(path, fi.ModTime(), fi.ModTime()))
}

func TestVerify(t *testing.T) {
	ctx := context.Background()
	type want struct {
		kind   ProblemKind
		chunk  int
		sample int // -1 for a chunk problem
	}
	tests := []struct {
		name   string
		damage func(t *testing.T, st *s3backend.Local, ix *chunkindex.Index) []want
	}{
		{"intact", func(*testing.T, *s3backend.Local, *chunkindex.Index) []want { return nil }},
		{"silent corruption", func(t *testing.T, st *s3backend.Local, ix *chunkindex.Index) []want {
			first, _ := ix.ChunkRange(2)
			_, off, _, _ := ix.SampleRange(first + 1)
			corruptInPlace(t, filepath.Join(st.Dir(), filepath.FromSlash(ix.Chunk(2).Key)), off+600) // in the data
			return []want{{ChunkChanged, 2, -1}, {SampleCRCMismatch, 2, first + 1}}
		}},
		{"corrupt header of a chunk's last sample", func(t *testing.T, st *s3backend.Local, ix *chunkindex.Index) []want {
			first, n := ix.ChunkRange(4)
			_, off, _, _ := ix.SampleRange(first + n - 1)
			corruptInPlace(t, filepath.Join(st.Dir(), filepath.FromSlash(ix.Chunk(4).Key)), off)
			return []want{{ChunkChanged, 4, -1}, {SampleCRCMismatch, 4, first + n - 1}}
		}},
		{"deleted chunk", func(t *testing.T, st *s3backend.Local, ix *chunkindex.Index) []want {
			must(t, os.Remove(filepath.Join(st.Dir(), filepath.FromSlash(ix.Chunk(1).Key))))
			return []want{{ChunkMissing, 1, -1}}
		}},
		{"rewritten with the same bytes", func(t *testing.T, st *s3backend.Local, ix *chunkindex.Index) []want {
			key := ix.Chunk(3).Key
			b, err := os.ReadFile(filepath.Join(st.Dir(), filepath.FromSlash(key)))
			if err != nil {
				t.Fatal(err)
			}
			putBytes(t, st, key, b)
			return nil // the same content keeps its ETag
		}},
		{"truncated", func(t *testing.T, st *s3backend.Local, ix *chunkindex.Index) []want {
			first, n := ix.ChunkRange(0)
			_, off, _, _ := ix.SampleRange(first + n - 2)
			must(t, os.Truncate(filepath.Join(st.Dir(), filepath.FromSlash(ix.Chunk(0).Key)), off+100))
			return []want{{ChunkChanged, 0, -1}, {ChunkSizeDiffers, 0, -1}, {SamplePastEnd, 0, first + n - 2}, {SamplePastEnd, 0, first + n - 1}}
		}},
		{"two chunks broken", func(t *testing.T, st *s3backend.Local, ix *chunkindex.Index) []want {
			must(t, os.Remove(filepath.Join(st.Dir(), filepath.FromSlash(ix.Chunk(4).Key))))
			first, _ := ix.ChunkRange(1)
			_, off, _, _ := ix.SampleRange(first)
			corruptInPlace(t, filepath.Join(st.Dir(), filepath.FromSlash(ix.Chunk(1).Key)), off+700)
			return []want{{ChunkChanged, 1, -1}, {SampleCRCMismatch, 1, first}, {ChunkMissing, 4, -1}}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st, ix := packedLocal(t)
			wants := tt.damage(t, st, ix)
			var last Progress
			rep, err := Verify(ctx, st, ix, 3, func(p Progress) { last = p })
			if err != nil {
				t.Fatal(err)
			}
			if rep.Chunks != ix.NumChunks() || rep.Samples != ix.NumSamples() {
				t.Fatalf("report counts %d chunks, %d samples", rep.Chunks, rep.Samples)
			}
			var got []want
			for _, p := range rep.Problems {
				got = append(got, want{p.Kind, p.Chunk, p.Sample})
				if p.ChunkKey != ix.Chunk(p.Chunk).Key {
					t.Errorf("problem %v names chunk key %q", p, p.ChunkKey)
				}
				if p.Sample >= 0 && (p.SampleKey != ix.SampleKey(p.Sample) || !strings.Contains(p.String(), p.SampleKey)) {
					t.Errorf("problem %q does not name sample %q", p, ix.SampleKey(p.Sample))
				}
			}
			if !slices.Equal(got, wants) {
				t.Fatalf("problems %v, want %v", rep.Problems, wants)
			}
			if rep.OK() != (len(wants) == 0) {
				t.Fatalf("OK() = %v with %d problems", rep.OK(), len(rep.Problems))
			}
			if len(wants) == 0 && rep.Bytes != ix.TotalBytes()-int64(ix.NumChunks()*len(chunkindex.EndOfArchive)) {
				t.Fatalf("read %d bytes of %d", rep.Bytes, ix.TotalBytes())
			}
			if last.Chunks != ix.NumChunks() || last.Samples != ix.NumSamples() || last.Bytes != rep.Bytes {
				t.Fatalf("last progress %+v, report %+v", last, rep)
			}
		})
	}
}

func TestVerifyInfrastructureError(t *testing.T) {
	st, ix := packedLocal(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := Verify(ctx, st, ix, 2, nil); !errors.Is(err, context.Canceled) {
		t.Fatalf("got %v, want context.Canceled", err)
	}
	down := s3test.Wrap(st) // every read failed as a store that is down would
	down.Fail(func(c s3test.Call) error {
		if c.Op == s3backend.OpGet {
			return s3backend.ErrUnavailable
		}
		return nil
	})
	if _, err := Verify(context.Background(), down, ix, 2, nil); !errors.Is(err, s3backend.ErrUnavailable) {
		t.Fatalf("got %v, want ErrUnavailable", err)
	}
}
