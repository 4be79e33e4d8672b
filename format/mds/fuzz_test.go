package mds

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"testing"

	"github.com/brandgw/brand/format"
	"github.com/brandgw/brand/format/internal/decodetest"
)

// FuzzIndexJSON: no index.json makes Index panic, and what it accepts
// opens, with bounds within the chunk limit. Seeded with the fixture's
// index and the edits TestRefused makes.
func FuzzIndexJSON(f *testing.F) {
	base := fixture(f, "", nil)
	f.Add(base.Objs["index.json"])
	f.Add(fixture(f, "zstd", nil).Objs["index.json"])
	for _, edit := range []func(map[string]any, *decodetest.Store){
		func(idx map[string]any, _ *decodetest.Store) { shard(idx, 0)["samples"] = -1 },
		func(idx map[string]any, _ *decodetest.Store) { shard(idx, 0)["samples"] = 1 << 40 },
		func(idx map[string]any, _ *decodetest.Store) { shard(idx, 0)["column_sizes"] = []any{4, nil, nil} },
		func(idx map[string]any, _ *decodetest.Store) {
			shard(idx, 0)["column_encodings"] = []string{"int", "ndarray:uint8:3,4", "ndarray"}
		},
		func(idx map[string]any, _ *decodetest.Store) {
			shard(idx, 0)["raw_data"].(map[string]any)["basename"] = "../x.mds"
		},
		func(idx map[string]any, _ *decodetest.Store) { shard(idx, 0)["compression"] = "br:11" },
		func(idx map[string]any, _ *decodetest.Store) { idx["version"] = 1 },
	} {
		f.Add(fixture(f, "", edit).Objs["index.json"])
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		s := fixture(t, "", nil)
		s.Objs["index.json"] = b
		lim := format.Limits{ChunkBytes: 1 << 20}
		lay, err := Format{}.Index(context.Background(), s, s.List(), format.Options{Limits: lim})
		if err != nil {
			if !errors.Is(err, format.ErrInvalid) && !errors.Is(err, format.ErrUnsupported) {
				t.Fatalf("neither invalid nor unsupported: %v", err)
			}
			return
		}
		dec, err := Format{}.Open(lay.Meta)
		if err != nil {
			t.Fatal(err)
		}
		for c := range lay.Chunks {
			if _, r := dec.Extent(c, nil); r > lim.ChunkBytes {
				t.Fatalf("chunk %d: bound %d", c, r)
			}
		}
	})
}

// FuzzDecode: no shard's bytes make Decode panic or write past its
// bound; a shard that is not what index.json says is damaged; and
// DecodeStream agrees with Decode, error for error and byte for byte.
func FuzzDecode(f *testing.F) {
	s := fixture(f, "", nil)
	f.Add(s.Objs["shard.00000.mds"])
	f.Add(s.Objs["shard.00001.mds"])
	f.Fuzz(func(t *testing.T, b []byte) {
		s := fixture(t, "", nil)
		var idx map[string]any
		json.Unmarshal(s.Objs["index.json"], &idx)
		shard(idx, 0)["raw_data"].(map[string]any)["bytes"] = len(b)
		s.Objs["index.json"], _ = json.Marshal(idx)
		s.Objs["shard.00000.mds"] = b
		lay, dec, err := indexSource(t, s, format.Options{})
		if err != nil {
			return
		}
		src, resident := decodetest.ReadChunk(t, s, lay, dec, 0, nil)
		dst := make([]byte, resident)
		err = dec.Decode(0, nil, src, dst, format.WriterOptions{})
		// Streamed, the same bytes decode to the same resident form, or
		// fail for the same reason.
		o := &opener{obj: b, step: 3}
		streamed := make([]byte, resident)
		serr := dec.(format.Streamer).DecodeStream(0, nil, o.open, make([]byte, len(src)), streamed, format.WriterOptions{})
		if fmt.Sprint(err) != fmt.Sprint(serr) || err == nil && !bytes.Equal(dst, streamed) {
			t.Fatalf("Decode: %v; DecodeStream: %v (same resident form: %v)", err, serr, bytes.Equal(dst, streamed))
		}
		if err != nil {
			if !errors.Is(err, format.ErrDamaged) {
				t.Fatalf("not damaged: %v", err)
			}
			return
		}
		if _, err := format.Verify(dst); err != nil {
			t.Fatal(err)
		}
	})
}
