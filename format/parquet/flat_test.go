package parquet

import (
	"encoding/binary"
	"fmt"
	"strings"
	"testing"

	pq "github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/compress"
	"github.com/klauspost/compress/snappy"

	"github.com/brandgw/brand/format"
)

// plainBytes is byte arrays PLAIN-encoded.
func plainBytes(vs ...string) []byte {
	var b []byte
	for _, v := range vs {
		b = binary.LittleEndian.AppendUint32(b, uint32(len(v)))
		b = append(b, v...)
	}
	return b
}

// rleRuns is levels or indices of width bits as RLE runs of one value
// each.
func rleRuns(width int, vals ...int) []byte {
	var b []byte
	for _, v := range vals {
		b = binary.AppendUvarint(b, 1<<1)
		for i := 0; i < (width+7)/8; i++ {
			b = append(b, byte(v>>(8*i)))
		}
	}
	return b
}

// testPage is a page of flatCol's: v1 pages carry their definition levels
// (defs, of a column of max level 1; nil for a required column) in their
// compressed bytes, v2 pages before them.
type testPage struct {
	typ  int32
	enc  int32
	defs []int
	vals []byte // PLAIN values, or a dictionary page's; for RLE_DICTIONARY, the indices' width byte and runs
	n    int    // values (levels)
}

func (p testPage) build(t *testing.T) flatPage {
	t.Helper()
	h := pageHeader{typ: p.typ, encoding: p.enc, numValues: int32(p.n), defEnc: encRLE, compressed: true}
	var levels []byte
	if p.defs != nil {
		levels = rleRuns(1, p.defs...)
	}
	content := p.vals
	if p.typ == pageData && p.defs != nil {
		content = append(binary.LittleEndian.AppendUint32(nil, uint32(len(levels))), levels...)
		content = append(content, p.vals...)
	}
	body := snappy.Encode(nil, content)
	h.unc, h.comp = int32(len(content)), int32(len(body))
	if p.typ == pageDataV2 {
		h.levelsLen = int32(len(levels))
		body = append(append([]byte(nil), levels...), body...)
		h.unc += h.levelsLen
		h.comp += h.levelsLen
	}
	return flatPage{h: h, body: body}
}

// testPlacer places each value in room of its own (kept) or, when
// scratch is set, in one buffer every value reuses, as a writer past its
// bound does; it records what was placed when the row is done.
type testPlacer struct {
	scratch bool
	room    []byte
	last    []byte // the room of the last value placed
	heads   []string
}

func (p *testPlacer) place(n int64, head []byte) ([]byte, bool, error) {
	p.heads = append(p.heads, string(head))
	if p.scratch {
		if int64(cap(p.room)) < n {
			p.room = make([]byte, n)
		}
		clear(p.room[:n])
		p.last = p.room[:n:n]
		return p.last, false, nil
	}
	p.last = make([]byte, n)
	return p.last, true, nil
}

// photoish are values that share long runs with one another, so that
// snappy's copies reach back across values, lengths and levels.
func photoish(n int) []string {
	vs := make([]string, n)
	for i := range vs {
		vs[i] = "\xff\xd8\xff\xe0" + strings.Repeat(fmt.Sprintf("photo %d of the set, ", i%3), 20+i) + fmt.Sprint(i)
	}
	return vs
}

