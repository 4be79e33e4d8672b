package megatron

import (
	"context"
	"encoding/binary"
	"fmt"
	"runtime"
	"testing"

	"github.com/brandgw/brand/format"
	"github.com/brandgw/brand/format/internal/decodetest"
)

// FuzzIdx: no .idx makes parseIdx panic, allocate more than its own
// length and 64 KiB (a document's count is 4 bytes of the 8 of its
// boundary: counts are checked against the file before anything is made
// for them), or accept tables that do not describe the .bin exactly.
// Seeded with the refused inputs of TestRefused, and tables whose counts
// claim 2^60 sequences and documents.
func FuzzIdx(f *testing.F) {
	good := buildIdx(4, []int32{3, 5, 2}, []int64{0, 2, 3}, nil)
	f.Add(good, int64(40))
	f.Add(good[:20], int64(40))
	f.Add(good[:len(good)-3], int64(40))
	f.Add(append(append([]byte{}, good...), 1, 2), int64(40))
	f.Add(buildIdx(4, []int32{3, 5, 2}, []int64{0, 2, 3}, []int64{0, 32, 12}), int64(40))
	f.Add(buildIdx(4, []int32{3, 5, 2}, []int64{0, 2, 1, 3}, nil), int64(40))
	f.Add(buildIdx(4, []int32{3, -5, 2}, []int64{0, 3}, nil), int64(40))
	f.Add(buildIdx(1, []int32{1.5e9, 1.5e9, 1.5e9}, []int64{0, 3}, nil), int64(4.5e9))
	f.Add(buildIdx(9, []int32{1}, []int64{0, 1}, nil), int64(1))
	lying := buildIdx(4, []int32{3, 5, 2}, []int64{0, 2, 3}, nil)
	binary.LittleEndian.PutUint64(lying[18:], 1<<60) // sequences
	f.Add(lying, int64(40))
	lying = buildIdx(4, []int32{3, 5, 2}, []int64{0, 2, 3}, nil)
	binary.LittleEndian.PutUint64(lying[26:], 1<<60) // document boundaries
	f.Add(lying, int64(40))
	f.Fuzz(func(t *testing.T, b []byte, binSize int64) {
		var x index
		var err error
		var m0, m1 runtime.MemStats
		runtime.ReadMemStats(&m0)
		x, err = parseIdx("f.idx", b, binSize)
		runtime.ReadMemStats(&m1)
		if a := m1.TotalAlloc - m0.TotalAlloc; a > uint64(len(b))+64<<10 {
			t.Fatalf("parsing a .idx of %d bytes allocated %d", len(b), a)
		}
		if err != nil {
			return
		}
		var total int64
		for _, n := range x.docs {
			total += int64(n) * dtypes[x.code].size
		}
		if total != binSize {
			t.Fatalf("accepted documents of %d bytes for a .bin of %d", total, binSize)
		}
	})
}

// FuzzOpen: no Meta makes Open panic, and what it accepts has chunks
// whose extents stay inside their documents' bytes.
func FuzzOpen(f *testing.F) {
	s := decodetest.NewStore()
	s.Objs["p.idx"] = buildIdx(8, []int32{3, 5, 0, 9}, []int64{0, 1, 2, 3, 4}, nil)
	s.Objs["p.bin"] = make([]byte, 34)
	s.Objs["q/r.idx"] = buildIdx(8, []int32{1}, []int64{0, 1}, nil)
	s.Objs["q/r.bin"] = make([]byte, 2)
	lay, err := Format{}.Index(context.Background(), s, s.List(), format.Options{ChunkBytes: 1200})
	if err != nil {
		f.Fatal(err)
	}
	f.Add(lay.Meta)
	f.Add(lay.Meta[:len(lay.Meta)-1])
	f.Add([]byte("BRANDMEG\x01\x04\xff\xff\xff\xff\x0f"))
	f.Fuzz(func(t *testing.T, b []byte) {
		d, err := Format{}.Open(b)
		if err != nil {
			return
		}
		md := d.(*Decoder)
		for c := range md.Chunks() {
			rs, resident := md.Extent(c, nil)
			if resident < format.Overhead(len(md.DocTokens(c))) {
				t.Fatalf("chunk %d: bound %d", c, resident)
			}
			if n := format.Concat(rs); n < 0 {
				t.Fatal(fmt.Sprint(rs))
			}
		}
	})
}
