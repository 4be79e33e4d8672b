package parquet

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	pq "github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/compress"

	"github.com/brandgw/brand/format"
	"github.com/brandgw/brand/tokenize"
)

// tokenSchema is a tokenized corpus as the Hub holds one: token lists, an
// id, and a wide column a token job never reads.
func tokenSchema(elem arrow.DataType) *arrow.Schema {
	return arrow.NewSchema([]arrow.Field{
		{Name: "id", Type: arrow.PrimitiveTypes.Int64},
		{Name: "input_ids", Type: arrow.ListOf(elem), Nullable: true},
		{Name: "blob", Type: arrow.BinaryTypes.Binary},
	}, nil)
}

// tokenRows writes n rows of documents of every length a corpus has
// (empty, null, one token, long ones spanning pages) and returns each
// row's tokens (nil for a null list).
func tokenRows(sc *arrow.Schema, n int) (arrow.RecordBatch, [][]int64) {
	docs := make([][]int64, n)
	rec := newRecord(sc, func(b *array.RecordBuilder) {
		ib := b.Field(1).(*array.ListBuilder)
		for i := range n {
			b.Field(0).(*array.Int64Builder).Append(int64(i))
			b.Field(2).(*array.BinaryBuilder).Append([]byte(strings.Repeat(fmt.Sprint(i%10), 900)))
			switch {
			case i%17 == 5:
				ib.AppendNull()
				continue
			case i%13 == 4:
				ib.Append(true) // empty
				docs[i] = []int64{}
				continue
			}
			ib.Append(true)
			l := 1 + (i*7919)%300
			if i%50 == 7 {
				l = 5000 // spans pages
			}
			for j := range l {
				v := int64((i*31 + j*17) % 60000)
				docs[i] = append(docs[i], v)
				switch vb := ib.ValueBuilder().(type) {
				case *array.Int32Builder:
					vb.Append(int32(v))
				case *array.Uint16Builder:
					vb.Append(uint16(v))
				case *array.Int64Builder:
					vb.Append(v)
				}
			}
		}
	})
	return rec, docs
}

// A list<int> column named by Options.Tokens is a token dataset: each
// row's count from the column's levels, read once at index time (that
// column's column chunks and nothing else), for every codec, both page
// versions and dictionary or plain values; its decoder is format.Tokens,
// and each row's .npy has the count the index holds.
func TestTokensList(t *testing.T) {
	codecs := []compress.Compression{compress.Codecs.Uncompressed, compress.Codecs.Snappy, compress.Codecs.Zstd, compress.Codecs.Gzip, compress.Codecs.Lz4}
	for _, elem := range []struct {
		typ   arrow.DataType
		dtype string
	}{{arrow.PrimitiveTypes.Int32, "int32"}, {arrow.PrimitiveTypes.Uint16, "uint16"}, {arrow.PrimitiveTypes.Int64, "int64"}} {
		sc := tokenSchema(elem.typ)
		rec, docs := tokenRows(sc, 400)
		codecs := codecs
		if elem.dtype != "int32" { // the levels are the same whatever the values' type
			codecs = codecs[1:2]
		}
		for _, codec := range codecs {
			for _, v2 := range []bool{false, true} {
				for _, dict := range []bool{false, true} {
					t.Run(fmt.Sprintf("%s/%s/v2=%v/dict=%v", elem.dtype, codec, v2, dict), func(t *testing.T) {
						opts := []pq.WriterProperty{pq.WithCompression(codec), pq.WithDictionaryDefault(dict),
							pq.WithDataPageSize(4 << 10), pq.WithMaxRowGroupLength(150)}
						if v2 {
							opts = append(opts, pq.WithDataPageVersion(pq.DataPageV2))
						}
						st := newStore()
						st.put("a.parquet", writeArrow(t, sc, pq.NewWriterProperties(opts...), rec))
						checkTokenList(t, st, docs, elem.dtype)
					})
				}
			}
		}
	}
}

