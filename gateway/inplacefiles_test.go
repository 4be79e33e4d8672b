package gateway_test

import (
	"archive/tar"
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	pq "github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/compress"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"

	"github.com/brandgw/brand/chunkindex"
	"github.com/brandgw/brand/dataset"
	"github.com/brandgw/brand/format"
	"github.com/brandgw/brand/format/mds"
	"github.com/brandgw/brand/format/megatron"
	"github.com/brandgw/brand/format/megatron/megatrontest"
	"github.com/brandgw/brand/format/parquet"
	"github.com/brandgw/brand/gateway"
	"github.com/brandgw/brand/s3backend"
)

// This file writes, for the tests of datasets served in place, one
// dataset of each format on a local store: files larger than the two
// 64 KiB blocks a local file's content ETag hashes (s3backend's etag.go),
// each sample's bytes told apart, and an offset in the middle of one
// file that a batch of every sample serves.

// inPlaceFiles is a dataset of one format served in place, as written.
type inPlaceFiles struct {
	name    string
	formats []format.Format
	opts    format.Options
	// all is a job's query whose batch 0 holds every sample (a token
	// job: every sequence).
	all string
	// file is the data file whose middle a test edits (relative to the
	// store), and middle an offset in it that batch 0 of all serves.
	file   string
	middle int64
	// write writes the files into st.
	write func(t testing.TB, st *s3backend.Local)
}

// rowBytes is row i's value: 4 KiB that no other row has.
func rowBytes(i int) []byte {
	r := rand.New(rand.NewPCG(uint64(i), 0x62726e64))
	b := make([]byte, 4096)
	for j := range b {
		b[j] = byte(r.Uint32())
	}
	copy(b, fmt.Sprintf("row %06d:", i))
	return b
}

// inPlaceRows is the rows of the Parquet and MDS datasets.
const inPlaceRows = 120

