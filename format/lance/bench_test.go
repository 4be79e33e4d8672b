package lance

import (
	"context"
	"testing"
)

// BenchmarkDecode decodes each column of the kinds fixture's first
// fragment (one page of 2,048 rows each: bit-packed, RLE, dictionary,
// FSST, fixed-size lists, flat) and the images fixture's zstd column,
// from bytes in memory: the decoders' throughput, as bytes of page read
// a second.
func BenchmarkDecode(b *testing.B) {
	for _, fx := range []struct {
		name string
		cols []int
	}{{"kinds", nil}, {"images", []int{1}}} {
		st, objs, ms := fixture(b, fx.name)
		df := ms[len(ms)-1].Fragments[0].Files[0]
		key := "data/" + df.Path
		f, err := ReadFile(context.Background(), st, key, "", sizeOf(b, objs, key))
		if err != nil {
			b.Fatal(err)
		}
		whole := make([]byte, f.Size)
		if err := st.ReadRange(context.Background(), key, "", 0, whole); err != nil {
			b.Fatal(err)
		}
		read := func(off, n uint64) ([]byte, error) { return whole[off : off+n], nil }
		cols := fx.cols
		if cols == nil {
			for c := range f.Columns {
				cols = append(cols, c)
			}
		}
		for _, c := range cols {
			p := f.Columns[c].Pages[0]
			var size int64
			for _, buf := range p.Buffers {
				size += int64(buf.Len)
			}
			name := m0(ms).Fields[c].Name
			b.Run(fx.name+"/"+name, func(b *testing.B) {
				b.SetBytes(size)
				for b.Loop() {
					if _, err := f.ReadRows(c, 0, f.Rows, read, 1<<30); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

func m0(ms []*Manifest) *Manifest { return ms[len(ms)-1] }
