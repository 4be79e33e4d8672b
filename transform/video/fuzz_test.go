//go:build cgo && brand_libav

package video

import (
	"context"
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/brandgw/brand/format/video/framesize"
	"github.com/brandgw/brand/format/video/mp4"
)

// fuzzCodecs are the codecs a fuzzed stream may name, by the input's
// first argument.
var fuzzCodecs = []string{"h264", "hevc", "vp9", "av1"}

// fuzzMaxPixels bounds a fuzzed stream's frames, so that every input's
// decode is small: what is fuzzed is libavcodec's parsing of damaged
// packets and this package's checks around it, not its memory at 8K.
const fuzzMaxPixels = 256 * 256

// fuzzHeapSlack is how much more C heap than before an input a decoder
// may hold once closed: none of its own (its contexts are freed), a few
// libraries' one-time tables and glibc's rounding.
const fuzzHeapSlack = 16 << 20

// packRun writes a run's packets as a fuzz input: each packet its
// length (4 bytes), PTS (4), key flag (1) and bytes; unpackRun reads
// them back, a packet's DTS its place.
func packRun(ps []Packet) []byte {
	var b []byte
	for _, p := range ps {
		b = binary.BigEndian.AppendUint32(b, uint32(len(p.Data)))
		b = binary.BigEndian.AppendUint32(b, uint32(p.PTS))
		k := byte(0)
		if p.Key {
			k = 1
		}
		b = append(append(b, k), p.Data...)
	}
	return b
}

func unpackRun(b []byte) []Packet {
	var ps []Packet
	for len(b) >= 9 && len(ps) < 64 {
		n := int(binary.BigEndian.Uint32(b))
		pts := int64(int32(binary.BigEndian.Uint32(b[4:])))
		key := b[8]&1 == 1
		b = b[9:]
		n = min(n, len(b))
		ps = append(ps, Packet{PTS: pts, DTS: int64(len(ps)), Key: key, Data: b[:n]})
		b = b[n:]
	}
	return ps
}

// FuzzDecode: no stream and packets make Decode panic, crash libavcodec
// or leave a decoder open or its memory held, and what it hands out is
// consistent: every error one of the package's kinds, every frame of
// the stream's size, wanted, and handed out once. Seeded with each GOP of
// format/video/mp4's test files (H.264 as Debian's ffmpeg wrote it), as
// whole runs and cut short; the fuzzer mutates the packets' bytes, their
// timestamps and key flags, the codec configuration, the codec and the
// size.
func FuzzDecode(f *testing.F) {
	files, _ := filepath.Glob("../../format/video/mp4/testdata/*.mp4")
	for _, path := range files {
		b, err := os.ReadFile(path)
		if err != nil {
			f.Fatal(err)
		}
		file, err := mp4.Index(context.Background(), mp4.Bytes(b), int64(len(b)), mp4.Limits{MetaBytes: 1 << 20, Samples: 1 << 12, Boxes: 1 << 12})
		if err != nil {
			f.Fatalf("%s: %v", path, err)
		}
		v := file.Video
		for _, g := range v.GOPs {
			var ps []Packet
			for _, s := range v.Samples[g.First:g.End] {
				ps = append(ps, Packet{PTS: s.PTS, Key: s.Key, Data: b[s.Off : s.Off+int64(s.Size)]})
			}
			f.Add(uint8(0), uint16(v.Width), uint16(v.Height), v.Extradata, packRun(ps))
			f.Add(uint8(0), uint16(v.Width), uint16(v.Height), v.Extradata, packRun(ps[:len(ps)/2]))
		}
	}
	f.Add(uint8(2), uint16(32), uint16(32), []byte(nil), packRun([]Packet{{Key: true, Data: []byte{0x82, 0x49, 0x83, 0x42, 0x00}}}))
	f.Fuzz(func(t *testing.T, which uint8, w, h uint16, extradata, packets []byte) {
		run := Run{Stream: Stream{Codec: fuzzCodecs[int(which)%len(fuzzCodecs)], Width: int(w), Height: int(h), Extradata: extradata},
			Packets: unpackRun(packets), First: true}
		var want []int64
		seen := map[int64]bool{}
		for _, p := range run.Packets {
			if !seen[p.PTS] {
				want = append(want, p.PTS)
				seen[p.PTS] = true
			}
		}
		heap := cHeap()
		dec := NewDecoder(Options{Frames: framesize.Bound{Pixels: fuzzMaxPixels}})
		given := map[int64]bool{}
		err := dec.Decode(context.Background(), run, want, func(fr Frame) error {
			if fr.Width != run.Stream.Width || fr.Height != run.Stream.Height || len(fr.RGB) != 3*fr.Width*fr.Height {
				t.Fatalf("a frame of %d×%d, %d bytes, from a stream of %d×%d", fr.Width, fr.Height, len(fr.RGB), w, h)
			}
			if !seen[fr.PTS] || given[fr.PTS] {
				t.Fatalf("frame pts %d handed out unwanted or twice", fr.PTS)
			}
			given[fr.PTS] = true
			return nil
		})
		if err != nil && !errors.Is(err, ErrDecode) && !errors.Is(err, ErrRun) && !errors.Is(err, ErrCodec) && !errors.Is(err, ErrTooLarge) {
			t.Fatalf("an error of none of the package's kinds: %v", err)
		}
		if err == nil && len(given) != len(want) {
			t.Fatalf("%d of %d wanted frames handed out, and no error", len(given), len(want))
		}
		dec.Close()
		if s := dec.Stats(); s.Live != 0 {
			t.Fatalf("%d decoders live after Close", s.Live)
		}
		if grew := cHeap() - heap; grew > fuzzHeapSlack {
			t.Fatalf("the C heap grew by %d bytes over a closed decoder's input", grew)
		}
	})
}
