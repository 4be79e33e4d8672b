package dataset

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/iotest"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	pq "github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"

	"github.com/brandgw/brand/chunkindex"
	"github.com/brandgw/brand/dataset/stored"
	"github.com/brandgw/brand/format"
	"github.com/brandgw/brand/format/formattest"
	"github.com/brandgw/brand/format/parquet"
	"github.com/brandgw/brand/s3backend"
)

// wideParquet is a Parquet file of three columns (binary, integer,
// string) in row groups of 10 rows, 40 rows.
func wideParquet(t *testing.T) []byte {
	t.Helper()
	sc := arrow.NewSchema([]arrow.Field{
		{Name: "blob", Type: arrow.BinaryTypes.Binary}, {Name: "label", Type: arrow.PrimitiveTypes.Int64},
		{Name: "text", Type: arrow.BinaryTypes.String}}, nil)
	var buf bytes.Buffer
	w, err := pqarrow.NewFileWriter(sc, &buf, pq.NewWriterProperties(pq.WithMaxRowGroupLength(10)), pqarrow.DefaultWriterProps())
	if err != nil {
		t.Fatal(err)
	}
	b := array.NewRecordBuilder(memory.DefaultAllocator, sc)
	defer b.Release()
	for i := range 40 {
		b.Field(0).(*array.BinaryBuilder).Append(bytes.Repeat([]byte{byte(i)}, 300+i))
		b.Field(1).(*array.Int64Builder).Append(int64(i))
		b.Field(2).(*array.StringBuilder).Append(fmt.Sprintf("row %d", i))
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

// The spans of an index with checksums make every range a chunk is read
// in with any selection of its fields — a Parquet chunk of two row
// groups, three columns, each column's chunks apart from the others' —
// and together they are the bytes it is read in with every field, each
// with the CRC32C of the file's bytes there.
func TestSpansMakeEverySelection(t *testing.T) {
	ctx := context.Background()
	st := newLocal(t)
	file := wideParquet(t)
	putAll(t, st, map[string][]byte{"data/a.parquet": file})
	res, err := IndexInPlace(ctx, st, st, InPlaceOptions{Formats: []format.Format{parquet.Format{}}, Checksums: true,
		Options: format.Options{ChunkBytes: 2 * int64(len(file)) / 5}})
	if err != nil {
		t.Fatal(err)
	}
	ix := res.Index
	meta, err := stored.ReadFormat(ctx, st, ix)
	if err != nil {
		t.Fatal(err)
	}
	dec, err := parquet.Format{}.Open(meta)
	if err != nil {
		t.Fatal(err)
	}
	if !ix.Checksummed() || ix.NumChunks() < 2 {
		t.Fatalf("checksummed %t, %d chunks", ix.Checksummed(), ix.NumChunks())
	}
	for c := range ix.NumChunks() {
		spans := ix.Spans(c)
		all, _ := dec.Extent(c, nil)
		var covered []format.Range
		for _, s := range spans {
			covered = append(covered, format.Range{Off: s.Off, Len: s.Len})
			if got := crc(file[s.Off:s.End()]); got != s.CRC {
				t.Errorf("chunk %d: span %d+%d has CRC32C %08x, the file %08x", c, s.Off, s.Len, s.CRC, got)
			}
		}
		if m := format.Merge(covered); fmt.Sprint(m) != fmt.Sprint(all) {
			t.Errorf("chunk %d: spans cover %v, the chunk is read in %v", c, m, all)
		}
		for mask := 1; mask < 8; mask++ {
			var sel format.Selection
			for f := range 3 {
				if mask&(1<<f) != 0 {
					sel = append(sel, f)
				}
			}
			if mask == 7 {
				sel = nil
			}
			rs, _ := dec.Extent(c, sel)
			src := make([]byte, format.Concat(rs))
			at := int64(0)
			for _, r := range rs {
				copy(src[at:], file[r.Off:r.End()])
				at += r.Len
			}
			if err := stored.CheckSpans(ix, c, "data/a.parquet", rs, src); err != nil {
				t.Errorf("chunk %d, fields %v: %v", c, sel, err)
			}
			if len(src) > 0 {
				src[len(src)/2] ^= 1
				if err := stored.CheckSpans(ix, c, "data/a.parquet", rs, src); !errors.Is(err, stored.ErrChecksum) {
					t.Errorf("chunk %d, fields %v, a byte changed: %v, want ErrChecksum", c, sel, err)
				}
			}
		}
	}
}

func crc(b []byte) uint32 { return crc32.Checksum(b, castagnoli) }

// setMtime sets a file's modification time.
func setMtime(t *testing.T, st *s3backend.Local, key string, at time.Time) {
	t.Helper()
	if err := os.Chtimes(filepath.Join(st.Dir(), filepath.FromSlash(key)), at, at); err != nil {
		t.Fatal(err)
	}
}

// editMiddle changes one byte in the middle of a file, in place.
func editMiddle(t *testing.T, st *s3backend.Local, key string) {
	t.Helper()
	name := filepath.Join(st.Dir(), filepath.FromSlash(key))
	b, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(name, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteAt([]byte{b[len(b)/2] ^ 1}, int64(len(b)/2)); err != nil {
		t.Fatal(err)
	}
}

// verifyLines opens the Lines dataset indexed in st and verifies it.
func verifyLines(t *testing.T, st *s3backend.Local) *VerifyReport {
	t.Helper()
	ctx := context.Background()
	ix, err := stored.ReadIndex(ctx, st)
	if err != nil {
		t.Fatal(err)
	}
	meta, err := stored.ReadFormat(ctx, st, ix)
	if err != nil {
		t.Fatal(err)
	}
	dec, err := formattest.Lines{}.Open(meta)
	if err != nil {
		t.Fatal(err)
	}
	rep, err := VerifyInPlace(ctx, st, ix, dec, 2, nil)
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

// linesStore is a local store of one .lines file of 2,000 lines (well
// over the 128 KiB a content ETag hashes), its modification time an hour
// back, indexed in place with opts.
func linesStore(t *testing.T, opts InPlaceOptions) (*s3backend.Local, *chunkindex.Index) {
	t.Helper()
	st := newLocal(t)
	var lines []string
	for i := range 2000 {
		lines = append(lines, fmt.Sprintf("line %04d %s", i, strings.Repeat("x", 90)))
	}
	putAll(t, st, formattest.Write(map[string][]string{"data/a.lines": lines}))
	setMtime(t, st, "data/a.lines", time.Now().Add(-time.Hour))
	opts.Formats, opts.Options = []format.Format{formattest.Lines{}}, format.Options{ChunkBytes: 16 << 10}
	res, err := IndexInPlace(context.Background(), st, st, opts)
	if err != nil {
		t.Fatal(err)
	}
	return st, res.Index
}

// A local file indexed without checksums is recorded by its identity,
// its size and modification time: a same-size edit of its middle and a
// touch are each a chunk changed (brand inspect --verify), a copy keeping
// its times is not. With checksums it is recorded by its content ETag
// and every range's CRC32C: a touch reads, an edit of the middle is a
// checksum mismatch naming the bytes.
func TestIndexInPlaceVersions(t *testing.T) {
	ctx := context.Background()
	for _, tt := range []struct {
		name      string
		checksums bool
		change    func(t *testing.T, st *s3backend.Local)
		want      ProblemKind // "" for none
	}{
		{"identity, untouched", false, func(*testing.T, *s3backend.Local) {}, ""},
		{"identity, middle edited", false, func(t *testing.T, st *s3backend.Local) { editMiddle(t, st, "data/a.lines") }, ChunkChanged},
		{"identity, touched", false, func(t *testing.T, st *s3backend.Local) { setMtime(t, st, "data/a.lines", time.Now()) }, ChunkChanged},
		{"identity, copied keeping times", false, func(t *testing.T, st *s3backend.Local) {
			name := filepath.Join(st.Dir(), "data/a.lines")
			fi, _ := os.Stat(name)
			b, _ := os.ReadFile(name)
			os.Remove(name)
			os.WriteFile(name, b, 0o644)
			os.Chtimes(name, fi.ModTime(), fi.ModTime())
		}, ""},
		{"checksums, untouched", true, func(*testing.T, *s3backend.Local) {}, ""},
		{"checksums, touched", true, func(t *testing.T, st *s3backend.Local) { setMtime(t, st, "data/a.lines", time.Now()) }, ""},
		{"checksums, middle edited", true, func(t *testing.T, st *s3backend.Local) { editMiddle(t, st, "data/a.lines") }, ChunkChecksum},
	} {
		t.Run(tt.name, func(t *testing.T) {
			st, ix := linesStore(t, InPlaceOptions{Checksums: tt.checksums})
			fi, err := os.Stat(filepath.Join(st.Dir(), "data/a.lines"))
			if err != nil {
				t.Fatal(err)
			}
			content, _ := st.Stat(ctx, "data/a.lines")
			identity := fmt.Sprintf("%x-%x", fi.Size(), fi.ModTime().UnixNano())
			for c := range ix.NumChunks() {
				if want := map[bool]string{false: identity, true: content.ETag}[tt.checksums]; ix.Chunk(c).ETag != want {
					t.Fatalf("chunk %d is recorded with ETag %q, want %q", c, ix.Chunk(c).ETag, want)
				}
			}
			if ix.Checksummed() != tt.checksums {
				t.Fatalf("checksummed: %t", ix.Checksummed())
			}
			tt.change(t, st)
			if c, _ := st.Stat(ctx, "data/a.lines"); c.ETag != content.ETag {
				t.Fatal("the change is seen by the content ETag: the test no longer tests what only the identity or the checksums see")
			}
			rep := verifyLines(t, st)
			switch {
			case tt.want == "" && !rep.OK():
				t.Errorf("problems: %v", rep.Problems)
			case tt.want != "" && (rep.OK() || rep.Problems[0].Kind != tt.want || !strings.Contains(rep.Problems[0].Detail, "data/a.lines")):
				t.Errorf("problems %v, want %s naming the file", rep.Problems, tt.want)
			}
		})
	}
}

// A file modified less than its settle time before it is listed is
// waited for before its identity is recorded; one whose time stays ahead
// of the clock (being written, or a file server's clock ahead) is
// refused, saying so.
func TestIndexInPlaceWaitsToSettle(t *testing.T) {
	ctx := context.Background()
	st := newLocal(t)
	putAll(t, st, formattest.Write(map[string][]string{"a.lines": {"x", "y"}}))
	fs := []format.Format{formattest.Lines{}}
	if _, err := IndexInPlace(ctx, st, st, InPlaceOptions{Formats: fs}); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(filepath.Join(st.Dir(), "a.lines"))
	if err != nil {
		t.Fatal(err)
	}
	if since := time.Since(fi.ModTime()); since < s3backend.SettleOf(fi.ModTime()) {
		t.Fatalf("indexed %v after the file was written, within its settle time %v", since, s3backend.SettleOf(fi.ModTime()))
	}
	setMtime(t, st, "a.lines", time.Now().Add(time.Hour))
	_, err = IndexInPlace(ctx, st, st, InPlaceOptions{Formats: fs})
	if err == nil || !strings.Contains(err.Error(), "being written") || !strings.Contains(err.Error(), "a.lines") {
		t.Fatalf("a file modified in the future: %v", err)
	}
}

// A stream read through a stored.SpanChecker checks each span as it passes,
// however the reads cut it: a changed byte fails the read that completes
// its span and Err; a range not read whole is not checked, which Err
// says.
func TestSpanChecker(t *testing.T) {
	st, ix := linesStore(t, InPlaceOptions{Checksums: true})
	file, err := os.ReadFile(filepath.Join(st.Dir(), "data/a.lines"))
	if err != nil {
		t.Fatal(err)
	}
	spans := ix.Spans(1)
	r := format.Range{Off: spans[0].Off, Len: spans[len(spans)-1].End() - spans[0].Off}
	read := func(b []byte, whole bool) (*stored.SpanChecker, error) {
		k := stored.NewSpanChecker(ix, 1, "data/a.lines")
		rc, err := k.Wrap(r, io.NopCloser(iotest.OneByteReader(bytes.NewReader(b))))
		if err != nil {
			t.Fatal(err)
		}
		defer rc.Close()
		if !whole {
			_, err := io.ReadFull(rc, make([]byte, len(b)-1))
			return k, err
		}
		_, err = io.ReadAll(rc)
		return k, err
	}
	good := file[r.Off:r.End()]
	if k, err := read(good, true); err != nil || k.Err() != nil {
		t.Fatalf("the file's bytes: %v, %v", err, k.Err())
	}
	bad := bytes.Clone(good)
	bad[len(bad)/3] ^= 1
	if k, err := read(bad, true); !errors.Is(err, stored.ErrChecksum) || !errors.Is(k.Err(), stored.ErrChecksum) {
		t.Fatalf("a byte changed: %v, %v", err, k.Err())
	}
	if k, err := read(good, false); err != nil || k.Err() == nil {
		t.Fatalf("a range not read whole: %v, Err %v", err, k.Err())
	}
	if _, err := stored.NewSpanChecker(ix, 1, "data/a.lines").Wrap(format.Range{Off: r.Off + 1, Len: 10}, io.NopCloser(nil)); !errors.Is(err, chunkindex.ErrCorrupt) {
		t.Fatalf("a range that is not whole spans: %v", err)
	}
}
