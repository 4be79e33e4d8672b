package parquet

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	pq "github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/compress"

	"github.com/brandgw/brand/format"
	"github.com/brandgw/brand/internal/server/memory"
)

// hubPhotos are n photos as the formats benchmark serves them: JPEGs of
// about 30 KiB (24–36 KiB of bytes that do not compress, as a JPEG's
// do not), named photo_NNNNN.jpg, with an int64 label each.
func hubPhotos(n int) []imageRow {
	r := rand.New(rand.NewPCG(41, uint64(n)))
	rows := make([]imageRow, n)
	for i := range rows {
		body := make([]byte, 24<<10+r.IntN(12<<10))
		for j := 0; j < len(body); j += 8 {
			v := r.Uint64()
			for k := 0; k < 8 && j+k < len(body); k++ {
				body[j+k] = byte(v >> (8 * k))
			}
		}
		copy(body, "\xff\xd8\xff\xe0")
		p := fmt.Sprintf("photo_%05d.jpg", i)
		l := int64(i % 1000)
		rows[i] = imageRow{img: body, path: &p, label: &l}
	}
	return rows
}

// duckdbRewrite has DuckDB read file (written by arrow-go) and write it
// again, snappy, in row groups of rows rows: the same values as DuckDB
// lays them out. It skips when DuckDB is not installed (duckdbFixtures).
func duckdbRewrite(b *testing.B, file []byte, rows int) []byte {
	b.Helper()
	node, err := exec.LookPath("node")
	if err != nil {
		b.Skip("DuckDB: no node")
	}
	out, err := exec.Command("../../scripts/ensure-duckdb.sh", "--print-path").Output()
	if err != nil {
		b.Skipf("DuckDB: scripts/ensure-duckdb.sh --print-path: %v", err)
	}
	mods := filepath.Join(strings.TrimSpace(string(out)), "node_modules")
	dir := b.TempDir()
	in, res := filepath.Join(dir, "in.parquet"), filepath.Join(dir, "out.parquet")
	if err := os.WriteFile(in, file, 0o644); err != nil {
		b.Fatal(err)
	}
	js := fmt.Sprintf(`const { DuckDBInstance } = require('@duckdb/node-api');
(async () => {
	const db = await DuckDBInstance.create(':memory:');
	const con = await db.connect();
	await con.run('SET threads = 1');
	await con.run("COPY (SELECT * FROM read_parquet('%s')) TO '%s' (FORMAT parquet, COMPRESSION snappy, ROW_GROUP_SIZE %d)");
})().catch((e) => { console.error(e); process.exit(1); });`, in, res, rows)
	cmd := exec.Command(node, "-e", js)
	cmd.Env = append(os.Environ(), "NODE_PATH="+mods)
	if o, err := cmd.CombinedOutput(); err != nil {
		b.Skipf("DuckDB: %v\n%s", err, o)
	}
	got, err := os.ReadFile(res)
	if err != nil {
		b.Fatal(err)
	}
	return got
}

// BenchmarkDecodeHub decodes one row group of 100 photos in the Hub's
// layout (image struct{bytes, path} of ~30 KiB JPEGs, int64 label,
// snappy) as arrow-go writes it with pyarrow's defaults (dictionary
// pages until the dictionary passes 1 MiB, then plain), as arrow-go
// writes it without dictionaries, and as DuckDB writes it; its buffers
// from the node's pools (internal/server/memory), as the gateway decodes. The
// "resident" case is the floor a decoder of the same bytes cannot go
// under, and what a tar chunk's load costs at most: the same members
// written from memory with format.Writer (a copy, a header, a CRC32C).
func BenchmarkDecodeHub(b *testing.B) {
	const rows = 100
	photos := hubPhotos(rows)
	arrowDict := writeArrow(b, imageSchema, pq.NewWriterProperties(pq.WithCompression(compress.Codecs.Snappy)), imageRecord(photos))
	arrowPlain := writeArrow(b, imageSchema, pq.NewWriterProperties(pq.WithDictionaryDefault(false), pq.WithCompression(compress.Codecs.Snappy)), imageRecord(photos))
	mem := memory.New(memory.Config{})
	var bytes int64
	for _, p := range photos {
		bytes += int64(len(p.img))
	}
	for _, tc := range []struct {
		name string
		file func() []byte
	}{
		{"arrow-dictionary", func() []byte { return arrowDict }},
		{"arrow-plain", func() []byte { return arrowPlain }},
		{"duckdb", func() []byte { return duckdbRewrite(b, arrowPlain, rows) }},
	} {
		b.Run(tc.name, func(b *testing.B) {
			file := tc.file()
			st := newStore()
			st.put("data/train-00000-of-00001.parquet", file)
			lay, err := Format{}.Index(context.Background(), st, st.listing(), format.Options{})
			if err != nil {
				b.Fatal(err)
			}
			if len(lay.Chunks) != 1 || lay.Chunks[0].Samples != rows {
				b.Fatalf("%d chunks", len(lay.Chunks))
			}
			dec, _ := Format{}.Open(lay.Meta)
			sel, err := format.Select(dec.Fields(), []string{"image", "label"})
			if err != nil {
				b.Fatal(err)
			}
			ranges, bound := dec.Extent(0, sel)
			var src []byte
			for _, rg := range ranges {
				src = append(src, file[rg.Off:rg.End()]...)
			}
			dst := make([]byte, bound)
			wo := format.WriterOptions{Buffers: mem}
			b.SetBytes(bytes)
			b.ReportAllocs()
			cpu := cpuTime()
			for b.Loop() {
				if err := dec.Decode(0, sel, src, dst, wo); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(cpuTime()-cpu)/float64(b.N)/rows, "cpu-ns/sample")
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/rows, "ns/sample")
			b.ReportMetric(float64(bound)/float64(bytes), "bound/bytes")
		})
	}
	b.Run("resident", func(b *testing.B) {
		var bound int64 = format.Overhead(rows)
		for i, p := range photos {
			key := fmt.Sprintf("data/train-00000-of-00001/%03d", i)
			bound += format.MemberLen(len(key)+4, int64(len(p.img))) + format.MemberLen(len(key)+4, 3)
		}
		dst := make([]byte, bound)
		b.SetBytes(bytes)
		b.ReportAllocs()
		cpu := cpuTime()
		for b.Loop() {
			w, err := format.NewWriter(dst, rows, format.WriterOptions{})
			if err != nil {
				b.Fatal(err)
			}
			for i, p := range photos {
				w.Begin(fmt.Sprintf("data/train-00000-of-00001/%03d", i))
				w.Add("jpg", p.img)
				w.Add("cls", []byte("123"))
			}
			if err := w.Finish(); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(cpuTime()-cpu)/float64(b.N)/rows, "cpu-ns/sample")
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/rows, "ns/sample")
	})
}
