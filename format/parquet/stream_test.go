package parquet

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"math/rand/v2"
	"slices"
	"sync/atomic"
	"testing"
	"testing/iotest"

	pq "github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/compress"

	"github.com/brandgw/brand/format"
	"github.com/brandgw/brand/internal/server/memory"
)

// opener opens ranges of file, each read giving at most half of what it
// asks (a socket's short reads); opened counts the opens.
func opener(file []byte, opened *atomic.Int64) func(format.Range) (io.ReadCloser, error) {
	return func(r format.Range) (io.ReadCloser, error) {
		opened.Add(1)
		return io.NopCloser(iotest.HalfReader(bytes.NewReader(file[r.Off:r.End()]))), nil
	}
}

// sameResident fails unless resident chunks a and b hold the same
// samples: offsets, lengths, CRC32Cs and bytes.
func sameResident(t *testing.T, a, b []byte) {
	t.Helper()
	ta, err := format.Verify(a)
	if err != nil {
		t.Fatalf("Decode's chunk: %v", err)
	}
	tb, err := format.Verify(b)
	if err != nil {
		t.Fatalf("DecodeStream's chunk: %v", err)
	}
	if ta.Len() != tb.Len() {
		t.Fatalf("%d samples, Decode's %d", tb.Len(), ta.Len())
	}
	for i := range ta.Len() {
		oa, la, ca := ta.Sample(i)
		ob, lb, cb := tb.Sample(i)
		if oa != ob || la != lb || ca != cb || !bytes.Equal(a[oa:oa+la], b[ob:ob+lb]) {
			t.Fatalf("sample %d: at %d+%d crc %08x, Decode's at %d+%d crc %08x (bytes equal %t)", i, ob, lb, cb, oa, la, ca, la == lb && bytes.Equal(a[oa:oa+la], b[ob:ob+lb]))
		}
	}
}

// decodeBoth decodes chunk c of file with Decode (into the room a
// GrowError asks for, which DecodeStream must ask for too) and as
// DecodeStream's caller does — streamed, each range opened once, or, when
// not streamed, read and decoded — and fails unless the resident forms
// are the same. It returns the placement streamed with (nil: none).
func decodeBoth(t *testing.T, d *decoder, c int, sel format.Selection, file []byte, wo format.WriterOptions) *placement {
	t.Helper()
	ranges, bound := d.Extent(c, sel)
	var src []byte
	for _, r := range ranges {
		src = append(src, file[r.Off:r.End()]...)
	}
	want := make([]byte, bound)
	err := d.Decode(c, sel, src, want, wo)
	var ge *format.GrowError
	if errors.As(err, &ge) {
		// A dictionary repeating values needs more than the footer's
		// bound: decoded again into what it asks.
		want = make([]byte, ge.Need)
		err = d.Decode(c, sel, src, want, wo)
	}
	if err != nil {
		t.Fatalf("chunk %d: Decode: %v", c, err)
	}
	got := make([]byte, bound)
	for i := range got {
		got[i] = 0xa5 // a pooled buffer's leftovers
	}
	var opens atomic.Int64
	pl, err := d.streamed(c, sel, opener(file, &opens), make([]byte, len(src)), got, wo)
	if errors.As(err, &ge) {
		if ge.Need != int64(len(want)) {
			t.Fatalf("chunk %d: DecodeStream needs %d bytes, Decode %d", c, ge.Need, len(want))
		}
		got = make([]byte, ge.Need)
		opens.Store(0)
		pl, err = d.streamed(c, sel, opener(file, &opens), make([]byte, len(src)), got, wo)
	}
	if errors.Is(err, format.ErrNotStreamed) {
		pl, err = nil, d.Decode(c, sel, src, got, wo)
	} else if err == nil && int(opens.Load()) != len(ranges) {
		t.Errorf("chunk %d: %d ranges opened for %d", c, opens.Load(), len(ranges))
	}
	if err != nil {
		t.Fatalf("chunk %d: DecodeStream: %v", c, err)
	}
	sameResident(t, want, got)
	return pl
}

