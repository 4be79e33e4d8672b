package parquet

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	pq "github.com/apache/arrow-go/v18/parquet"

	"github.com/brandgw/brand/format"
)

// Files appended to a dataset are described as a whole index of the
// same files in that order would describe them: the old chunks first,
// unchanged, then the new files' chunks (one file cut into chunks of
// several row groups, one of a row group each), every chunk's extent and
// decoded samples the same, and only the new files' footers read.
func TestAppend(t *testing.T) {
	rows := hubRows(600, 3000)
	st := newStore()
	props := pq.NewWriterProperties(pq.WithDictionaryDefault(false))
	file := func(name string, groups ...[]imageRow) {
		var recs []arrow.RecordBatch
		for _, g := range groups {
			recs = append(recs, imageRecord(g))
		}
		st.put(name, writeArrow(t, imageSchema, props, recs...))
	}
	file("data/a.parquet", rows[:100], rows[100:200])
	file("data/b.parquet", rows[200:300])
	opt := format.Options{ChunkBytes: 400 << 10}
	ctx := context.Background()
	old, err := Format{}.Index(ctx, st, st.listing(), opt)
	if err != nil {
		t.Fatal(err)
	}
	// Two new files, one of three row groups, one with big rows.
	file("data/c.parquet", rows[300:350], rows[350:400], rows[400:450])
	file("data/d.parquet", hubRows(20, 300<<10))
	listing := st.listing()
	added := listing[2:]
	st.Take()
	lay, err := Format{}.Append(ctx, st, old.Meta, added, opt)
	if err != nil {
		t.Fatal(err)
	}
	reads := st.Take()
	for _, o := range listing {
		if n := reads[o.Key].Reads; (n == 0) != (o.Key < "data/c") {
			t.Errorf("%s read %d times: only the new files' footers are read", o.Key, n)
		}
	}
	whole, err := Format{}.Index(ctx, st, listing, opt)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(lay.Meta, whole.Meta) {
		t.Fatal("the appended description is not the whole index's")
	}
	if n := len(old.Chunks); !slices.Equal(named(lay.Chunks), named(whole.Chunks[n:])) || !slices.Equal(named(old.Chunks), named(whole.Chunks[:n])) {
		t.Fatalf("chunks: old %+v, new %+v, whole %+v", old.Chunks, lay.Chunks, whole.Chunks)
	}
	if n := len(old.Keys); !slices.Equal(lay.Keys, whole.Keys[n:]) {
		t.Fatalf("keys: %d new, whole %d", len(lay.Keys), len(whole.Keys)-n)
	}
	// The old files are a chunk a row group, the new c one chunk of its
	// three: both cuts merge into one description.
	if old.Chunks[0].Name != "" || len(lay.Chunks) != 2 || lay.Chunks[0].Name != "0-2" {
		t.Fatalf("the test wants old chunks of a row group each and a new one of several: %+v, %+v", old.Chunks, lay.Chunks)
	}
	dec, err := Format{}.Open(lay.Meta)
	if err != nil {
		t.Fatal(err)
	}
	for c, ch := range append(slices.Clone(old.Chunks), lay.Chunks...) {
		if _, err := decodeChunk(st, dec, ch, c, nil); err != nil {
			t.Fatalf("chunk %d: %v", c, err)
		}
	}

	none, err := Format{}.Append(ctx, st, old.Meta, []format.Object{{Key: "README.md", Size: 3}}, opt)
	if err != nil || len(none.Chunks) != 0 || !slices.Equal(none.Meta, old.Meta) {
		t.Fatalf("nothing to append: %v, %+v", err, none)
	}
}

// A file whose columns are not the dataset's is refused, naming it.
func TestAppendOtherSchema(t *testing.T) {
	st := newStore()
	props := pq.NewWriterProperties()
	st.put("data/a.parquet", writeArrow(t, imageSchema, props, imageRecord(hubRows(10, 100))))
	ctx := context.Background()
	old, err := Format{}.Index(ctx, st, st.listing(), format.Options{})
	if err != nil {
		t.Fatal(err)
	}
	other := arrow.NewSchema([]arrow.Field{{Name: "text", Type: arrow.BinaryTypes.String}}, nil)
	st.put("data/b.parquet", writeArrow(t, other, props, newRecord(other, func(b *array.RecordBuilder) {
		b.Field(0).(*array.StringBuilder).Append("x")
	})))
	_, err = Format{}.Append(ctx, st, old.Meta, st.listing()[1:], format.Options{})
	if !errors.Is(err, format.ErrInvalid) || !strings.Contains(err.Error(), "data/b.parquet does not have the dataset's schema") {
		t.Fatalf("another schema: %v", err)
	}
}

// named is chunks each with its name, its ordinal among its object's
// chunks where it has none (as dataset.BuildInPlace names it).
func named(chunks []format.Chunk) []format.Chunk {
	out := slices.Clone(chunks)
	nth := map[string]int{}
	for i, c := range out {
		if c.Name == "" {
			out[i].Name = strconv.Itoa(nth[c.Object])
		}
		nth[c.Object]++
	}
	return out
}
