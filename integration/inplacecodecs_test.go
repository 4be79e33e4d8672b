package integration

import (
	"context"
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	pq "github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/compress"

	"github.com/brandgw/brand/api"
	"github.com/brandgw/brand/client"
	_ "github.com/brandgw/brand/format/parquet" // registers the deprecated LZ4 codec, which arrow-go writes here
	"github.com/brandgw/brand/internal/testsupport/miniotest"
	"github.com/brandgw/brand/s3backend"
	"github.com/brandgw/brand/shuffle"
)

// mixedSchema is testdata/inplace_duckdb.cjs's "mixed" table as arrow-go
// writes it: nullable integers and strings, a low-cardinality string, a
// list of integers, a float, and a struct holding a list.
var mixedSchema = arrow.NewSchema([]arrow.Field{
	{Name: "label", Type: arrow.PrimitiveTypes.Int32, Nullable: true},
	{Name: "text", Type: arrow.BinaryTypes.String, Nullable: true},
	{Name: "kind", Type: arrow.BinaryTypes.String, Nullable: true},
	{Name: "input_ids", Type: arrow.ListOf(arrow.PrimitiveTypes.Int32), Nullable: true},
	{Name: "score", Type: arrow.PrimitiveTypes.Float64, Nullable: true},
	{Name: "meta", Type: arrow.StructOf(
		arrow.Field{Name: "id", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
		arrow.Field{Name: "tags", Type: arrow.ListOf(arrow.BinaryTypes.String), Nullable: true},
	), Nullable: true},
}, nil)

// mixedRow is row g of the "mixed" table: each column's value, nil for a
// null. The formulas are inplace_duckdb.cjs's.
type mixedRow struct {
	label     *int
	text      *string
	kind      *string
	inputIDs  []int32 // nil: null
	score     *float64
	meta      bool // null when false
	metaID    int64
	tags      []string // nil: null; "\x00" an element that is null
	tagsEmpty bool
}

func mixedRowOf(g int) mixedRow {
	var r mixedRow
	if g%11 != 3 {
		v := g%7 - 3
		r.label = &v
	}
	if g%9 != 2 {
		v := strings.Repeat("ab", g%5) + strconv.Itoa(g)
		r.text = &v
	}
	if g%4 != 1 {
		v := strconv.Itoa(g % 3)
		r.kind = &v
	}
	switch g % 6 {
	case 1:
	case 2:
		r.inputIDs = []int32{}
	default:
		for j := range g%40 + 1 {
			r.inputIDs = append(r.inputIDs, int32((g*31+j*7)%50000-100))
		}
	}
	if g%8 != 0 {
		v := float64(g) / 4
		r.score = &v
	}
	if g%10 != 7 {
		r.meta, r.metaID = true, int64(g)*8589934592
		switch g % 3 {
		case 1:
			r.tagsEmpty = true
		case 2:
			r.tags = []string{"a", "\x00", strconv.Itoa(g)}
		}
	}
	return r
}

// members is what Brand serves of the row: member extension → bytes (the
// .npy's are its int32 values, little-endian), with the fields cols (nil:
// all).
func (r mixedRow) members(cols []string) map[string]string {
	has := func(c string) bool { return cols == nil || slices.Contains(cols, c) }
	m := map[string]string{}
	if r.label != nil && has("label") {
		m["cls"] = strconv.Itoa(*r.label)
	}
	if r.text != nil && has("text") {
		m["text.txt"] = *r.text
	}
	if r.kind != nil && has("kind") {
		m["kind.txt"] = *r.kind
	}
	if r.inputIDs != nil && has("input_ids") {
		b := make([]byte, 0, 4*len(r.inputIDs))
		for _, v := range r.inputIDs {
			b = binary.LittleEndian.AppendUint32(b, uint32(v))
		}
		m["npy"] = string(b)
	}
	if r.score != nil && has("score") {
		m["score.json"] = fmt.Sprint(*r.score)
	}
	if r.meta && has("meta") {
		tags := "null"
		switch {
		case r.tagsEmpty:
			tags = "[]"
		case r.tags != nil:
			tags = fmt.Sprintf(`["a",null,"%s"]`, r.tags[2])
		}
		m["meta.json"] = fmt.Sprintf(`{"id":%d,"tags":%s}`, r.metaID, tags)
	}
	if len(m) == 0 {
		m["null"] = ""
	}
	return m
}

// mixedRecord is rows lo..hi-1 of the table as an arrow record.
func mixedRecord(lo, hi int) arrow.RecordBatch {
	return newRecord(mixedSchema, func(b *array.RecordBuilder) {
		lb := b.Field(0).(*array.Int32Builder)
		tb := b.Field(1).(*array.StringBuilder)
		kb := b.Field(2).(*array.StringBuilder)
		ib := b.Field(3).(*array.ListBuilder)
		ivb := ib.ValueBuilder().(*array.Int32Builder)
		sb := b.Field(4).(*array.Float64Builder)
		mb := b.Field(5).(*array.StructBuilder)
		idb := mb.FieldBuilder(0).(*array.Int64Builder)
		tgb := mb.FieldBuilder(1).(*array.ListBuilder)
		tgvb := tgb.ValueBuilder().(*array.StringBuilder)
		for g := lo; g < hi; g++ {
			r := mixedRowOf(g)
			if r.label == nil {
				lb.AppendNull()
			} else {
				lb.Append(int32(*r.label))
			}
			for _, s := range []struct {
				b *array.StringBuilder
				v *string
			}{{tb, r.text}, {kb, r.kind}} {
				if s.v == nil {
					s.b.AppendNull()
				} else {
					s.b.Append(*s.v)
				}
			}
			if r.inputIDs == nil {
				ib.AppendNull()
			} else {
				ib.Append(true)
				ivb.AppendValues(r.inputIDs, nil)
			}
			if r.score == nil {
				sb.AppendNull()
			} else {
				sb.Append(*r.score)
			}
			if !r.meta {
				mb.AppendNull()
				continue
			}
			mb.Append(true)
			idb.Append(r.metaID)
			switch {
			case r.tagsEmpty:
				tgb.Append(true)
			case r.tags != nil:
				tgb.Append(true)
				tgvb.Append("a")
				tgvb.AppendNull()
				tgvb.Append(r.tags[2])
			default:
				tgb.AppendNull()
			}
		}
	})
}

// checkMixed compares a served sample of a "mixed" dataset with the row
// its key names (file mixed-KK-…, row R: row KK×rows+R of the table),
// with the fields cols.
func checkMixed(t *testing.T, what string, s client.Sample, rows int, cols []string) {
	t.Helper()
	file, row, ok := strings.Cut(s.Key, "/")
	var k, r int
	if _, err := fmt.Sscanf(file, "mixed-%02d-", &k); err != nil || !ok {
		t.Fatalf("%s: sample %s is of no mixed file", what, s.Key)
	}
	r, err := strconv.Atoi(row)
	if err != nil || len(row) != len(strconv.Itoa(rows-1)) || r >= rows {
		t.Fatalf("%s: sample %s: row %q", what, s.Key, row)
	}
	want := mixedRowOf(k*rows + r).members(cols)
	if len(s.Files) != len(want) {
		t.Fatalf("%s: sample %s has members %v, want %v", what, s.Key, exts(s), want)
	}
	for ext, w := range want {
		got, ok := s.Files[ext]
		if ext == "npy" && ok {
			tn, err := client.ParseNPY(got)
			if err != nil || tn.DType != "<i4" || len(tn.Shape) != 1 || tn.Shape[0]*4 != len(w) {
				t.Fatalf("%s: sample %s: npy %v %v %v, want %d int32s", what, s.Key, tn.DType, tn.Shape, err, len(w)/4)
			}
			got = tn.Data
		}
		if !ok || string(got) != w {
			t.Fatalf("%s: sample %s: %s = %q, want %q", what, s.Key, ext, got, w)
		}
	}
}

// Parquet of every codec the issue names (uncompressed, snappy, gzip,
// zstd, lz4 — LZ4_RAW from both writers, and the deprecated Hadoop LZ4
// from arrow-go), data pages v1 and v2, dictionary and plain encodings
// (DuckDB's v2 pages add its DELTA and BYTE_STREAM_SPLIT encodings), with
// nullable and nested columns, written by arrow-go and by DuckDB — a
// dataset of 24 and one of 20 files, a file per combination — indexed in
// place by `brand index` and served by `brand serve`: every sample of an
// epoch is its row's members, exactly; with columns= only those fields'.
func TestParquetCodecsOnMinIO(t *testing.T) {
	node, nodeEnv := duckDB(t)
	ctx := context.Background()
	srv := miniotest.ForTest(t)
	hub, own := srv.NewBucket(t), srv.NewBucket(t)
	proxy := newStoreProxy(t, srv.URL(), hub)
	bin := buildBrand(t)
	env := brandEnv(srv)
	const rows, rowGroup = 300, 100

	src, err := s3backend.Open(ctx, "s3://"+hub, srv.Config())
	if err != nil {
		t.Fatal(err)
	}
	arrowFiles := map[string][]byte{}
	k := 0
	for _, codec := range []struct {
		name string
		c    compress.Compression
	}{{"uncompressed", compress.Codecs.Uncompressed}, {"snappy", compress.Codecs.Snappy}, {"gzip", compress.Codecs.Gzip},
		{"zstd", compress.Codecs.Zstd}, {"lz4raw", compress.Codecs.Lz4Raw}, {"lz4hadoop", compress.Codecs.Lz4}} {
		for _, v2 := range []bool{false, true} {
			for _, dict := range []bool{true, false} {
				opts := []pq.WriterProperty{pq.WithCompression(codec.c), pq.WithDictionaryDefault(dict), pq.WithDataPageSize(1 << 10)}
				page, enc := "V1", "plain"
				if v2 {
					opts, page = append(opts, pq.WithDataPageVersion(pq.DataPageV2)), "V2"
				}
				if dict {
					enc = "dictionary"
				}
				var recs []arrow.RecordBatch
				for lo := k * rows; lo < (k+1)*rows; lo += rowGroup {
					recs = append(recs, mixedRecord(lo, lo+rowGroup))
				}
				arrowFiles[fmt.Sprintf("arrow/mixed-%02d-%s-%s-%s.parquet", k, codec.name, page, enc)] =
					writeParquet(t, mixedSchema, pq.NewWriterProperties(opts...), recs...)
				k++
			}
		}
	}
	putObjects(t, src, arrowFiles)
	dir := t.TempDir()
	runDuckDB(t, node, nodeEnv, "mixed", dir, strconv.Itoa(rows), strconv.Itoa(rowGroup))
	names, err := filepath.Glob(filepath.Join(dir, "mixed-*.parquet"))
	if err != nil || len(names) != 20 {
		t.Fatalf("DuckDB wrote %d files (%v)", len(names), err)
	}
	for _, name := range names {
		b, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		putBytes(t, src, "duckdb/"+filepath.Base(name), b)
	}
	before := listing(t, src)

	files := map[string]int{"arrow": len(arrowFiles), "duckdb": len(names)}
	for w, n := range files {
		out := runBrand(t, bin, env, "index", "--src", "s3://"+hub+"/"+w, "--dst", "s3://"+own+"/"+w, "--s3-endpoint", proxy.URL)
		if !strings.Contains(strings.ReplaceAll(out, ",", ""), fmt.Sprintf("indexed %d samples", n*rows)) {
			t.Fatalf("brand index of %s: %s", w, out)
		}
	}
	gw := serveProc(t, bin, env, proxy.URL, "--cache-size", "256MiB",
		"--dataset", "arrow=s3://"+own+"/arrow", "--dataset", "duckdb=s3://"+own+"/duckdb")

	for _, tc := range []struct {
		dataset string
		cols    []string
	}{
		{"arrow", nil}, {"duckdb", nil},
		{"arrow", []string{"input_ids", "meta"}}, {"duckdb", []string{"label", "kind", "score"}},
	} {
		t.Run(fmt.Sprintf("%s/columns=%s", tc.dataset, strings.Join(tc.cols, ",")), func(t *testing.T) {
			seen := map[string]int{}
			job := api.Job{Dataset: tc.dataset, Columns: tc.cols, Params: shuffle.Params{Seed: 2, BatchSize: 100}}
			readEpochOf(t, gw.url, job, 0, func(_ int, _ *client.Batch, s client.Sample) {
				checkMixed(t, tc.dataset, s, rows, tc.cols)
				seen[s.Key]++
			})
			exactlyOnce(t, seen, files[tc.dataset]*rows, tc.dataset+"'s epoch")
		})
	}
	if w := proxy.writesRefused(); len(w) > 0 {
		t.Errorf("Brand tried to write to the source: %v", w)
	}
	sameListing(t, "the source bucket", before, listing(t, src))
}
