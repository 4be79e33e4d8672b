package mds

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"

	"github.com/brandgw/brand/format"
	"github.com/brandgw/brand/format/internal/decodetest"
)

// opener opens ranges of a test store's object, as a gateway's store does
// (s3backend.S3.OpenRange), in reads of at most step bytes, failing
// after fail bytes if fail > 0; it counts the ranges opened.
type opener struct {
	obj   []byte
	step  int
	fail  int
	opens int
}

func (o *opener) open(r format.Range) (io.ReadCloser, error) {
	o.opens++
	if r.End() > int64(len(o.obj)) {
		return nil, fmt.Errorf("range %+v past the object's %d bytes", r, len(o.obj))
	}
	return io.NopCloser(&stepReader{b: o.obj[r.Off:r.End()], step: o.step, fail: o.fail}), nil
}

var errCut = errors.New("connection cut")

type stepReader struct {
	b          []byte
	step, fail int
	n          int
}

func (s *stepReader) Read(p []byte) (int, error) {
	if s.fail > 0 && s.n >= s.fail {
		return 0, errCut
	}
	if len(s.b) == 0 {
		return 0, io.EOF
	}
	k := min(len(p), len(s.b), s.step)
	copy(p, s.b[:k])
	s.b, s.n = s.b[k:], s.n+k
	return k, nil
}

// decodeBoth decodes chunk c with the fields sel by Decode and by
// DecodeStream (whose src is left as it was made: garbage, so that a
// value read from it rather than the stream would show) and returns
// both resident forms, Decode's first, and the streamed one's error.
func decodeBoth(t *testing.T, s *decodetest.Store, lay *format.Layout, dec format.Decoder, c int, sel format.Selection, step int) (want, got []byte, err error) {
	t.Helper()
	src, resident := decodetest.ReadChunk(t, s, lay, dec, c, sel)
	want = make([]byte, resident)
	if err := dec.Decode(c, sel, src, want, format.WriterOptions{ModTime: 1700000000}); err != nil {
		t.Fatalf("Decode of chunk %d: %v", c, err)
	}
	o := &opener{obj: s.Objs[lay.Chunks[c].Object], step: step}
	garbage := bytes.Repeat([]byte{0xa5}, len(src))
	got = make([]byte, resident)
	err = dec.(format.Streamer).DecodeStream(c, sel, o.open, garbage, got, format.WriterOptions{ModTime: 1700000000})
	if err == nil && o.opens != 1 {
		t.Errorf("chunk %d: %d ranges opened, want 1", c, o.opens)
	}
	return want, got, err
}

// TestDecodeStream: a raw shard decoded as it arrives is Decode's
// resident form byte for byte, whatever the fields and however the
// response's reads are cut.
func TestDecodeStream(t *testing.T) {
	sources := []struct {
		name string
		s    *decodetest.Store
		sels [][]string
	}{
		{"fixture", fixture(t, "", nil), [][]string{nil, {"text"}, {"label", "vec"}, {"vec"}}},
		{"images", imageSource(t, false), [][]string{nil, {"image"}, {"label"}}},
	}
	for _, src := range sources {
		lay, dec, err := indexSource(t, src.s, format.Options{})
		if err != nil {
			t.Fatal(err)
		}
		for _, names := range src.sels {
			sel := format.Selection(nil)
			if names != nil {
				if sel, err = format.Select(dec.Fields(), names); err != nil {
					t.Fatal(err)
				}
			}
			for _, step := range []int{1, 7, 4096, 1 << 20} {
				if src.name == "images" && step < 4096 {
					continue // 64 MiB a byte at a time: the fixture covers it
				}
				t.Run(fmt.Sprintf("%s/%v/%d", src.name, names, step), func(t *testing.T) {
					for c := range lay.Chunks {
						want, got, err := decodeBoth(t, src.s, lay, dec, c, sel, step)
						if err != nil {
							t.Fatalf("chunk %d: %v", c, err)
						}
						if !bytes.Equal(got, want) {
							t.Fatalf("chunk %d: the streamed resident form differs from Decode's", c)
						}
					}
				})
			}
		}
	}
}

