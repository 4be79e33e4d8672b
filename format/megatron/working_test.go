package megatron

import (
	"runtime"
	"testing"

	"github.com/brandgw/brand/format"
	"github.com/brandgw/brand/format/internal/decodetest"
)

// TestWorking: Decoder.Working bounds what a decode allocates.
func TestWorking(t *testing.T) {
	s := blend(1, 40000)
	for k, n := range s.Sizes {
		s.Objs[k] = make([]byte, n)
	}
	lay, dec, err := indexSource(t, s, format.Options{})
	if err != nil {
		t.Fatal(err)
	}
	src, resident := decodetest.ReadChunk(t, s, lay, dec, 0, nil)
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
	t.Logf("%d documents: allocated %.1f MB, Working %.1f MB", lay.Chunks[0].Samples, float64(got)/1e6, float64(work)/1e6)
	if got > work || work > 2*got+1<<20 {
		t.Errorf("a decode allocated %d bytes, Working says %d", got, work)
	}
}
