package integration

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"golang.org/x/sync/errgroup"

	"github.com/brandgw/brand/chunkindex"
	"github.com/brandgw/brand/dataset"
	"github.com/brandgw/brand/dataset/stored"
	"github.com/brandgw/brand/internal/gen/synth"
	"github.com/brandgw/brand/internal/testsupport/miniotest"
	"github.com/brandgw/brand/s3backend"
	"github.com/brandgw/brand/shuffle"
)

// TestDatasetEndToEnd packs a 10,000-file class-folder tree into a store,
// verifies it, reads every sample back with ranged reads and shuffles an
// epoch over it: pack → index → range reads → shuffle, on MinIO and on a
// local directory.
func TestDatasetEndToEnd(t *testing.T) {
	spec := synth.Spec{Samples: 5000, MeanBytes: 2048, Classes: 10, Seed: 21} // a .jpg and a .cls each
	src := filepath.Join(t.TempDir(), "train")
	if err := spec.WriteTree(src); err != nil {
		t.Fatal(err)
	}
	files := sourceFiles(t, src)
	if len(files) != 2*spec.Samples {
		t.Fatalf("the tree has %d files, want %d", len(files), 2*spec.Samples)
	}

	stores := []struct {
		name string
		open func(t *testing.T) s3backend.Store
	}{
		{"minio", func(t *testing.T) s3backend.Store {
			srv := miniotest.ForTest(t)
			st, err := s3backend.Open(context.Background(), "s3://"+srv.NewBucket(t)+"/datasets/train", srv.Config())
			if err != nil {
				t.Fatal(err)
			}
			return st
		}},
		{"local", func(t *testing.T) s3backend.Store {
			st, err := s3backend.NewLocal(filepath.Join(t.TempDir(), "datasets", "train"))
			if err != nil {
				t.Fatal(err)
			}
			return st
		}},
	}
	for _, sk := range stores {
		t.Run(sk.name, func(t *testing.T) {
			ctx := context.Background()
			st := sk.open(t)
			res, err := dataset.Pack(ctx, src, st, dataset.PackOptions{ChunkSize: 1 << 20, Shuffle: true, Seed: 4, Parallel: 4})
			if err != nil {
				t.Fatal(err)
			}

			// What a gateway would load.
			ix, err := stored.ReadIndex(ctx, st)
			if err != nil {
				t.Fatal(err)
			}
			if ix.ID() != res.Index.ID() || ix.NumSamples() != spec.Samples {
				t.Fatalf("stored index %s with %d samples; packed %s with %d", ix.ID(), ix.NumSamples(), res.Index.ID(), spec.Samples)
			}
			if ix.NumChunks() < 10 {
				t.Fatalf("%d chunks; the test needs several", ix.NumChunks())
			}
			m, err := stored.ReadManifest(ctx, st)
			if err != nil {
				t.Fatal(err)
			}
			if err := m.Describes(ix); err != nil {
				t.Fatal(err)
			}

			rep, err := dataset.Verify(ctx, st, ix, 4, nil)
			if err != nil {
				t.Fatal(err)
			}
			if !rep.OK() || rep.Chunks != ix.NumChunks() || rep.Samples != spec.Samples {
				t.Fatalf("verify: %d chunks, %d samples, problems %v", rep.Chunks, rep.Samples, rep.Problems)
			}

			checkEverySample(t, st, ix, files)

			// One shuffled epoch serves every sample exactly once.
			e, err := shuffle.NewEpoch(ix.SampleCounts(), 77, 0, 4)
			if err != nil {
				t.Fatal(err)
			}
			order := e.AppendRange(nil, 0, e.NumSamples())
			seen := make([]int, ix.NumSamples())
			for _, id := range order {
				seen[id]++
			}
			for id, n := range seen {
				if n != 1 {
					t.Fatalf("sample %d (%s) appears %d times in epoch 0", id, ix.SampleKey(id), n)
				}
			}
			// Packing shuffled the classes across chunks, so even the first
			// batch of a window mixes classes.
			classes := map[string]bool{}
			for _, id := range order[:32] {
				classes[strings.SplitN(ix.SampleKey(id), "/", 2)[0]] = true
			}
			if len(classes) < 5 {
				t.Fatalf("the first 32 samples of the epoch hold only %d classes", len(classes))
			}
		})
	}
}

