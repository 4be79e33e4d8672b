package dataset

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/brandgw/brand/chunkindex"
	"github.com/brandgw/brand/dataset/stored"
	"github.com/brandgw/brand/internal/gen/synth"
	"github.com/brandgw/brand/s3backend"
)

// gnuTarShards writes one shard per class folder of src with GNU tar, in
// the given format, and returns their paths. --sort=name keeps a sample's
// members next to each other, as WebDataset writers do.
func gnuTarShards(t testing.TB, src, format string) []string {
	t.Helper()
	if _, err := exec.LookPath("tar"); err != nil {
		t.Fatalf("GNU tar is needed to write test shards: %v", err)
	}
	entries, err := os.ReadDir(src)
	if err != nil {
		t.Fatal(err)
	}
	out := t.TempDir()
	var shards []string
	for i, e := range entries {
		shard := filepath.Join(out, fmt.Sprintf("shard-%04d.tar", i))
		cmd := exec.Command("tar", "--sort=name", "--format="+format, "-C", src, "-cf", shard, e.Name())
		if b, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("%v: %v\n%s", cmd, err, b)
		}
		shards = append(shards, shard)
	}
	return shards
}

func putFile(t testing.TB, st s3backend.Store, key, path string) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	putBytes(t, st, key, b)
}

func putBytes(t testing.TB, st s3backend.Store, key string, b []byte) {
	t.Helper()
	if _, err := st.Put(context.Background(), key, bytes.NewReader(b), int64(len(b))); err != nil {
		t.Fatal(err)
	}
}

func TestIndexShardsGNUTar(t *testing.T) {
	for _, format := range []string{"gnu", "pax", "ustar"} {
		t.Run(format, func(t *testing.T) {
			ctx := context.Background()
			src := writeTree(t, synth.Spec{Samples: 120, MeanBytes: 3000, Classes: 4, Seed: 5})
			// Names beyond ustar's 100 bytes need GNU 'L' or pax 'x'
			// headers, which belong to the sample's range.
			if format != "ustar" {
				long := filepath.Join(src, "n00000001", strings.Repeat("long", 30)+".jpg")
				must(t, os.WriteFile(long, []byte("a long-named sample"), 0o644))
			}
			st := newLocal(t)
			for i, shard := range gnuTarShards(t, src, format) {
				putFile(t, st, fmt.Sprintf("shards/train-%04d.tar", i), shard)
			}
			putBytes(t, st, "shards/README.md", []byte("not a shard"))
			putBytes(t, st, "other/x.tar", []byte("outside the prefix"))

			var last Progress
			res, err := IndexShards(ctx, st, IndexOptions{Prefix: "shards/", Parallel: 3, Progress: func(p Progress) { last = p }})
			if err != nil {
				t.Fatal(err)
			}
			ix, err := stored.ReadIndex(ctx, st)
			if err != nil {
				t.Fatal(err)
			}
			if ix.ID() != res.Index.ID() {
				t.Fatal("the stored index is not the one returned")
			}
			checkSamples(t, st, ix, readTree(t, src))

			listed, err := st.List(ctx, "shards/")
			if err != nil {
				t.Fatal(err)
			}
			var want []s3backend.ObjectInfo
			for _, o := range listed {
				if strings.HasSuffix(o.Key, ".tar") {
					want = append(want, o)
				}
			}
			if ix.NumChunks() != len(want) {
				t.Fatalf("%d chunks, %d shards", ix.NumChunks(), len(want))
			}
			for c, o := range want {
				if ch := ix.Chunk(c); ch.Key != o.Key || ch.Size != o.Size || ch.ETag != o.ETag {
					t.Fatalf("chunk %d is %+v, shard %+v", c, ch, o)
				}
			}

			m, err := stored.ReadManifest(ctx, st)
			if err != nil {
				t.Fatal(err)
			}
			if err := m.Describes(ix); err != nil {
				t.Fatal(err)
			}
			if m.Name != "shards" || m.Shuffled || m.ChunkTargetBytes != 0 || !strings.HasSuffix(m.Source, "/shards/") || m.Tool != "brand" {
				t.Fatalf("manifest %+v", m)
			}
			if last.Bytes != ix.TotalBytes() || last.TotalBytes != ix.TotalBytes() || last.Samples != ix.NumSamples() ||
				last.TotalSamples != ix.NumSamples() || last.Chunks != ix.NumChunks() || last.TotalChunks != ix.NumChunks() {
				t.Fatalf("last progress %+v", last)
			}

			rep, err := Verify(ctx, st, ix, 2, nil)
			if err != nil {
				t.Fatal(err)
			}
			if !rep.OK() {
				t.Fatalf("verify: %v", rep.Problems)
			}
		})
	}
}

