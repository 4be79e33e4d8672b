package mds

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/klauspost/compress/zstd"

	"github.com/brandgw/brand/format"
	"github.com/brandgw/brand/format/internal/decodetest"
)

// imageShard is a 64 MiB shard of image-like samples ("image" jpeg of
// 80 to 160 KB, "label" int): ImageNet's shape.
func imageShard() (raw []byte, samples int) {
	r := rand.New(rand.NewPCG(3, 4))
	le := binary.LittleEndian
	var body [][]byte
	total := 0
	for total < 64<<20 {
		img := make([]byte, 80<<10+r.IntN(80<<10))
		for i := range img {
			img[i] = byte(r.Uint32())
		}
		b := le.AppendUint32(nil, uint32(len(img)))
		b = append(b, img...)
		b = le.AppendUint64(b, uint64(r.IntN(1000)))
		body = append(body, b)
		total += len(b)
	}
	config := []byte(`{}`)
	raw = le.AppendUint32(nil, uint32(len(body)))
	off := 4 + 4*(len(body)+1) + len(config)
	for i := 0; i <= len(body); i++ {
		raw = le.AppendUint32(raw, uint32(off))
		if i < len(body) {
			off += len(body[i])
		}
	}
	raw = append(raw, config...)
	for _, b := range body {
		raw = append(raw, b...)
	}
	return raw, len(body)
}

func imageSource(_ testing.TB, compress bool) *decodetest.Store {
	raw, n := imageShard()
	s := decodetest.NewStore()
	sh := map[string]any{
		"column_names": []string{"image", "label"}, "column_encodings": []string{"jpeg", "int"}, "column_sizes": []any{nil, 8},
		"format": "mds", "version": 2, "samples": n,
		"raw_data": map[string]any{"basename": "shard.00000.mds", "bytes": len(raw)},
	}
	if compress {
		enc, _ := zstd.NewWriter(nil)
		z := enc.EncodeAll(raw, nil)
		sh["compression"] = "zstd"
		sh["zip_data"] = map[string]any{"basename": "shard.00000.mds.zstd", "bytes": len(z)}
		s.Objs["shard.00000.mds.zstd"] = z
	} else {
		s.Objs["shard.00000.mds"] = raw
	}
	s.Objs["index.json"], _ = json.Marshal(map[string]any{"version": 2, "shards": []any{sh}})
	return s
}

// BenchmarkDecode decodes a 64 MiB shard of images and labels; bytes/s
// are the shard's (decompressed).
func BenchmarkDecode(b *testing.B) {
	for _, compress := range []bool{false, true} {
		b.Run(fmt.Sprintf("zstd=%v", compress), func(b *testing.B) {
			s := imageSource(b, compress)
			lay, dec, err := indexSource(b, s, format.Options{})
			if err != nil {
				b.Fatal(err)
			}
			src, resident := decodetest.ReadChunk(b, s, lay, dec, 0, nil)
			dst := make([]byte, resident)
			b.SetBytes(dec.(*Decoder).m.Shards[0].Raw)
			b.ReportMetric(float64(resident)/float64(dec.(*Decoder).m.Shards[0].Raw), "bound/raw")
			for b.Loop() {
				if err := dec.Decode(0, nil, src, dst, format.WriterOptions{}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkIndex indexes a dataset of 10,000 shards (one index.json of
// 12 MB, the shards only listed): a 640 GB dataset at Streaming's
// default shard size.
func BenchmarkIndex(b *testing.B) {
	s := decodetest.NewStore()
	var shards []any
	for i := range 10000 {
		name := fmt.Sprintf("shard.%05d.mds", i)
		shards = append(shards, map[string]any{
			"column_names": []string{"image", "label"}, "column_encodings": []string{"jpeg", "int"}, "column_sizes": []any{nil, 8},
			"format": "mds", "version": 2, "samples": 540, "compression": nil, "hashes": []string{}, "size_limit": 1 << 26,
			"raw_data": map[string]any{"basename": name, "bytes": 64 << 20, "hashes": map[string]any{}}, "zip_data": nil,
		})
		s.Objs[name] = nil
		s.Sizes[name] = 64 << 20
	}
	s.Objs["index.json"], _ = json.Marshal(map[string]any{"version": 2, "shards": shards})
	objs := s.List()
	b.SetBytes(int64(len(s.Objs["index.json"])))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := (Format{}).Index(context.Background(), s, objs, format.Options{}); err != nil {
			b.Fatal(err)
		}
	}
}
