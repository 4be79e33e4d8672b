package mds

import (
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/klauspost/compress/zstd"

	"github.com/brandgw/brand/format"
	"github.com/brandgw/brand/format/internal/decodetest"
)

// A small dataset built here, for the inputs no writer makes: columns
// "label" (int), "text" (str) and "vec" (ndarray:uint8), two shards.
var (
	fixNames = []string{"label", "text", "vec"}
	fixEncs  = []string{"int", "str", "ndarray:uint8"}
	fixSizes = []any{8, nil, nil}
)

// shardBytes is an MDS shard of the fixture's columns: samples values.
func shardBytes(samples [][3][]byte) []byte {
	le := binary.LittleEndian
	config := []byte(`{"column_encodings":["int","str","ndarray:uint8"]}`)
	var body [][]byte
	for _, s := range samples {
		b := le.AppendUint32(nil, uint32(len(s[1])))
		b = le.AppendUint32(b, uint32(len(s[2])))
		b = append(append(append(b, s[0]...), s[1]...), s[2]...)
		body = append(body, b)
	}
	out := le.AppendUint32(nil, uint32(len(samples)))
	off := 4 + 4*(len(samples)+1) + len(config)
	for i := 0; i <= len(samples); i++ {
		out = le.AppendUint32(out, uint32(off))
		if i < len(samples) {
			off += len(body[i])
		}
	}
	out = append(out, config...)
	for _, b := range body {
		out = append(out, b...)
	}
	return out
}

func sample(i int) [3][]byte {
	label := binary.LittleEndian.AppendUint64(nil, uint64(i))
	vec := append([]byte{1<<2 | 0, 3}, byte(i), byte(i+1), byte(i+2)) // ndim 1, uint8 shape (3,)
	return [3][]byte{label, []byte(strings.Repeat("x", i)), vec}
}

// fixture is a source of two shards (3 and 2 samples) and its index,
// which edit may change before it is written.
func fixture(t testing.TB, compress string, edit func(idx map[string]any, s *decodetest.Store)) *decodetest.Store {
	t.Helper()
	s := decodetest.NewStore()
	var shards []any
	for n, samples := range [][][3][]byte{{sample(0), sample(1), sample(2)}, {sample(3), sample(4)}} {
		raw := shardBytes(samples)
		name := []string{"shard.00000.mds", "shard.00001.mds"}[n]
		sh := map[string]any{
			"column_names": fixNames, "column_encodings": fixEncs, "column_sizes": fixSizes,
			"compression": nil, "format": "mds", "hashes": []string{}, "samples": len(samples), "size_limit": 1 << 26, "version": 2,
			"raw_data": map[string]any{"basename": name, "bytes": len(raw), "hashes": map[string]any{}}, "zip_data": nil,
		}
		data := raw
		switch compress {
		case "zstd":
			enc, _ := zstd.NewWriter(nil)
			data = enc.EncodeAll(raw, nil)
		case "gz":
			var b bytes.Buffer
			w := gzip.NewWriter(&b)
			w.Write(raw)
			w.Close()
			data = b.Bytes()
		}
		if compress != "" {
			sh["compression"] = compress
			name += "." + compress
			sh["zip_data"] = map[string]any{"basename": name, "bytes": len(data), "hashes": map[string]any{}}
		}
		s.Objs[name] = data
		shards = append(shards, sh)
	}
	idx := map[string]any{"version": 2, "shards": shards}
	if edit != nil {
		edit(idx, s)
	}
	b, err := json.Marshal(idx)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := s.Objs["index.json"]; !ok {
		s.Objs["index.json"] = b
	}
	return s
}

func shard(idx map[string]any, i int) map[string]any {
	return idx["shards"].([]any)[i].(map[string]any)
}

func TestFixture(t *testing.T) {
	for _, c := range []string{"", "zstd", "gz"} {
		s := fixture(t, c, nil)
		lay, dec, err := indexSource(t, s, format.Options{})
		if err != nil {
			t.Fatal(c, err)
		}
		if len(lay.Keys) != 5 || lay.Keys[3] != "shard.00001/000000" {
			t.Fatal(lay.Keys)
		}
		b := decodetest.DecodeAll(t, s, lay, dec, nil)
		for _, want := range []string{"shard.00000/000002.cls", "shard.00000/000002.txt", "shard.00001/000001.npy"} {
			if !bytes.Contains(b, []byte(want)) {
				t.Errorf("%s: no %s", c, want)
			}
		}
	}
}

