package parquet

import (
	"context"
	"encoding/binary"
	"errors"
	"runtime"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	pq "github.com/apache/arrow-go/v18/parquet"

	"github.com/brandgw/brand/format"
)

// tw writes Thrift's compact protocol: enough to forge footers.
type tw struct {
	b    []byte
	last []int16
}

func (w *tw) begin()      { w.last = append(w.last, 0) }
func (w *tw) end()        { w.b = append(w.b, 0); w.last = w.last[:len(w.last)-1] }
func (w *tw) uv(v uint64) { w.b = binary.AppendUvarint(w.b, v) }
func (w *tw) zz(v int64)  { w.uv(uint64(v<<1) ^ uint64(v>>63)) }
func (w *tw) field(id int16, t byte) {
	d := id - w.last[len(w.last)-1]
	if d > 0 && d <= 15 {
		w.b = append(w.b, byte(d)<<4|t)
	} else {
		w.b = append(w.b, t)
		w.zz(int64(id))
	}
	w.last[len(w.last)-1] = id
}
func (w *tw) i32(id int16, v int64) { w.field(id, tI32); w.zz(v) }
func (w *tw) i64(id int16, v int64) { w.field(id, tI64); w.zz(v) }
func (w *tw) str(id int16, s string) {
	w.field(id, tBinary)
	w.uv(uint64(len(s)))
	w.b = append(w.b, s...)
}
func (w *tw) list(id int16, et byte, n int) {
	w.field(id, tList)
	if n < 15 {
		w.b = append(w.b, byte(n)<<4|et)
	} else {
		w.b = append(w.b, 0xf0|et)
		w.uv(uint64(n))
	}
}

type fcol struct {
	name               string
	phys, rep          int64
	codec, values      int64
	unc, comp, dataOff int64
}

// forge writes a footer of a flat schema of cols and groups row groups
// of rows rows each, and a file around it of size bytes of data.
func forge(cols []fcol, groups int, rows int64, extra func(w *tw)) []byte {
	w := &tw{}
	w.begin()
	w.i32(1, 1)
	w.list(2, tStruct, len(cols)+1)
	w.begin()
	w.str(4, "schema")
	w.i32(5, int64(len(cols)))
	w.end()
	for _, c := range cols {
		w.begin()
		w.i32(1, c.phys)
		w.i32(3, c.rep)
		w.str(4, c.name)
		w.end()
	}
	w.i64(3, rows*int64(groups))
	w.list(4, tStruct, groups)
	for range groups {
		w.begin()
		w.list(1, tStruct, len(cols))
		for _, c := range cols {
			w.begin()
			w.i64(2, c.dataOff)
			w.field(3, tStruct)
			w.begin()
			w.i32(1, c.phys)
			w.list(2, tI32, 1)
			w.zz(0)
			w.list(3, tBinary, 1)
			w.uv(uint64(len(c.name)))
			w.b = append(w.b, c.name...)
			w.i32(4, c.codec)
			w.i64(5, c.values)
			w.i64(6, c.unc)
			w.i64(7, c.comp)
			w.i64(9, c.dataOff)
			w.end()
			w.end()
		}
		w.i64(2, 0)
		w.i64(3, rows)
		w.end()
	}
	if extra != nil {
		extra(w)
	}
	w.end()
	return wrap(w.b, 1000)
}

// wrap puts a footer after data bytes of data, with the magic and length.
func wrap(footer []byte, data int) []byte {
	b := append([]byte("PAR1"), make([]byte, data)...)
	b = append(b, footer...)
	b = binary.LittleEndian.AppendUint32(b, uint32(len(footer)))
	return append(b, "PAR1"...)
}

func indexOne(key string, b []byte, lim format.Limits) error {
	st := newStore()
	st.put(key, b)
	_, err := Format{}.Index(context.Background(), st, st.listing(), format.Options{Limits: lim})
	return err
}

