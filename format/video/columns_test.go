package video

import (
	"archive/tar"
	"bytes"
	"encoding/binary"
	"errors"
	"testing"

	"github.com/brandgw/brand/internal/codec/npy"
)

// row is a sample as format/parquet writes a row: a tar of its members.
func row(t *testing.T, name string, data []byte) []byte {
	t.Helper()
	var b bytes.Buffer
	w := tar.NewWriter(&b)
	if err := w.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: int64(len(data))}); err != nil {
		t.Fatal(err)
	}
	w.Write(data)
	w.Close()
	return b.Bytes()
}

// array is a .npy array of descr and shape holding data.
func array(t *testing.T, descr string, shape []int64, data []byte) []byte {
	t.Helper()
	b, err := npy.AppendHeader(nil, descr, shape)
	if err != nil {
		t.Fatal(err)
	}
	return append(b, data...)
}

func int32s(v ...int32) []byte {
	b := make([]byte, 4*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint32(b[4*i:], uint32(x))
	}
	return b
}

// TestColumnArrayOfNpyMembers: a list column's rows, each a .npy member
// as format/parquet writes it, stack into one array through the house's
// .npy codec; a member that is not a whole 1-D array of the column's
// dtype is ErrColumn, never an array whose header and data disagree (a
// member cut mid-element, or with bytes past its shape, was passed on
// with its data whole under the header's rounded-down shape).
func TestColumnArrayOfNpyMembers(t *testing.T) {
	col := Column{Name: "observation.state", Ext: "observation_state.npy", Descr: "<i4"}
	good := func(v ...int32) []byte {
		return row(t, "0.observation_state.npy", array(t, "<i4", []int64{int64(len(v))}, int32s(v...)))
	}
	for _, tc := range []struct {
		name string
		rows [][]byte
		want []byte // nil: ErrColumn
	}{
		{"stacked", [][]byte{good(1, 2), good(3, 4)}, array(t, "<i4", []int64{2, 2}, int32s(1, 2, 3, 4))},
		{"other dtype", [][]byte{row(t, "0.observation_state.npy", array(t, "<f4", []int64{2}, int32s(1, 2)))}, nil},
		{"two dimensions", [][]byte{row(t, "0.observation_state.npy", array(t, "<i4", []int64{1, 2}, int32s(1, 2)))}, nil},
		{"cut mid-element", [][]byte{row(t, "0.observation_state.npy", array(t, "<i4", []int64{2}, int32s(1, 2)[:7]))}, nil},
		{"bytes past its shape", [][]byte{row(t, "0.observation_state.npy", append(array(t, "<i4", []int64{1}, int32s(1)), 0, 0))}, nil},
		{"not a .npy", [][]byte{row(t, "0.observation_state.npy", []byte("[1, 2]"))}, nil},
		{"unequal shapes", [][]byte{good(1, 2), good(3)}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ColumnArray(col, tc.rows, true)
			if tc.want == nil {
				if !errors.Is(err, ErrColumn) {
					t.Fatalf("ColumnArray = %d bytes, %v; want ErrColumn", len(got), err)
				}
				return
			}
			if err != nil || !bytes.Equal(got, tc.want) {
				t.Fatalf("ColumnArray = %q, %v; want %q", got, err, tc.want)
			}
			if _, _, err := npy.Read(got); err != nil {
				t.Errorf("the array does not read back: %v", err)
			}
		})
	}
}
