package s3backend_test

import (
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/brandgw/brand/chunkindex"
	"github.com/brandgw/brand/dataset"
	"github.com/brandgw/brand/internal/gen/synth"
	"github.com/brandgw/brand/s3backend"
)

// TestLocalDatasetCopy packs a dataset into a directory, copies it as
// `cp -r` does (new modification times) and checks that every chunk of the
// copy reads, and verifies, under the original index's ETags; then that a
// touch of every file in the copy changes nothing.
func TestLocalDatasetCopy(t *testing.T) {
	ctx := context.Background()
	src := filepath.Join(t.TempDir(), "train")
	if err := (synth.Spec{Samples: 300, MeanBytes: 4 << 10, Classes: 4, Seed: 5}).WriteTree(src); err != nil {
		t.Fatal(err)
	}
	orig, err := s3backend.NewLocal(filepath.Join(t.TempDir(), "store"))
	if err != nil {
		t.Fatal(err)
	}
	// Chunks of a few blocks: the ETag hashes their ends, not all of them.
	res, err := dataset.Pack(ctx, src, orig, dataset.PackOptions{ChunkSize: 256 << 10, Shuffle: true, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	ix := res.Index
	dir := filepath.Join(t.TempDir(), "copy")
	s3backend.CopyTree(t, orig.Dir(), dir)
	cp, err := s3backend.NewLocal(dir)
	if err != nil {
		t.Fatal(err)
	}

	readAll := func(t *testing.T) {
		t.Helper()
		for c := range ix.NumChunks() {
			ch := ix.Chunk(c)
			buf := make([]byte, ch.Size)
			v := chunkindex.NewVerifier(ix, c, buf)
			if err := cp.ReadObject(ctx, ch.Key, ch.ETag, buf, v.Progress); err != nil {
				t.Fatalf("chunk %d: %v", c, err)
			}
			if id, _ := v.Finish(); id >= 0 {
				t.Fatalf("chunk %d: sample %d fails its CRC32C", c, id)
			}
			if err := cp.ReadRange(ctx, ch.Key, ch.ETag, ch.Size/2, make([]byte, 100)); err != nil {
				t.Fatalf("chunk %d, ranged: %v", c, err)
			}
		}
		rep, err := dataset.Verify(ctx, cp, ix, 2, nil)
		if err != nil || !rep.OK() {
			t.Fatalf("Verify of the copy = %+v, %v", rep, err)
		}
	}
	t.Run("copied", readAll)

	later := time.Now().Add(time.Hour)
	err = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		return os.Chtimes(p, later, later)
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Run("touched", readAll)
}