// Each hostile input is refused at index time, naming the object and the
// reason.
func TestHostileFooters(t *testing.T) {
	ok := []fcol{{name: "x", phys: tyInt64, values: 100, unc: 800, comp: 800, dataOff: 4}}
	if err := indexOne("ok.parquet", forge(ok, 1, 100, nil), format.Limits{}); err != nil {
		t.Fatalf("the forged footer itself is refused: %v", err)
	}
	deep := func() []byte {
		w := &tw{}
		w.begin()
		w.list(2, tStruct, 1001)
		for i := range 1001 {
			w.begin()
			w.str(4, "n")
			if i < 1000 {
				w.i32(3, 1)
				w.i32(5, 1)
			} else {
				w.i32(1, tyInt32)
				w.i32(3, 1)
			}
			w.end()
		}
		w.end()
		return wrap(w.b, 10)
	}()
	lies := func(c fcol) []byte { return forge([]fcol{c}, 1, 100, nil) }
	tests := []struct {
		name string
		file []byte
		lim  format.Limits
		want string
	}{
		{"not parquet", []byte("this is a CSV file, not columns at all,\n1,2,3\n"), format.Limits{}, "magic"},
		{"too small", []byte("PAR1"), format.Limits{}, "cannot hold"},
		{"footer longer than the file", append([]byte("PAR1xxxxxxxx"), 0xff, 0xff, 0xff, 0x0f, 'P', 'A', 'R', '1'), format.Limits{}, "larger than the file"},
		{"footer over MetaBytes", forge(ok, 1, 100, nil), format.Limits{MetaBytes: 16}, "MetaBytes"},
		{"offsets past the object", lies(fcol{name: "x", phys: tyInt64, values: 100, unc: 800, comp: 800, dataOff: 1 << 40}), format.Limits{}, "not between"},
		{"chunk runs into the footer", lies(fcol{name: "x", phys: tyInt64, values: 100, unc: 800, comp: 5000, dataOff: 4}), format.Limits{}, "not between"},
		{"overlapping chunks", forge([]fcol{{name: "x", phys: tyInt64, values: 100, unc: 800, comp: 600, dataOff: 4}, {name: "y", phys: tyInt64, values: 100, unc: 800, comp: 300, dataOff: 304}}, 1, 100, nil), format.Limits{}, "overlap"},
		{"row group of 10 GB", lies(fcol{name: "x", phys: tyBytes, values: 100, unc: 10 << 30, comp: 900, dataOff: 4}), format.Limits{}, "ChunkBytes"},
		{"nested 1,000 deep", deep, format.Limits{}, "deeper than"},
		{"absurd row count", forge(ok, 1, 1<<40, nil), format.Limits{}, "ChunkSamples"},
		{"values disagree with rows", lies(fcol{name: "x", phys: tyInt64, values: 7, unc: 800, comp: 800, dataOff: 4}), format.Limits{}, "values in a row group"},
		{"column of another type", forge([]fcol{{name: "x", phys: tyInt64, values: 100, unc: 800, comp: 800, dataOff: 4}}, 1, 100, func(w *tw) {}), format.Limits{}, ""},
		{"LZO", lies(fcol{name: "x", phys: tyInt64, codec: codecLZO, values: 100, unc: 800, comp: 800, dataOff: 4}), format.Limits{}, "LZO"},
		{"list of 2^31 row groups", wrap([]byte{0x19, 0xfc, 0xff, 0xff, 0xff, 0xff, 0x07, 0}, 10), format.Limits{}, "list of"},
		{"truncated footer", wrap(forge(ok, 1, 100, nil)[1004:1030], 10), format.Limits{}, "footer"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := indexOne("bad/file.parquet", tc.file, tc.lim)
			if err == nil {
				if tc.want == "" {
					return
				}
				t.Fatal("accepted")
			}
			if !errors.Is(err, format.ErrInvalid) && !errors.Is(err, format.ErrUnsupported) {
				t.Fatalf("not ErrInvalid: %v", err)
			}
			if !strings.Contains(err.Error(), "bad/file.parquet") || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("%v (want the object and %q)", err, tc.want)
			}
		})
	}
}