func checkTokenList(t *testing.T, st *memStore, docs [][]int64, dtype string) {
	t.Helper()
	ctx := context.Background()
	// The footers alone, as without Options.Tokens.
	if _, err := (Format{}).Index(ctx, st, st.listing(), format.Options{}); err != nil {
		t.Fatal(err)
	}
	footers := st.Take().Sum().Bytes
	lay, err := Format{}.Index(ctx, st, st.listing(), format.Options{Tokens: "input_ids", Vocabulary: "gpt2"})
	if err != nil {
		t.Fatal(err)
	}
	dec, err := Format{}.Open(lay.Meta)
	if err != nil {
		t.Fatal(err)
	}
	tok, ok := dec.(format.Tokens)
	if !ok {
		t.Fatalf("%T is not format.Tokens", dec)
	}
	if tok.TokenType() != dtype || tok.TokenField() != "input_ids" || tok.Vocabulary() != "gpt2" {
		t.Fatalf("type %q field %q vocabulary %q", tok.TokenType(), tok.TokenField(), tok.Vocabulary())
	}
	if _, ok := dec.(format.TokenSpecials).EOS(); ok {
		t.Fatal("a list column's dataset names an EOS")
	}
	sel, _ := format.Select(dec.Fields(), []string{"input_ids"})
	var column int64
	for c := range lay.Chunks {
		rs, _ := dec.Extent(c, sel)
		column += format.Concat(rs)
	}
	if got := st.Take().Sum().Bytes - footers; got != column {
		t.Fatalf("counting read %d bytes besides the footers; the input_ids column chunks are %d", got, column)
	}
	k := 0
	for c, ch := range lay.Chunks {
		counts := tok.DocTokens(c)
		if len(counts) != ch.Samples {
			t.Fatalf("chunk %d: %d counts for %d rows", c, len(counts), ch.Samples)
		}
		got, err := decodeChunk(st, dec, ch, c, sel)
		if err != nil {
			t.Fatal(err)
		}
		for i, n := range counts {
			if int(n) != len(docs[k]) {
				t.Fatalf("row %d: counted %d tokens, has %d", k, n, len(docs[k]))
			}
			size := map[string]int{"int32": 4, "uint16": 2, "int64": 8}[dtype]
			descr := map[string]string{"int32": "<i4", "uint16": "<u2", "int64": "<i8"}[dtype]
			want := ""
			if docs[k] != nil {
				want = fmt.Sprintf("npy=%q\n", npyOf(descr, size, docs[k]))
			} else {
				want = fmt.Sprintf("null=%q\n", "")
			}
			if g := render(got[i].members); g != want {
				t.Fatalf("row %d:\n got %.200s\nwant %.200s", k, g, want)
			}
			k++
		}
	}
}

// Without Options.Tokens indexing reads the footers alone, as before
// token datasets (one tail read a file: 64 KiB of the first, twice its
// footer of the second), and the decoder is not a token dataset's.
func TestNoTokensFootersAlone(t *testing.T) {
	sc := tokenSchema(arrow.PrimitiveTypes.Int32)
	rec, _ := tokenRows(sc, 400)
	st := newStore()
	st.put("a.parquet", writeArrow(t, sc, pq.NewWriterProperties(pq.WithMaxRowGroupLength(100)), rec))
	st.put("b.parquet", writeArrow(t, sc, pq.NewWriterProperties(pq.WithMaxRowGroupLength(100)), rec))
	lay, err := Format{}.Index(context.Background(), st, st.listing(), format.Options{})
	if err != nil {
		t.Fatal(err)
	}
	a := st.objs["a.parquet"]
	last := int64(binary.LittleEndian.Uint32(a[len(a)-8:])) + 8
	if got, want := st.Total().Sum(), min(int64(len(a)), tailRead)+min(int64(len(a)), tailFor(last)); got.Bytes != want || got.Reads != 2 {
		t.Fatalf("indexing read %d bytes in %d reads; want %d in 2 (the files are %d bytes)", got.Bytes, got.Reads, want, len(st.objs["a.parquet"]))
	}
	dec, err := Format{}.Open(lay.Meta)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := dec.(format.Tokens); ok {
		t.Fatalf("a dataset indexed without Options.Tokens is a token dataset")
	}
}

