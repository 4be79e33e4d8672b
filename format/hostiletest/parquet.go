package hostiletest

import (
	"encoding/binary"
	"fmt"
)

// Column is the one column of a forged Parquet file.
type Column int

const (
	// Image is a required binary column "image": an image field.
	Image Column = iota
	// Tokens is an optional list<int32> column "input_ids" (the
	// three-level list): a token field.
	Tokens
)

// Page is the one data page (v1, PLAIN) of a forged Parquet file.
type Page struct {
	Column Column
	// Codec is "" (uncompressed) or a codec Parquet has: ZSTD,
	// ZSTDNoSize, Gzip, Snappy, LZ4Raw, LZ4Frame, LZ4Hadoop (the
	// deprecated LZ4), Brotli.
	Codec string
	// Rows is the row group's rows: each one value (Image) or a list of
	// one element (Tokens).
	Rows int
	// States is the page's uncompressed size as its header states it
	// (the footer's total_uncompressed_size is its header's and this).
	States int64
	// Body is the page's bytes as stored.
	Body []byte
}

// parquetCodec is each codec's number in Parquet's footer.
var parquetCodec = map[string]int64{"": 0, Snappy: 1, Gzip: 2, Brotli: 4, LZ4Frame: 5, LZ4Hadoop: 5, ZSTD: 6, ZSTDNoSize: 6, LZ4Raw: 7}

// ParquetCodecs are the codecs a Parquet page may have, in a fixed order.
var ParquetCodecs = []string{ZSTD, ZSTDNoSize, Gzip, Snappy, LZ4Raw, LZ4Frame, LZ4Hadoop, Brotli}

// Plain is what an honest page of rows rows of column c holds
// uncompressed: Image's values PLAIN (a length and the bytes: a few
// hundred bytes a row, compressible), Tokens' repetition and definition
// levels (RLE) and PLAIN int32 elements.
func Plain(c Column, rows int) []byte {
	var b []byte
	if c == Image {
		for i := range rows {
			v := make([]byte, 200+i%300)
			for j := range v {
				v[j] = byte(i + j/16)
			}
			b = binary.LittleEndian.AppendUint32(b, uint32(len(v)))
			b = append(b, v...)
		}
		return b
	}
	run := func(v byte) []byte { // an RLE run of rows levels v, length-prefixed
		r := binary.AppendUvarint(nil, uint64(rows)<<1)
		r = append(r, v)
		return append(binary.LittleEndian.AppendUint32(nil, uint32(len(r))), r...)
	}
	b = append(b, run(0)...) // repetition: every row a list of its own
	b = append(b, run(3)...) // definition: every element present
	for i := range rows {
		b = binary.LittleEndian.AppendUint32(b, uint32(i%50257))
	}
	return b
}

// Honest is the page of rows rows of column c compressed with codec, as
// a writer writes it.
func Honest(c Column, codec string, rows int) Page {
	plain := Plain(c, rows)
	body := plain
	if codec != "" {
		body = Compress(codec, plain)
	}
	return Page{Column: c, Codec: codec, Rows: rows, States: int64(len(plain)), Body: body}
}

// Parquet returns a Parquet file of one row group whose column chunk is
// the page p alone, its footer stating the page's sizes.
func Parquet(p Page) []byte {
	codec, ok := parquetCodec[p.Codec]
	if !ok {
		panic("hostiletest: Parquet has no codec " + p.Codec)
	}
	hdr := &thrift{}
	hdr.begin()
	hdr.i32(1, 0) // DATA_PAGE
	hdr.i32(2, p.States)
	hdr.i32(3, int64(len(p.Body)))
	hdr.field(5, tStruct)
	hdr.begin()
	hdr.i32(1, int64(p.Rows))
	hdr.i32(2, 0) // PLAIN
	hdr.i32(3, 3) // RLE levels
	hdr.i32(4, 3)
	hdr.end()
	hdr.end()
	chunk := append(hdr.b, p.Body...)

	f := &thrift{}
	f.begin()
	f.i32(1, 1)
	path := []string{"image"}
	phys := int64(6) // BYTE_ARRAY
	if p.Column == Image {
		f.list(2, tStruct, 2)
		f.element(-1, -1, "schema", 1, -1)
		f.element(6, 0, "image", -1, -1)
	} else {
		path, phys = []string{"input_ids", "list", "element"}, 1 // INT32
		f.list(2, tStruct, 4)
		f.element(-1, -1, "schema", 1, -1)
		f.element(-1, 1, "input_ids", 1, 3) // OPTIONAL, LIST
		f.element(-1, 2, "list", 1, -1)     // REPEATED
		f.element(1, 1, "element", -1, -1)  // OPTIONAL INT32
	}
	f.i64(3, int64(p.Rows))
	f.list(4, tStruct, 1)
	f.begin()
	f.list(1, tStruct, 1)
	f.begin()
	f.i64(2, 4)
	f.field(3, tStruct)
	f.begin()
	f.i32(1, phys)
	f.list(2, tI32, 2)
	f.zz(0) // PLAIN
	f.zz(3) // RLE
	f.list(3, tBinary, len(path))
	for _, s := range path {
		f.uv(uint64(len(s)))
		f.b = append(f.b, s...)
	}
	f.i32(4, codec)
	f.i64(5, int64(p.Rows))
	f.i64(6, int64(len(hdr.b))+p.States)
	f.i64(7, int64(len(chunk)))
	f.i64(9, 4)
	f.end()
	f.end()
	f.i64(2, int64(len(hdr.b))+p.States)
	f.i64(3, int64(p.Rows))
	f.end()
	f.end()

	b := append([]byte("PAR1"), chunk...)
	b = append(b, f.b...)
	b = binary.LittleEndian.AppendUint32(b, uint32(len(f.b)))
	return append(b, "PAR1"...)
}

