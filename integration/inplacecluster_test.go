package integration

import (
	"context"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	pq "github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/compress"

	"github.com/brandgw/brand/api"
	"github.com/brandgw/brand/client"
	"github.com/brandgw/brand/internal/testsupport/miniotest"
	"github.com/brandgw/brand/s3backend"
	"github.com/brandgw/brand/shuffle"
)

// wideFeatures is how many binary feature columns a wide row has, beside
// its id, label and caption.
const wideFeatures = 8

// wideSchema is a table of many columns, most of them large: what a job
// that needs two small ones should not read.
var wideSchema = func() *arrow.Schema {
	fs := []arrow.Field{
		{Name: "id", Type: arrow.PrimitiveTypes.Int64},
		{Name: "label", Type: arrow.PrimitiveTypes.Int64},
		{Name: "caption", Type: arrow.BinaryTypes.String},
	}
	for j := range wideFeatures {
		fs = append(fs, arrow.Field{Name: fmt.Sprintf("f%d", j), Type: arrow.BinaryTypes.Binary})
	}
	return arrow.NewSchema(fs, nil)
}()

// wideRow is row g's values: label, caption, and the features
// (incompressible bytes, 1 to 2 KB each, not an image's magic).
func wideRow(g int) (label int64, caption string, features [][]byte) {
	r := rand.New(rand.NewPCG(uint64(g), 77))
	caption = fmt.Sprintf("row %d: %s", g, strings.Repeat("abcdefgh"[g%8:g%8+1], 20+g%60))
	for range wideFeatures {
		f := make([]byte, 1000+r.IntN(1000))
		for i := range f {
			f[i] = byte(r.Uint32())
		}
		copy(f, "BIN")
		features = append(features, f)
	}
	return int64(g % 10), caption, features
}

// checkWide compares a served sample with its row (the key's file and
// row: row file×rowsPerFile+row), with every field or with label and
// caption alone.
func checkWide(t *testing.T, s client.Sample, rowsPerFile int, projected bool) {
	t.Helper()
	file, row, _ := strings.Cut(s.Key, "/")
	var k int
	r, err := strconv.Atoi(row)
	if _, serr := fmt.Sscanf(file, "wide-%02d", &k); serr != nil || err != nil || r >= rowsPerFile {
		t.Fatalf("sample %s names no row", s.Key)
	}
	g := k*rowsPerFile + r
	label, caption, features := wideRow(g)
	want := map[string]string{"label.cls": strconv.FormatInt(label, 10), "txt": caption}
	if !projected {
		want["id.cls"] = strconv.Itoa(g)
		for j, f := range features {
			want[fmt.Sprintf("f%d.bin", j)] = string(f)
		}
	}
	if len(s.Files) != len(want) {
		t.Fatalf("sample %s: members %v, want %d", s.Key, exts(s), len(want))
	}
	for ext, w := range want {
		if string(s.Files[ext]) != w {
			t.Fatalf("sample %s: %s differs (%d bytes, want %d)", s.Key, ext, len(s.Files[ext]), len(w))
		}
	}
}