// Options.Tokens naming a column that is not a list of integers, or none,
// is refused naming it; --text naming a column that is not a string too.
func TestTokensRefusedColumns(t *testing.T) {
	sc := tokenSchema(arrow.PrimitiveTypes.Int32)
	rec, _ := tokenRows(sc, 50)
	st := newStore()
	st.put("a.parquet", writeArrow(t, sc, pq.NewWriterProperties(), rec))
	for _, c := range []struct {
		opt  format.Options
		want string
	}{
		{format.Options{Tokens: "blob"}, `column "blob" is binary, not a list of integers`},
		{format.Options{Tokens: "id"}, `column "id" is int64, not a list of integers`},
		{format.Options{Tokens: "nope"}, `no column "nope"`},
		{format.Options{Text: "input_ids", Tokenizer: goldenModel(t)}, `column "input_ids" is list<int32>, not a string`},
		{format.Options{Text: "blob"}, `--text and --tokenizer go together`},
		{format.Options{Tokens: "input_ids", Text: "blob", Tokenizer: goldenModel(t)}, `not both`},
	} {
		_, err := Format{}.Index(context.Background(), st, st.listing(), c.opt)
		if !errors.Is(err, format.ErrInvalid) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v; want ErrInvalid saying %q", c.opt.Tokens+c.opt.Text, err, c.want)
		}
	}
}

// A value outside the column's integer type (an INT(16, unsigned) column
// whose INT32 holds 70000) is damage, never truncated into another token
// (it was: 70000 became 4464).
func TestTokenOutsideType(t *testing.T) {
	f := handFile{
		leafType:  tyInt32,
		logical:   &intLogical{bits: 16, signed: false},
		values:    []int32{1, 65535, 70000, 3},
		rowStarts: []int{0, 2},
	}
	st := newStore()
	st.put("u.parquet", f.bytes())
	lay, err := Format{}.Index(context.Background(), st, st.listing(), format.Options{Tokens: "tokens"})
	if err != nil {
		t.Fatal(err)
	}
	dec, err := Format{}.Open(lay.Meta)
	if err != nil {
		t.Fatal(err)
	}
	if got := dec.(format.Tokens).DocTokens(0); len(got) != 2 || got[0] != 2 || got[1] != 2 {
		t.Fatalf("counts %v", got)
	}
	_, err = decodeChunk(st, dec, lay.Chunks[0], 0, nil)
	if !errors.Is(err, format.ErrDamaged) || !strings.Contains(err.Error(), "70000 is outside the column's type uint16") {
		t.Fatalf("%v; want damage naming 70000", err)
	}
}

// A document of 10^9 tokens (a list of uint8 whose levels are two runs,
// so the file is a few hundred bytes and its resident bound, 10^9 bytes,
// fits a chunk) is refused at index time past Limits.DocTokens, counted
// run by run without allocating for its tokens.
func TestTokensDocumentTooLong(t *testing.T) {
	f := handFile{leafType: tyInt32, logical: &intLogical{bits: 8, signed: false}, runOf: 1_000_000_000}
	st := newStore()
	st.put("big.parquet", f.bytes())
	// Without Options.Tokens it is a dataset like any: its bound fits.
	if _, err := (Format{}).Index(context.Background(), st, st.listing(), format.Options{}); err != nil {
		t.Fatal(err)
	}
	_, err := Format{}.Index(context.Background(), st, st.listing(), format.Options{Tokens: "tokens"})
	if !errors.Is(err, format.ErrInvalid) || !strings.Contains(err.Error(), "row 0 has more than 268435456 tokens (Limits.DocTokens)") {
		t.Fatalf("%v; want the document refused past Limits.DocTokens", err)
	}
}