// A dictionary whose header claims more values than its page holds is
// refused when indexing reads it.
func TestDictionaryLargerThanPage(t *testing.T) {
	sc := arrow.NewSchema([]arrow.Field{{Name: "s", Type: arrow.BinaryTypes.String}}, nil)
	rec := newRecord(sc, func(b *array.RecordBuilder) {
		for i := range 100 {
			b.Field(0).(*array.StringBuilder).Append(strings.Repeat("v", i%3))
		}
	})
	b := writeArrow(t, sc, pq.NewWriterProperties(pq.WithDictionaryDefault(true)), rec)
	// The dictionary page's header is at byte 4: make its num_values
	// (the dictionary_page_header's first field) huge.
	h, err := parsePageHeader(b[4:])
	if err != nil || h.typ != pageDict {
		t.Fatalf("%+v %v", h, err)
	}
	r := &treader{b: b[4:]}
	at := -1
	r.walk(func(id int16, typ byte) error {
		if id == 7 {
			return r.walk(func(id int16, typ byte) error {
				if id == 1 {
					at = 4 + r.pos
				}
				return errSkip
			})
		}
		return errSkip
	})
	if at < 0 || b[at] != byte(3<<1) { // zigzag 3: three distinct values
		t.Fatalf("num_values at %d is %x", at, b[at])
	}
	b[at] = 0x7e // zigzag 63
	// Indexing reads footers alone: a dictionary page is data, read when
	// its row group is decoded, which refuses it as damaged, naming it.
	st := newStore()
	st.put("dict.parquet", b)
	lay, err := Format{}.Index(context.Background(), st, st.listing(), format.Options{})
	if err != nil {
		t.Fatal(err)
	}
	dec, err := Format{}.Open(lay.Meta)
	if err != nil {
		t.Fatal(err)
	}
	_, err = decodeChunk(st, dec, lay.Chunks[0], 0, nil)
	if !errors.Is(err, format.ErrDamaged) || !strings.Contains(err.Error(), "does not fit its page") || !strings.Contains(err.Error(), "dict.parquet") {
		t.Fatalf("%v", err)
	}
}

// FuzzIndex: a hostile file — footer, schema, row groups, a dictionary —
// never panics indexing, and never makes it allocate much past what the
// file's own bytes and the limits allow.
func FuzzIndex(f *testing.F) {
	ok := []fcol{{name: "x", phys: tyInt64, values: 100, unc: 800, comp: 800, dataOff: 4}}
	f.Add(forge(ok, 1, 100, nil))
	f.Add(forge([]fcol{{name: "x", phys: tyBytes, values: 100, unc: 10 << 30, comp: 900, dataOff: 4}}, 1, 100, nil))
	f.Add(forge(ok, 3, 1<<40, nil))
	f.Add(wrap([]byte{0x19, 0xfc, 0xff, 0xff, 0xff, 0xff, 0x07, 0}, 10))
	sc := arrow.NewSchema([]arrow.Field{{Name: "s", Type: arrow.BinaryTypes.String}, {Name: "l", Type: arrow.ListOf(arrow.PrimitiveTypes.Int32)}}, nil)
	rec := newRecord(sc, func(b *array.RecordBuilder) {
		for i := range 20 {
			b.Field(0).(*array.StringBuilder).Append(strings.Repeat("v", i%3))
			b.Field(1).(*array.ListBuilder).Append(true)
			b.Field(1).(*array.ListBuilder).ValueBuilder().(*array.Int32Builder).Append(int32(i))
		}
	})
	f.Add(writeArrow(f, sc, pq.NewWriterProperties(pq.WithDictionaryDefault(true)), rec))
	lim := format.Limits{MetaBytes: 1 << 20, ChunkBytes: 1 << 30, Fields: 64, Depth: 16, ChunkSamples: 1 << 20}
	f.Fuzz(func(t *testing.T, b []byte) {
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		err := indexOne("f.parquet", b, lim)
		runtime.ReadMemStats(&after)
		if err != nil && !errors.Is(err, format.ErrInvalid) && !errors.Is(err, format.ErrUnsupported) {
			t.Fatalf("an error that is neither invalid nor unsupported: %v", err)
		}
		// The file is read (a tail, a footer, dictionaries), a footer's
		// structs kept at a few times their bytes; a generous slack for
		// the index's layout of up to a row group's keys.
		if a := after.TotalAlloc - before.TotalAlloc; a > 64*uint64(len(b))+64<<20 {
			t.Fatalf("indexing %d bytes allocated %d", len(b), a)
		}
	})
}