// TestDecodeStream decodes chunks as their bytes arrive into the same
// resident form Decode makes from a buffer — on pyarrow's layout with
// and without dictionaries, data pages v2, no compression, chunks of
// several row groups, a projection — leaving every image where it was
// placed on arrival when the guess holds (moved counts those it had to
// move), and moving them, to the same bytes, when it does not: null
// images and labels, an image repeated in its row group.
func TestDecodeStream(t *testing.T) {
	photos := hubPhotos(240)
	dups := hubPhotos(120)
	for i := 3; i < len(dups); i += 7 {
		dups[i].img = dups[i-2].img
	}
	snappy := pq.WithCompression(compress.Codecs.Snappy)
	groups := func(n int64) pq.WriterProperty { return pq.WithMaxRowGroupLength(n) }
	cases := []struct {
		name    string
		rows    []imageRow
		props   []pq.WriterProperty
		fields  []string
		chunk   int64 // format.Options.ChunkBytes (0: the default)
		streams bool  // DecodeStream streams the image column
		moved   bool  // and moves some values
	}{
		{name: "pyarrow's defaults", rows: photos[:100], props: []pq.WriterProperty{snappy}, fields: []string{"image", "label"}, streams: true},
		{name: "no dictionary", rows: photos, props: []pq.WriterProperty{snappy, pq.WithDictionaryDefault(false), groups(100)}, fields: []string{"image", "label"}, streams: true},
		{name: "row groups of 60, chunks of several", rows: photos, props: []pq.WriterProperty{snappy, groups(60)}, fields: []string{"image", "label"}, chunk: 8 << 20, streams: true},
		{name: "data pages v2", rows: photos, props: []pq.WriterProperty{snappy, pq.WithDictionaryDefault(false), pq.WithDataPageVersion(pq.DataPageV2), groups(80)}, fields: []string{"image", "label"}, streams: true},
		{name: "not compressed", rows: photos[:100], props: []pq.WriterProperty{pq.WithDictionaryDefault(false)}, fields: []string{"image", "label"}, streams: true},
		{name: "the image alone", rows: photos[:100], props: []pq.WriterProperty{snappy}, fields: []string{"image"}, streams: true},
		{name: "the label first", rows: photos[:100], props: []pq.WriterProperty{snappy}, fields: []string{"label", "image"}, streams: true},
		{name: "nulls", rows: hubRows(150, 40<<10), props: []pq.WriterProperty{snappy}, fields: []string{"image", "label"}, streams: true, moved: true},
		{name: "an image repeated", rows: dups, props: []pq.WriterProperty{snappy}, fields: []string{"image", "label"}, streams: true, moved: true},
		{name: "the label alone", rows: photos[:100], props: []pq.WriterProperty{snappy}, fields: []string{"label"}},
		{name: "gzip", rows: photos[:100], props: []pq.WriterProperty{pq.WithCompression(compress.Codecs.Gzip)}, fields: []string{"image", "label"}},
	}
	mem := memory.New(memory.Config{})
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			file := writeArrow(t, imageSchema, pq.NewWriterProperties(tc.props...), imageRecord(tc.rows))
			st := newStore()
			st.put("data/train-00000-of-00001.parquet", file)
			lay, err := Format{}.Index(context.Background(), st, st.listing(), format.Options{ChunkBytes: tc.chunk})
			if err != nil {
				t.Fatal(err)
			}
			dec, err := Format{}.Open(lay.Meta)
			if err != nil {
				t.Fatal(err)
			}
			sel, err := format.Select(dec.Fields(), tc.fields)
			if err != nil {
				t.Fatal(err)
			}
			d := dec.(*decoder)
			var streamed, moved int
			for c := range lay.Chunks {
				pl := decodeBoth(t, d, c, sel, file, format.WriterOptions{ModTime: 1700000000, Buffers: mem})
				if pl != nil && len(pl.vals) > 0 {
					streamed++
					moved += pl.moved + pl.shifted
				}
			}
			if tc.streams != (streamed > 0) || tc.moved != (moved > 0) {
				t.Errorf("%d of %d chunks streamed, %d values moved; want streamed %t, moved %t", streamed, len(lay.Chunks), moved, tc.streams, tc.moved)
			}
		})
	}
}