// handFile writes a Parquet file by hand (arrow-go's writer cannot write
// what these tests need: values outside a column's logical type, a list
// of 10^9 elements in a few bytes): one row group, one column "tokens",
// a bare repeated INT32 with an integer logical type, one data page v2,
// uncompressed, its levels and values as given.
type handFile struct {
	leafType  int8
	logical   *intLogical
	values    []int32 // PLAIN values
	rowStarts []int   // where each row's list starts in values
	runOf     int     // instead: one row of this many elements, all 0, as RLE runs
}

type intLogical struct {
	bits   int8
	signed bool
}

func (f handFile) bytes() []byte {
	var reps, defs, vals []byte
	var numValues, rows int
	if f.runOf > 0 {
		numValues, rows = f.runOf, 1
		reps = rleRun(nil, 1, 0, 1)
		reps = rleRun(reps, f.runOf-1, 1, 1)
		defs = rleRun(nil, f.runOf, 1, 1)
		// RLE_DICTIONARY values would be a few bytes too; PLAIN needs
		// them all, and are never read: no dictionary is declared, and
		// counting does not read values. A page with one value's bytes
		// is enough for the index (which the test never decodes).
		vals = make([]byte, 4)
	} else {
		numValues, rows = len(f.values), len(f.rowStarts)
		rep := make([]int, len(f.values))
		for i := range rep {
			rep[i] = 1
		}
		for _, s := range f.rowStarts {
			rep[s] = 0
		}
		for _, r := range rep {
			reps = rleRun(reps, 1, r, 1)
		}
		defs = rleRun(nil, len(f.values), 1, 1)
		for _, v := range f.values {
			vals = binary.LittleEndian.AppendUint32(vals, uint32(v))
		}
	}
	body := append(append(append([]byte{}, reps...), defs...), vals...)
	var ph thriftW
	ph.i32(1, pageDataV2)
	ph.i32(2, int32(len(body)))
	ph.i32(3, int32(len(body)))
	ph.structBegin(8)
	ph.i32(1, int32(numValues))
	ph.i32(2, 0)
	ph.i32(3, int32(rows))
	ph.i32(4, 0) // PLAIN
	ph.i32(5, int32(len(defs)))
	ph.i32(6, int32(len(reps)))
	ph.boolean(7, false)
	ph.structEnd()
	ph.stop()
	page := append(ph.b, body...)
	file := append([]byte("PAR1"), page...)

	var m thriftW
	m.i32(1, 1) // version
	m.listBegin(2, tStruct, 2)
	// root
	m.elemBegin()
	m.str(4, "schema")
	m.i32(5, 1)
	m.elemEnd()
	// the leaf
	m.elemBegin()
	m.i32(1, int32(f.leafType))
	m.i32(3, repRepeated)
	m.str(4, "tokens")
	if f.logical != nil {
		m.structBegin(10) // LogicalType
		m.structBegin(10) // INTEGER
		m.byteField(1, f.logical.bits)
		m.boolean(2, f.logical.signed)
		m.structEnd()
		m.structEnd()
	}
	m.elemEnd()
	m.i64(3, int64(rows))
	m.listBegin(4, tStruct, 1)
	m.elemBegin() // row group
	m.listBegin(1, tStruct, 1)
	m.elemBegin() // column chunk
	m.i64(2, 4)
	m.structBegin(3)
	m.i32(1, int32(f.leafType))
	m.listBegin(2, tI32, 2)
	m.listI32(0)
	m.listI32(3)
	m.listBegin(3, tBinary, 1)
	m.listStr("tokens")
	m.i32(4, 0) // uncompressed
	m.i64(5, int64(numValues))
	m.i64(6, int64(len(page)))
	m.i64(7, int64(len(page)))
	m.i64(9, 4)
	m.structEnd()
	m.elemEnd()
	m.i64(2, int64(len(page)))
	m.i64(3, int64(rows))
	m.elemEnd()
	m.stop()
	file = append(file, m.b...)
	file = binary.LittleEndian.AppendUint32(file, uint32(len(m.b)))
	return append(file, "PAR1"...)
}