// TestFlatInPlace reads columns of snappy pages — PLAIN in v1 and v2
// pages, and a dictionary whose values rows use out of order, again, never
// or not at all, with nulls — with into, into room kept and into scratch
// reused (a decode past its bound), and with next: every row's value is
// the one written, and into showed its placer the value's first bytes.
func TestFlatInPlace(t *testing.T) {
	v := photoish(6)
	null := "<null>"
	tests := []struct {
		name  string
		pages []testPage
		rows  []string
	}{
		{
			name: "PLAIN, v1, required, two pages",
			pages: []testPage{
				{typ: pageData, enc: encPlain, vals: plainBytes(v[0], v[1], v[2]), n: 3},
				{typ: pageData, enc: encPlain, vals: plainBytes(v[3], v[1]), n: 2},
			},
			rows: []string{v[0], v[1], v[2], v[3], v[1]},
		},
		{
			name: "PLAIN, v1, nulls first and last",
			pages: []testPage{
				{typ: pageData, enc: encPlain, defs: []int{0, 1, 1, 0}, vals: plainBytes(v[4], v[5]), n: 4},
			},
			rows: []string{null, v[4], v[5], null},
		},
		{
			name: "PLAIN, v2, nulls",
			pages: []testPage{
				{typ: pageDataV2, enc: encPlain, defs: []int{1, 0, 1}, vals: plainBytes(v[2], v[0]), n: 3},
				{typ: pageDataV2, enc: encPlain, defs: []int{1}, vals: plainBytes(v[3]), n: 1},
			},
			rows: []string{v[2], null, v[0], v[3]},
		},
		{
			name: "dictionary: in order, again, skipped ahead, unused last",
			pages: []testPage{
				{typ: pageDict, enc: encPlain, vals: plainBytes(v[0], v[1], v[2], v[3], v[4]), n: 5},
				{typ: pageData, enc: encRLEDict, defs: []int{1, 1, 0, 1, 1, 1}, vals: append([]byte{3}, rleRuns(3, 0, 2, 0, 1, 3)...), n: 6},
			},
			rows: []string{v[0], v[2], null, v[0], v[1], v[3]},
		},
		{
			name: "an empty dictionary, every row null",
			pages: []testPage{
				{typ: pageDict, enc: encPlain, vals: nil, n: 0},
				{typ: pageData, enc: encRLEDict, defs: []int{0, 0, 0}, vals: []byte{0}, n: 3},
			},
			rows: []string{null, null, null},
		},
		{
			name: "dictionary, then PLAIN pages (a writer's fallback)",
			pages: []testPage{
				{typ: pageDict, enc: encPlain, vals: plainBytes(v[0], v[1]), n: 2},
				{typ: pageData, enc: encRLEDict, vals: append([]byte{1}, rleRuns(1, 0, 1, 1)...), n: 3},
				{typ: pageData, enc: encPlain, vals: plainBytes(v[5], v[4]), n: 2},
			},
			rows: []string{v[0], v[1], v[1], v[5], v[4]},
		},
	}
	for _, tc := range tests {
		maxDef := 0
		for _, p := range tc.pages {
			if p.defs != nil {
				maxDef = 1
			}
		}
		for _, mode := range []string{"into", "into scratch", "next"} {
			t.Run(tc.name+"/"+mode, func(t *testing.T) {
				var pages []flatPage
				for _, p := range tc.pages {
					pages = append(pages, p.build(t))
				}
				c, err := newFlatCol(pages, int8(compress.Codecs.Snappy), maxDef, 0, int64(len(tc.rows)), nil, nil)
				if err != nil {
					t.Fatal(err)
				}
				defer c.release()
				pl := &testPlacer{scratch: mode == "into scratch"}
				for i, want := range tc.rows {
					var got string
					switch mode {
					case "next":
						b, ok, err := c.next()
						if err != nil {
							t.Fatalf("row %d: %v", i, err)
						}
						got = string(b)
						if !ok {
							got = null
						}
					default:
						heads := len(pl.heads)
						ok, err := c.into(pl)
						if err != nil {
							t.Fatalf("row %d: %v", i, err)
						}
						got = string(pl.last)
						if !ok {
							got = null
							if len(pl.heads) != heads {
								t.Fatalf("row %d: a null was placed", i)
							}
						} else if h := pl.heads[heads]; h != want[:min(len(want), headLen)] {
							t.Fatalf("row %d: the placer saw %q first, want %q", i, h, want[:headLen])
						}
					}
					if got != want {
						t.Fatalf("row %d: %.40q, want %.40q", i, got, want)
					}
				}
				if _, _, err := c.next(); err == nil {
					t.Fatal("a row past the column chunk's values")
				}
			})
		}
	}
}

