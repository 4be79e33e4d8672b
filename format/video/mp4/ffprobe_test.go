package mp4

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/brandgw/brand/internal/testsupport/videotest"
)

// indexFile indexes a file on disk, read whole into memory.
func indexFile(t testing.TB, path string) (*File, []byte) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	f, err := Index(context.Background(), Bytes(b), int64(len(b)), Limits{})
	if err != nil {
		t.Fatalf("%s: %v", filepath.Base(path), err)
	}
	return f, b
}

// TestFFprobe holds the index of every fixture — written by the ffmpeg
// command — to ffprobe's reading of the same file, packet for packet
// (PTS, DTS, size, position, key and discard flags, the bytes' SHA-256)
// and frame for frame (the decoder's output order, PTS, the packet each
// came from, key flags), and the stream's codec, size and extradata.
func TestFFprobe(t *testing.T) {
	dir := t.TempDir()
	paths := videotest.Make(t, dir)
	cut := filepath.Join(dir, "h264-cut.mp4")
	videotest.Cut(t, paths["h264-bframes.mp4"], cut, "1.3")
	paths["h264-cut.mp4"] = cut
	// Rotated: the tkhd matrix rewritten in place (FFmpeg 5.1's muxer has
	// no option that writes one), read back by ffprobe as its display
	// matrix.
	const one, neg = 1 << 16, -1 << 16
	for deg, m := range map[int][4]int32{90: {0, one, neg, 0}, 180: {neg, 0, 0, neg}, 270: {0, neg, one, 0}} {
		b, err := os.ReadFile(paths["h264.mp4"])
		if err != nil {
			t.Fatal(err)
		}
		o := findBox(t, b, "moov", "trak", "tkhd") + 8 + 4 + 20 + 16
		for i, v := range []int32{m[0], m[1], 0, m[2], m[3]} {
			binary.BigEndian.PutUint32(b[o+4*i:], uint32(v))
		}
		name := fmt.Sprintf("h264-rotated%d.mp4", deg)
		paths[name] = filepath.Join(dir, name)
		if err := os.WriteFile(paths[name], b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for name, path := range paths {
		t.Run(name, func(t *testing.T) {
			f, b := indexFile(t, path)
			p := videotest.ProbeFile(t, path)
			compareProbe(t, f, b, p)
			if strings.HasPrefix(name, "h264-rotated") && f.Video.Rotation == 0 {
				t.Error("not rotated")
			}
			r := &recorder{b: b}
			if _, err := Index(context.Background(), r, int64(len(b)), Limits{}); err != nil {
				t.Fatal(err)
			}
			checkMetadataOnly(t, b, r.reads)
			t.Logf("%d bytes, moov %d bytes at %d, %d fragments: %d reads of %d bytes", len(b), f.Moov.Len, f.Moov.Off, f.Fragments, f.Reads, f.BytesRead)
		})
	}
}

func compareProbe(t *testing.T, f *File, b []byte, p videotest.Probe) {
	t.Helper()
	v := f.Video
	if v.Codec != p.Stream.Codec || v.Width != p.Stream.Width || v.Height != p.Stream.Height {
		t.Errorf("stream %s %d×%d, ffprobe %s %d×%d", v.Codec, v.Width, v.Height, p.Stream.Codec, p.Stream.Width, p.Stream.Height)
	}
	if tb := fmt.Sprintf("1/%d", v.Timescale); tb != p.Stream.TimeBase {
		t.Errorf("time base %s, ffprobe %s", tb, p.Stream.TimeBase)
	}
	if len(v.Extradata) != p.Stream.ExtradataSize || len(v.Extradata) > 0 && hash(v.Extradata) != p.Stream.ExtradataHash {
		t.Errorf("extradata of %d bytes (%s), ffprobe %d (%s)", len(v.Extradata), hash(v.Extradata), p.Stream.ExtradataSize, p.Stream.ExtradataHash)
	}
	if got, want := v.Rotation, (360-p.Stream.Rotation)%360; got != want {
		t.Errorf("rotation %d° clockwise, ffprobe %d° counterclockwise", got, p.Stream.Rotation)
	}
	if len(v.Samples) != len(p.Packets) {
		t.Errorf("%d samples, ffprobe %d packets", len(v.Samples), len(p.Packets))
	}
	for i := range min(len(v.Samples), len(p.Packets)) {
		s, k := v.Samples[i], p.Packets[i]
		got := fmt.Sprintf("pts %d dts %d size %d pos %d key %v discard %v %s", s.PTS, s.DTS, s.Size, s.Off, s.Key, s.Discard, hash(b[s.Off:s.Off+int64(s.Size)]))
		want := fmt.Sprintf("pts %d dts %d size %d pos %d key %v discard %v %s", k.PTS, k.DTS, k.Size, k.Pos, k.Key, k.Discard, k.Hash)
		if got != want {
			t.Errorf("sample %d: %s\nffprobe packet:    %s", i, got, want)
		}
	}
	if len(v.Frames) != len(p.Frames) {
		t.Errorf("%d frames, ffprobe %d", len(v.Frames), len(p.Frames))
	}
	for i := range min(len(v.Frames), len(p.Frames)) {
		fr, pf := v.Frames[i], p.Frames[i]
		s := v.Samples[fr.Sample]
		if fr.PTS != pf.PTS || s.Off != pf.PktPos {
			t.Errorf("frame %d: pts %d from the sample at %d; ffprobe pts %d from the packet at %d", i, fr.PTS, s.Off, pf.PTS, pf.PktPos)
		}
	}
}

func hash(b []byte) string {
	h := sha256.Sum256(b)
	return "SHA256:" + hex.EncodeToString(h[:])
}
