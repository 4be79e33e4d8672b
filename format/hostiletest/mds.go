package hostiletest

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"strings"
)

// MDSShard is one shard of a forged MDS dataset (columns "label", an
// int, and "text", a str).
type MDSShard struct {
	// Codec is "" (raw) or ZSTD, ZSTDNoSize, Gzip or BZ2: index.json's
	// "zstd", "gz" and "bz2".
	Codec string
	// Samples is the shard's samples.
	Samples int
	// Hostile is "" for an honest shard, "past" for one whose bytes
	// inflate 8 bytes past the raw_data.bytes its index.json states, and
	// "bomb" for one whose bytes are Bomb(Codec, 2 GiB) (16 MiB for
	// gzip), its raw_data.bytes the honest shard's.
	Hostile string
}

var mdsCodec = map[string]string{"": "", ZSTD: "zstd", ZSTDNoSize: "zstd", Gzip: "gz", BZ2: "bz2"}

// MDSText is the text of sample i of shard s of a forged MDS dataset.
func MDSText(s, i int) string {
	return strings.Repeat(fmt.Sprintf("shard %d sample %d. ", s, i), 1+i%5)
}

// MDS returns a forged MDS dataset's objects by key: index.json and the
// shards, shard.NNNNN.mds[.zstd|.gz|.bz2]. A bzip2 shard is hostile
// only ("past": 4 MiB of zeros), Go having no bzip2 writer.
func MDS(shards ...MDSShard) map[string][]byte {
	le := binary.LittleEndian
	objs := map[string][]byte{}
	var index []any
	for s, sh := range shards {
		ext, ok := mdsCodec[sh.Codec]
		if !ok {
			panic("hostiletest: MDS has no codec " + sh.Codec)
		}
		config := []byte(`{"column_encodings":["int","str"]}`)
		var body [][]byte
		for i := range sh.Samples {
			text := []byte(MDSText(s, i))
			b := le.AppendUint32(nil, uint32(len(text)))
			b = le.AppendUint64(b, uint64(i))
			body = append(body, append(b, text...))
		}
		raw := le.AppendUint32(nil, uint32(sh.Samples))
		off := 4 + 4*(sh.Samples+1) + len(config)
		for i := 0; i <= sh.Samples; i++ {
			raw = le.AppendUint32(raw, uint32(off))
			if i < sh.Samples {
				off += len(body[i])
			}
		}
		raw = append(raw, config...)
		for _, b := range body {
			raw = append(raw, b...)
		}
		name := fmt.Sprintf("shard.%05d.mds", s)
		states := int64(len(raw))
		entry := map[string]any{
			"column_names": []string{"label", "text"}, "column_encodings": []string{"int", "str"}, "column_sizes": []any{8, nil},
			"compression": nil, "format": "mds", "hashes": []string{}, "samples": sh.Samples, "size_limit": 1 << 26, "version": 2,
			"zip_data": nil,
		}
		data := raw
		if sh.Codec != "" {
			switch {
			case sh.Hostile == "bomb":
				n := int64(2 << 30)
				if sh.Codec == Gzip {
					n = 16 << 20
				}
				data = Bomb(sh.Codec, n)
			case sh.Codec == BZ2:
				// Go has no bzip2 writer: 4 MiB of zeros, past any
				// forged shard's size.
				if sh.Hostile == "" {
					panic("hostiletest: no honest bzip2 shard (Go has no bzip2 writer)")
				}
				data = Bomb(BZ2, 1)
			default:
				data = Compress(sh.Codec, raw)
				if sh.Hostile == "past" {
					states -= 8
				}
			}
			name += "." + ext
			entry["compression"] = ext
			entry["zip_data"] = map[string]any{"basename": name, "bytes": len(data), "hashes": map[string]any{}}
		}
		entry["raw_data"] = map[string]any{"basename": fmt.Sprintf("shard.%05d.mds", s), "bytes": states, "hashes": map[string]any{}}
		objs[name] = data
		index = append(index, entry)
	}
	b, err := json.Marshal(map[string]any{"version": 2, "shards": index})
	if err != nil {
		panic(err)
	}
	objs["index.json"] = b
	return objs
}
