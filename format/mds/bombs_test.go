package mds

import (
	"encoding/json"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"testing"

	"github.com/brandgw/brand/format"
	"github.com/brandgw/brand/format/hostiletest"
	"github.com/brandgw/brand/format/internal/decodetest"
)

// storeOf is a source holding objs.
func storeOf(objs map[string][]byte) *decodetest.Store {
	s := decodetest.NewStore()
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

// FuzzShards: a compressed shard of every codec MDS has — ZSTD with and
// without a frame content size, gzip, bzip2 — its bytes and the
// raw_data.bytes its index.json states the fuzzer's: decoding it never
// panics, fails only as damage, and never allocates past the decoder's
// Working, which a gateway reserves before the read (the stated shard
// and its codec's working), whatever the shard inflates to. Seeded with
// honest shards and hostiletest's bombs of each codec.
func FuzzShards(f *testing.F) {
	codecs := []string{hostiletest.ZSTD, hostiletest.ZSTDNoSize, hostiletest.Gzip, hostiletest.BZ2}
	shardOf := func(objs map[string][]byte) (raw int64, zip []byte) {
		var idx struct {
			Shards []struct {
				RawData struct{ Bytes int64 }     `json:"raw_data"`
				ZipData struct{ Basename string } `json:"zip_data"`
			}
		}
		if err := json.Unmarshal(objs["index.json"], &idx); err != nil {
			f.Fatal(err)
		}
		return idx.Shards[0].RawData.Bytes, objs[idx.Shards[0].ZipData.Basename]
	}
	for i, c := range codecs {
		hostile := []string{"bomb", "past"}
		if c != hostiletest.BZ2 {
			hostile = append(hostile, "")
		}
		for _, h := range hostile {
			raw, zip := shardOf(hostiletest.MDS(hostiletest.MDSShard{Codec: c, Samples: 40, Hostile: h}))
			f.Add(uint8(i), uint32(raw), zip)
		}
	}
	f.Fuzz(func(t *testing.T, codec uint8, raw uint32, zip []byte) {
		c := codecs[int(codec)%len(codecs)]
		h := ""
		if c == hostiletest.BZ2 {
			h = "past"
		}
		objs := hostiletest.MDS(hostiletest.MDSShard{Codec: c, Samples: 40, Hostile: h})
		var idx map[string]any
		if err := json.Unmarshal(objs["index.json"], &idx); err != nil {
			t.Fatal(err)
		}
		sh := idx["shards"].([]any)[0].(map[string]any)
		// A stated shard of at most 4 MiB keeps an input's run short; the
		// bound is relative to it.
		sh["raw_data"].(map[string]any)["bytes"] = raw % (4 << 20)
		name := sh["zip_data"].(map[string]any)["basename"].(string)
		sh["zip_data"].(map[string]any)["bytes"] = len(zip)
		objs[name] = zip
		objs["index.json"], _ = json.Marshal(idx)
		s := storeOf(objs)
		lay, dec, err := indexSource(t, s, format.Options{})
		if err != nil {
			return // raw_data.bytes too few for the samples: refused at index time
		}
		src, resident := decodetest.ReadChunk(t, s, lay, dec, 0, nil)
		dst := make([]byte, resident)
		work := dec.(format.Working).Working(0, nil)
		var m0, m1 runtime.MemStats
		runtime.ReadMemStats(&m0)
		err = dec.Decode(0, nil, src, dst, format.WriterOptions{})
		runtime.ReadMemStats(&m1)
		if a := int64(m1.TotalAlloc - m0.TotalAlloc); a > work+256<<10 {
			t.Fatalf("decoding a %s shard of %d bytes stating %d allocated %d, its Working is %d", c, len(zip), raw%(4<<20), a, work)
		}
		if err != nil && !errors.Is(err, format.ErrDamaged) {
			t.Fatalf("not damaged: %v", err)
		}
	})
}