// Keys past 100 bytes take PAX headers, which the bound counts.
func TestLongKeys(t *testing.T) {
	long := strings.Repeat("d", 120) + "/"
	s := fixture(t, "", func(idx map[string]any, s *decodetest.Store) {
		for i, name := range []string{"shard.00000.mds", "shard.00001.mds"} {
			shard(idx, i)["raw_data"].(map[string]any)["basename"] = long + name
			s.Objs[long+name] = s.Objs[name]
			delete(s.Objs, name)
		}
	})
	lay, dec, err := indexSource(t, s, format.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if lay.Keys[0] != long+"shard.00000/000000" {
		t.Fatal(lay.Keys[0])
	}
	decodetest.DecodeAll(t, s, lay, dec, nil)
	sel, _ := format.Select(dec.Fields(), []string{"vec"})
	decodetest.DecodeAll(t, s, lay, dec, sel)
}

// Every bad index is refused at index time, naming the object and why.
func TestRefused(t *testing.T) {
	tests := []struct {
		name     string
		compress string
		edit     func(idx map[string]any, s *decodetest.Store)
		opt      format.Options
		err      error
		mention  []string
	}{
		{"shard missing", "", func(idx map[string]any, s *decodetest.Store) { delete(s.Objs, "shard.00001.mds") }, format.Options{}, format.ErrInvalid, []string{"index.json: shard 1", "shard.00001.mds, which the source does not have"}},
		{"zip shard missing", "zstd", func(idx map[string]any, s *decodetest.Store) { delete(s.Objs, "shard.00000.mds.zstd") }, format.Options{}, format.ErrInvalid, []string{"shard 0", "shard.00000.mds.zstd, which the source does not have"}},
		{"shard size disagrees", "", func(idx map[string]any, s *decodetest.Store) {
			s.Objs["shard.00000.mds"] = append(s.Objs["shard.00000.mds"], 0)
		}, format.Options{}, format.ErrInvalid, []string{"shard.00000.mds is", "index.json says"}},
		{"zip size disagrees", "zstd", func(idx map[string]any, s *decodetest.Store) { shard(idx, 1)["zip_data"].(map[string]any)["bytes"] = 3 }, format.Options{}, format.ErrInvalid, []string{"shard.00001.mds.zstd is", "index.json says 3"}},
		{"unknown encoding", "", func(idx map[string]any, s *decodetest.Store) {
			shard(idx, 0)["column_encodings"] = []string{"int", "pil", "ndarray:uint8"}
		}, format.Options{}, format.ErrUnsupported, []string{`column "text"`, `"pil"`}},
		{"list of images", "", func(idx map[string]any, s *decodetest.Store) {
			shard(idx, 0)["column_encodings"] = []string{"int", "list[jpeg]", "ndarray:uint8"}
		}, format.Options{}, format.ErrUnsupported, []string{`column "text"`, `list[jpeg]`}},
		{"pickle unnamed", "", func(idx map[string]any, s *decodetest.Store) {
			for i := range 2 {
				shard(idx, i)["column_encodings"] = []string{"int", "pkl", "ndarray:uint8"}
			}
		}, format.Options{}, format.ErrUnsupported, []string{`column "text" is pickled`}},
		{"columns differ between shards", "", func(idx map[string]any, s *decodetest.Store) {
			shard(idx, 1)["column_encodings"] = []string{"int", "bytes", "ndarray:uint8"}
		}, format.Options{}, format.ErrInvalid, []string{"shard 1 has other columns than", "shard 0"}},
		{"fixed size that lies", "", func(idx map[string]any, s *decodetest.Store) { shard(idx, 0)["column_sizes"] = []any{4, nil, nil} }, format.Options{}, format.ErrInvalid, []string{`column "label" of int has a size of 4`}},
		{"variable column with a size", "", func(idx map[string]any, s *decodetest.Store) { shard(idx, 0)["column_sizes"] = []any{8, 5, nil} }, format.Options{}, format.ErrInvalid, []string{`column "text"`, "its values vary"}},
		{"negative samples", "", func(idx map[string]any, s *decodetest.Store) { shard(idx, 0)["samples"] = -1 }, format.Options{}, format.ErrInvalid, []string{"shard 0", "-1 samples"}},
		{"samples over the limit", "", func(idx map[string]any, s *decodetest.Store) { shard(idx, 0)["samples"] = 1 << 40 }, format.Options{}, format.ErrInvalid, []string{"shard 0", "1099511627776 samples"}},
		{"raw bytes past u32", "zstd", func(idx map[string]any, s *decodetest.Store) {
			shard(idx, 0)["raw_data"].(map[string]any)["bytes"] = int64(1) << 33
		}, format.Options{}, format.ErrInvalid, []string{"shard 0", "raw_data of 8589934592 bytes"}},
		{"raw bytes too few for the samples", "zstd", func(idx map[string]any, s *decodetest.Store) {
			shard(idx, 0)["raw_data"].(map[string]any)["bytes"] = 20
		}, format.Options{}, format.ErrInvalid, []string{"shard 0", "cannot hold 3 samples"}},
		{"huge sizes that overflow", "", func(idx map[string]any, s *decodetest.Store) { shard(idx, 0)["samples"] = 1e300 }, format.Options{}, format.ErrInvalid, []string{"index.json", "not an MDS index"}},
		{"resident over the chunk limit", "", nil, format.Options{Limits: format.Limits{ChunkBytes: 4000}}, format.ErrInvalid, []string{"shard shard.00000.mds", "over the chunk limit of 4000"}},
		{"columns over the limit", "", nil, format.Options{Limits: format.Limits{Fields: 2}}, format.ErrInvalid, []string{"shard 0", "3 columns, over the limit of 2"}},
		{"index over the metadata limit", "", nil, format.Options{Limits: format.Limits{MetaBytes: 100}}, format.ErrInvalid, []string{"index.json", "over the metadata limit of 100"}},
		{"not json", "", func(idx map[string]any, s *decodetest.Store) {
			s.Objs["index.json"] = []byte("{\"version\": 2, \"shards\": [")
		}, format.Options{}, format.ErrInvalid, []string{"index.json", "not an MDS index"}},
		{"version 1", "", func(idx map[string]any, s *decodetest.Store) { idx["version"] = 1 }, format.Options{}, format.ErrUnsupported, []string{"index.json", "version 1"}},
		{"jsonl shards", "", func(idx map[string]any, s *decodetest.Store) { shard(idx, 0)["format"] = "json" }, format.Options{}, format.ErrUnsupported, []string{"shard 0", `format "json"`}},
		{"escaping basename", "", func(idx map[string]any, s *decodetest.Store) {
			shard(idx, 0)["raw_data"].(map[string]any)["basename"] = "../secret.mds"
		}, format.Options{}, format.ErrInvalid, []string{"shard 0", `"../secret.mds", which is not a file of the source`}},
		{"two shards one name", "", func(idx map[string]any, s *decodetest.Store) {
			shard(idx, 1)["raw_data"] = shard(idx, 0)["raw_data"]
			shard(idx, 1)["samples"] = 3
		}, format.Options{}, format.ErrInvalid, []string{"both name the shard shard.00000"}},
		{"brotli", "zstd", func(idx map[string]any, s *decodetest.Store) { shard(idx, 0)["compression"] = "br:11" }, format.Options{}, format.ErrUnsupported, []string{"shard 0", `compression "br:11"`}},
		{"no raw_data", "", func(idx map[string]any, s *decodetest.Store) { shard(idx, 0)["raw_data"] = nil }, format.Options{}, format.ErrInvalid, []string{"shard 0", "no raw_data"}},
		{"member for no column", "", nil, format.Options{Members: map[string]string{"image": "jpg"}}, format.ErrInvalid, []string{`column "image"`, "label, text, vec"}},
		{"member that is no extension", "", nil, format.Options{Members: map[string]string{"text": "a/b"}}, format.ErrInvalid, []string{`column "text"`, `"a/b"`}},
		{"no index.json", "", nil, format.Options{}, format.ErrInvalid, []string{"no index.json"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := fixture(t, tt.compress, tt.edit)
			if tt.name == "no index.json" {
				delete(s.Objs, "index.json")
			}
			_, _, err := indexSource(t, s, tt.opt)
			if !errors.Is(err, tt.err) {
				t.Fatalf("got %v, want %v", err, tt.err)
			}
			for _, m := range tt.mention {
				if !strings.Contains(err.Error(), m) {
					t.Errorf("%q does not say %q", err, m)
				}
			}
			for k := range s.Read {
				if k != "index.json" {
					t.Errorf("read %s", k)
				}
			}
		})
	}
}

// A pickled column is served as its raw bytes when its member is named,
// and colliding extensions are qualified by the column's name.
func TestMembers(t *testing.T) {
	s := fixture(t, "", func(idx map[string]any, s *decodetest.Store) {
		for i := range 2 {
			shard(idx, i)["column_encodings"] = []string{"int", "pkl", "ndarray:uint8"}
		}
	})
	_, dec, err := indexSource(t, s, format.Options{Members: map[string]string{"text": "pickle", "vec": "cls"}})
	if err != nil {
		t.Fatal(err)
	}
	got := []string{}
	for _, f := range dec.Fields() {
		got = append(got, f.Ext)
	}
	if strings.Join(got, " ") != "label.cls pickle vec.cls" {
		t.Fatal(got)
	}
}

// Shards whose bytes disagree with index.json are damaged at decode.
func TestDamaged(t *testing.T) {
	le := binary.LittleEndian
	tests := []struct {
		name     string
		compress string
		edit     func(idx map[string]any, s *decodetest.Store)
		mention  string
	}{
		{"header count", "", func(idx map[string]any, s *decodetest.Store) { le.PutUint32(s.Objs["shard.00000.mds"], 2) }, "its header counts 2 samples; index.json says 3"},
		{"last offset", "", func(idx map[string]any, s *decodetest.Store) {
			b := s.Objs["shard.00000.mds"]
			le.PutUint32(b[4+4*3:], le.Uint32(b[4+4*3:])-1)
		}, "its samples run from byte"},
		{"offsets backwards", "", func(idx map[string]any, s *decodetest.Store) {
			b := s.Objs["shard.00000.mds"]
			le.PutUint32(b[4+4*2:], le.Uint32(b[4+4*1:])-1)
		}, "sample 1 ends at byte"},
		{"offset past the end", "", func(idx map[string]any, s *decodetest.Store) { le.PutUint32(s.Objs["shard.00000.mds"][4+4:], 1<<30) }, "sample 0 ends at byte 1073741824"},
		{"first offset in the header", "", func(idx map[string]any, s *decodetest.Store) { le.PutUint32(s.Objs["shard.00000.mds"][4:], 3) }, "its samples run from byte 3"},
		{"value past the sample", "", func(idx map[string]any, s *decodetest.Store) {
			b := s.Objs["shard.00000.mds"]
			first := le.Uint32(b[4:])
			le.PutUint32(b[first:], 1000) // sample 0's text size
		}, `column "text" of 1000 bytes past the sample's end`},
		{"ndarray shape that lies", "", func(idx map[string]any, s *decodetest.Store) {
			b := s.Objs["shard.00000.mds"]
			end := le.Uint32(b[4+4:]) // sample 0 ends where sample 1 starts
			b[end-4] = 4              // its vec's shape: (4,) over 3 bytes
		}, "an ndarray of shape [4] uint8 in 3 bytes"},
		{"zstd that does not decompress", "zstd", func(idx map[string]any, s *decodetest.Store) {
			b := s.Objs["shard.00000.mds.zstd"]
			for i := 8; i < len(b); i++ {
				b[i] ^= 0x5a
			}
		}, "does not decompress"},
		{"zstd past its stated size", "zstd", func(idx map[string]any, s *decodetest.Store) {
			r := shard(idx, 0)["raw_data"].(map[string]any)
			r["bytes"] = r["bytes"].(int) - 8
		}, "does not decompress to the"},
		{"zstd bomb", "zstd", func(idx map[string]any, s *decodetest.Store) {
			enc, _ := zstd.NewWriter(nil)
			bomb := enc.EncodeAll(make([]byte, 64<<20), nil)
			s.Objs["shard.00000.mds.zstd"] = bomb
			shard(idx, 0)["zip_data"].(map[string]any)["bytes"] = len(bomb)
		}, "decompresses past the"},
		{"gz bomb", "gz", func(idx map[string]any, s *decodetest.Store) {
			var b bytes.Buffer
			w, _ := gzip.NewWriterLevel(&b, gzip.BestCompression)
			w.Write(make([]byte, 64<<20))
			w.Close()
			s.Objs["shard.00000.mds.gz"] = b.Bytes()
			shard(idx, 0)["zip_data"].(map[string]any)["bytes"] = b.Len()
		}, "decompresses past the"},
		{"gz short", "gz", func(idx map[string]any, s *decodetest.Store) {
			r := shard(idx, 0)["raw_data"].(map[string]any)
			r["bytes"] = r["bytes"].(int) + 8
		}, "bytes; index.json says"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := fixture(t, tt.compress, tt.edit)
			_, dec, src, resident := firstChunk(t, s)
			err := dec.Decode(0, nil, src, make([]byte, resident), format.WriterOptions{})
			if !errors.Is(err, format.ErrDamaged) || !strings.Contains(err.Error(), tt.mention) {
				t.Fatalf("got %v, want damaged: %s", err, tt.mention)
			}
			if tt.compress == "" && !strings.Contains(err.Error(), "shard.00000.mds") {
				t.Errorf("%v does not name the shard", err)
			}
		})
	}
}

