package stagetest

import (
	"bytes"
	"context"
	"encoding/binary"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/brandgw/brand/dataset"
	"github.com/brandgw/brand/format"
	"github.com/brandgw/brand/format/video"
	"github.com/brandgw/brand/format/video/mp4"
	"github.com/brandgw/brand/internal/testsupport/videotest"
	"github.com/brandgw/brand/s3backend"
)

// DamagedVideo is a video written by ffmpeg and the same file with one
// bit flipped near the end of a P-frame, where FFmpeg's own decoder,
// told to stop at any error it can detect (ffmpeg -xerror -err_detect
// explode), decodes the file to other frames without one: damage at rest
// that still parses, as bit rot leaves it, the file's size kept.
type DamagedVideo struct {
	Good, Bad []byte
	At        int64 // the byte flipped
}

// NewDamagedVideo writes a video with ffmpeg (args: its input and
// encoding) and flips a bit of packet pkt, in decode order, of its GOP
// gop (DamagedVideo).
func NewDamagedVideo(t testing.TB, gop, pkt int, args ...string) DamagedVideo {
	t.Helper()
	ffmpeg, _ := videotest.Tools(t)
	src := filepath.Join(t.TempDir(), "x.mp4")
	videotest.Run(t, ffmpeg, append(append([]string{"-hide_banner", "-loglevel", "error", "-nostdin", "-y"}, args...),
		"-map_metadata", "-1", "-fflags", "+bitexact", src)...)
	good, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	f, err := mp4.Index(context.Background(), mp4.Bytes(good), int64(len(good)), mp4.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	tr := f.Video
	smp := tr.Samples[int(tr.GOPs[gop].First)+pkt]
	if smp.Key {
		t.Fatalf("packet %d of GOP %d is a keyframe", pkt, gop)
	}
	decode := func(b []byte) (string, bool) {
		p := filepath.Join(t.TempDir(), "d.mp4")
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
		out, err := exec.Command(ffmpeg, "-v", "error", "-nostdin", "-xerror", "-err_detect", "+crccheck+bitstream+buffer+explode",
			"-i", p, "-f", "framemd5", "-").Output()
		return string(out), err == nil
	}
	intactMD5, ok := decode(good)
	if !ok {
		t.Fatal("ffmpeg does not decode the intact file")
	}
	for back := int64(2); back < 96; back++ {
		b := bytes.Clone(good)
		at := smp.Off + int64(smp.Size) - back
		b[at] ^= 0x01
		if md5, ok := decode(b); ok && md5 != intactMD5 {
			t.Logf("bit 0 of byte %d (%d of the packet's %d, PTS %d) flipped: FFmpeg decodes other frames without an error", at, int64(smp.Size)-back, smp.Size, smp.PTS)
			return DamagedVideo{Good: good, Bad: b, At: at}
		}
	}
	t.Fatal("no bit flipped near the packet's end decodes without an error in FFmpeg")
	return DamagedVideo{}
}

// Store puts the video (damaged, if damage) at cls/x.mp4 of a local
// store indexed with opts (as a video tree), the file's time kept: bit
// rot changes no time.
func (dv DamagedVideo) Store(t testing.TB, opts dataset.InPlaceOptions, damage bool) *s3backend.Local {
	t.Helper()
	dir := t.TempDir()
	st, err := s3backend.NewLocal(dir)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Put(context.Background(), "cls/x.mp4", bytes.NewReader(dv.Good), int64(len(dv.Good))); err != nil {
		t.Fatal(err)
	}
	opts.Formats = []format.Format{video.Format{}}
	if _, err := dataset.IndexInPlace(context.Background(), st, st, opts); err != nil {
		t.Fatal(err)
	}
	if damage {
		p := filepath.Join(dir, "cls", "x.mp4")
		fi, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, dv.Bad, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(p, fi.ModTime(), fi.ModTime()); err != nil {
			t.Fatal(err)
		}
	}
	return st
}

// ZeroMedia rewrites every video packet of the MP4 at p in place as one
// NAL unit of a slice of zeros, keeping its size and modification time:
// each packet still parses as length-prefixed NAL units filling it, as
// bit rot that leaves a local file's identity might, and only the
// decoder can tell.
func ZeroMedia(t testing.TB, p string) {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	f, err := mp4.Index(context.Background(), mp4.Bytes(b), int64(len(b)), mp4.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range f.Video.Samples {
		pkt := b[s.Off : s.Off+int64(s.Size)]
		clear(pkt)
		binary.BigEndian.PutUint32(pkt, uint32(len(pkt)-4))
		pkt[4] = 0x01 // a non-IDR slice's NAL header
	}
	fi, err := os.Stat(p)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(p, fi.ModTime(), fi.ModTime()); err != nil {
		t.Fatal(err)
	}
}

// Videos is the spec of a dataset of videos served in place from st, as
// `brand serve` reads them (the video tree's and LeRobot's formats).
func Videos(st s3backend.Store) []Spec {
	return []Spec{{Name: "test", URL: "file:///fixture", Store: st, Formats: []format.Format{video.Format{}, video.LeRobotFormat{}}}}
}