// TestDecodeStreamDamage: a streamed page whose bytes are damaged is a
// damaged chunk, named as Decode names it, and a failing store is the
// store's error, not damage.
func TestDecodeStreamDamage(t *testing.T) {
	file := writeArrow(t, imageSchema, pq.NewWriterProperties(pq.WithCompression(compress.Codecs.Snappy)), imageRecord(hubPhotos(100)))
	st := newStore()
	st.put("data/train-00000-of-00001.parquet", file)
	lay, err := Format{}.Index(context.Background(), st, st.listing(), format.Options{})
	if err != nil {
		t.Fatal(err)
	}
	dec, _ := Format{}.Open(lay.Meta)
	d := dec.(*decoder)
	sel, _ := format.Select(dec.Fields(), []string{"image", "label"})
	ranges, bound := d.Extent(0, sel)
	src := make([]byte, format.Concat(ranges))
	dst := make([]byte, bound)

	bad := bytes.Clone(file)
	// The dictionary page's first snappy element made a copy from before
	// the output's start.
	m := d.ds.chunks[0].cols[d.fields[0].bytesLeaf]
	h, err := parsePageHeader(file[m.start:])
	if err != nil || h.typ != pageDict {
		t.Fatalf("the column chunk starts with page type %d (%v), want a dictionary", h.typ, err)
	}
	at := int(m.start) + h.len
	for bad[at] >= 0x80 { // the decoded length's varint
		at++
	}
	bad[at+1], bad[at+2] = 0x05, 0x09
	var opens atomic.Int64
	err = dec.(format.Streamer).DecodeStream(0, sel, opener(bad, &opens), src, dst, format.WriterOptions{})
	if !errors.Is(err, format.ErrDamaged) {
		t.Fatalf("a damaged page: %v, want ErrDamaged", err)
	}

	failing := errors.New("the store fails")
	open := func(r format.Range) (io.ReadCloser, error) {
		return io.NopCloser(io.MultiReader(bytes.NewReader(file[r.Off:r.Off+r.Len/2]), iotest.ErrReader(failing))), nil
	}
	err = dec.(format.Streamer).DecodeStream(0, sel, open, src, dst, format.WriterOptions{})
	if !errors.Is(err, failing) || errors.Is(err, format.ErrDamaged) {
		t.Fatalf("a failing store: %v, want its error and not ErrDamaged", err)
	}
	if err := dec.(format.Streamer).DecodeStream(0, sel, func(format.Range) (io.ReadCloser, error) { return nil, failing }, src, dst, format.WriterOptions{}); !errors.Is(err, failing) {
		t.Fatalf("a store that cannot open: %v", err)
	}
}

// TestDecodeStreamRandom: rows of random sizes, nulls and repeats, in
// random row groups and pages, decode as they arrive to Decode's bytes.
func TestDecodeStreamRandom(t *testing.T) {
	mem := memory.New(memory.Config{})
	var streamed, rescued, shifted int
	for seed := range uint64(24) {
		r := rand.New(rand.NewPCG(seed, 99))
		rows := hubPhotos(40 + r.IntN(160))
		for i := range rows {
			switch r.IntN(12) {
			case 0:
				rows[i].img = nil
			case 1:
				rows[i].label = nil
			case 2:
				rows[i].path = nil
			case 3:
				if i > 0 {
					rows[i].img = rows[r.IntN(i)].img
				}
			case 4:
				rows[i].img = rows[i].img[:r.IntN(600)]
			}
		}
		props := []pq.WriterProperty{pq.WithMaxRowGroupLength(int64(20 + r.IntN(100))), pq.WithDataPageSize(int64(64<<10 + r.IntN(1<<20)))}
		if r.IntN(3) > 0 {
			props = append(props, pq.WithCompression(compress.Codecs.Snappy))
		}
		if r.IntN(2) == 0 {
			props = append(props, pq.WithDictionaryDefault(false))
		}
		if r.IntN(3) == 0 {
			props = append(props, pq.WithDataPageVersion(pq.DataPageV2))
		}
		fields := [][]string{{"image", "label"}, {"label", "image"}, {"image"}}[r.IntN(3)]
		file := writeArrow(t, imageSchema, pq.NewWriterProperties(props...), imageRecord(rows))
		st := newStore()
		st.put("data/train-00000-of-00001.parquet", file)
		lay, err := Format{}.Index(context.Background(), st, st.listing(), format.Options{ChunkBytes: int64(1<<20 + r.IntN(8<<20))})
		if err != nil {
			t.Fatal(err)
		}
		dec, _ := Format{}.Open(lay.Meta)
		d := dec.(*decoder)
		sel, _ := format.Select(dec.Fields(), fields)
		for c := range lay.Chunks {
			pl := decodeBoth(t, d, c, sel, file, format.WriterOptions{ModTime: 1700000000, Buffers: mem})
			if pl != nil && len(pl.vals) > 0 {
				streamed++
				if pl.moved > 0 {
					rescued++
				}
				if pl.shifted > 0 {
					shifted++
				}
			}
		}
	}
	t.Logf("chunks streamed %d, rescued %d, shifted down %d", streamed, rescued, shifted)
	if streamed == 0 || rescued == 0 || shifted == 0 {
		t.Errorf("chunks streamed %d, rescued %d, shifted down %d: want some of each", streamed, rescued, shifted)
	}
}

