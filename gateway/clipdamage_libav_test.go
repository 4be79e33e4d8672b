//go:build brand_libav

package gateway_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/brandgw/brand/dataset"
	"github.com/brandgw/brand/format"
	"github.com/brandgw/brand/format/video"
	"github.com/brandgw/brand/format/video/mp4"
	"github.com/brandgw/brand/internal/testsupport/videotest"
	"github.com/brandgw/brand/s3backend"
)

// A packet damaged at rest so that it still parses — one bit flipped
// near the end of a P-frame's slice data, the file's size and time kept,
// as bit rot leaves them — decodes without an error: a tree indexed
// without checksums serves every clip 200, those of the damaged GOP with
// frames that differ from the intact file's. Indexed with checksums
// (brand index --checksums: the CRC32C of each chunk's run of GOPs, which
// every load checks before a packet is decoded), every batch whose clips
// need that GOP's chunk is a 502 naming the damage and no other batch
// changes: never a wrong frame.
func TestClipOfADamagedPacket(t *testing.T) {
	ffmpeg, _ := videotest.Tools(t)
	src := filepath.Join(t.TempDir(), "x.mp4")
	// 4 s of 320×240 at 25 fps, a keyframe a second, no B-frames: about
	// 1 MB, so that the damage lies past the first and last 64 KiB a
	// content ETag reads (docs/format.md §6.9), where only checksums see.
	videotest.Run(t, ffmpeg, "-hide_banner", "-loglevel", "error", "-nostdin", "-y", "-f", "lavfi", "-i", "testsrc2=size=320x240:rate=25:duration=4",
		"-c:v", "libx264", "-pix_fmt", "yuv420p", "-bf", "0", "-g", "25", "-crf", "8", "-map_metadata", "-1", "-fflags", "+bitexact", src)
	good, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	f, err := mp4.Index(context.Background(), mp4.Bytes(good), int64(len(good)), mp4.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	// The damaged packet: a P-frame in the middle of the file, in the
	// third GOP, one bit flipped near its end where FFmpeg's own decoder,
	// told to stop at any error it can detect, decodes the file to
	// other frames without one (ffmpeg -xerror -err_detect explode; its
	// framemd5 differs from the intact file's).
	tr := f.Video
	smp := tr.Samples[tr.GOPs[2].First+5]
	if smp.Key || smp.Off < 64<<10 || smp.Off+int64(smp.Size) >= int64(len(good))-64<<10 {
		t.Fatalf("packet at %d+%d of %d (key %v) is not a P-frame past the content ETag's ends", smp.Off, smp.Size, len(good), smp.Key)
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
	var bad []byte
	for back := int64(2); back < 96 && bad == nil; back++ {
		b := bytes.Clone(good)
		b[smp.Off+int64(smp.Size)-back] ^= 0x01
		if md5, ok := decode(b); ok && md5 != intactMD5 {
			bad = b
			t.Logf("bit 0 of byte %d of the packet's %d flipped: FFmpeg decodes other frames without an error", int64(smp.Size)-back, smp.Size)
		}
	}
	if bad == nil {
		t.Fatal("no bit flipped near the packet's end decodes without an error in FFmpeg")
	}

	// A store of the file indexed with or without checksums, then
	// damaged (contents, if damage) with its time kept.
	serve := func(checksums, damage bool) string {
		dir := t.TempDir()
		st, err := s3backend.NewLocal(dir)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := st.Put(context.Background(), "cls/x.mp4", bytes.NewReader(good), int64(len(good))); err != nil {
			t.Fatal(err)
		}
		if _, err := dataset.IndexInPlace(context.Background(), st, st, dataset.InPlaceOptions{Checksums: checksums,
			Formats: []format.Format{video.Format{}}, Options: format.Options{ChunkBytes: 128 << 10}}); err != nil {
			t.Fatal(err)
		}
		if damage {
			p := filepath.Join(dir, "cls", "x.mp4")
			fi, err := os.Stat(p)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(p, bad, 0o644); err != nil {
				t.Fatal(err)
			}
			if err := os.Chtimes(p, fi.ModTime(), fi.ModTime()); err != nil {
				t.Fatal(err)
			}
		}
		return startVideos(t, st, nil).URL
	}
	const q = "clip=4&step=4&clip_start=first&batch_size=5"
	batches := func(url string) (codes []int, bodies [][]byte) {
		var info struct{ Batches int }
		if resp, body := get(t, url+"/epoch/0?"+q); resp.StatusCode != http.StatusOK || json.Unmarshal(body, &info) != nil {
			t.Fatalf("the epoch: %d %s", resp.StatusCode, body)
		}
		for m := range info.Batches {
			resp, body := get(t, fmt.Sprintf("%s/epoch/0/batch/%d?%s", url, m, q))
			codes, bodies = append(codes, resp.StatusCode), append(bodies, body)
		}
		return codes, bodies
	}
	_, intact := batches(serve(false, false))
	// The damaged GOP's frames: 50..74, in clips of 4 from frame 0.
	damaged := map[int]bool{}
	for k, body := range intact {
		for _, s := range readTar(t, body) {
			var js clipJSON
			if err := json.Unmarshal(s.files["json"], &js); err != nil {
				t.Fatal(err)
			}
			if js.Frames[0] >= 48 && js.Frames[0] < 75 {
				damaged[k] = true
			}
		}
	}
	if len(damaged) == 0 || len(damaged) == len(intact) {
		t.Fatalf("%d of %d batches hold the damaged GOP's clips", len(damaged), len(intact))
	}

	codes, bodies := batches(serve(false, true))
	wrong := 0
	for k := range intact {
		if codes[k] != http.StatusOK {
			t.Fatalf("without checksums, batch %d: %d %s; the damaged packet was to decode without an error", k, codes[k], bodies[k])
		}
		if !bytes.Equal(bodies[k], intact[k]) {
			if !damaged[k] {
				t.Errorf("without checksums, batch %d differs from the intact file's and holds no clip of the damaged GOP", k)
			}
			wrong++
		}
	}
	if wrong == 0 {
		t.Fatalf("without checksums, every batch is the intact file's: the damage decoded to the same frames")
	}
	t.Logf("without checksums: %d of %d batches served 200 with wrong frames", wrong, len(intact))

	codes, bodies = batches(serve(true, true))
	for k := range intact {
		switch {
		case damaged[k] && (codes[k] != http.StatusBadGateway || !strings.Contains(string(bodies[k]), "damaged")):
			t.Errorf("with checksums, batch %d of the damaged GOP: %d %.300s; want 502 naming the damage", k, codes[k], bodies[k])
		case !damaged[k] && (codes[k] != http.StatusOK || !bytes.Equal(bodies[k], intact[k])):
			t.Errorf("with checksums, batch %d (no clip of the damaged GOP): %d, %d bytes; want the intact file's", k, codes[k], len(bodies[k]))
		}
	}
}
