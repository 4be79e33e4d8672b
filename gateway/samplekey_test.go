package gateway_test

import (
	"bytes"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	pq "github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/compress"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"

	"github.com/brandgw/brand/dataset"
	"github.com/brandgw/brand/format"
	"github.com/brandgw/brand/format/parquet"
	"github.com/brandgw/brand/s3backend"
)

// parquetTokenFiles is a token dataset in Parquet: a list<int32> column
// "ids" of documents of tokens (indexed with Options.Tokens), and a text
// column.
func parquetTokenFiles(t testing.TB) inPlaceFiles {
	sc := arrow.NewSchema([]arrow.Field{{Name: "ids", Type: arrow.ListOf(arrow.PrimitiveTypes.Int32)}, {Name: "text", Type: arrow.BinaryTypes.String}}, nil)
	var buf bytes.Buffer
	w, err := pqarrow.NewFileWriter(sc, &buf, pq.NewWriterProperties(pq.WithCompression(compress.Codecs.Snappy)), pqarrow.DefaultWriterProps())
	if err != nil {
		t.Fatal(err)
	}
	b := array.NewRecordBuilder(memory.DefaultAllocator, sc)
	lb := b.Field(0).(*array.ListBuilder)
	vb := lb.ValueBuilder().(*array.Int32Builder)
	for d := range 60 {
		lb.Append(true)
		for k := range 1 + d*7%90 {
			vb.Append(int32(d*1000 + k))
		}
		b.Field(1).(*array.StringBuilder).Append(fmt.Sprintf("document %d", d))
	}
	rec := b.NewRecordBatch()
	if err := w.Write(rec); err != nil {
		t.Fatal(err)
	}
	rec.Release()
	b.Release()
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	file := buf.Bytes()
	return inPlaceFiles{
		name: "tokens", formats: []format.Format{parquet.Format{}}, opts: format.Options{Tokens: "ids"}, all: "batch_size=60",
		write: func(t testing.TB, st *s3backend.Local) { putFile(t, st, "docs/part-0.parquet", file) },
	}
}

// GET /samples/{key} answers each sample of a dataset of every format —
// packed tar chunks, Parquet, MDS, Megatron, a token dataset — as the tar
// of its members a batch serves it in: the same bytes as the sample's
// part of a batch that holds it, ending in the end-of-archive marker, its
// Content-Length the body's; a HEAD claims no other length. (The
// reproduction: a 1,024-byte tar for every sample of a dataset served in
// place, whose length came from its deferred index, where it is 0.)
func TestSampleByKeyEveryFormat(t *testing.T) {
	type sampled struct {
		url, all string
		samples  int
	}
	cases := map[string]func(t *testing.T) sampled{
		"tar": func(t *testing.T) sampled {
			f := newFixture(t, 3, 7)
			_, srv := start(t, f.store, nil)
			return sampled{srv.URL, "batch_size=21", 21}
		},
	}
	for _, files := range []inPlaceFiles{parquetFiles(t), mdsFiles(t), megatronFiles(0), parquetTokenFiles(t)} {
		cases[files.name] = func(t *testing.T) sampled {
			st := files.store(t, dataset.InPlaceOptions{})
			n, _ := strconv.Atoi(strings.TrimPrefix(files.all, "batch_size="))
			return sampled{files.serve(t, st), files.all, n}
		}
	}
	for name, setup := range cases {
		t.Run(name, func(t *testing.T) {
			s := setup(t)
			resp, body := get(t, s.url+"/epoch/0/batch/0?"+s.all)
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("batch: %s %s", resp.Status, body)
			}
			keys, inBatch := tarSamples(t, body)
			if len(keys) != s.samples {
				t.Fatalf("batch 0 holds %d samples, want all %d", len(keys), s.samples)
			}
			for _, key := range keys {
				u := s.url + "/samples/" + (&url.URL{Path: key}).EscapedPath()
				resp, got := get(t, u)
				want := append(bytes.Clone(inBatch[key]), make([]byte, 1024)...)
				if resp.StatusCode != http.StatusOK || !bytes.Equal(got, want) {
					t.Fatalf("/samples/%s: %s, %d bytes, want the batch's %d bytes of it and the end-of-archive marker (equal: %t)",
						key, resp.Status, len(got), len(want), bytes.Equal(got, want))
				}
				if cl := resp.Header.Get("Content-Length"); cl != strconv.Itoa(len(got)) {
					t.Fatalf("/samples/%s: Content-Length %s, body %d bytes", key, cl, len(got))
				}
				head, _ := do(t, http.MethodHead, u, nil)
				if cl := head.Header.Get("Content-Length"); head.StatusCode != http.StatusOK || cl != "" && cl != strconv.Itoa(len(got)) {
					t.Fatalf("HEAD /samples/%s: %s, Content-Length %q; the GET's body is %d bytes", key, head.Status, cl, len(got))
				}
			}
		})
	}
}
