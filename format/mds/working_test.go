package mds

import (
	"fmt"
	"runtime"
	"testing"

	"github.com/brandgw/brand/format"
	"github.com/brandgw/brand/format/internal/inflate"
)

// oneBuffer lends the same buffer again and again, and counts.
type oneBuffer struct {
	buf        []byte
	gets, puts int
}

func (o *oneBuffer) Get(n int64) []byte {
	o.gets++
	if int64(cap(o.buf)) < n {
		o.buf = make([]byte, 0, n)
	}
	return o.buf[:0]
}

func (o *oneBuffer) Put([]byte) { o.puts++ }

// TestWorking: Decoder.Working bounds what a decode allocates — a
// compressed shard decompressed whole, its keys — which a gateway
// reserves before it reads the shard; with Buffers lent, the
// decompressed shard is the lender's, given back before Decode returns.
func TestWorking(t *testing.T) {
	for _, compress := range []bool{false, true} {
		t.Run(fmt.Sprintf("zstd=%v", compress), func(t *testing.T) {
			s := imageSource(t, compress)
			lay, dec, src, resident := firstChunk(t, s)
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
			raw := dec.(*Decoder).m.Shards[0].Raw
			t.Logf("allocated %.1f MB, Working %.1f MB, shard %.1f MB", float64(got)/1e6, float64(work)/1e6, float64(raw)/1e6)
			if got > work {
				t.Errorf("a decode allocated %d bytes, Working says %d", got, work)
			}
			if !compress {
				// Streamed, it reads the shard through a buffer of its own.
				o := &opener{obj: s.Objs[lay.Chunks[0].Object], step: 1 << 20}
				runtime.GC()
				runtime.ReadMemStats(&m0)
				if err := dec.(format.Streamer).DecodeStream(0, nil, o.open, src, dst, format.WriterOptions{}); err != nil {
					t.Fatal(err)
				}
				runtime.ReadMemStats(&m1)
				if got := int64(m1.TotalAlloc - m0.TotalAlloc); got > work {
					t.Errorf("a streamed decode allocated %d bytes, Working says %d", got, work)
				}
			}
			// No more than the shard, what its codec may take beside it
			// (a frame inflating past the shard's stated size is read
			// into one reallocation of it before ZSTD's decoder stops),
			// and the keys.
			if compress && work < raw || work > raw+inflate.Working(inflate.ZSTD, raw)+16<<20 {
				t.Errorf("Working %d bytes for a shard of %d", work, raw)
			}
			lend := &oneBuffer{}
			for range 2 {
				if err := dec.Decode(0, nil, src, dst, format.WriterOptions{Buffers: lend}); err != nil {
					t.Fatal(err)
				}
			}
			if compress && (lend.gets != 2 || lend.puts != 2) || !compress && lend.gets != 0 {
				t.Errorf("buffers lent %d times, given back %d", lend.gets, lend.puts)
			}
		})
	}
}