// TestDatasetIndexGNUTarShardsOnMinIO indexes WebDataset shards written by
// GNU tar and uploaded to MinIO, reads every sample back, then rewrites a
// shard: verification and pinned reads notice, and re-indexing recovers.
func TestDatasetIndexGNUTarShardsOnMinIO(t *testing.T) {
	ctx := context.Background()
	srv := miniotest.ForTest(t)
	spec := synth.Spec{Samples: 600, MeanBytes: 4 << 10, Classes: 6, Seed: 2}
	src := filepath.Join(t.TempDir(), "src")
	if err := spec.WriteTree(src); err != nil {
		t.Fatal(err)
	}
	// A name beyond ustar's 100 bytes: GNU tar writes an 'L' header for it,
	// which must be part of the sample's range.
	long := filepath.Join(src, "n00000002", strings.Repeat("long-name-", 12)+".jpg")
	if err := os.WriteFile(long, []byte("a sample with a long name"), 0o644); err != nil {
		t.Fatal(err)
	}
	files := sourceFiles(t, src)

	st, err := s3backend.Open(ctx, "s3://"+srv.NewBucket(t)+"/webdataset", srv.Config())
	if err != nil {
		t.Fatal(err)
	}
	classes, err := os.ReadDir(src)
	if err != nil {
		t.Fatal(err)
	}
	shardDir := t.TempDir()
	for i, c := range classes {
		path := filepath.Join(shardDir, fmt.Sprintf("train-%04d.tar", i))
		cmd := exec.Command("tar", "--sort=name", "--format=gnu", "-C", src, "-cf", path, c.Name())
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("%v: %v\n%s", cmd, err, out)
		}
		putFile(t, st, fmt.Sprintf("shards/train-%04d.tar", i), path)
	}
	putBytes(t, st, "shards/README", []byte("not a shard"))

	res, err := dataset.IndexShards(ctx, st, dataset.IndexOptions{Prefix: "shards/", Parallel: 3})
	if err != nil {
		t.Fatal(err)
	}
	ix, err := stored.ReadIndex(ctx, st)
	if err != nil {
		t.Fatal(err)
	}
	if ix.ID() != res.Index.ID() || ix.NumChunks() != len(classes) || ix.NumSamples() != spec.Samples+1 {
		t.Fatalf("index %s: %d chunks, %d samples", ix.ID(), ix.NumChunks(), ix.NumSamples())
	}
	all, err := st.List(ctx, "shards/")
	if err != nil {
		t.Fatal(err)
	}
	var listed []s3backend.ObjectInfo
	for _, o := range all {
		if strings.HasSuffix(o.Key, ".tar") {
			listed = append(listed, o)
		}
	}
	for c := range ix.NumChunks() {
		if ch, o := ix.Chunk(c), listed[c]; ch.Key != o.Key || ch.Size != o.Size || ch.ETag != o.ETag || ch.ETag == "" {
			t.Fatalf("chunk %d is %+v, the listing has %+v", c, ch, o)
		}
	}
	checkEverySample(t, st, ix, files)
	if rep, err := dataset.Verify(ctx, st, ix, 2, nil); err != nil || !rep.OK() {
		t.Fatalf("verify: %v %+v", err, rep)
	}

	// Replace shard 1 with shard 0's bytes. (Rewriting its own bytes would
	// not do: the ETag of a single-part upload is the content's MD5.)
	key := ix.Chunk(1).Key
	other := filepath.Join(shardDir, "train-0000.tar")
	putFile(t, st, key, other)
	rep, err := dataset.Verify(ctx, st, ix, 2, nil)
	if err != nil {
		t.Fatal(err)
	}
	if rep.OK() || rep.Problems[0].Kind != dataset.ChunkChanged || rep.Problems[0].ChunkKey != key {
		t.Fatalf("verify after a rewrite: %v", rep.Problems)
	}
	first, _ := ix.ChunkRange(1)
	_, off, n, _ := ix.SampleRange(first)
	if err := st.ReadRange(ctx, key, ix.Chunk(1).ETag, off, make([]byte, n)); !errors.Is(err, s3backend.ErrChanged) {
		t.Fatalf("a read pinned to the indexed ETag: %v, want ErrChanged", err)
	}
	// Shard 1 now repeats shard 0's samples.
	if _, err := dataset.IndexShards(ctx, st, dataset.IndexOptions{Prefix: "shards/"}); !errors.Is(err, chunkindex.ErrDuplicateKey) {
		t.Fatalf("re-indexing duplicated shards: %v", err)
	}
	// Put shard 1 back; re-indexing gives the original index again.
	putFile(t, st, key, filepath.Join(shardDir, "train-0001.tar"))
	again, err := dataset.IndexShards(ctx, st, dataset.IndexOptions{Prefix: "shards/"})
	if err != nil {
		t.Fatal(err)
	}
	if again.Index.ID() != ix.ID() {
		t.Fatalf("re-indexed %s, first index %s", again.Index.ID(), ix.ID())
	}
}

