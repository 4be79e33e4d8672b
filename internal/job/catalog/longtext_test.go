package catalog

import (
	"bytes"
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	pq "github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/compress"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"

	"github.com/brandgw/brand/format"
	"github.com/brandgw/brand/format/parquet"
	"github.com/brandgw/brand/s3backend"
)

// reservations records what a loader reserves.
type reservations struct {
	mu sync.Mutex
	n  []int64
}

func (r *reservations) Reserve(_ context.Context, n int64) (func(), error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.n = append(r.n, n)
	return func() {}, nil
}

// TestLoaderLeavesLongTextsUnread is issue 80, case 3's loader half: a
// loader with a text bound (WithTexts) decodes a Parquet chunk holding a
// text past it with that row written unread, naming its field and bytes,
// and every other row as it is; it reserves what that decode takes
// (format.TextBound.LongTexts) before reading; the chunk is asked for
// with the size it was found to need from then on (fit), far below its
// bound, and loads again into that. Without a bound the text is decoded.
func TestLoaderLeavesLongTextsUnread(t *testing.T) {
	const big, most = 4 << 20, 64 << 10
	sc := arrow.NewSchema([]arrow.Field{{Name: "image", Type: arrow.BinaryTypes.Binary}, {Name: "caption", Type: arrow.BinaryTypes.String}}, nil)
	var buf bytes.Buffer
	w, err := pqarrow.NewFileWriter(sc, &buf, pq.NewWriterProperties(pq.WithCompression(compress.Codecs.Snappy)), pqarrow.DefaultWriterProps())
	if err != nil {
		t.Fatal(err)
	}
	b := array.NewRecordBuilder(memory.DefaultAllocator, sc)
	defer b.Release()
	for i := range 6 {
		b.Field(0).(*array.BinaryBuilder).Append([]byte("\x89PNG an image"))
		text := "a short caption"
		if i == 2 {
			text = strings.Repeat("a long caption ", big/15)
		}
		b.Field(1).(*array.StringBuilder).Append(text)
	}
	rec := b.NewRecordBatch()
	defer rec.Release()
	if err := w.Write(rec); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	files := map[string][]byte{"a.parquet": buf.Bytes()}
	for _, bounded := range []bool{true, false} {
		d, cat, _ := checkedDataset(t, parquet.Format{}, files, false, func(s s3backend.Store) s3backend.Store { return s })
		var res reservations
		l := NewLoader(cat, time.Minute, 0).WithMemory(unbounded{}, &res)
		if bounded {
			l = l.WithTexts(most)
		}
		working, long := d.InPlace.longTexts(0, most)
		if !long {
			t.Fatal("longTexts: the chunk holds no text past the bound, its statistics say")
		}
		before := d.ChunkSize(0)
		req := d.ChunkRequest(0)
		chunk := make([]byte, req.Size)
		if err := l.Load(context.Background(), req.Key, chunk); err != nil {
			t.Fatal(err)
		}
		tab, err := format.Verify(chunk)
		if err != nil {
			t.Fatal(err)
		}
		for i := range tab.Len() {
			off, n, _ := tab.Sample(i)
			why, unread := format.SampleUnread(chunk[off : off+n])
			switch {
			case bounded && i == 2 && (!unread || !strings.Contains(why, "field caption holds a text of") || !strings.Contains(why, "more than the 65536")):
				t.Errorf("sample 2: unread %v (%q); want it unread naming its field and bytes", unread, why)
			case (!bounded || i != 2) && unread:
				t.Errorf("sample %d written unread (bound %v): %s", i, bounded, why)
			case !bounded && i == 2 && n < big:
				t.Errorf("sample 2 without a bound: %d bytes; want its text", n)
			}
		}
		if !bounded {
			if d.ChunkSize(0) != before {
				t.Errorf("without a bound the chunk's size changed: %d, was %d", d.ChunkSize(0), before)
			}
			continue
		}
		if len(res.n) != 1 || res.n[0] != working {
			t.Errorf("reserved %v; want what the decode without the long text takes, %d", res.n, working)
		}
		if after := d.ChunkSize(0); after != tab.Need() || after > before/8 {
			t.Errorf("the chunk's size after its load: %d (bound %d, its resident form %d); want what it holds", after, before, tab.Need())
		}
		req = d.ChunkRequest(0)
		again := make([]byte, req.Size)
		if err := l.Load(context.Background(), req.Key, again); err != nil {
			t.Fatalf("loading again into the size learnt: %v", err)
		}
		if end := tab.Need() - format.Overhead(tab.Len()); !bytes.Equal(again[:end], chunk[:end]) {
			t.Error("the chunk loaded again into the size learnt holds other samples")
		}
	}
}