// TestFlatInPlaceDamaged: a streamed page or dictionary that is damaged
// past the values rows use — a value's length past the page's end, bytes
// that do not decompress — fails the column chunk at its last row, as a
// library decoder, which decompresses the page whole, fails it at its
// first; a value longer than what is left of its page fails its row.
func TestFlatInPlaceDamaged(t *testing.T) {
	v := photoish(3)
	longLen := binary.LittleEndian.AppendUint32(nil, 1000)
	tests := []struct {
		name  string
		pages []flatPage
		rows  int
		want  string
	}{
		{
			name: "the dictionary's unused last value runs past its page",
			pages: []flatPage{
				{h: pageHeader{typ: pageDict, encoding: encPlain, numValues: 3}, body: append(plainBytes(v[0], v[1]), append(longLen, "ab"...)...)},
				{h: pageHeader{typ: pageData, encoding: encRLEDict, numValues: 2, defEnc: encRLE}, body: append([]byte{1}, rleRuns(1, 0, 1)...)},
			},
			rows: 2,
			want: "the dictionary: a value of 1000 bytes",
		},
		{
			name: "a PLAIN page's value runs past its page",
			pages: []flatPage{
				{h: pageHeader{typ: pageData, encoding: encPlain, numValues: 2, defEnc: encRLE}, body: append(plainBytes(v[0]), append(longLen, "ab"...)...)},
			},
			rows: 2,
			want: "a value of 1000 bytes",
		},
		{
			name: "a PLAIN page's bytes after its values",
			pages: []flatPage{
				{h: pageHeader{typ: pageData, encoding: encPlain, numValues: 1, defEnc: encRLE}, body: append(plainBytes(v[0]), "garbage"...)},
			},
			rows: 1,
			want: "", // the bytes decompress; what follows the values is not a value
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			for i := range tc.pages {
				p := &tc.pages[i]
				p.h.unc = int32(len(p.body))
				p.body = snappy.Encode(nil, p.body)
				p.h.comp = int32(len(p.body))
			}
			for _, scratch := range []bool{false, true} {
				c, err := newFlatCol(tc.pages, int8(compress.Codecs.Snappy), 0, 0, int64(tc.rows), nil, nil)
				if err != nil {
					t.Fatal(err)
				}
				pl := &testPlacer{scratch: scratch}
				var last error
				for r := 0; r < tc.rows && last == nil; r++ {
					_, last = c.into(pl)
				}
				c.release()
				if tc.want == "" {
					if last != nil {
						t.Fatalf("scratch %v: %v", scratch, last)
					}
					continue
				}
				if last == nil || !strings.Contains(last.Error(), tc.want) {
					t.Fatalf("scratch %v: %v, want an error with %q", scratch, last, tc.want)
				}
			}
		})
	}
	// A block that is not snappy at all, in a page and in the dictionary.
	for _, typ := range []int32{pageData, pageDict} {
		body := []byte{20, 0x0f, 'a'} // 20 bytes stated, a literal of 4 cut short
		pages := []flatPage{{h: pageHeader{typ: typ, encoding: encPlain, numValues: 1, defEnc: encRLE, unc: 20, comp: 3}, body: body}}
		if typ == pageDict {
			pages = append(pages, flatPage{h: pageHeader{typ: pageData, encoding: encRLEDict, numValues: 1, defEnc: encRLE, unc: 3, comp: 3}, body: append([]byte{1}, rleRuns(1, 0)...)})
			pages[1].body = snappy.Encode(nil, pages[1].body)
			pages[1].h.comp = int32(len(pages[1].body))
		}
		c, err := newFlatCol(pages, int8(compress.Codecs.Snappy), 0, 0, 1, nil, nil)
		if err == nil {
			_, err = c.into(&testPlacer{})
			c.release()
		}
		if err == nil || !strings.Contains(err.Error(), "decompress") {
			t.Fatalf("page type %d: %v, want a page that does not decompress", typ, err)
		}
	}
}

// A dictionary-encoded image column can repeat one large image on every
// row, which the footer cannot bound: the decode goes on past the bound
// into scratch room (counting what the chunk needs) and is decoded again
// into that; every row's image is the one written, read in place each
// time.
func TestImageDictionaryRepeatsGrow(t *testing.T) {
	big := []byte("\xff\xd8\xff\xe0" + strings.Repeat("the same photo on every row, ", 2000))
	small := []byte("\x89PNG\r\n\x1a\n a small one")
	var rows []imageRow
	for i := range 300 {
		img := big
		if i%40 == 0 {
			img = small
		}
		p := fmt.Sprintf("p%d.jpg", i)
		if i%40 == 0 {
			p = fmt.Sprintf("p%d", i) // no extension: its magic names it
		}
		l := int64(i)
		rows = append(rows, imageRow{img: img, path: &p, label: &l})
	}
	st := newStore()
	st.put("g.parquet", writeArrow(t, imageSchema, pq.NewWriterProperties(pq.WithDictionaryDefault(true), pq.WithCompression(compress.Codecs.Snappy), pq.WithMaxRowGroupLength(300)), imageRecord(rows)))
	before := grown
	got, _, _ := decodeAll(t, st, format.Options{})
	if grown != before+1 {
		t.Fatalf("the row group was decoded again %d times, want once", grown-before)
	}
	for i, r := range rows {
		if g, w := render(got[fmt.Sprintf("g/%03d", i)]), wantImage(r); g != w {
			t.Fatalf("row %d:\n got %.80s\nwant %.80s", i, g, w)
		}
	}
}

// A row group whose image column is null on every row (a split with no
// images in it) has an empty dictionary as arrow-go writes it: every row
// is its label alone, not a damaged row group.
func TestImagesAllNull(t *testing.T) {
	rows := make([]imageRow, 10)
	for i := range rows {
		l := int64(i)
		rows[i].label = &l
	}
	st := newStore()
	st.put("n.parquet", writeArrow(t, imageSchema, pq.NewWriterProperties(pq.WithDictionaryDefault(true), pq.WithCompression(compress.Codecs.Snappy)), imageRecord(rows)))
	got, _, _ := decodeAll(t, st, format.Options{})
	for i, r := range rows {
		if g, w := render(got[fmt.Sprintf("n/%02d", i)]), wantImage(r); g != w {
			t.Fatalf("row %d: %s, want %s", i, g, w)
		}
	}
}