// TestIndexShardsOfPack checks that indexing the chunks Pack wrote gives
// Pack's own index, byte for byte.
func TestIndexShardsOfPack(t *testing.T) {
	ctx := context.Background()
	st := newLocal(t)
	packed, err := Pack(ctx, writeTree(t, testSpec()), st, PackOptions{ChunkSize: 256 << 10, Shuffle: true, Seed: 3})
	if err != nil {
		t.Fatal(err)
	}
	indexed, err := IndexShards(ctx, st, IndexOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if packed.Index.ID() != indexed.Index.ID() {
		t.Fatalf("Pack wrote index %s, IndexShards built %s", packed.Index.ID(), indexed.Index.ID())
	}
	if indexed.Manifest.Name != "store" {
		t.Fatalf("default name %q, want the store directory's name", indexed.Manifest.Name)
	}
}

func TestIndexShardsErrors(t *testing.T) {
	ctx := context.Background()
	goodTar := func(names ...string) []byte {
		var b bytes.Buffer
		cw := chunkindex.NewChunkWriter(&b)
		for _, n := range names {
			key, _ := chunkindex.SplitKey(n)
			if _, _, _, err := cw.WriteSample(key, []chunkindex.Member{{Name: n, Size: 1, Body: strings.NewReader("x")}}); err != nil {
				t.Fatal(err)
			}
		}
		if err := cw.Close(); err != nil {
			t.Fatal(err)
		}
		return b.Bytes()
	}
	hidden := func() []byte {
		// ChunkWriter refuses hidden members, so write one with tar.
		dir := t.TempDir()
		must(t, os.WriteFile(filepath.Join(dir, ".DS_Store"), []byte("junk"), 0o644))
		out := filepath.Join(t.TempDir(), "h.tar")
		if b, err := exec.Command("tar", "-C", dir, "-cf", out, ".DS_Store").CombinedOutput(); err != nil {
			t.Fatalf("%v\n%s", err, b)
		}
		b, err := os.ReadFile(out)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	tests := []struct {
		name    string
		objects map[string][]byte
		prefix  string
		wantIs  error
		wantSub []string
	}{
		{"empty store", nil, "", ErrEmpty, []string{"no .tar objects"}},
		{"only compressed", map[string][]byte{"a.tar.gz": {1}, "b.tgz": {2}}, "", ErrEmpty, []string{"2 compressed"}},
		{"prefix selects nothing", map[string][]byte{"a/x.tar": goodTar("x.jpg")}, "b/", ErrEmpty, []string{`"b/"`}},
		{"not a tar", map[string][]byte{"a.tar": goodTar("x.jpg"), "b.tar": bytes.Repeat([]byte("junk"), 300)}, "", nil, []string{"shard b.tar"}},
		{"truncated tar", map[string][]byte{"a.tar": goodTar("x.jpg", "y.jpg")[:700]}, "", io.ErrUnexpectedEOF, []string{"shard a.tar"}},
		{"hidden member", map[string][]byte{"h.tar": hidden()}, "", chunkindex.ErrUnsupportedMember, []string{"shard h.tar", ".DS_Store"}},
		{"key in two shards", map[string][]byte{"a.tar": goodTar("x.jpg", "y.jpg"), "b.tar": goodTar("z.jpg", "y.cls")}, "",
			chunkindex.ErrDuplicateKey, []string{`"y"`, "shard a.tar", "shard b.tar"}},
		{"prefix in _brand", map[string][]byte{"a.tar": goodTar("x.jpg")}, "_brand/", nil, []string{"metadata folder"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st := newLocal(t)
			for k, b := range tt.objects {
				putBytes(t, st, k, b)
			}
			_, err := IndexShards(ctx, st, IndexOptions{Prefix: tt.prefix})
			if err == nil {
				t.Fatal("IndexShards succeeded")
			}
			if tt.wantIs != nil && !errors.Is(err, tt.wantIs) {
				t.Errorf("error %v does not wrap %v", err, tt.wantIs)
			}
			for _, sub := range tt.wantSub {
				if !strings.Contains(err.Error(), sub) {
					t.Errorf("error %q does not mention %s", err, sub)
				}
			}
			if _, err := st.Stat(ctx, chunkindex.IndexKey); !errors.Is(err, s3backend.ErrNotFound) {
				t.Errorf("a failed IndexShards left an index: %v", err)
			}
		})
	}
}

func TestIndexShardsSkipsMetadataAndEmptyShards(t *testing.T) {
	ctx := context.Background()
	st := newLocal(t)
	var b bytes.Buffer
	cw := chunkindex.NewChunkWriter(&b)
	must(t, cw.Close())
	putBytes(t, st, "empty.tar", b.Bytes()) // a valid tar with no samples
	putBytes(t, st, "_brand/old.tar", []byte("not looked at"))
	b.Reset()
	cw = chunkindex.NewChunkWriter(&b)
	if _, _, _, err := cw.WriteSample("x", []chunkindex.Member{{Name: "x.jpg", Size: 2, Body: strings.NewReader("hi")}}); err != nil {
		t.Fatal(err)
	}
	must(t, cw.Close())
	putBytes(t, st, "full.tar", b.Bytes())
	res, err := IndexShards(ctx, st, IndexOptions{Name: "named"})
	if err != nil {
		t.Fatal(err)
	}
	ix := res.Index
	if ix.NumChunks() != 2 || ix.Chunk(0).Key != "empty.tar" || ix.Chunk(0).Samples != 0 || ix.NumSamples() != 1 || res.Manifest.Name != "named" {
		t.Fatalf("%d chunks (%+v), %d samples, name %q", ix.NumChunks(), ix.Chunk(0), ix.NumSamples(), res.Manifest.Name)
	}
}

func TestObjectReader(t *testing.T) {
	ctx := context.Background()
	st := newLocal(t)
	data := make([]byte, 10_000)
	for i := range data {
		data[i] = byte(i * 7)
	}
	putBytes(t, st, "obj", data)
	info, err := st.Stat(ctx, "obj")
	if err != nil {
		t.Fatal(err)
	}
	for _, part := range []int{1, 999, 1000, 10_000, 20_000} {
		var parts []int64
		r := newObjectReader(ctx, st, info, make([]byte, part), func(n int64) { parts = append(parts, n) })
		got, err := io.ReadAll(r)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, data) {
			t.Fatalf("part %d: read %d bytes that differ", part, len(got))
		}
		if want := (len(data) + part - 1) / part; len(parts) != want {
			t.Fatalf("part %d: %d reads, want %d", part, len(parts), want)
		}
	}

	// Replacing the object between parts fails the next part.
	r := newObjectReader(ctx, st, info, make([]byte, 4096), nil)
	if _, err := io.ReadFull(r, make([]byte, 100)); err != nil {
		t.Fatal(err)
	}
	putBytes(t, st, "obj", slices.Repeat([]byte{1}, len(data)))
	_, err = io.ReadAll(r)
	if !errors.Is(err, s3backend.ErrChanged) || !strings.Contains(err.Error(), "obj at offset 4096") {
		t.Fatalf("got %v, want ErrChanged at offset 4096", err)
	}
}
