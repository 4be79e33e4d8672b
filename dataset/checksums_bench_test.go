package dataset_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/brandgw/brand/dataset"
	"github.com/brandgw/brand/dataset/stored"
	"github.com/brandgw/brand/format"
	"github.com/brandgw/brand/format/megatron"
	"github.com/brandgw/brand/format/megatron/megatrontest"
	"github.com/brandgw/brand/s3backend"
)

// benchTokens writes a Megatron dataset of about 64 MiB of uint16
// tokens into a local store, its times an hour back (settled), and
// returns the .bin's size.
func benchTokens(b *testing.B) (*s3backend.Local, int64) {
	st, err := s3backend.NewLocal(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	bin, idx := megatrontest.Files("uint16", megatrontest.Corpus(40000, 3000, 50000, 1))
	for k, v := range map[string][]byte{"data/p_text_document.bin": bin, "data/p_text_document.idx": idx} {
		if _, err := st.Put(context.Background(), k, bytes.NewReader(v), int64(len(v))); err != nil {
			b.Fatal(err)
		}
		at := time.Now().Add(-time.Hour)
		if err := os.Chtimes(filepath.Join(st.Dir(), k), at, at); err != nil {
			b.Fatal(err)
		}
	}
	return st, int64(len(bin))
}

// BenchmarkIndexInPlaceChecksums measures indexing a Megatron dataset in
// place on a local store (page cache, no network): its .idx alone, and
// with checksums, which read every byte of its .bin once. The bytes per
// second are the .bin's.
func BenchmarkIndexInPlaceChecksums(b *testing.B) {
	ctx := context.Background()
	st, size := benchTokens(b)
	for _, checksums := range []bool{false, true} {
		b.Run(fmt.Sprintf("checksums=%t", checksums), func(b *testing.B) {
			b.SetBytes(size)
			for b.Loop() {
				_, err := dataset.IndexInPlace(ctx, st, st, dataset.InPlaceOptions{Formats: []format.Format{megatron.Format{}}, Checksums: checksums})
				if err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkCheckSpans measures what checksums add to a chunk's load: the
// CRC32C of its bytes as read (a Megatron chunk of 64 MiB, the default).
func BenchmarkCheckSpans(b *testing.B) {
	ctx := context.Background()
	st, _ := benchTokens(b)
	res, err := dataset.IndexInPlace(ctx, st, st, dataset.InPlaceOptions{Formats: []format.Format{megatron.Format{}}, Checksums: true})
	if err != nil {
		b.Fatal(err)
	}
	ix := res.Index
	spans := ix.Spans(0)
	r := format.Range{Off: spans[0].Off, Len: spans[len(spans)-1].End() - spans[0].Off}
	src := make([]byte, r.Len)
	if err := st.ReadRange(ctx, stored.ChunkObject(ix.Chunk(0).Key), ix.Chunk(0).ETag, r.Off, src); err != nil {
		b.Fatal(err)
	}
	b.SetBytes(r.Len)
	for b.Loop() {
		if err := stored.CheckSpans(ix, 0, "bench", []format.Range{r}, src); err != nil {
			b.Fatal(err)
		}
	}
}
