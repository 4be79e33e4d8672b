package main

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"strconv"

	pqa "github.com/apache/arrow-go/v18/parquet"
	afile "github.com/apache/arrow-go/v18/parquet/file"
	pqg "github.com/parquet-go/parquet-go"

	"github.com/brandgw/brand/format"
)

// Each decoder turns one row group into Brand's resident form, as
// format/parquet must: row by row, every row's members (image bytes with
// the extension its path gives, the label as decimal text, or the tokens
// as a .npy array), through format.Writer. The file's footer is parsed
// once, outside the measured loop, as Brand's index does.

// npyHeader appends a NumPy v1.0 header of a 1-D int32 array of n
// elements to h.
func npyHeader(h []byte, n int) []byte {
	h = append(h, "\x93NUMPY\x01\x00\x00\x00{'descr': '<i4', 'fortran_order': False, 'shape': ("...)
	h = strconv.AppendInt(h, int64(n), 10)
	h = append(h, ",), }"...)
	for (len(h)+1)%64 != 0 {
		h = append(h, ' ')
	}
	h = append(h, '\n')
	binary.LittleEndian.PutUint16(h[8:], uint16(len(h)-10))
	return h
}

func ext(path []byte) string {
	if i := bytes.LastIndexByte(path, '.'); i >= 0 {
		return string(bytes.ToLower(path[i+1:]))
	}
	return "bin"
}

// --- parquet-go: a column chunk's pages, held until the row group is
// written (pages are reference-counted, so their values stay valid).

type pqgDecoder struct {
	f    *pqg.File
	keys []string
}

func newPQG(b []byte) *pqgDecoder {
	f, err := pqg.OpenFile(bytes.NewReader(b), int64(len(b)), pqg.SkipPageIndex(true), pqg.SkipBloomFilters(true))
	check(err)
	return &pqgDecoder{f: f}
}

// column is one leaf's values of a row group: per value its definition
// level, repetition level and, when defined, its bytes or number.
type pqgColumn struct {
	pages []pqg.Page
	defs  []byte
	reps  []byte
	bytes [][]byte
	i32   []int32
	i64   []int64
}

func (d *pqgDecoder) column(rg, c int) (*pqgColumn, error) {
	cc := d.f.RowGroups()[rg].ColumnChunks()[c]
	pages := cc.Pages()
	defer pages.Close()
	nv := cc.NumValues()
	col := &pqgColumn{defs: make([]byte, 0, nv), reps: make([]byte, 0, nv)}
	switch cc.Type().Kind() {
	case pqg.ByteArray:
		col.bytes = make([][]byte, 0, nv)
	case pqg.Int32:
		col.i32 = make([]int32, 0, nv)
	case pqg.Int64:
		col.i64 = make([]int64, 0, nv)
	}
	for {
		p, err := pages.ReadPage()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, err
		}
		col.pages = append(col.pages, p)
		col.defs = append(col.defs, p.DefinitionLevels()...)
		col.reps = append(col.reps, p.RepetitionLevels()...)
		v := p.Data()
		var idx []int32
		if dict := p.Dictionary(); dict != nil {
			idx = v.Int32()
			v = dict.Page().Data()
		}
		switch cc.Type().Kind() {
		case pqg.ByteArray:
			data, offs := v.ByteArray()
			if idx == nil {
				for i := 0; i+1 < len(offs); i++ {
					col.bytes = append(col.bytes, data[offs[i]:offs[i+1]])
				}
			} else {
				for _, i := range idx {
					if int(i)+1 >= len(offs) || i < 0 {
						return nil, fmt.Errorf("dictionary index %d of %d", i, len(offs)-1)
					}
					col.bytes = append(col.bytes, data[offs[i]:offs[i+1]])
				}
			}
		case pqg.Int32:
			if idx == nil {
				col.i32 = append(col.i32, v.Int32()...)
			} else {
				dv := v.Int32()
				for _, i := range idx {
					col.i32 = append(col.i32, dv[i])
				}
			}
		case pqg.Int64:
			if idx == nil {
				col.i64 = append(col.i64, v.Int64()...)
			} else {
				dv := v.Int64()
				for _, i := range idx {
					col.i64 = append(col.i64, dv[i])
				}
			}
		}
	}
	return col, nil
}

func (d *pqgDecoder) release(cols ...*pqgColumn) {
	for _, c := range cols {
		for _, p := range c.pages {
			pqg.Release(p)
		}
	}
}

// decodeImages: columns image.bytes, image.path, label (max definition
// levels 2, 2, 1: the struct and its fields are nullable).
func (d *pqgDecoder) decodeImages(rg int, dst []byte) error {
	var cols [3]*pqgColumn
	for c := range cols {
		col, err := d.column(rg, c)
		if err != nil {
			return err
		}
		cols[c] = col
	}
	defer d.release(cols[:]...)
	n := int(d.f.RowGroups()[rg].NumRows())
	w, err := format.NewWriter(dst, n, format.WriterOptions{})
	if err != nil {
		return err
	}
	var bi, pi, li int
	var num [20]byte
	for r := range n {
		if err := w.Begin(d.keys[r]); err != nil {
			return err
		}
		var img, path []byte
		if cols[0].defs[r] == 2 {
			img = cols[0].bytes[bi]
			bi++
		}
		if cols[1].defs[r] == 2 {
			path = cols[1].bytes[pi]
			pi++
		}
		if img != nil {
			if err := w.Add(ext(path), img); err != nil {
				return err
			}
		}
		if cols[2].defs[r] == 1 {
			if err := w.Add("cls", strconv.AppendInt(num[:0], cols[2].i64[li], 10)); err != nil {
				return err
			}
			li++
		}
	}
	return w.Finish()
}

