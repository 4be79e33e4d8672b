package dataset

import (
	"archive/tar"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/brandgw/brand/chunkindex"
	"github.com/brandgw/brand/dataset/stored"
	"github.com/brandgw/brand/internal/gen/synth"
	"github.com/brandgw/brand/internal/testsupport/s3test"
	"github.com/brandgw/brand/s3backend"
)

var update = flag.Bool("update", false, "rewrite golden files")

func TestPackRoundTrip(t *testing.T) {
	ctx := context.Background()
	spec := testSpec()
	src := writeTree(t, spec)
	st := newLocal(t)
	const target = 128 << 10
	var last Progress
	calls := 0
	res, err := Pack(ctx, src, st, PackOptions{ChunkSize: target, Shuffle: true, Seed: 7, Parallel: 3, Tool: "brand test",
		Progress: func(p Progress) { last = p; calls++ }})
	if err != nil {
		t.Fatal(err)
	}
	ix, err := stored.ReadIndex(ctx, st)
	if err != nil {
		t.Fatal(err)
	}
	if ix.ID() != res.Index.ID() {
		t.Fatalf("stored index %s, Pack returned %s", ix.ID(), res.Index.ID())
	}
	if ix.NumSamples() != spec.Samples {
		t.Fatalf("%d samples, want %d", ix.NumSamples(), spec.Samples)
	}
	checkSamples(t, st, ix, readTree(t, src))

	m, err := stored.ReadManifest(ctx, st)
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Describes(ix); err != nil {
		t.Fatal(err)
	}
	if m != res.Manifest {
		t.Fatalf("stored manifest %+v, Pack returned %+v", m, res.Manifest)
	}
	if m.Name != "train" || !m.Shuffled || m.ShuffleSeed != 7 || m.ChunkTargetBytes != target || m.Source != src || m.Tool != "brand test" {
		t.Fatalf("manifest %+v", m)
	}

	// Every chunk but the last reaches the target, and overshoots it by
	// less than one sample plus the end-of-archive marker.
	var largest int64
	for id := range ix.NumSamples() {
		largest = max(largest, ix.Sample(id).Length)
	}
	for c := range ix.NumChunks() {
		ch := ix.Chunk(c)
		if want := fmt.Sprintf("chunks/%06d.tar", c); ch.Key != want {
			t.Fatalf("chunk %d key %q, want %q", c, ch.Key, want)
		}
		info, err := st.Stat(ctx, ch.Key)
		if err != nil {
			t.Fatal(err)
		}
		if info.Size != ch.Size || info.ETag != ch.ETag {
			t.Fatalf("chunk %d: stored %+v, indexed %+v", c, info, ch)
		}
		if c < ix.NumChunks()-1 && ch.Size < target {
			t.Fatalf("chunk %d is %d bytes, below the %d target", c, ch.Size, target)
		}
		if ch.Size >= target+largest+int64(len(chunkindex.EndOfArchive)) {
			t.Fatalf("chunk %d is %d bytes: more than a sample over the %d target", c, ch.Size, target)
		}
	}
	if ix.NumChunks() < 10 {
		t.Fatalf("only %d chunks; the test needs several", ix.NumChunks())
	}

	if calls == 0 {
		t.Fatal("progress never reported")
	}
	want := Progress{Bytes: ix.TotalBytes(), TotalBytes: ix.TotalBytes(), Samples: spec.Samples, TotalSamples: spec.Samples,
		Chunks: ix.NumChunks(), TotalChunks: ix.NumChunks()}
	if last != want {
		t.Fatalf("last progress %+v, want %+v", last, want)
	}
}