// sourceFiles returns every file under dir by slash-separated relative path.
func sourceFiles(t *testing.T, dir string) map[string][]byte {
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
		rel, err := filepath.Rel(dir, p)
		files[filepath.ToSlash(rel)] = b
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}

// checkEverySample reads each sample of ix with one ranged read, as the
// gateway does, and checks that its range is a tar of members under the
// sample's key with the bytes of the source files, the indexed CRC32C, and
// that every source file is in exactly one sample.
func checkEverySample(t *testing.T, st s3backend.Store, ix *chunkindex.Index, files map[string][]byte) {
	t.Helper()
	castagnoli := crc32.MakeTable(crc32.Castagnoli)
	var (
		mu   sync.Mutex
		seen = map[string]int{}
	)
	g, ctx := errgroup.WithContext(context.Background())
	g.SetLimit(8)
	for id := range ix.NumSamples() {
		g.Go(func() error {
			c, off, n, crc := ix.SampleRange(id)
			ch := ix.Chunk(c)
			b := make([]byte, n)
			if err := st.ReadRange(ctx, ch.Key, ch.ETag, off, b); err != nil {
				return fmt.Errorf("sample %d: %w", id, err)
			}
			if got := crc32.Checksum(b, castagnoli); got != crc {
				return fmt.Errorf("sample %d (%s): CRC32C %08x, indexed %08x", id, ix.SampleKey(id), got, crc)
			}
			tr := tar.NewReader(io.MultiReader(bytes.NewReader(b), bytes.NewReader(chunkindex.EndOfArchive[:])))
			members := 0
			for {
				hdr, err := tr.Next()
				if errors.Is(err, io.EOF) {
					break
				}
				if err != nil {
					return fmt.Errorf("sample %d (%s): not a tar: %w", id, ix.SampleKey(id), err)
				}
				body, err := io.ReadAll(tr)
				if err != nil {
					return err
				}
				if k, _ := chunkindex.SplitKey(hdr.Name); k != ix.SampleKey(id) {
					return fmt.Errorf("sample %d (%s) holds %q", id, ix.SampleKey(id), hdr.Name)
				}
				if want, ok := files[hdr.Name]; !ok || !bytes.Equal(body, want) {
					return fmt.Errorf("sample %d: member %q does not match its source file", id, hdr.Name)
				}
				members++
				mu.Lock()
				seen[hdr.Name]++
				mu.Unlock()
			}
			if members == 0 {
				return fmt.Errorf("sample %d (%s) has no members", id, ix.SampleKey(id))
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		t.Fatal(err)
	}
	for name := range files {
		if seen[name] != 1 {
			t.Fatalf("source file %q is in %d samples", name, seen[name])
		}
	}
	if len(seen) != len(files) {
		t.Fatalf("%d members read, %d source files", len(seen), len(files))
	}
}

func putFile(t *testing.T, st s3backend.Store, key, path string) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	putBytes(t, st, key, b)
}

func putBytes(t *testing.T, st s3backend.Store, key string, b []byte) {
	t.Helper()
	if _, err := st.Put(context.Background(), key, bytes.NewReader(b), int64(len(b))); err != nil {
		t.Fatal(err)
	}
}