// decodeTokens: column input_ids.list.element (repetition level 1,
// definition levels: 0 null list, 1 empty, 2 null element, 3 value).
func (d *pqgDecoder) decodeTokens(rg int, dst []byte) error {
	col, err := d.column(rg, 0)
	if err != nil {
		return err
	}
	defer d.release(col)
	n := int(d.f.RowGroups()[rg].NumRows())
	w, err := format.NewWriter(dst, n, format.WriterOptions{})
	if err != nil {
		return err
	}
	return writeTokens(w, d.keys, col.defs, col.reps, col.i32)
}

// writeTokens writes each row's tokens as a .npy member.
func writeTokens(w *format.Writer, keys []string, defs, reps []byte, vals []int32) error {
	row, vi := -1, 0
	var hdr [128]byte
	for i := 0; i < len(defs); {
		if reps[i] != 0 {
			return fmt.Errorf("a row starts with repetition level %d", reps[i])
		}
		row++
		j := i + 1
		for j < len(defs) && reps[j] != 0 {
			j++
		}
		if err := w.Begin(keys[row]); err != nil {
			return err
		}
		k := 0
		if defs[i] >= 2 {
			k = j - i
		}
		h := npyHeader(hdr[:0], k)
		m, err := w.Member("npy", int64(len(h)+4*k))
		if err != nil {
			return err
		}
		copy(m, h)
		m = m[len(h):]
		for x := i; x < j && defs[i] >= 2; x++ {
			if defs[x] == 3 {
				binary.LittleEndian.PutUint32(m, uint32(vals[vi]))
				vi++
			}
			m = m[4:]
		}
		i = j
	}
	return w.Finish()
}

// --- arrow-go's column chunk readers. A batch's values point into the
// reader's page buffer, which the next page overwrites, so rows are read
// in lockstep across columns (images) or copied as they come (tokens).

type arrowDecoder struct {
	r    *afile.Reader
	keys []string
}

func newArrow(b []byte) *arrowDecoder {
	r, err := afile.NewParquetReader(bytes.NewReader(b))
	check(err)
	return &arrowDecoder{r: r}
}

func (d *arrowDecoder) decodeImages(rg int, dst []byte) error {
	g := d.r.RowGroup(rg)
	c0, err := g.Column(0)
	if err != nil {
		return err
	}
	c1, err := g.Column(1)
	if err != nil {
		return err
	}
	c2, err := g.Column(2)
	if err != nil {
		return err
	}
	img, path, label := c0.(*afile.ByteArrayColumnChunkReader), c1.(*afile.ByteArrayColumnChunkReader), c2.(*afile.Int64ColumnChunkReader)
	n := int(g.NumRows())
	w, err := format.NewWriter(dst, n, format.WriterOptions{})
	if err != nil {
		return err
	}
	var (
		iv, pv [1]pqa.ByteArray
		lv     [1]int64
		def    [1]int16
		num    [20]byte
	)
	for r := range n {
		if err := w.Begin(d.keys[r]); err != nil {
			return err
		}
		if _, _, err := path.ReadBatch(1, pv[:], def[:], nil); err != nil {
			return err
		}
		p := []byte(nil)
		if def[0] == 2 {
			p = pv[0]
		}
		if _, _, err := img.ReadBatch(1, iv[:], def[:], nil); err != nil {
			return err
		}
		if def[0] == 2 {
			if err := w.Add(ext(p), iv[0]); err != nil {
				return err
			}
		}
		if _, _, err := label.ReadBatch(1, lv[:], def[:], nil); err != nil {
			return err
		}
		if def[0] == 1 {
			if err := w.Add("cls", strconv.AppendInt(num[:0], lv[0], 10)); err != nil {
				return err
			}
		}
	}
	return w.Finish()
}

func (d *arrowDecoder) decodeTokens(rg int, dst []byte) error {
	g := d.r.RowGroup(rg)
	c, err := g.Column(0)
	if err != nil {
		return err
	}
	cr := c.(*afile.Int32ColumnChunkReader)
	cm, err := g.MetaData().ColumnChunk(0)
	if err != nil {
		return err
	}
	nv := cm.NumValues()
	defs, reps := make([]int16, nv), make([]int16, nv)
	vals := make([]int32, nv)
	var got int64
	vi := 0
	for got < nv {
		total, read, err := cr.ReadBatch(nv-got, vals[vi:], defs[got:], reps[got:])
		if err != nil {
			return err
		}
		if total == 0 {
			return fmt.Errorf("read %d of %d levels", got, nv)
		}
		got += total
		vi += read
	}
	d8, r8 := make([]byte, nv), make([]byte, nv)
	for i := range defs {
		d8[i], r8[i] = byte(defs[i]), byte(reps[i])
	}
	w, err := format.NewWriter(dst, int(g.NumRows()), format.WriterOptions{})
	if err != nil {
		return err
	}
	return writeTokens(w, d.keys, d8, r8, vals[:vi])
}
