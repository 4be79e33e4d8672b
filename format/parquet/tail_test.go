package parquet

import (
	"context"
	"encoding/binary"
	"testing"

	pq "github.com/apache/arrow-go/v18/parquet"

	"github.com/brandgw/brand/format"
)

// footerLen is a Parquet file's footer with its length and magic.
func footerLen(b []byte) int64 { return int64(binary.LittleEndian.Uint32(b[len(b)-8:])) + 8 }

// TestTailReadFromFirstFooter checks what indexing reads of each file: the
// first file's last 64 KiB, every other's last tailFor(the first's
// footer), and for a file whose footer is longer than that one read more
// of the rest, which it indexes from as it would alone. Reading 64 KiB of
// every file made the tail 37 % of a dataset of 173 KiB files.
func TestTailReadFromFirstFooter(t *testing.T) {
	rows := hubRows(600, 4<<10)
	few := writeArrow(t, imageSchema, pq.NewWriterProperties(pq.WithMaxRowGroupLength(300)), imageRecord(rows))
	many := writeArrow(t, imageSchema, pq.NewWriterProperties(pq.WithMaxRowGroupLength(5)), imageRecord(rows))
	guess := tailFor(footerLen(few))
	if footerLen(many) <= guess || int64(len(few)) <= tailRead {
		t.Fatalf("the files do not test it: footers of %d and %d bytes, a guess of %d, files of %d bytes", footerLen(few), footerLen(many), guess, len(few))
	}
	st := newStore()
	st.put("data/a.parquet", few)
	st.put("data/b.parquet", few)
	st.put("data/c.parquet", many)
	lay, err := Format{}.Index(context.Background(), st, st.listing(), format.Options{ChunkBytes: 1})
	if err != nil {
		t.Fatal(err)
	}
	want := tailRead + guess + guess + (footerLen(many) - guess)
	if read := st.Total().Sum(); read.Bytes != want || read.Reads != 4 {
		t.Errorf("indexing read %d bytes in %d reads; want %d in 4 (64 KiB, a guess of %d twice, and the rest of a footer of %d)",
			read.Bytes, read.Reads, want, guess, footerLen(many))
	}
	if len(lay.Keys) != 1800 || len(lay.Chunks) != 2+2+120 {
		t.Errorf("%d samples in %d chunks; want 1800 in 124", len(lay.Keys), len(lay.Chunks))
	}

	// The same dataset indexed with every file read whole describes it
	// alike: what a read costs does not change the index.
	whole := newStore()
	whole.put("data/c.parquet", many)
	alone, err := Format{}.Index(context.Background(), whole, whole.listing(), format.Options{ChunkBytes: 1})
	if err != nil {
		t.Fatal(err)
	}
	if got := lay.Chunks[4:]; len(got) != len(alone.Chunks) || got[0] != alone.Chunks[0] || got[len(got)-1] != alone.Chunks[len(alone.Chunks)-1] {
		t.Errorf("c.parquet's chunks after a short tail read differ from its own index's")
	}

	for _, tt := range []struct{ last, want int64 }{
		{0, 4 << 10}, {100, 4 << 10}, {2 << 10, 4 << 10}, {2<<10 + 1, 8 << 10}, {20 << 10, 40 << 10}, {40 << 10, 64 << 10}, {1 << 20, 64 << 10},
	} {
		if got := tailFor(tt.last); got != tt.want {
			t.Errorf("tailFor(%d) = %d, want %d", tt.last, got, tt.want)
		}
	}
}
