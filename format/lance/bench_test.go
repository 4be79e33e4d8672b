package lance

import (
	"context"
	"path/filepath"
	"testing"
)

// BenchmarkDecode decodes each column of the kinds fixture's first
// fragment (one page of 2,048 rows each: bit-packed, RLE, dictionary,
// FSST, fixed-size lists, flat) and the images fixture's zstd column,
// from bytes in memory: the decoders' throughput, as bytes of page read
// a second (MB/s) and bytes of values decoded a second (decoded-MB/s).
func BenchmarkDecode(b *testing.B) {
	for _, fx := range []struct {
		name string
		cols []int
	}{{"kinds", nil}, {"images", []int{1}}} {
		st, objs, ms := fixture(b, fx.name)
		df := ms[len(ms)-1].Fragments[0].Files[0]
		key := "data/" + df.Path
		f, err := ReadFile(context.Background(), st, key, "", sizeOf(b, objs, key), 1<<30)
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
				var decoded int
				for b.Loop() {
					vals, err := f.ReadRows(c, 0, f.Rows, read, 1<<30)
					if err != nil {
						b.Fatal(err)
					}
					decoded = vals.Offsets[vals.Len()]
				}
				if decoded > 0 {
					b.ReportMetric(float64(decoded)*float64(b.N)/b.Elapsed().Seconds()/1e6, "decoded-MB/s")
				}
			})
		}
	}
}

// BenchmarkImageRows has Lance write the large table (200 random images
// of 80 to 120 KiB in 8 batches: image pages of about 5 MB, zstd per
// value) and reads 1 row, 64 rows and a whole page of its image column
// from the files, reporting the bytes each read takes from the store
// (read-B/op) against the page's size (page-B) and the bytes it decodes
// (decoded-B/op). Skipped without node and the pinned package.
func BenchmarkImageRows(b *testing.B) {
	dir := writeLarge(b)
	st := &dirStore{root: filepath.Join(dir, "large.lance")}
	d, err := Open(context.Background(), st, listing(b, st.root), 0, Options{})
	if err != nil {
		b.Fatal(err)
	}
	df := d.Manifest.Fragments[0].Files[0]
	f, err := d.File(context.Background(), df)
	if err != nil {
		b.Fatal(err)
	}
	p := f.Columns[1].Pages[0]
	var page int64
	for _, buf := range p.Buffers {
		page += int64(buf.Len)
	}
	for _, r := range []struct {
		what   string
		lo, hi uint64
	}{{"1row", 3, 4}, {"64rows", 5, 69}, {"page", 0, p.Rows}} {
		b.Run(r.what, func(b *testing.B) {
			var decoded int
			before := st.read
			for b.Loop() {
				vals, err := f.ReadRows(1, r.lo, r.hi, fileReader(st, "data/"+df.Path), 1<<30)
				if err != nil {
					b.Fatal(err)
				}
				decoded = vals.Offsets[vals.Len()]
			}
			read := float64(st.read-before) / float64(b.N)
			b.SetBytes(int64(read))
			b.ReportMetric(read, "read-B/op")
			b.ReportMetric(float64(decoded), "decoded-B/op")
			b.ReportMetric(float64(page), "page-B")
			b.ReportMetric(read/float64(page), "read/page")
		})
	}
}

func m0(ms []*Manifest) *Manifest { return ms[len(ms)-1] }