// TestDecodeStreamNot: what DecodeStream leaves to Decode, it says
// (format.ErrNotStreamed) having read nothing.
func TestDecodeStreamNot(t *testing.T) {
	tests := []struct {
		name     string
		compress string
		edit     func(idx map[string]any, s *decodetest.Store)
		opens    int
	}{
		{"zstd", "zstd", nil, 0},
		{"gz", "gz", nil, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := fixture(t, tt.compress, tt.edit)
			lay, dec, src, resident := firstChunk(t, s)
			o := &opener{obj: s.Objs[lay.Chunks[0].Object], step: 1 << 20}
			err := dec.(format.Streamer).DecodeStream(0, nil, o.open, make([]byte, len(src)), make([]byte, resident), format.WriterOptions{})
			if !errors.Is(err, format.ErrNotStreamed) || o.opens != tt.opens {
				t.Fatalf("got %v with %d ranges opened, want ErrNotStreamed with %d", err, o.opens, tt.opens)
			}
			// Decode makes sense of it.
			if err := dec.Decode(0, nil, src, make([]byte, resident), format.WriterOptions{}); err != nil {
				t.Fatalf("Decode: %v", err)
			}
		})
	}
}

// TestDecodeStreamDamaged: a damaged raw shard is damaged streamed as
// it is decoded whole, with the same reason (TestDamaged's cases); a
// response that fails is the store's error, not damage.
func TestDecodeStreamDamaged(t *testing.T) {
	le := binary.LittleEndian
	tests := []struct {
		name    string
		edit    func(idx map[string]any, s *decodetest.Store)
		mention string
	}{
		{"header count", func(idx map[string]any, s *decodetest.Store) { le.PutUint32(s.Objs["shard.00000.mds"], 2) }, "its header counts 2 samples; index.json says 3"},
		{"last offset", func(idx map[string]any, s *decodetest.Store) {
			b := s.Objs["shard.00000.mds"]
			le.PutUint32(b[4+4*3:], le.Uint32(b[4+4*3:])-1)
		}, "its samples run from byte"},
		{"offsets backwards", func(idx map[string]any, s *decodetest.Store) {
			b := s.Objs["shard.00000.mds"]
			le.PutUint32(b[4+4*2:], le.Uint32(b[4+4*1:])-1)
		}, "sample 1 ends at byte"},
		{"offset past the end", func(idx map[string]any, s *decodetest.Store) { le.PutUint32(s.Objs["shard.00000.mds"][4+4:], 1<<30) }, "sample 0 ends at byte 1073741824"},
		{"first offset in the header", func(idx map[string]any, s *decodetest.Store) { le.PutUint32(s.Objs["shard.00000.mds"][4:], 3) }, "its samples run from byte 3"},
		{"value past the sample", func(idx map[string]any, s *decodetest.Store) {
			b := s.Objs["shard.00000.mds"]
			first := le.Uint32(b[4:])
			le.PutUint32(b[first:], 1000) // sample 0's text size
		}, `column "text" of 1000 bytes past the sample's end`},
		{"ndarray shape that lies", func(idx map[string]any, s *decodetest.Store) {
			b := s.Objs["shard.00000.mds"]
			end := le.Uint32(b[4+4:])
			b[end-4] = 4
		}, "an ndarray of shape [4] uint8 in 3 bytes"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := fixture(t, "", tt.edit)
			lay, dec, src, resident := firstChunk(t, s)
			o := &opener{obj: s.Objs[lay.Chunks[0].Object], step: 5}
			err := dec.(format.Streamer).DecodeStream(0, nil, o.open, make([]byte, len(src)), make([]byte, resident), format.WriterOptions{})
			if !errors.Is(err, format.ErrDamaged) || !strings.Contains(err.Error(), tt.mention) || !strings.Contains(err.Error(), "shard.00000.mds") {
				t.Fatalf("got %v, want damaged, naming the shard: %s", err, tt.mention)
			}
		})
	}

	s := fixture(t, "", nil)
	lay, dec, src, resident := firstChunk(t, s)
	for _, fail := range []int{1, 30, len(src) - 1} {
		o := &opener{obj: s.Objs[lay.Chunks[0].Object], step: 3, fail: fail}
		err := dec.(format.Streamer).DecodeStream(0, nil, o.open, make([]byte, len(src)), make([]byte, resident), format.WriterOptions{})
		if !errors.Is(err, errCut) || errors.Is(err, format.ErrDamaged) || !strings.Contains(err.Error(), "shard.00000.mds") {
			t.Errorf("cut after %d bytes: got %v, want the reader's error, not damage", fail, err)
		}
	}
	short := &opener{obj: s.Objs[lay.Chunks[0].Object][:len(src)-2], step: 3}
	err := dec.(format.Streamer).DecodeStream(0, nil, func(r format.Range) (io.ReadCloser, error) {
		return short.open(format.Range{Off: r.Off, Len: r.Len - 2})
	}, make([]byte, len(src)), make([]byte, resident), format.WriterOptions{})
	if err == nil || errors.Is(err, format.ErrDamaged) || !strings.Contains(err.Error(), "ended within bytes") {
		t.Errorf("a response 2 bytes short: got %v, want an error that is not damage", err)
	}
}
