package video

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/apache/arrow-go/v18/parquet/file"

	"github.com/brandgw/brand/format"
)

// objectReader is one object of a store as arrow-go's Parquet reader
// reads a file: ReadAt as range reads, pinned to the object's ETag, and
// the bytes read counted.
type objectReader struct {
	ctx  context.Context
	st   format.Store
	obj  format.Object
	pos  int64
	read int64
}

func (r *objectReader) ReadAt(p []byte, off int64) (int, error) {
	if off < 0 {
		return 0, errors.New("video: a negative offset")
	}
	if off >= r.obj.Size {
		return 0, io.EOF
	}
	n := min(int64(len(p)), r.obj.Size-off)
	if err := r.st.ReadRange(r.ctx, r.obj.Key, r.obj.ETag, off, p[:n]); err != nil {
		return 0, err
	}
	r.read += n
	if n < int64(len(p)) {
		return int(n), io.EOF
	}
	return int(n), nil
}

func (r *objectReader) Read(p []byte) (int, error) {
	n, err := r.ReadAt(p, r.pos)
	r.pos += int64(n)
	return n, err
}

func (r *objectReader) Seek(off int64, whence int) (int64, error) {
	switch whence {
	case io.SeekStart:
	case io.SeekCurrent:
		off += r.pos
	case io.SeekEnd:
		off += r.obj.Size
	default:
		return 0, errors.New("video: a bad whence")
	}
	if off < 0 {
		return 0, errors.New("video: a seek before the start")
	}
	r.pos = off
	return off, nil
}

// column is one numeric column's values: integers or floats.
type column struct {
	ints   []int64
	floats []float64
}

func (c column) int(i int) int64 {
	if c.ints != nil {
		return c.ints[i]
	}
	return int64(c.floats[i])
}

func (c column) float(i int) float64 {
	if c.floats != nil {
		return c.floats[i]
	}
	return float64(c.ints[i])
}

// readColumns reads the named top-level numeric columns of a Parquet
// object with arrow-go's column readers — the footer and those columns'
// chunks, nothing else — and returns them, the rows, and the bytes read.
// A column missing, of another type, or with a null is ErrInvalid.
func readColumns(ctx context.Context, st format.Store, o format.Object, names []string, lim format.Limits) (cols []column, rows int, read int64, err error) {
	r := &objectReader{ctx: ctx, st: st, obj: o}
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("%w: %s: the Parquet reader failed: %v", format.ErrInvalid, o.Key, p)
		}
		read = r.read
	}()
	pf, err := file.NewParquetReader(r)
	if err != nil {
		if ctx.Err() != nil {
			return nil, 0, r.read, ctx.Err()
		}
		return nil, 0, r.read, fmt.Errorf("%w: %s: %v", format.ErrInvalid, o.Key, err)
	}
	md := pf.MetaData()
	total := md.GetNumRows()
	if total < 0 || total > maxLeRobotRows {
		return nil, 0, r.read, fmt.Errorf("%w: %s states %d rows", format.ErrInvalid, o.Key, total)
	}
	idx := make([]int, len(names))
	for i, n := range names {
		idx[i] = md.Schema.ColumnIndexByName(n)
		if idx[i] < 0 {
			return nil, 0, r.read, fmt.Errorf("%w: %s has no column %q", format.ErrInvalid, o.Key, n)
		}
		if c := md.Schema.Column(idx[i]); c.MaxRepetitionLevel() > 0 {
			return nil, 0, r.read, fmt.Errorf("%w: %s: column %q is a list, not a number", format.ErrInvalid, o.Key, n)
		}
	}
	cols = make([]column, len(names))
	def := make([]int16, 0)
	for g := range pf.NumRowGroups() {
		rg := pf.RowGroup(g)
		n := rg.NumRows()
		if n < 0 || int64(rows)+n > total {
			return nil, 0, r.read, fmt.Errorf("%w: %s: row group %d of %d rows past the file's %d", format.ErrInvalid, o.Key, g, n, total)
		}
		if int64(cap(def)) < n {
			def = make([]int16, n)
		}
		for i, ci := range idx {
			cr, err := rg.Column(ci)
			if err != nil {
				return nil, 0, r.read, fmt.Errorf("%w: %s: column %q: %v", format.ErrInvalid, o.Key, names[i], err)
			}
			if err := readNumbers(cr, n, def[:n], &cols[i]); err != nil {
				if ctx.Err() != nil {
					return nil, 0, r.read, ctx.Err()
				}
				return nil, 0, r.read, fmt.Errorf("%w: %s: column %q, row group %d: %v", format.ErrInvalid, o.Key, names[i], g, err)
			}
		}
		rows += int(n)
	}
	return cols, rows, r.read, nil
}

// readNumbers appends n values of a column chunk to c.
func readNumbers(cr file.ColumnChunkReader, n int64, def []int16, c *column) error {
	batch := func(read func(vals int64) (int64, int, error)) error {
		for got := int64(0); got < n; {
			total, values, err := read(n - got)
			if err != nil {
				return err
			}
			if total == 0 {
				return fmt.Errorf("%d of %d values", got, n)
			}
			if int64(values) != total {
				return errors.New("a null value")
			}
			got += total
		}
		return nil
	}
	switch r := cr.(type) {
	case *file.Int64ColumnChunkReader:
		at := len(c.ints)
		c.ints = append(c.ints, make([]int64, n)...)
		return batch(func(k int64) (int64, int, error) {
			t, v, err := r.ReadBatch(k, c.ints[at:at+int(k)], def[:k], nil)
			at += v
			return t, v, err
		})
	case *file.Int32ColumnChunkReader:
		vals := make([]int32, n)
		at := 0
		err := batch(func(k int64) (int64, int, error) {
			t, v, err := r.ReadBatch(k, vals[at:at+int(k)], def[:k], nil)
			at += v
			return t, v, err
		})
		for _, x := range vals {
			c.ints = append(c.ints, int64(x))
		}
		return err
	case *file.Float32ColumnChunkReader:
		vals := make([]float32, n)
		at := 0
		err := batch(func(k int64) (int64, int, error) {
			t, v, err := r.ReadBatch(k, vals[at:at+int(k)], def[:k], nil)
			at += v
			return t, v, err
		})
		for _, x := range vals {
			c.floats = append(c.floats, float64(x))
		}
		return err
	case *file.Float64ColumnChunkReader:
		at := len(c.floats)
		c.floats = append(c.floats, make([]float64, n)...)
		return batch(func(k int64) (int64, int, error) {
			t, v, err := r.ReadBatch(k, c.floats[at:at+int(k)], def[:k], nil)
			at += v
			return t, v, err
		})
	}
	return fmt.Errorf("a column of %s, not a number", cr.Type())
}
