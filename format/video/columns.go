package video

import (
	"archive/tar"
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"

	"github.com/brandgw/brand/internal/errkind"

	"github.com/brandgw/brand/format"
	"github.com/brandgw/brand/internal/codec/npy"
)

// A LeRobot clip sample carries its rows' columns as arrays, as
// LeRobotDataset's __getitem__ returns them: a column a window reads is
// its rows' values stacked, (T, ...); any other is the anchor row's
// value, (...). The rows arrive as format/parquet decodes them (a member
// a column: an integer as ".cls" text, a list of integers as ".npy", a
// float, a double or a list of them as ".json"), and become .npy arrays
// of the column's own type: float32 for float, float64 for double, the
// integer's width for integers.

// ErrColumn marks a LeRobot column whose values cannot be an array: a
// string, a boolean, a struct, values of unequal shapes. The clip stage
// leaves such a column out of a sample's arrays.
var ErrColumn = errkind.New(errkind.Internal, "video: column not an array")

// Column is one numeric LeRobot data column as the clip stage writes it.
type Column struct {
	// Name is the column ("observation.state"), Ext its member in a row's
	// sample as format/parquet writes it ("observation_state.json").
	Name, Ext string
	// Descr is the .npy dtype of its values ("<f4", "<i8").
	Descr string
	field int // in the rows' decoder's fields
}

// Columns are the dataset's data columns that become arrays, in the
// rows' fields' order; nil for a tree of videos.
func (dec *Decoder) Columns() []Column {
	if dec.rows == nil {
		return nil
	}
	var out []Column
	for i, f := range dec.rows.Fields() {
		if d := descrOf(f); d != "" {
			out = append(out, Column{Name: f.Name, Ext: f.Ext, Descr: d, field: i})
		}
	}
	return out
}

// descrOf is the .npy dtype a field's values become, "" for a field that
// does not become an array.
func descrOf(f format.Field) string {
	t := strings.TrimSuffix(strings.TrimPrefix(f.Type, "list<"), ">")
	switch t {
	case "float":
		return "<f4"
	case "double":
		return "<f8"
	case "int8":
		return "|i1"
	case "uint8":
		return "|u1"
	case "int16", "uint16", "int32", "uint32", "int64", "uint64":
		kind := "i"
		if t[0] == 'u' {
			kind, t = "u", t[1:]
		}
		bits, _ := strconv.Atoi(strings.TrimPrefix(t, "int"))
		return "<" + kind + strconv.Itoa(bits/8)
	}
	return ""
}

// ColumnArray is column col's values in rows (each a row's sample bytes,
// as format/parquet decoded it), as one .npy array: stacked (len(rows),
// ...) when stack, else the one row's value. A row without the column's
// member (a null) or values of unequal shapes are ErrColumn.
func ColumnArray(col Column, rows [][]byte, stack bool) ([]byte, error) {
	var shape []int64
	var data []byte
	for i, r := range rows {
		m, err := member(r, col.Ext)
		if err != nil {
			return nil, fmt.Errorf("%w: %s, row %d: %v", ErrColumn, col.Name, i, err)
		}
		vals, s, err := values(m, col)
		if err != nil {
			return nil, fmt.Errorf("%w: %s, row %d: %v", ErrColumn, col.Name, i, err)
		}
		if i == 0 {
			shape = s
		} else if !equal(shape, s) {
			return nil, fmt.Errorf("%w: %s: rows of shapes %v and %v", ErrColumn, col.Name, shape, s)
		}
		data = append(data, vals...)
	}
	if stack {
		shape = append([]int64{int64(len(rows))}, shape...)
	} else if len(rows) != 1 {
		return nil, fmt.Errorf("%w: %s: %d rows for one value", ErrColumn, col.Name, len(rows))
	}
	out, err := npy.AppendHeader(make([]byte, 0, npy.HeaderLen(col.Descr, shape)+len(data)), col.Descr, shape)
	if err != nil {
		return nil, err
	}
	return append(out, data...), nil
}

func equal(a, b []int64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// member is the data of the member of a sample (tar members) whose name
// ends with "."+ext.
func member(sample []byte, ext string) ([]byte, error) {
	tr := tar.NewReader(bytes.NewReader(sample))
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return nil, fmt.Errorf("no .%s member (a null)", ext)
		}
		if err != nil {
			return nil, err
		}
		if strings.HasSuffix(h.Name, "."+ext) {
			return io.ReadAll(tr)
		}
	}
}

// values is one row's value of col as little-endian bytes of its dtype,
// and its shape.
func values(m []byte, col Column) ([]byte, []int64, error) {
	size, _ := strconv.Atoi(col.Descr[2:])
	// put appends a number's text as the dtype: a float parsed at its own
	// width, so that a float32 format/parquet wrote in its shortest form
	// comes back exactly.
	put := func(b []byte, text string) ([]byte, error) {
		if col.Descr[1] == 'f' {
			x, err := strconv.ParseFloat(text, size*8)
			if err != nil {
				return nil, err
			}
			if size == 4 {
				return binary.LittleEndian.AppendUint32(b, math.Float32bits(float32(x))), nil
			}
			return binary.LittleEndian.AppendUint64(b, math.Float64bits(x)), nil
		}
		var v uint64
		if col.Descr[1] == 'u' {
			u, err := strconv.ParseUint(text, 10, size*8)
			if err != nil {
				return nil, err
			}
			v = u
		} else {
			i, err := strconv.ParseInt(text, 10, size*8)
			if err != nil {
				return nil, err
			}
			v = uint64(i)
		}
		for i := range size {
			b = append(b, byte(v>>(8*i)))
		}
		return b, nil
	}
	switch {
	case strings.HasSuffix(col.Ext, "npy"):
		// A list of integers, as format/parquet writes it: its data as is.
		h, data, err := npy.Read(m)
		if err != nil {
			return nil, nil, fmt.Errorf("a .npy member: %w", err)
		}
		if h.Descr != col.Descr || len(h.Shape) != 1 || h.Fortran {
			return nil, nil, fmt.Errorf("a .npy member of %s %v, not a list of %s", h.Descr, h.Shape, col.Descr)
		}
		return data, []int64{h.Shape[0]}, nil
	case strings.HasSuffix(col.Ext, "cls"):
		b, err := put(nil, strings.TrimSpace(string(m)))
		return b, nil, err
	}
	// JSON: a number, or a list of numbers (null: NaN for a float).
	var x any
	d := json.NewDecoder(bytes.NewReader(m))
	d.UseNumber()
	if err := d.Decode(&x); err != nil {
		return nil, nil, err
	}
	var out []byte
	one := func(v any) error {
		var err error
		switch v := v.(type) {
		case json.Number:
			out, err = put(out, v.String())
		case nil:
			if col.Descr[1] != 'f' {
				return fmt.Errorf("a null integer")
			}
			out, err = put(out, "NaN")
		default:
			return fmt.Errorf("a %T value", v)
		}
		return err
	}
	if list, ok := x.([]any); ok {
		for _, v := range list {
			if err := one(v); err != nil {
				return nil, nil, err
			}
		}
		return out, []int64{int64(len(list))}, nil
	}
	if err := one(x); err != nil {
		return nil, nil, err
	}
	return out, nil, nil
}
