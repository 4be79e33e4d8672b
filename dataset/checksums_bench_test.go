package dataset_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/brandgw/brand/dataset"
	"github.com/brandgw/brand/dataset/stored"
	"github.com/brandgw/brand/format"
	"github.com/brandgw/brand/format/megatron"
	"github.com/brandgw/brand/format/megatron/megatrontest"
	"github.com/brandgw/brand/format/video"
	"github.com/brandgw/brand/internal/testsupport/videotest"
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

// byteCounter is an s3backend.Observer counting the reads of a store.
type byteCounter struct{ reads, bytes atomic.Int64 }

func (c *byteCounter) ObserveBackend(op string, n int64, _ time.Duration, _ error) {
	if op == s3backend.OpGet {
		c.reads.Add(1)
		c.bytes.Add(n)
	}
}

// BenchmarkIndexVideoChecksums measures what a tree of videos costs to
// index on a local store (page cache, no network): its metadata alone
// (--checksums=false, what every video index was before per-GOP
// checksums), and with the CRC32C of every GOP (the default), which
// reads every GOP's bytes once. 32 copies of a 10-second 320×240 H.264
// at 25 fps, a keyframe a second (a Kinetics-sized clip); the bytes per
// second are the files'.
func BenchmarkIndexVideoChecksums(b *testing.B) {
	ctx := context.Background()
	ffmpeg, _ := videotest.Tools(b)
	src := filepath.Join(b.TempDir(), "clip.mp4")
	videotest.Run(b, ffmpeg, "-hide_banner", "-loglevel", "error", "-nostdin", "-y", "-f", "lavfi", "-i", "testsrc2=size=320x240:rate=25:duration=10",
		"-c:v", "libx264", "-pix_fmt", "yuv420p", "-g", "25", "-crf", "18", "-map_metadata", "-1", "-fflags", "+bitexact", src)
	clip, err := os.ReadFile(src)
	if err != nil {
		b.Fatal(err)
	}
	const files = 32
	dir := b.TempDir()
	at := time.Now().Add(-time.Hour)
	for i := range files {
		p := filepath.Join(dir, "train", fmt.Sprintf("c%d", i%4), fmt.Sprintf("%03d.mp4", i))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			b.Fatal(err)
		}
		if err := os.WriteFile(p, clip, 0o644); err != nil {
			b.Fatal(err)
		}
		if err := os.Chtimes(p, at, at); err != nil {
			b.Fatal(err)
		}
	}
	count := &byteCounter{}
	st, err := s3backend.Open(ctx, dir, s3backend.Config{Observer: count})
	if err != nil {
		b.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		opts dataset.InPlaceOptions
	}{
		{"metadata-only", dataset.InPlaceOptions{NoChecksums: true}},
		{"per-GOP-CRC32C", dataset.InPlaceOptions{}},
	} {
		b.Run(tc.name, func(b *testing.B) {
			tc.opts.Formats = []format.Format{video.Format{}}
			b.SetBytes(files * int64(len(clip)))
			count.reads.Store(0)
			count.bytes.Store(0)
			for b.Loop() {
				if _, err := dataset.IndexInPlace(ctx, st, st, tc.opts); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Microseconds())/1e3/float64(b.N)/files, "ms/file")
			b.ReportMetric(float64(count.bytes.Load())/float64(b.N)/files, "B-read/file")
			b.ReportMetric(float64(count.reads.Load())/float64(b.N)/files, "reads/file")
			b.ReportMetric(float64(len(clip)), "B/file")
		})
	}
}
