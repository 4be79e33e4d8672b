package catalog

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	pq "github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/compress"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"github.com/brandgw/brand/dataset"
	"github.com/brandgw/brand/format"
	"github.com/brandgw/brand/format/formattest"
	"github.com/brandgw/brand/format/parquet"
	"github.com/brandgw/brand/s3backend"
)

// streamingStore is a store that reads a range as a stream (as
// s3backend.S3 does), so that a format that decodes as its bytes arrive
// (format.Streamer: Parquet's binary columns) does so over a local store.
type streamingStore struct {
	s3backend.Store
	opened *atomic.Int64 // ranges opened
}

func (s streamingStore) OpenRange(ctx context.Context, key, etag string, off, n int64) (io.ReadCloser, error) {
	s.opened.Add(1)
	b := make([]byte, n)
	if err := s.ReadRange(ctx, key, etag, off, b); err != nil {
		return nil, err
	}
	return io.NopCloser(bytes.NewReader(b)), nil
}

// flipAt damages reads of one byte of one object: the next flips of them
// (all of them with -1), counting those it damaged.
type flipAt struct {
	s3backend.Store
	key string
	at  int64

	mu      sync.Mutex
	flips   int
	flipped int
}

func (f *flipAt) ReadRange(ctx context.Context, key, etag string, off int64, p []byte) error {
	if err := f.Store.ReadRange(ctx, key, etag, off, p); err != nil || key != f.key || f.at < off || f.at >= off+int64(len(p)) {
		return err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.flips != 0 {
		f.flips--
		f.flipped++
		p[f.at-off] ^= 0x20
	}
	return nil
}

// binaryParquet is a Parquet file of 60 rows of a binary column of 2 KiB
// values, uncompressed (which Parquet's decoder streams), and an integer.
func binaryParquet(t *testing.T) []byte {
	t.Helper()
	sc := arrow.NewSchema([]arrow.Field{{Name: "data", Type: arrow.BinaryTypes.Binary}, {Name: "label", Type: arrow.PrimitiveTypes.Int64}}, nil)
	var buf bytes.Buffer
	w, err := pqarrow.NewFileWriter(sc, &buf, pq.NewWriterProperties(pq.WithCompression(compress.Codecs.Uncompressed),
		pq.WithDictionaryDefault(false), pq.WithMaxRowGroupLength(20)), pqarrow.DefaultWriterProps())
	if err != nil {
		t.Fatal(err)
	}
	b := array.NewRecordBuilder(memory.DefaultAllocator, sc)
	defer b.Release()
	for i := range 60 {
		b.Field(0).(*array.BinaryBuilder).Append(bytes.Repeat([]byte(fmt.Sprintf("%04d", i)), 512))
		b.Field(1).(*array.Int64Builder).Append(int64(i))
	}
	rec := b.NewRecordBatch()
	defer rec.Release()
	if err := w.Write(rec); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// checkedDataset writes files into a local store, indexes them in place
// with f and checksums (or not), and opens the dataset reading its data
// through data(local), with a catalog holding it.
func checkedDataset(t *testing.T, f format.Format, files map[string][]byte, checksums bool, data func(s3backend.Store) s3backend.Store) (*Dataset, *Catalog, *s3backend.Local) {
	t.Helper()
	ctx := context.Background()
	local, err := s3backend.NewLocal(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	for k, b := range files {
		if _, err := local.Put(ctx, k, bytes.NewReader(b), int64(len(b))); err != nil {
			t.Fatal(err)
		}
	}
	res, err := dataset.IndexInPlace(ctx, local, local, dataset.InPlaceOptions{Formats: []format.Format{f}, Checksums: checksums,
		Options: format.Options{ChunkBytes: 4 << 10}})
	if err != nil {
		t.Fatal(err)
	}
	st := data(local)
	ip, err := openInPlace(ctx, opening{formats: []format.Format{f}}, st, res.Index)
	if err != nil {
		t.Fatal(err)
	}
	d := NewDataset("d", "file:///d", st, res.Index)
	d.InPlace = ip
	c := New([]string{"d"}, "d", NewMetrics(prometheus.NewRegistry()), zerolog.Nop())
	c.Add(d)
	c.MarkReady()
	return d, c, local
}

// loadAllChunks loads every chunk of d with l, returning the first error.
func loadAllChunks(d *Dataset, l Loader) error {
	for ch := range d.Index.NumChunks() {
		req := d.ChunkRequest(ch)
		if err := l.Load(context.Background(), req.Key, make([]byte, req.Size)); err != nil {
			return err
		}
	}
	return nil
}

// The loader reads a chunk served in place pinned to the version its
// index recorded, and checks the bytes against an index's checksums
// before decoding them: on a local store, a file edited in the middle
// since it was indexed is s3backend.ErrChanged naming the file (its
// identity changed); with checksums, bytes that differ on every read are
// a chunk damaged at rest naming the bytes, and bytes damaged on one read
// only are read again and served — the same whether the chunk is decoded
// from bytes read whole or as they arrive (format.Streamer).
func TestLoaderChecksInPlaceBytes(t *testing.T) {
	var lines []string
	for i := range 200 {
		lines = append(lines, fmt.Sprintf("line %03d %s", i, strings.Repeat("z", 40)))
	}
	sources := []struct {
		name   string
		format format.Format
		files  map[string][]byte
		object string
		data   func(s3backend.Store) s3backend.Store
	}{
		{"lines", formattest.Lines{}, formattest.Write(map[string][]string{"a.lines": lines}), "a.lines",
			func(s s3backend.Store) s3backend.Store { return s }},
		{"parquet, read whole", parquet.Format{}, map[string][]byte{"a.parquet": binaryParquet(t)}, "a.parquet",
			func(s s3backend.Store) s3backend.Store { return s }},
		{"parquet, streamed", parquet.Format{}, map[string][]byte{"a.parquet": binaryParquet(t)}, "a.parquet",
			nil},
	}
	var opened atomic.Int64
	sources[2].data = func(s s3backend.Store) s3backend.Store { return streamingStore{s, &opened} }
	for _, src := range sources {
		t.Run(src.name, func(t *testing.T) {
			// Without checksums: the file's identity.
			d, c, local := checkedDataset(t, src.format, src.files, false, src.data)
			if err := loadAllChunks(d, NewLoader(c, time.Minute, 0)); err != nil {
				t.Fatal(err)
			}
			name := filepath.Join(local.Dir(), src.object)
			b, err := os.ReadFile(name)
			if err != nil {
				t.Fatal(err)
			}
			b[len(b)/2] ^= 1
			if err := os.WriteFile(name, b, 0o644); err != nil { // in place: the same inode
				t.Fatal(err)
			}
			later := time.Now().Add(time.Second)
			os.Chtimes(name, later, later) // past any timestamp tick of the index's
			err = loadAllChunks(d, NewLoader(c, time.Minute, 0))
			if !errors.Is(err, s3backend.ErrChanged) || !strings.Contains(err.Error(), src.object) {
				t.Fatalf("a file edited since it was indexed: %v, want ErrChanged naming it", err)
			}

			// With checksums.
			d, c, local = checkedDataset(t, src.format, src.files, true, src.data)
			if err := loadAllChunks(d, NewLoader(c, time.Minute, 0)); err != nil {
				t.Fatal(err)
			}
			flip := &flipAt{Store: local, key: src.object, at: int64(len(src.files[src.object]) / 2), flips: 1}
			d.InPlace.Data = src.data(flip)
			if err := loadAllChunks(d, NewLoader(c, time.Minute, 1)); err != nil || flip.flipped != 1 {
				t.Fatalf("a byte damaged on one read (%d damaged), read again: %v", flip.flipped, err)
			}
			// Damaged on every read: read 1 + rereads times, the loader's
			// one setting (--checksum-rereads) as for a tar chunk, and
			// told as a file to index again, not a chunk to re-pack.
			for _, rereads := range []int{0, 1, 3} {
				flip.flips, flip.flipped = -1, 0
				err = loadAllChunks(d, NewLoader(c, time.Minute, rereads))
				var dce *DamagedChunkError
				if !errors.As(err, &dce) || !errors.Is(err, ErrCorrupt) || dce.Reads != 1+rereads ||
					!strings.Contains(err.Error(), src.object) || !strings.Contains(err.Error(), "CRC32C") {
					t.Fatalf("a byte damaged on every read, %d re-reads: %v, want a chunk damaged at rest after %d reads naming the bytes", rereads, err, 1+rereads)
				}
				if flip.flipped != 1+rereads {
					t.Errorf("%d re-reads: the damaged range read %d times, want %d", rereads, flip.flipped, 1+rereads)
				}
				for _, msg := range []string{err.Error(), dce.Public()} {
					if !strings.Contains(msg, "index") || strings.Contains(msg, "re-pack") {
						t.Errorf("%q: want it to say to index the file again, not to re-pack it", msg)
					}
				}
				if !strings.Contains(dce.Public(), "CRC32C") {
					t.Errorf("%q does not say the cause", dce.Public())
				}
			}
			if strings.Contains(src.name, "streamed") && opened.Load() == 0 {
				t.Fatal("no range was streamed")
			}
		})
	}
}