// A wide Parquet dataset (an id, a label, a caption and 8 columns of
// incompressible bytes; 4 files of 3 row groups) is served in place by
// `brand serve` processes through a proxy that counts what MinIO sends:
//
//   - `brand index` reads the files' footers alone (or the last 64 KiB,
//     the optimistic first read of a footer);
//   - a job naming two columns (columns=label,caption) reads from MinIO
//     exactly the bytes of those columns' column chunks — the bound: the
//     proxy's count, /stats' backend bytes and the sum of the two column
//     chunks' total_compressed_size (from the footers, read by arrow-go)
//     are equal, and, the two columns being adjacent, their ranges merge
//     into one GET per row group (0.13 % of the dataset's bytes here);
//   - indexed with a chunk size of about two row groups (--chunk-size
//     700KiB), each file is two chunks: its first two row groups and its
//     third;
//   - a cluster of 3 gateways serves it to 6 ranks exactly once an epoch,
//     two epochs, and reads each chunk from the store once: one GET of
//     each chunk's extent (its row groups' column chunks, one range) in
//     all.
func TestParquetProjectionAndClusterOnMinIO(t *testing.T) {
	ctx := context.Background()
	srv := miniotest.ForTest(t)
	hub, own := srv.NewBucket(t), srv.NewBucket(t)
	proxy := newStoreProxy(t, srv.URL(), hub)
	bin := buildBrand(t)
	env := brandEnv(srv)
	const files, groups, rowsPerGroup = 4, 3, 30
	const rowsPerFile = groups * rowsPerGroup

	src, err := s3backend.Open(ctx, "s3://"+hub, srv.Config())
	if err != nil {
		t.Fatal(err)
	}
	var datasetBytes, projectedBytes, rowGroups int64
	extents := map[string]bool{} // object and Range of each chunk's whole extent: row groups 0-1, and 2
	for k := range files {
		var recs []arrow.RecordBatch
		for gr := range groups {
			lo := k*rowsPerFile + gr*rowsPerGroup
			recs = append(recs, newRecord(wideSchema, func(b *array.RecordBuilder) {
				for g := lo; g < lo+rowsPerGroup; g++ {
					label, caption, features := wideRow(g)
					b.Field(0).(*array.Int64Builder).Append(int64(g))
					b.Field(1).(*array.Int64Builder).Append(label)
					b.Field(2).(*array.StringBuilder).Append(caption)
					for j, f := range features {
						b.Field(3 + j).(*array.BinaryBuilder).Append(f)
					}
				}
			}))
		}
		key := fmt.Sprintf("wide/wide-%02d.parquet", k)
		data := writeParquet(t, wideSchema, pq.NewWriterProperties(pq.WithCompression(compress.Codecs.Zstd), pq.WithDictionaryDefault(false)), recs...)
		putBytes(t, src, key, data)
		datasetBytes += int64(len(data))
		lo, hi := map[int]int64{}, map[int]int64{}
		for _, cc := range columnChunks(t, data) {
			if cc.column == "label" || cc.column == "caption" {
				projectedBytes += cc.len
			}
			if l, ok := lo[cc.rowGroup]; !ok || cc.off < l {
				lo[cc.rowGroup] = cc.off
			}
			hi[cc.rowGroup] = max(hi[cc.rowGroup], cc.off+cc.len)
		}
		rowGroups += int64(len(lo))
		extents[fmt.Sprintf("%s bytes=%d-%d", key, lo[0], hi[1]-1)] = true
		extents[fmt.Sprintf("%s bytes=%d-%d", key, lo[2], hi[2]-1)] = true
	}
	if rowGroups != files*groups || projectedBytes*20 > datasetBytes {
		t.Fatalf("the fixture: %d row groups, %d of %d bytes in label and caption", rowGroups, projectedBytes, datasetBytes)
	}
	sizes := listing(t, src)

	footers := map[string]int64{} // each file's footer and its length and magic: what indexing may read
	for key, o := range sizes {
		tail := make([]byte, 8)
		if err := src.ReadRange(ctx, key, "", o.Size-8, tail); err != nil {
			t.Fatal(err)
		}
		footers[key] = int64(binary.LittleEndian.Uint32(tail)) + 8
	}
	proxy.take(hub, "")
	runBrand(t, bin, env, "index", "--src", "s3://"+hub+"/wide", "--dst", "s3://"+own+"/wide", "--s3-endpoint", proxy.URL, "--chunk-size", "700KiB")
	var indexBytes int64
	for _, g := range proxy.take(hub, ".parquet") {
		var lo, hi int64
		size := sizes[g.key].Size
		if _, err := fmt.Sscanf(g.rng, "bytes=%d-%d", &lo, &hi); err != nil || hi >= size || lo < size-max(footers[g.key], 64<<10) {
			t.Errorf("brand index read %s %q: more than the file's footer (%d bytes of %d) or its last 64 KiB", g.key, g.rng, footers[g.key], size)
		}
		indexBytes += g.bytes
	}
	t.Logf("brand index read %d bytes of the %d files' %d: their footers", indexBytes, files, datasetBytes)

	t.Run("projection", func(t *testing.T) {
		gw := serveProc(t, bin, env, proxy.URL, "--cache-size", "64MiB", "--dataset", "wide=s3://"+own+"/wide")
		proxy.take(hub, "")
		seen := map[string]int{}
		readEpochOf(t, gw.url, api.Job{Dataset: "wide", Columns: []string{"label", "caption"}, Params: shuffle.Params{Seed: 9, BatchSize: 16}}, 0,
			func(_ int, _ *client.Batch, s client.Sample) {
				checkWide(t, s, rowsPerFile, true)
				seen[s.Key]++
			})
		exactlyOnce(t, seen, files*rowsPerFile, "the projected epoch")
		gets := proxy.take(hub, ".parquet")
		stats := statsBackendBytes(t, gw.url, "wide")
		t.Logf("columns=label,caption: MinIO sent %d bytes in %d GETs, /stats says %d, the two columns' chunks are %d bytes of the dataset's %d",
			getBytes(gets), len(gets), stats, projectedBytes, datasetBytes)
		if getBytes(gets) != projectedBytes || stats != projectedBytes {
			t.Errorf("a job of two columns read %d bytes from MinIO (/stats: %d); their column chunks are %d bytes",
				getBytes(gets), stats, projectedBytes)
		}
		if int64(len(gets)) != rowGroups {
			t.Errorf("%d GETs for %d row groups: two adjacent column chunks are one range", len(gets), rowGroups)
		}
	})

	t.Run("cluster", func(t *testing.T) {
		const nodes, world, batch = 3, 6, 8
		ports := freePorts(t, nodes)
		urls := make([]string, nodes)
		for k, port := range ports {
			urls[k] = fmt.Sprintf("http://127.0.0.1:%d", port)
		}
		dir := t.TempDir()
		procs := make([]*clusterProc, nodes)
		for k := range nodes {
			procs[k] = &clusterProc{k: k, url: urls[k], logPath: filepath.Join(dir, fmt.Sprintf("node%d.log", k)),
				args: []string{"serve", "--listen", fmt.Sprintf("127.0.0.1:%d", ports[k]), "--s3-endpoint", proxy.URL,
					"--dataset", "wide=s3://" + own + "/wide", "--cache-size", "64MiB", "--cache-prefault=false",
					"--peers", strings.Join(urls, ","), "--self", strconv.Itoa(k),
					"--log-format", "json", "--shutdown-timeout", "10s", "--index-poll", "0"}}
		}
		startProcs(t, procs, bin, env, "")
		proxy.take(hub, "")
		for epoch := range 2 {
			seen := map[string]int{}
			for r := range world {
				c, err := client.New(urls[0], client.Options{Peers: urls, Job: api.Job{Dataset: "wide",
					Params: shuffle.Params{Seed: 4, Window: 2, BatchSize: batch, World: world, Rank: r}}})
				if err != nil {
					t.Fatal(err)
				}
				for b, err := range c.Epoch(ctx, epoch) {
					if err != nil {
						t.Fatalf("epoch %d rank %d: %v", epoch, r, err)
					}
					for _, s := range b.Samples {
						checkWide(t, s, rowsPerFile, false)
						seen[s.Key]++
					}
					b.Release()
				}
			}
			exactlyOnce(t, seen, files*rowsPerFile, fmt.Sprintf("epoch %d over 6 ranks on 3 nodes", epoch))
		}
		gets := proxy.take(hub, ".parquet")
		reads := map[string]int{}
		for _, g := range gets {
			reads[g.key+" "+g.rng]++
		}
		for e, n := range reads {
			if !extents[e] || n != 1 {
				t.Errorf("the cluster read %s %d times (a chunk's extent: %v)", e, n, extents[e])
			}
		}
		if len(reads) != len(extents) {
			t.Errorf("the cluster read %d distinct ranges; the dataset has %d chunks", len(reads), len(extents))
		}
		t.Logf("a cluster of 3, two epochs: %d GETs of %d chunks of %d row groups, %d bytes from MinIO of the dataset's %d",
			len(gets), len(extents), rowGroups, getBytes(gets), datasetBytes)
	})
	if w := proxy.writesRefused(); len(w) > 0 {
		t.Errorf("Brand tried to write to the source: %v", w)
	}
}