// rleRun appends an RLE run of n levels of value v (width bits) to b.
func rleRun(b []byte, n, v, width int) []byte {
	b = binary.AppendUvarint(b, uint64(n)<<1)
	for i := 0; i < (width+7)/8; i++ {
		b = append(b, byte(v>>(8*i)))
	}
	return b
}

// thriftW writes Thrift's compact protocol, as much as handFile needs.
type thriftW struct {
	b    []byte
	last []int16 // the last field id, per open struct
	id   int16
}

func (w *thriftW) field(id int16, typ byte) {
	if d := id - w.id; d > 0 && d <= 15 {
		w.b = append(w.b, byte(d)<<4|typ)
	} else {
		w.b = append(w.b, typ)
		w.b = binary.AppendVarint(w.b, int64(id))
	}
	w.id = id
}
func (w *thriftW) i32(id int16, v int32) { w.field(id, tI32); w.b = binary.AppendVarint(w.b, int64(v)) }
func (w *thriftW) i64(id int16, v int64) { w.field(id, tI64); w.b = binary.AppendVarint(w.b, v) }
func (w *thriftW) byteField(id int16, v int8) {
	w.field(id, tByte)
	w.b = append(w.b, byte(v))
}
func (w *thriftW) boolean(id int16, v bool) {
	if v {
		w.field(id, tTrue)
	} else {
		w.field(id, tFalse)
	}
}
func (w *thriftW) str(id int16, s string) {
	w.field(id, tBinary)
	w.b = binary.AppendUvarint(w.b, uint64(len(s)))
	w.b = append(w.b, s...)
}
func (w *thriftW) structBegin(id int16) {
	w.field(id, tStruct)
	w.last = append(w.last, w.id)
	w.id = 0
}
func (w *thriftW) structEnd() {
	w.stop()
	w.id, w.last = w.last[len(w.last)-1], w.last[:len(w.last)-1]
}
func (w *thriftW) stop() { w.b = append(w.b, 0) }
func (w *thriftW) listBegin(id int16, elem byte, n int) {
	w.field(id, tList)
	w.b = append(w.b, byte(n)<<4|elem)
}
func (w *thriftW) listI32(v int32) { w.b = binary.AppendVarint(w.b, int64(v)) }
func (w *thriftW) listStr(s string) {
	w.b = binary.AppendUvarint(w.b, uint64(len(s)))
	w.b = append(w.b, s...)
}

// elemBegin and elemEnd open and close a struct that is a list element.
func (w *thriftW) elemBegin() { w.last = append(w.last, w.id); w.id = 0 }
func (w *thriftW) elemEnd()   { w.structEnd() }

