package mds

import (
	"errors"
	"fmt"
	"runtime"
	"strings"
	"testing"

	"github.com/brandgw/brand/format"
	"github.com/brandgw/brand/format/hostiletest"
	"github.com/brandgw/brand/format/internal/formattest"
)

// storeOf is a source holding objs.
func storeOf(objs map[string][]byte) *formattest.Store {
	s := formattest.NewStore()
	for k, b := range objs {
		s.Objs[k] = b
	}
	return s
}

// A shard of every codec MDS has — ZSTD with and without a frame content
// size, gzip, bzip2 — decodes when honest; one whose bytes inflate past
// the raw_data.bytes its index.json states, by 8 bytes or as a bomb (2
// GiB of ZSTD, 16 MiB of gzip, 2 GiB of bzip2), is damaged, named by its
// object, having allocated no more than the decoder's Working, which a
// gateway reserves before the read.
func TestHostileShards(t *testing.T) {
	for _, codec := range []string{hostiletest.ZSTD, hostiletest.ZSTDNoSize, hostiletest.Gzip, hostiletest.BZ2} {
		for _, hostile := range []string{"", "past", "bomb"} {
			if codec == hostiletest.BZ2 && hostile == "" {
				continue // hostiletest has no bzip2 writer; TestPythonWriter reads honest ones
			}
			t.Run(fmt.Sprintf("%s/%s", codec, hostile), func(t *testing.T) {
				s := storeOf(hostiletest.MDS(hostiletest.MDSShard{Codec: codec, Samples: 40, Hostile: hostile}))
				_, dec, src, resident := firstChunk(t, s)
				var m0, m1 runtime.MemStats
				runtime.GC()
				runtime.ReadMemStats(&m0)
				err := dec.Decode(0, nil, src, make([]byte, resident), format.WriterOptions{})
				runtime.ReadMemStats(&m1)
				if hostile == "" {
					if err != nil {
						t.Fatal(err)
					}
					return
				}
				if !errors.Is(err, format.ErrDamaged) || !strings.Contains(err.Error(), "shard.00000.mds") ||
					!strings.Contains(err.Error(), "decompresses past") && !strings.Contains(err.Error(), "does not decompress") {
					t.Fatalf("%v; want damage naming the shard", err)
				}
				work := dec.(format.Working).Working(0, nil)
				if a := int64(m1.TotalAlloc - m0.TotalAlloc); a > work {
					t.Errorf("decoding %d bytes allocated %d, its Working is %d", len(src), a, work)
				}
			})
		}
	}
}
