package video

import (
	"context"
	"os"
	"runtime"
	"testing"

	"github.com/brandgw/brand/format"
	"github.com/brandgw/brand/format/internal/formattest"
)

// TestWorking: what decoding a chunk of many GOPs allocates beside its
// source and destination is within Working (the GOPs' keys, the
// writer's and the read's tables), and Working not far above it.
func TestWorking(t *testing.T) {
	b, err := os.ReadFile("mp4/testdata/fragmented.mp4")
	if err != nil {
		t.Fatal(err)
	}
	st := formattest.NewStore()
	st.Objs["a/with/a/long/path/of/folders/to/make/the/keys/long/x.mp4"] = b
	lay, err := Format{}.Index(context.Background(), st, st.List(), format.Options{})
	if err != nil {
		t.Fatal(err)
	}
	dec, err := Format{}.Open(lay.Meta)
	if err != nil {
		t.Fatal(err)
	}
	src, resident := formattest.ReadChunk(t, st, lay, dec, 0, nil)
	dst := make([]byte, resident)
	work := dec.(format.Working).Working(0, nil)
	var m0, m1 runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&m0)
	if err := dec.Decode(0, nil, src, dst, format.WriterOptions{}); err != nil {
		t.Fatal(err)
	}
	runtime.ReadMemStats(&m1)
	got := int64(m1.TotalAlloc - m0.TotalAlloc)
	t.Logf("%d GOPs: allocated %d bytes, Working %d", lay.Chunks[0].Samples, got, work)
	if got > work {
		t.Errorf("a decode allocated %d bytes, Working says %d", got, work)
	}
}