// parquetFiles is a Parquet file of inPlaceRows rows, a binary column
// "data" (member .bin) and an integer "label" (.cls), uncompressed and
// without dictionaries, so that a byte changed in a value changes that
// value alone; 40 rows a row group.
func parquetFiles(t testing.TB) inPlaceFiles {
	sc := arrow.NewSchema([]arrow.Field{{Name: "data", Type: arrow.BinaryTypes.Binary}, {Name: "label", Type: arrow.PrimitiveTypes.Int64}}, nil)
	var file []byte
	{
		var buf bytes.Buffer
		props := pq.NewWriterProperties(pq.WithCompression(compress.Codecs.Uncompressed), pq.WithDictionaryDefault(false))
		w, err := pqarrow.NewFileWriter(sc, &buf, props, pqarrow.DefaultWriterProps())
		if err != nil {
			t.Fatal(err)
		}
		for g := range inPlaceRows / 40 {
			b := array.NewRecordBuilder(memory.DefaultAllocator, sc)
			for i := g * 40; i < (g+1)*40; i++ {
				b.Field(0).(*array.BinaryBuilder).Append(rowBytes(i))
				b.Field(1).(*array.Int64Builder).Append(int64(i % 10))
			}
			rec := b.NewRecordBatch()
			if err := w.Write(rec); err != nil {
				t.Fatal(err)
			}
			rec.Release()
			b.Release()
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		file = buf.Bytes()
	}
	return inPlaceFiles{
		name: "parquet", formats: []format.Format{parquet.Format{}}, all: fmt.Sprintf("batch_size=%d", inPlaceRows),
		file: "data/train-00000.parquet", middle: valueIn(t, file, rowBytes(inPlaceRows/2)),
		write: func(t testing.TB, st *s3backend.Local) { putFile(t, st, "data/train-00000.parquet", file) },
	}
}

// mdsFiles is an MDS shard of inPlaceRows samples, columns "label" (int)
// and "data" (bytes), uncompressed, with its index.json.
func mdsFiles(t testing.TB) inPlaceFiles {
	le := binary.LittleEndian
	var body [][]byte
	for i := range inPlaceRows {
		v := rowBytes(i)
		s := le.AppendUint32(nil, uint32(len(v)))
		s = le.AppendUint64(s, uint64(i%10))
		body = append(body, append(s, v...))
	}
	config := []byte(`{"column_encodings":["int","bytes"]}`)
	shard := le.AppendUint32(nil, inPlaceRows)
	off := 4 + 4*(inPlaceRows+1) + len(config)
	for i := 0; i <= inPlaceRows; i++ {
		shard = le.AppendUint32(shard, uint32(off))
		if i < inPlaceRows {
			off += len(body[i])
		}
	}
	shard = append(shard, config...)
	for _, b := range body {
		shard = append(shard, b...)
	}
	idx, err := json.Marshal(map[string]any{"version": 2, "shards": []any{map[string]any{
		"column_names": []string{"label", "data"}, "column_encodings": []string{"int", "bytes"}, "column_sizes": []any{8, nil},
		"compression": nil, "format": "mds", "hashes": []string{}, "samples": inPlaceRows, "size_limit": 1 << 26, "version": 2,
		"raw_data": map[string]any{"basename": "shard.00000.mds", "bytes": len(shard), "hashes": map[string]any{}}, "zip_data": nil,
	}}})
	if err != nil {
		t.Fatal(err)
	}
	return inPlaceFiles{
		name: "mds", formats: []format.Format{mds.Format{}}, all: fmt.Sprintf("batch_size=%d", inPlaceRows),
		file: "shard.00000.mds", middle: valueIn(t, shard, rowBytes(inPlaceRows/2)),
		write: func(t testing.TB, st *s3backend.Local) {
			putFile(t, st, "shard.00000.mds", shard)
			putFile(t, st, "index.json", idx)
		},
	}
}

// megatronFiles is a Megatron dataset of uint16 tokens, one .bin of a
// few hundred KiB cut into chunks of 64 KiB; seq packs its documents into
// sequences of that many tokens (a token job) rather than serving them.
func megatronFiles(seq int) inPlaceFiles {
	docs := megatrontest.Corpus(1000, 2000, 50000, 3)
	bin, idx := megatrontest.Files("uint16", docs)
	f := inPlaceFiles{
		name: "megatron", formats: []format.Format{megatron.Format{}}, opts: format.Options{ChunkBytes: 64 << 10},
		all: fmt.Sprintf("batch_size=%d", len(docs)), file: "data/p0_text_document.bin", middle: int64(len(bin) / 2),
		write: func(t testing.TB, st *s3backend.Local) {
			putFile(t, st, "data/p0_text_document.bin", bin)
			putFile(t, st, "data/p0_text_document.idx", idx)
		},
	}
	if seq > 0 {
		f.name, f.all = "token job", fmt.Sprintf("seq=%d&batch_size=%d", seq, len(bin)/2/seq+len(docs))
	}
	return f
}

// valueIn is the offset of the middle of value in file, which holds it
// once.
func valueIn(t testing.TB, file, value []byte) int64 {
	i := bytes.Index(file, value)
	if i < 0 || bytes.Index(file[i+1:], value) >= 0 {
		t.Fatalf("the value is in the file %d times, want once", bytes.Count(file, value))
	}
	return int64(i + len(value)/2)
}

func putFile(t testing.TB, st *s3backend.Local, key string, b []byte) {
	t.Helper()
	if _, err := st.Put(context.Background(), key, bytes.NewReader(b), int64(len(b))); err != nil {
		t.Fatal(err)
	}
}

// store writes the dataset into a new local store and indexes it in
// place with opts (its format and options set here).
func (f inPlaceFiles) store(t testing.TB, opts dataset.InPlaceOptions) *s3backend.Local {
	t.Helper()
	st, err := s3backend.NewLocal(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	f.write(t, st)
	opts.Formats, opts.Options = f.formats, f.opts
	if _, err := dataset.IndexInPlace(context.Background(), st, st, opts); err != nil {
		t.Fatal(err)
	}
	return st
}

// serve starts a gateway of its own over st, its cache cold.
func (f inPlaceFiles) serve(t testing.TB, st s3backend.Store) string {
	t.Helper()
	_, srv := start(t, st, func(c *gateway.Config) { c.Datasets[0].Formats = f.formats })
	return srv.URL
}

// editMiddle changes, in place, the byte at off of the file key names in
// st: a same-size edit that neither the file's size nor its first and
// last 64 KiB show.
func editMiddle(t testing.TB, st *s3backend.Local, key string, off int64) {
	t.Helper()
	name := filepath.Join(st.Dir(), filepath.FromSlash(key))
	f, err := os.OpenFile(name, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		t.Fatal(err)
	}
	if off < 64<<10 || off >= fi.Size()-64<<10 {
		t.Fatalf("byte %d of a %d-byte file is not in its middle", off, fi.Size())
	}
	b := []byte{0}
	if _, err := f.ReadAt(b, off); err != nil {
		t.Fatal(err)
	}
	b[0] ^= 0x5a
	if _, err := f.WriteAt(b, off); err != nil {
		t.Fatal(err)
	}
}

// tarSamples splits a body of tar samples (a batch, a sample) into each
// sample's bytes — its members' headers, data and padding — by key, in
// order, and checks the body ends in the end-of-archive marker.
func tarSamples(t testing.TB, body []byte) (keys []string, samples map[string][]byte) {
	t.Helper()
	cr := &offsetReader{r: bytes.NewReader(body)}
	tr := tar.NewReader(cr)
	samples = map[string][]byte{}
	start, end := int64(0), int64(0) // of the sample being read, its last member's end
	for {
		at := end
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("not a tar: %v", err)
		}
		key, _ := chunkindex.SplitKey(h.Name)
		if len(keys) == 0 || keys[len(keys)-1] != key {
			if len(keys) > 0 {
				samples[keys[len(keys)-1]] = body[start:at]
			}
			keys, start = append(keys, key), at
		}
		if _, err := io.Copy(io.Discard, tr); err != nil {
			t.Fatal(err)
		}
		// The data read, the reader stands at its end; the padding
		// follows.
		end = cr.n + (chunkindex.BlockSize-h.Size%chunkindex.BlockSize)%chunkindex.BlockSize
	}
	if len(keys) > 0 {
		samples[keys[len(keys)-1]] = body[start:end]
	}
	if rest := body[end:]; !bytes.Equal(rest, make([]byte, len(chunkindex.EndOfArchive))) {
		t.Fatalf("the body ends in %d bytes after its last member, not the end-of-archive marker", len(rest))
	}
	return keys, samples
}

// offsetReader counts the bytes read through it.
type offsetReader struct {
	r io.Reader
	n int64
}

func (o *offsetReader) Read(p []byte) (int, error) {
	n, err := o.r.Read(p)
	o.n += int64(n)
	return n, err
}