// TestStreamBudget: the pages streamed decompress to no more than the
// footer says the column chunk holds; a page past that is read into src
// as it is (where Decode refuses it), never decompressed into scratch.
func TestStreamBudget(t *testing.T) {
	props := pq.NewWriterProperties(pq.WithCompression(compress.Codecs.Snappy), pq.WithDictionaryDefault(false), pq.WithBatchSize(8), pq.WithDataPageSize(200<<10))
	file := writeArrow(t, imageSchema, props, imageRecord(hubPhotos(100)))
	st := newStore()
	st.put("data/train-00000-of-00001.parquet", file)
	lay, err := Format{}.Index(context.Background(), st, st.listing(), format.Options{})
	if err != nil {
		t.Fatal(err)
	}
	dec, _ := Format{}.Open(lay.Meta)
	d := dec.(*decoder)
	sel, _ := format.Select(dec.Fields(), []string{"image", "label"})
	l := d.fields[0].bytesLeaf
	ch := d.ds.chunks[0]
	ch.cols = slices.Clone(ch.cols)
	m := ch.cols[l]
	ch.cols[l].unc = m.unc / 2 // a footer that says less than the pages
	_, bound := d.Extent(0, sel)
	pl := d.plan([]chunk{ch}, sel, make([]byte, bound), format.WriterOptions{})
	if pl == nil {
		t.Fatal("the image column is not streamed")
	}
	b := make([]byte, m.length)
	br := bufio.NewReaderSize(bytes.NewReader(file[m.start:m.start+m.length]), streamBuf)
	if err := d.streamColumn(&ch, l, pl, br, b, format.Range{Off: m.start, Len: m.length}); err != nil {
		t.Fatal(err)
	}
	var placed int64
	for _, v := range pl.vals {
		placed += int64(len(v))
	}
	if len(pl.pages) == 0 || placed > ch.cols[l].unc {
		t.Fatalf("%d pages streamed, %d bytes placed, the footer says %d", len(pl.pages), placed, ch.cols[l].unc)
	}
	// The pages not streamed are in b as the file has them.
	streamed := 0
	for pos := 0; pos < len(b); {
		h, err := parsePageHeader(b[pos:])
		if err != nil {
			t.Fatalf("page at %d: %v", pos, err)
		}
		end := pos + h.len + int(h.comp)
		if pl.pages[pageKey{ch.at, l, m.start + int64(pos)}] != nil {
			streamed++
		} else if !bytes.Equal(b[pos:end], file[m.start+int64(pos):m.start+int64(end)]) {
			t.Fatalf("the page at %d was neither streamed nor read as it is", pos)
		}
		pos = end
	}
	if total := pagesOf(t, b); streamed == total {
		t.Fatalf("all %d pages streamed past the footer's count", total)
	}
}

func pagesOf(t *testing.T, b []byte) int {
	n := 0
	for pos := 0; pos < len(b); n++ {
		h, err := parsePageHeader(b[pos:])
		if err != nil {
			t.Fatal(err)
		}
		pos += h.len + int(h.comp)
	}
	return n
}