func TestDetect(t *testing.T) {
	f := Format{}
	if !f.Detect([]format.Object{{Key: "index.json"}, {Key: "shard.00000.mds.zstd"}}) || !f.Detect([]format.Object{{Key: "p/index.json"}, {Key: "p/shard.00000.mds"}}) {
		t.Error("an MDS source")
	}
	if f.Detect([]format.Object{{Key: "index.json"}, {Key: "a.parquet"}}) || f.Detect([]format.Object{{Key: "a.bin"}, {Key: "a.idx"}}) {
		t.Error("not MDS")
	}
}

// The root index.json covers the partitions' own; without one, each
// top-most index.json is a stream; an index.json below another is not.
func TestIndexFiles(t *testing.T) {
	objs := func(keys ...string) []format.Object {
		var o []format.Object
		for _, k := range keys {
			o = append(o, format.Object{Key: k})
		}
		return o
	}
	tests := []struct {
		keys []string
		want string
	}{
		{[]string{"a/index.json", "index.json"}, "index.json"},
		{[]string{"a/index.json", "a/b/index.json", "c/d/index.json"}, "a/index.json c/d/index.json"},
		{[]string{"x.mds"}, ""},
	}
	for _, tt := range tests {
		var got []string
		for _, o := range indexFiles(objs(tt.keys...)) {
			got = append(got, o.Key)
		}
		if strings.Join(got, " ") != tt.want {
			t.Errorf("%v: %v", tt.keys, got)
		}
	}
}

// Decodes run at once on one Decoder (the zstd decoder is shared).
func TestConcurrentDecode(t *testing.T) {
	s := fixture(t, "zstd", nil)
	lay, dec, err := indexSource(t, s, format.Options{})
	if err != nil {
		t.Fatal(err)
	}
	errs := make(chan error, 16)
	for g := range 16 {
		go func() {
			c := g % len(lay.Chunks)
			src, resident := decodetest.ReadChunk(t, s, lay, dec, c, nil)
			dst := make([]byte, resident)
			if err := dec.Decode(c, nil, src, dst, format.WriterOptions{}); err != nil {
				errs <- err
				return
			}
			_, err := format.Verify(dst)
			errs <- err
		}()
	}
	for range 16 {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
}