// BombSize is what each codec's bomb in the corpora inflates to: 2 GiB
// for ZSTD (64 KiB of RLE blocks, the file), a Snappy header's
// 4 GiB − 1, 16 MiB for Brotli (whose writer takes the time of its
// output), 64 MiB for the others.
func BombSize(codec string) int64 {
	switch codec {
	case ZSTD, ZSTDNoSize:
		return 2 << 30
	case Snappy:
		return 1<<32 - 1
	case Brotli:
		return 16 << 20
	}
	return 64 << 20
}

// ParquetBombs is a Parquet file of every codec's bomb, by name
// ("zstd-bomb", ...): an image page whose header honestly states 1.6 MB
// (the issue's) and whose bytes are Bomb(codec, BombSize(codec)); and
// "tokens-zstd-nosize-bomb", the token column's ZSTD bomb, which indexing
// a token dataset decompresses.
func ParquetBombs() map[string][]byte {
	const states = 1_600_000
	out := map[string][]byte{}
	for _, c := range ParquetCodecs {
		out[c+"-bomb"] = ParquetBomb(Image, c, states, BombSize(c))
	}
	out["tokens-"+ZSTDNoSize+"-bomb"] = ParquetBomb(Tokens, ZSTDNoSize, states, 2<<30)
	return out
}

// ParquetDamaged is a damaged Parquet file, by name: a page of each codec
// that inflates 100 bytes past the size its header states
// ("gzip-past", ...), and an uncompressed page whose first value's length
// runs past the page ("value-past-page").
func ParquetDamaged() map[string][]byte {
	out := map[string][]byte{}
	for _, c := range ParquetCodecs {
		past := Honest(Image, c, 100)
		past.States -= 100
		out[c+"-past"] = Parquet(past)
	}
	plain := Honest(Image, "", 100)
	binary.LittleEndian.PutUint32(plain.Body, 1<<30) // the first value's length runs past its page
	out["value-past-page"] = Parquet(plain)
	return out
}

// ParquetBomb is a Parquet file of 1,000 rows of column c whose one page,
// of codec, states states bytes and is Bomb(codec, inflates): the issue's
// 66 KB file is ParquetBomb(Image, ZSTDNoSize, 1_600_000, 2<<30).
func ParquetBomb(c Column, codec string, states, inflates int64) []byte {
	return Parquet(Page{Column: c, Codec: codec, Rows: 1000, States: states, Body: Bomb(codec, inflates)})
}

// Thrift's compact protocol: enough to forge a footer and a page header.
const (
	tI32    = 5
	tI64    = 6
	tBinary = 8
	tList   = 9
	tStruct = 12
)

type thrift struct {
	b    []byte
	last []int16
}

func (w *thrift) begin()      { w.last = append(w.last, 0) }
func (w *thrift) end()        { w.b = append(w.b, 0); w.last = w.last[:len(w.last)-1] }
func (w *thrift) uv(v uint64) { w.b = binary.AppendUvarint(w.b, v) }
func (w *thrift) zz(v int64)  { w.uv(uint64(v<<1) ^ uint64(v>>63)) }

func (w *thrift) field(id int16, t byte) {
	d := id - w.last[len(w.last)-1]
	if d > 0 && d <= 15 {
		w.b = append(w.b, byte(d)<<4|t)
	} else {
		w.b = append(w.b, t)
		w.zz(int64(id))
	}
	w.last[len(w.last)-1] = id
}

func (w *thrift) i32(id int16, v int64) { w.field(id, tI32); w.zz(v) }
func (w *thrift) i64(id int16, v int64) { w.field(id, tI64); w.zz(v) }

func (w *thrift) str(id int16, s string) {
	w.field(id, tBinary)
	w.uv(uint64(len(s)))
	w.b = append(w.b, s...)
}

func (w *thrift) list(id int16, et byte, n int) {
	w.field(id, tList)
	if n < 15 {
		w.b = append(w.b, byte(n)<<4|et)
		return
	}
	w.b = append(w.b, 0xf0|et)
	w.uv(uint64(n))
}

// element writes a SchemaElement; -1 leaves a field out.
func (w *thrift) element(phys, rep int64, name string, children, converted int64) {
	w.begin()
	if phys >= 0 {
		w.i32(1, phys)
	}
	if rep >= 0 {
		w.i32(3, rep)
	}
	w.str(4, name)
	if children >= 0 {
		w.i32(5, children)
	}
	if converted >= 0 {
		w.i32(6, converted)
	}
	w.end()
}

// Describe names a page for messages.
func (p Page) Describe() string {
	return fmt.Sprintf("a %s page of %d rows, %d bytes stating %d", p.Codec, p.Rows, len(p.Body), p.States)
}