// goldenModel is package tokenize's committed BPE model.
func goldenModel(t testing.TB) []byte {
	t.Helper()
	b, err := os.ReadFile("../../tokenize/testdata/golden-bpe.model")
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// multilingualTexts are documents in several scripts, with invalid
// UTF-8 (a stray continuation byte, a truncated sequence, an overlong
// form, a surrogate), an empty one and a null.
var multilingualTexts = []*string{
	ptr("The quick brown fox jumps over the lazy dog."),
	ptr("Größenordnung: über 3 000 km² — naïve café."),
	ptr("Съешь же ещё этих мягких французских булок."),
	ptr("東京は日本の首都です。人口は約1400万人。"),
	ptr("مرحبا بالعالم، هذا نص عربي."),
	ptr("नमस्ते दुनिया, यह हिंदी है।"),
	ptr("🙂 emoji 👩‍💻 and combining e\u0301"),
	ptr("bad \x80 byte, truncated \xe6\x97 and overlong \xc0\xaf, surrogate \xed\xa0\x80 end"),
	ptr(""),
	nil,
	ptr(strings.Repeat("long document, many words. ", 400)),
}

func ptr(s string) *string { return &s }

// textFile writes texts as a string column "text" beside an id, in row
// groups of 4.
func textFile(t testing.TB, texts []*string, opts ...pq.WriterProperty) []byte {
	sc := arrow.NewSchema([]arrow.Field{
		{Name: "id", Type: arrow.PrimitiveTypes.Int64},
		{Name: "text", Type: arrow.BinaryTypes.String, Nullable: true},
	}, nil)
	rec := newRecord(sc, func(b *array.RecordBuilder) {
		for i, s := range texts {
			b.Field(0).(*array.Int64Builder).Append(int64(i))
			if s == nil {
				b.Field(1).AppendNull()
			} else {
				b.Field(1).(*array.StringBuilder).Append(*s)
			}
		}
	})
	return writeArrow(t, sc, pq.NewWriterProperties(append([]pq.WriterProperty{pq.WithMaxRowGroupLength(4)}, opts...)...), rec)
}

// A string column named by Options.Text with a SentencePiece model is a
// token dataset: indexing tokenizes each row once and keeps the counts
// (and the model, in the description), and the field "tokens" decodes
// each row's text into its IDs as an int32 .npy, counted as indexed.
func TestTokensText(t *testing.T) {
	model := goldenModel(t)
	m, err := tokenize.Load(model)
	if err != nil {
		t.Fatal(err)
	}
	st := newStore()
	st.put("t.parquet", textFile(t, multilingualTexts))
	lay, err := Format{}.Index(context.Background(), st, st.listing(), format.Options{Text: "text", Tokenizer: model})
	if err != nil {
		t.Fatal(err)
	}
	dec, err := Format{}.Open(lay.Meta)
	if err != nil {
		t.Fatal(err)
	}
	tok := dec.(format.Tokens)
	if tok.TokenType() != "int32" || tok.TokenField() != format.TextTokensField || tok.Vocabulary() != m.Fingerprint() {
		t.Fatalf("type %q field %q vocabulary %q", tok.TokenType(), tok.TokenField(), tok.Vocabulary())
	}
	if eos, ok := dec.(format.TokenSpecials).EOS(); !ok || eos != m.Special().EOS {
		t.Fatalf("EOS %d %v; the model's is %d", eos, ok, m.Special().EOS)
	}
	fs := dec.Fields()
	if f := fs[len(fs)-1]; f.Name != "tokens" || f.Ext != "npy" {
		t.Fatalf("fields %+v", fs)
	}
	sel, _ := format.Select(fs, []string{"tokens"})
	k := 0
	for c, ch := range lay.Chunks {
		got, err := decodeChunk(st, dec, ch, c, sel)
		if err != nil {
			t.Fatal(err)
		}
		for i, n := range tok.DocTokens(c) {
			want := fmt.Sprintf("null=%q\n", "")
			var ids []int32
			if s := multilingualTexts[k]; s != nil {
				if ids, err = m.Encode([]byte(*s)); err != nil {
					t.Fatal(err)
				}
				vals := make([]int64, len(ids))
				for j, id := range ids {
					vals[j] = int64(id)
				}
				want = fmt.Sprintf("npy=%q\n", npyOf("<i4", 4, vals))
			}
			if int(n) != len(ids) {
				t.Fatalf("row %d: counted %d tokens, the model gives %d", k, n, len(ids))
			}
			if g := render(got[i].members); g != want {
				t.Fatalf("row %d:\n got %.300s\nwant %.300s", k, g, want)
			}
			k++
		}
	}
	if k != len(multilingualTexts) {
		t.Fatalf("%d rows", k)
	}

	// The tokens field reads the text's column chunks and nothing else.
	var text []format.Range
	for _, g := range ds0(t, lay).chunks {
		text = append(text, format.Range{Off: g.cols[1].start, Len: g.cols[1].length})
	}
	if ranges, _ := dec.Extent(0, sel); len(lay.Chunks) != 1 || !slices.Equal(ranges, text) {
		t.Fatalf("the tokens field reads %v of %d chunks; want the text column chunks %v", ranges, len(lay.Chunks), text)
	}

	// A count the decode does not find is damage: the description's
	// counts edited.
	ds, err := decodeMeta(lay.Meta)
	if err != nil {
		t.Fatal(err)
	}
	ds.tokens.counts[0][1]++
	bad, err := Format{}.Open(encodeMeta(ds))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := decodeChunk(st, bad, lay.Chunks[0], 0, sel); !errors.Is(err, format.ErrDamaged) {
		t.Fatalf("%v; want damage: a count other than the index's", err)
	}
}

// A tokenizer that is neither a SentencePiece model nor a tokenizer.json
// package tokenize loads is refused at index
// time, saying so.
func TestTokensTextNotAModel(t *testing.T) {
	st := newStore()
	st.put("t.parquet", textFile(t, multilingualTexts[:3]))
	for _, b := range [][]byte{[]byte(`{"model": {"type": "BPE"}}`), []byte("PAR1 not a model"), {}} {
		_, err := Format{}.Index(context.Background(), st, st.listing(), format.Options{Text: "text", Tokenizer: b})
		if !errors.Is(err, format.ErrInvalid) || !errors.Is(err, tokenize.ErrNotModel) {
			t.Errorf("%q: %v; want ErrInvalid and tokenize.ErrNotModel", b, err)
		}
	}
}

func ds0(t testing.TB, lay *format.Layout) *dataset {
	ds, err := decodeMeta(lay.Meta)
	if err != nil {
		t.Fatal(err)
	}
	return ds
}

// FuzzCountList counts a list column's elements from hostile column
// chunk bytes (seeded with real v1 and v2 chunks): an error or counts,
// never a panic, a count past Limits.DocTokens or more rows than the
// row group has.
func FuzzCountList(f *testing.F) {
	sc := tokenSchema(arrow.PrimitiveTypes.Int32)
	rec, _ := tokenRows(sc, 60)
	type target struct {
		d  *decoder
		ch *chunk
	}
	var targets []target
	for _, v2 := range []bool{false, true} {
		opts := []pq.WriterProperty{pq.WithDataPageSize(512), pq.WithCompression(compress.Codecs.Snappy)}
		if v2 {
			opts = append(opts, pq.WithDataPageVersion(pq.DataPageV2))
		}
		file := writeArrow(f, sc, pq.NewWriterProperties(opts...), rec)
		st := newStore()
		st.put("a.parquet", file)
		lay, err := Format{}.Index(context.Background(), st, st.listing(), format.Options{})
		if err != nil {
			f.Fatal(err)
		}
		dec, _ := Format{}.Open(lay.Meta)
		d := dec.(*decoder)
		ch := &d.ds.chunks[0]
		m := ch.cols[d.fields[1].leaves[0]]
		f.Add(uint8(len(targets)), file[m.start:m.start+m.length])
		targets = append(targets, target{d, ch})
	}
	lim := format.Limits{DocTokens: 1000}.WithDefaults()
	f.Fuzz(func(t *testing.T, which uint8, b []byte) {
		tg := targets[int(which)%len(targets)]
		fd := tg.d.fields[1]
		leaf := fd.leaves[0]
		m := tg.ch.cols[leaf]
		m.length = int64(len(b))
		counts, err := countList(tg.ch, fd, tg.d.schema.leaves[leaf], &m, b, lim)
		if err != nil {
			return
		}
		if int64(len(counts)) != tg.ch.rows {
			t.Fatalf("%d counts for %d rows", len(counts), tg.ch.rows)
		}
		for _, n := range counts {
			if int64(n) > lim.DocTokens {
				t.Fatalf("a count of %d past the bound", n)
			}
		}
	})
}