// TestPackChunksMatchScanTar checks that the ranges ChunkWriter reports, the
// plan's sizes and what ScanTar reads back agree, for the names that need
// pax headers too.
func TestPackChunksMatchScanTar(t *testing.T) {
	ctx := context.Background()
	src := t.TempDir()
	long := strings.Repeat("d", 120) + "/" + strings.Repeat("f", 110)
	files := map[string]string{
		"a/one.jpg":       "first",
		"a/one.cls":       "1",
		"a/one.meta.json": `{"k":1}`,
		"a/empty.txt":     "",
		"b/ünïcödé.jpg":   "non-ASCII name",
		long + ".jpg":     "long name",
		long + ".cls":     "2",
		"noext":           "a file without extension",
		"dir.v2/x.jpg":    "dots in a directory",
		"c/" + long[:99]:  "a 101-byte name",
		"c/" + long[:97]:  "a 99-byte name",
		strings.Repeat("p", 90) + "/" + strings.Repeat("q", 95) + ".jpg": "ustar prefix split",
	}
	for name, body := range files {
		p := filepath.Join(src, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	tree, err := scanSource(ctx, src)
	if err != nil {
		t.Fatal(err)
	}
	st := newLocal(t)
	res, err := Pack(ctx, src, st, PackOptions{ChunkSize: 3 << 10})
	if err != nil {
		t.Fatal(err)
	}
	ix := res.Index
	want := map[string][]byte{}
	for name, body := range files {
		want[name] = []byte(body)
	}
	checkSamples(t, st, ix, want)

	order := make([]int, len(tree.samples))
	for i := range order {
		order[i] = i
	}
	plans := planChunks(tree, order, 3<<10)
	if len(plans) != ix.NumChunks() {
		t.Fatalf("planned %d chunks, packed %d", len(plans), ix.NumChunks())
	}
	for c := range ix.NumChunks() {
		ch := ix.Chunk(c)
		if plans[c].size != ch.Size {
			t.Errorf("chunk %d: planned %d bytes, wrote %d", c, plans[c].size, ch.Size)
		}
		b := make([]byte, ch.Size)
		if err := st.ReadRange(ctx, ch.Key, ch.ETag, 0, b); err != nil {
			t.Fatal(err)
		}
		first, n := ix.ChunkRange(c)
		var scanned []chunkindex.Sample
		size, err := chunkindex.ScanTar(bytes.NewReader(b), func(s chunkindex.TarSample) error {
			scanned = append(scanned, chunkindex.Sample{Key: s.Key, Chunk: c, Offset: s.Offset, Length: s.Length, CRC: s.CRC})
			return nil
		})
		if err != nil || size != ch.Size {
			t.Fatalf("chunk %d: ScanTar read %d of %d bytes: %v", c, size, ch.Size, err)
		}
		if len(scanned) != n {
			t.Fatalf("chunk %d: ScanTar found %d samples, index has %d", c, len(scanned), n)
		}
		for i, s := range scanned {
			if got := ix.Sample(first + i); got != s {
				t.Errorf("chunk %d: index has %+v, ScanTar %+v", c, got, s)
			}
		}
	}
}

func TestHeaderSize(t *testing.T) {
	names := []string{"a", strings.Repeat("x", 100), strings.Repeat("x", 101), "é.jpg", strings.Repeat("d/", 60) + "f",
		strings.Repeat("d", 150) + "/" + strings.Repeat("f", 100), strings.Repeat("f", 300)}
	for _, name := range names {
		for _, size := range []int64{0, 1, 1<<33 - 1, 1 << 33} {
			// A body that fails at once: ChunkWriter writes the header
			// blocks and nothing else.
			var n countWriter
			cw := chunkindex.NewChunkWriter(&n)
			key, _ := chunkindex.SplitKey(name)
			cw.WriteSample(key, []chunkindex.Member{{Name: name, Size: size, Body: failReader{}}})
			if got := headerSize(name, size); got != int64(n) {
				t.Errorf("headerSize(%d-byte name %.10q..., %d) = %d, ChunkWriter wrote %d", len(name), name, size, got, n)
			}
		}
	}
}

type failReader struct{}

func (failReader) Read([]byte) (int, error) { return 0, errInjected }

func TestPackOrder(t *testing.T) {
	ctx := context.Background()
	src := writeTree(t, testSpec())
	pack := func(shuffle bool, seed uint64, parallel int) *chunkindex.Index {
		t.Helper()
		res, err := Pack(ctx, src, newLocal(t), PackOptions{ChunkSize: 256 << 10, Shuffle: shuffle, Seed: seed, Parallel: parallel, ModTime: time.Unix(1_700_000_000, 0)})
		if err != nil {
			t.Fatal(err)
		}
		return res.Index
	}
	keys := func(ix *chunkindex.Index) []string {
		var k []string
		for id := range ix.NumSamples() {
			k = append(k, ix.SampleKey(id))
		}
		return k
	}
	// Chunk contents depend only on the tree and the options, not on how
	// many chunks were built at once. (ETags of the local store differ
	// between stores, so compare keys, ranges and CRCs.)
	samplesOf := func(ix *chunkindex.Index) []chunkindex.Sample {
		var s []chunkindex.Sample
		for id := range ix.NumSamples() {
			s = append(s, ix.Sample(id))
		}
		return s
	}
	a, b := pack(true, 1, 1), pack(true, 1, 4)
	if !slices.Equal(samplesOf(a), samplesOf(b)) {
		t.Fatal("the same seed packed differently with different parallelism")
	}
	sorted := keys(pack(false, 1, 2))
	if !slices.IsSorted(sorted) {
		t.Fatal("an unshuffled pack is not in key order")
	}
	shuffled := keys(a)
	if slices.Equal(shuffled, sorted) || slices.IsSorted(shuffled) {
		t.Fatal("the shuffled pack is in key order")
	}
	if other := keys(pack(true, 2, 2)); slices.Equal(other, shuffled) {
		t.Fatal("seeds 1 and 2 give the same order")
	}
	if got := slices.Sorted(slices.Values(shuffled)); !slices.Equal(got, sorted) {
		t.Fatal("the shuffled pack does not hold the same samples")
	}
	// A shuffled chunk mixes classes; a sorted one holds one or two.
	classes := func(ix *chunkindex.Index, c int) int {
		seen := map[string]bool{}
		first, n := ix.ChunkRange(c)
		for id := first; id < first+n; id++ {
			seen[strings.Split(ix.SampleKey(id), "/")[0]] = true
		}
		return len(seen)
	}
	if got := classes(a, 0); got < 6 {
		t.Fatalf("the first shuffled chunk holds %d of 8 classes", got)
	}
}

// TestPackOrderGolden pins packOrder: a change would silently change every
// dataset packed with a given seed.
func TestPackOrderGolden(t *testing.T) {
	type vector struct {
		N     int    `json:"n"`
		Seed  uint64 `json:"seed"`
		Order []int  `json:"order"`
	}
	var got []vector
	for _, v := range []struct {
		n    int
		seed uint64
	}{{0, 0}, {1, 0}, {2, 0}, {10, 0}, {10, 1}, {10, 1 << 63}, {25, 42}} {
		got = append(got, vector{v.n, v.seed, packOrder(v.n, v.seed)})
	}
	path := filepath.Join("testdata", "pack-order.golden")
	if *update {
		// One vector per line: a diff shows which vector changed.
		var lines []string
		for _, v := range got {
			b, err := json.Marshal(v)
			if err != nil {
				t.Fatal(err)
			}
			lines = append(lines, "  "+string(b))
		}
		if err := os.WriteFile(path, []byte("[\n"+strings.Join(lines, ",\n")+"\n]\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var want []vector
	if err := json.Unmarshal(b, &want); err != nil {
		t.Fatal(err)
	}
	if len(got) != len(want) {
		t.Fatalf("%d vectors, golden has %d", len(got), len(want))
	}
	for i := range got {
		if got[i].N != want[i].N || got[i].Seed != want[i].Seed || !slices.Equal(got[i].Order, want[i].Order) {
			t.Errorf("packOrder(%d, %d) = %v, golden %v", got[i].N, got[i].Seed, got[i].Order, want[i].Order)
		}
	}
	for _, v := range got {
		if s := slices.Sorted(slices.Values(v.Order)); len(s) != v.N || (v.N > 0 && (s[0] != 0 || s[v.N-1] != v.N-1)) {
			t.Errorf("packOrder(%d, %d) = %v is not a permutation", v.N, v.Seed, v.Order)
		}
	}
}

func TestPackLargeSampleOwnChunk(t *testing.T) {
	ctx := context.Background()
	src := t.TempDir()
	write := func(name string, size int) {
		if err := os.WriteFile(filepath.Join(src, name), make([]byte, size), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("a.bin", 1000)
	write("b.bin", 100<<10) // larger than the target
	write("c.bin", 1000)
	res, err := Pack(ctx, src, newLocal(t), PackOptions{ChunkSize: 8 << 10})
	if err != nil {
		t.Fatal(err)
	}
	ix := res.Index
	var counts []int
	for c := range ix.NumChunks() {
		counts = append(counts, ix.Chunk(c).Samples)
	}
	if !slices.Equal(counts, []int{1, 1, 1}) {
		t.Fatalf("samples per chunk %v, want a chunk each (the large one alone)", counts)
	}
	if ix.SampleKey(1) != "b" {
		t.Fatalf("chunk 1 holds %q", ix.SampleKey(1))
	}
}

func TestPackSkipsHiddenFollowsFileLinks(t *testing.T) {
	ctx := context.Background()
	src := t.TempDir()
	pool := t.TempDir()
	mk := func(p, body string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	mk(filepath.Join(src, "cats", "x.jpg"), "cat")
	mk(filepath.Join(src, "cats", ".DS_Store"), "junk")
	mk(filepath.Join(src, ".git", "config"), "junk")
	mk(filepath.Join(src, ".git", "objects", "ab"), "junk")
	mk(filepath.Join(pool, "dog.jpg"), "dog")
	if err := os.MkdirAll(filepath.Join(src, "dogs"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(pool, "dog.jpg"), filepath.Join(src, "dogs", "y.jpg")); err != nil {
		t.Fatal(err)
	}
	st := newLocal(t)
	res, err := Pack(ctx, src, st, PackOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if res.SkippedHidden != 2 {
		t.Fatalf("skipped %d hidden entries, want 2 (.DS_Store and .git)", res.SkippedHidden)
	}
	checkSamples(t, st, res.Index, map[string][]byte{"cats/x.jpg": []byte("cat"), "dogs/y.jpg": []byte("dog")})
}

func TestPackErrors(t *testing.T) {
	ctx := context.Background()
	tests := []struct {
		name    string
		setup   func(t *testing.T, src string) // src exists and holds ok.jpg
		opts    PackOptions
		wantIs  error
		wantSub string
	}{
		{
			name: "dangling symlink",
			setup: func(t *testing.T, src string) {
				must(t, os.Symlink(filepath.Join(src, "nowhere.jpg"), filepath.Join(src, "broken.jpg")))
			},
			wantSub: "broken.jpg is a dangling symbolic link",
		},
		{
			name: "link to a directory",
			setup: func(t *testing.T, src string) {
				must(t, os.Symlink(t.TempDir(), filepath.Join(src, "more")))
			},
			wantSub: "more is a symbolic link to a directory",
		},
		{
			name: "fifo",
			setup: func(t *testing.T, src string) {
				must(t, syscall.Mkfifo(filepath.Join(src, "pipe.jpg"), 0o644))
			},
			wantSub: "pipe.jpg is not a regular file",
		},
		{
			name:    "empty tree",
			setup:   func(t *testing.T, src string) { must(t, os.Remove(filepath.Join(src, "ok.jpg"))) },
			wantIs:  ErrEmpty,
			wantSub: "has no files to pack",
		},
		{
			name: "only hidden files",
			setup: func(t *testing.T, src string) {
				must(t, os.Rename(filepath.Join(src, "ok.jpg"), filepath.Join(src, ".ok.jpg")))
			},
			wantIs:  ErrEmpty,
			wantSub: "1 hidden entries skipped",
		},
		{
			name:    "chunk prefix in _brand",
			opts:    PackOptions{ChunkPrefix: "_brand/chunks/"},
			wantSub: "metadata folder",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			src := t.TempDir()
			must(t, os.WriteFile(filepath.Join(src, "ok.jpg"), []byte("fine"), 0o644))
			if tt.setup != nil {
				tt.setup(t, src)
			}
			st := newLocal(t)
			_, err := Pack(ctx, src, st, tt.opts)
			if err == nil {
				t.Fatal("Pack succeeded")
			}
			if tt.wantIs != nil && !errors.Is(err, tt.wantIs) {
				t.Errorf("error %v does not wrap %v", err, tt.wantIs)
			}
			if !strings.Contains(err.Error(), tt.wantSub) {
				t.Errorf("error %q does not mention %q", err, tt.wantSub)
			}
			if _, err := st.Stat(ctx, chunkindex.IndexKey); !errors.Is(err, s3backend.ErrNotFound) {
				t.Errorf("a failed pack left an index: %v", err)
			}
		})
	}

	t.Run("destination inside the source", func(t *testing.T) {
		src := writeTree(t, synth.Spec{Samples: 3, MeanBytes: 100, Seed: 1})
		st, err := s3backend.NewLocal(filepath.Join(src, "packed"))
		must(t, err)
		if _, err := Pack(ctx, src, st, PackOptions{}); err == nil || !strings.Contains(err.Error(), "inside the source") {
			t.Fatalf("got %v", err)
		}
	})
	t.Run("default name of a relative source", func(t *testing.T) {
		src := writeTree(t, synth.Spec{Samples: 3, MeanBytes: 100, Seed: 1})
		t.Chdir(src)
		res, err := Pack(ctx, ".", newLocal(t), PackOptions{})
		if err != nil || res.Manifest.Name != "train" {
			t.Fatalf("got %v, name %q", err, res.Manifest.Name)
		}
	})
	t.Run("source is a file", func(t *testing.T) {
		f := filepath.Join(t.TempDir(), "x.tar")
		must(t, os.WriteFile(f, nil, 0o644))
		if _, err := Pack(ctx, f, newLocal(t), PackOptions{}); err == nil || !strings.Contains(err.Error(), "not a directory") {
			t.Fatalf("got %v", err)
		}
	})
	t.Run("source missing", func(t *testing.T) {
		_, err := Pack(ctx, filepath.Join(t.TempDir(), "nope"), newLocal(t), PackOptions{})
		if !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("got %v", err)
		}
	})
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// TestPackFileChangesAfterListing checks the errors for a file that
// disappears or changes size between listing and packing: they name it.
func TestPackFileChangesAfterListing(t *testing.T) {
	ctx := context.Background()
	tests := []struct {
		name    string
		change  func(path string) error
		wantSub string
	}{
		{"removed", os.Remove, "no such file"},
		{"grown", func(p string) error { return os.WriteFile(p, make([]byte, 100000), 0o644) }, "changed during the pack"},
		{"replaced by a directory", func(p string) error {
			if err := os.Remove(p); err != nil {
				return err
			}
			return os.Mkdir(p, 0o755)
		}, "no longer a regular file"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			src := writeTree(t, synth.Spec{Samples: 20, MeanBytes: 1000, Classes: 2, Seed: 1})
			abs, _ := filepath.Abs(src)
			tree, err := scanSource(ctx, abs)
			if err != nil {
				t.Fatal(err)
			}
			victim := tree.samples[13].files[0].path
			must(t, tt.change(victim))
			opts := PackOptions{}
			must(t, opts.fill(abs))
			_, err = packSource(ctx, tree, abs, newLocal(t), opts)
			if err == nil {
				t.Fatal("pack succeeded")
			}
			if !strings.Contains(err.Error(), victim) || !strings.Contains(err.Error(), tt.wantSub) {
				t.Fatalf("error %q does not name %s and say %q", err, victim, tt.wantSub)
			}
		})
	}
}

func TestPackPublishesIndexLast(t *testing.T) {
	ctx := context.Background()
	src := writeTree(t, testSpec())
	st := &recordingStore{Store: newLocal(t)}
	res, err := Pack(ctx, src, st, PackOptions{ChunkSize: 256 << 10, Parallel: 4})
	if err != nil {
		t.Fatal(err)
	}
	n := res.Index.NumChunks()
	if len(st.puts) != n+3 {
		t.Fatalf("%d puts for %d chunks: %v", len(st.puts), n, st.puts)
	}
	if st.puts[n] != chunkindex.MembersKey || st.puts[n+1] != chunkindex.IndexKey || st.puts[n+2] != chunkindex.ManifestKey {
		t.Fatalf("puts end with %v, want the member table, the index, then the manifest", st.puts[n:])
	}
	for _, k := range st.puts[:n] {
		if !strings.HasPrefix(k, "chunks/") {
			t.Fatalf("put %q before the index", k)
		}
	}

	// A failed chunk upload publishes nothing.
	st2 := newLocal(t)
	failing := s3test.Wrap(st2)
	failing.Fail(func(c s3test.Call) error {
		if c.Op == s3backend.OpPut && strings.Contains(c.Key, "000003") {
			return errInjected
		}
		return nil
	})
	_, err = Pack(ctx, src, failing, PackOptions{ChunkSize: 256 << 10})
	if !errors.Is(err, errInjected) || !strings.Contains(err.Error(), "chunks/000003.tar") {
		t.Fatalf("got %v", err)
	}
	if _, err := stored.ReadIndex(ctx, st2); !errors.Is(err, s3backend.ErrNotFound) {
		t.Fatalf("index after a failed pack: %v", err)
	}
}

func TestPackRefusesExistingIndex(t *testing.T) {
	ctx := context.Background()
	src := writeTree(t, synth.Spec{Samples: 30, MeanBytes: 1000, Seed: 1})
	st := newLocal(t)
	first, err := Pack(ctx, src, st, PackOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Pack(ctx, src, st, PackOptions{}); !errors.Is(err, ErrExists) {
		t.Fatalf("second pack: %v, want ErrExists", err)
	}
	again, err := Pack(ctx, src, st, PackOptions{Overwrite: true, Shuffle: true, Seed: 9})
	if err != nil {
		t.Fatal(err)
	}
	if again.Index.ID() == first.Index.ID() {
		t.Fatal("the overwrite did not change the index")
	}
	ix, err := stored.ReadIndex(ctx, st)
	if err != nil {
		t.Fatal(err)
	}
	if ix.ID() != again.Index.ID() {
		t.Fatal("the store does not hold the new index")
	}
}

func TestPackCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	src := writeTree(t, synth.Spec{Samples: 30, MeanBytes: 1000, Seed: 1})
	if _, err := Pack(ctx, src, newLocal(t), PackOptions{}); !errors.Is(err, context.Canceled) {
		t.Fatalf("got %v", err)
	}
}

// TestPackWritesMembers: the member table describes every file of the
// source tree, and stored.ReadMembers finds it; `brand index` of the chunks as
// shards writes the same table; a dataset without one is ErrNoMembers.
func TestPackWritesMembers(t *testing.T) {
	ctx := context.Background()
	src := writeTree(t, testSpec())
	st := newLocal(t)
	res, err := Pack(ctx, src, st, PackOptions{ChunkSize: 256 << 10, Shuffle: true, Seed: 3})
	if err != nil {
		t.Fatal(err)
	}
	m, err := stored.ReadMembers(ctx, st, res.Index)
	if err != nil {
		t.Fatal(err)
	}
	files := 0
	for id := range res.Index.NumSamples() {
		c, off, _, _ := res.Index.SampleRange(id)
		key := res.Index.SampleKey(id)
		for j := range m.Count(id) {
			mi := m.Member(id, j)
			name := key
			if mi.Ext != "" {
				name += "." + mi.Ext
			}
			want, err := os.ReadFile(filepath.Join(src, filepath.FromSlash(name)))
			if err != nil {
				t.Fatalf("member %s: %v", name, err)
			}
			got := make([]byte, mi.Size)
			if err := st.ReadRange(ctx, res.Index.Chunk(c).Key, "", off+mi.DataOffset, got); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, want) {
				t.Fatalf("member %s: the table's range holds other bytes", name)
			}
			files++
		}
	}
	if files != len(sourceNames(t, src)) {
		t.Fatalf("%d members, %d source files", files, len(sourceNames(t, src)))
	}
	// Indexing the chunks in place (`brand index`) writes the same table.
	st2 := newLocal(t)
	for c := range res.Index.NumChunks() {
		k := res.Index.Chunk(c).Key
		b := make([]byte, res.Index.Chunk(c).Size)
		if err := st.ReadRange(ctx, k, "", 0, b); err != nil {
			t.Fatal(err)
		}
		if _, err := st2.Put(ctx, k, bytes.NewReader(b), int64(len(b))); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := stored.ReadMembers(ctx, st2, res.Index); !errors.Is(err, stored.ErrNoMembers) || !strings.Contains(err.Error(), "brand index") {
		t.Fatalf("without a member table: %v", err)
	}
	res2, err := IndexShards(ctx, st2, IndexOptions{Prefix: "chunks/"})
	if err != nil {
		t.Fatal(err)
	}
	m2, err := stored.ReadMembers(ctx, st2, res2.Index)
	if err != nil {
		t.Fatal(err)
	}
	a, _ := st.Stat(ctx, chunkindex.MembersKey)
	b, _ := st2.Stat(ctx, chunkindex.MembersKey)
	if m2.Len() != m.Len() || a.ETag != b.ETag {
		t.Fatalf("brand index wrote another table: %d members (%s), pack %d (%s)", m2.Len(), b.ETag, m.Len(), a.ETag)
	}
}

func sourceNames(t *testing.T, dir string) []string {
	var out []string
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			out = append(out, p)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestPackModTime: every member of a packed chunk carries a real
// modification time, the pack's (the manifest's Created), which a batch
// passes through to its tar — not the Unix epoch, which made `tar -tvf`
// of every batch read 1970-01-01. A given ModTime is kept, so the same
// tree packed twice with it gives byte-identical chunks.
func TestPackModTime(t *testing.T) {
	ctx := context.Background()
	src := writeTree(t, testSpec())
	before := time.Now().Truncate(time.Second)
	st := newLocal(t)
	res, err := Pack(ctx, src, st, PackOptions{ChunkSize: 256 << 10})
	if err != nil {
		t.Fatal(err)
	}
	created := res.Manifest.Created
	if created.Before(before) || created.After(time.Now()) {
		t.Fatalf("manifest created %v, want the pack's time (after %v)", created, before)
	}
	if got := chunkModTimes(t, st, res.Index); len(got) != 1 || !got[0].Equal(created) {
		t.Fatalf("members' modification times %v, want only the pack's %v", got, created)
	}

	fixed := time.Date(2026, 11, 24, 12, 30, 5, 0, time.UTC)
	var chunks [2][][]byte
	for i := range chunks {
		st := newLocal(t)
		res, err := Pack(ctx, src, st, PackOptions{ChunkSize: 256 << 10, ModTime: fixed.Add(300 * time.Millisecond)})
		if err != nil {
			t.Fatal(err)
		}
		if !res.Manifest.Created.Equal(fixed) {
			t.Fatalf("manifest created %v, want the given %v to the second", res.Manifest.Created, fixed)
		}
		if got := chunkModTimes(t, st, res.Index); len(got) != 1 || !got[0].Equal(fixed) {
			t.Fatalf("members' modification times %v, want the given %v", got, fixed)
		}
		for c := range res.Index.NumChunks() {
			b := make([]byte, res.Index.Chunk(c).Size)
			if err := st.ReadRange(ctx, res.Index.Chunk(c).Key, "", 0, b); err != nil {
				t.Fatal(err)
			}
			chunks[i] = append(chunks[i], b)
		}
	}
	if !slices.EqualFunc(chunks[0], chunks[1], bytes.Equal) {
		t.Fatal("the same tree packed twice with the same ModTime gave different chunks")
	}
}

// chunkModTimes returns the distinct modification times of every member
// of every chunk of ix in st, as tar reads them.
func chunkModTimes(t *testing.T, st s3backend.Store, ix *chunkindex.Index) []time.Time {
	t.Helper()
	seen := map[time.Time]bool{}
	for c := range ix.NumChunks() {
		b := make([]byte, ix.Chunk(c).Size)
		if err := st.ReadRange(context.Background(), ix.Chunk(c).Key, "", 0, b); err != nil {
			t.Fatal(err)
		}
		tr := tar.NewReader(bytes.NewReader(b))
		for {
			h, err := tr.Next()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			seen[h.ModTime.UTC()] = true
		}
	}
	return slices.SortedFunc(maps.Keys(seen), time.Time.Compare)
}
