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
	"strconv"
	"strings"
	"testing"

	"github.com/brandgw/brand/api"
	"github.com/brandgw/brand/dataset"
	"github.com/brandgw/brand/format"
	"github.com/brandgw/brand/format/video"
	"github.com/brandgw/brand/format/video/mp4"
	"github.com/brandgw/brand/gateway"
	"github.com/brandgw/brand/internal/testsupport/videotest"
	"github.com/brandgw/brand/s3backend"
)

// damagedVideo is a video written by ffmpeg (args: its encoding) and the
// same file with one bit flipped near the end of a P-frame of GOP gop —
// packet pkt of it, in decode order — where FFmpeg's own decoder, told to
// stop at any error it can detect (ffmpeg -xerror -err_detect explode),
// decodes the file to other frames without one: damage at rest that
// still parses, as bit rot leaves it, the file's size kept.
type damagedVideo struct {
	good, bad []byte
	at        int64 // the byte flipped
}

func makeDamagedVideo(t *testing.T, gop, pkt int, args ...string) damagedVideo {
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
			return damagedVideo{good: good, bad: b, at: at}
		}
	}
	t.Fatal("no bit flipped near the packet's end decodes without an error in FFmpeg")
	return damagedVideo{}
}

// serve puts the video (damaged, if damage) at cls/x.mp4 of a local
// store indexed with opts, the file's time kept (bit rot changes no
// time), and serves it.
func (dv damagedVideo) serve(t *testing.T, opts dataset.InPlaceOptions, damage bool, mutate func(*gateway.Config)) string {
	t.Helper()
	return startVideos(t, dv.store(t, opts, damage), mutate).URL
}

// store is serve's store, indexed and damaged, not served.
func (dv damagedVideo) store(t *testing.T, opts dataset.InPlaceOptions, damage bool) *s3backend.Local {
	t.Helper()
	dir := t.TempDir()
	st, err := s3backend.NewLocal(dir)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Put(context.Background(), "cls/x.mp4", bytes.NewReader(dv.good), int64(len(dv.good))); err != nil {
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
		if err := os.WriteFile(p, dv.bad, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(p, fi.ModTime(), fi.ModTime()); err != nil {
			t.Fatal(err)
		}
	}
	return st
}

// clipBatches gets every batch of epoch 0 of the clip job q.
func clipBatches(t *testing.T, url, q string) (resps []*http.Response, bodies [][]byte) {
	t.Helper()
	var info struct{ Batches int }
	if resp, body := get(t, url+"/epoch/0?"+q); resp.StatusCode != http.StatusOK || json.Unmarshal(body, &info) != nil {
		t.Fatalf("the epoch: %d %s", resp.StatusCode, body)
	}
	for m := range info.Batches {
		resp, body := get(t, fmt.Sprintf("%s/epoch/0/batch/%d?%s", url, m, q))
		resps, bodies = append(resps, resp), append(bodies, body)
	}
	return resps, bodies
}

// clipsOf returns the keys of a batch's clips whose first frame is in
// [from, to).
func clipsOf(t *testing.T, body []byte, from, to int) map[string]bool {
	t.Helper()
	out := map[string]bool{}
	for _, s := range readTar(t, body) {
		var js clipJSON
		if err := json.Unmarshal(s.files["json"], &js); err != nil {
			t.Fatal(err)
		}
		if js.Frames[0] >= from && js.Frames[0] < to {
			out[s.key] = true
		}
	}
	return out
}

// A packet damaged at rest so that it still parses decodes without an
// error. A tree indexed with the defaults (per-GOP CRC32Cs, checked on
// every load before a packet is decoded) or --checksums fails only the
// batches whose clips need the damaged GOP, 502 naming the file and the
// GOP, though the GOP's chunk holds others (256 KiB chunks of two or
// three GOPs): no other batch changes. Indexed with the checksums refused
// (--checksums=false), nothing sees the damage and the GOP's clips are
// served 200 with wrong frames: what that choice gives up.
func TestClipOfADamagedPacket(t *testing.T) {
	// 4 s of 320×240 at 25 fps, a keyframe a second, no B-frames: about
	// 1 MB; the damage lies in the third GOP, past the first and last
	// 64 KiB a content ETag reads (docs/format.md §6.9).
	dv := makeDamagedVideo(t, 2, 5, "-f", "lavfi", "-i", "testsrc2=size=320x240:rate=25:duration=4",
		"-c:v", "libx264", "-pix_fmt", "yuv420p", "-bf", "0", "-g", "25", "-crf", "8")
	if dv.at < 64<<10 || dv.at >= int64(len(dv.good))-64<<10 {
		t.Fatalf("the damage at %d of %d is not past the content ETag's ends", dv.at, len(dv.good))
	}
	chunks := format.Options{ChunkBytes: 256 << 10} // chunks of 2 or 3 GOPs of about 95 KB
	// 13 batches: the 7 clips of the damaged GOP leave some batches out.
	const q = "clip=4&step=4&clip_start=first&batch_size=2"
	_, intact := clipBatches(t, dv.serve(t, dataset.InPlaceOptions{Options: chunks}, false, nil), q)
	// The damaged GOP's frames: 50..74, in clips of 4 from frame 0.
	damaged := map[int]bool{}
	n := 0
	for k, body := range intact {
		damaged[k] = len(clipsOf(t, body, 48, 75)) > 0
		if damaged[k] {
			n++
		}
	}
	if n == 0 || n == len(intact) {
		t.Fatalf("%d of %d batches hold the damaged GOP's clips", n, len(intact))
	}

	wrong := 0
	resps, bodies := clipBatches(t, dv.serve(t, dataset.InPlaceOptions{Options: chunks, NoChecksums: true}, true, nil), q)
	for k := range intact {
		if resps[k].StatusCode != http.StatusOK {
			t.Fatalf("checksums refused, batch %d: %d %s; the damaged packet was to decode without an error", k, resps[k].StatusCode, bodies[k])
		}
		if !bytes.Equal(bodies[k], intact[k]) {
			if !damaged[k] {
				t.Errorf("checksums refused, batch %d differs from the intact file's and holds no clip of the damaged GOP", k)
			}
			wrong++
		}
	}
	if wrong == 0 {
		t.Fatalf("checksums refused, every batch is the intact file's: the damage decoded to the same frames")
	}
	t.Logf("checksums refused: %d of %d batches served 200 with wrong frames", wrong, len(intact))

	for _, tc := range []struct {
		name string
		opts dataset.InPlaceOptions
	}{
		{"default", dataset.InPlaceOptions{Options: chunks}},
		{"--checksums", dataset.InPlaceOptions{Options: chunks, Checksums: true}},
	} {
		resps, bodies := clipBatches(t, dv.serve(t, tc.opts, true, nil), q)
		for k := range intact {
			switch {
			case damaged[k] && (resps[k].StatusCode != http.StatusBadGateway || !strings.Contains(string(bodies[k]), "GOP 2 of cls/x.mp4")):
				t.Errorf("%s, batch %d of the damaged GOP: %d %.300s; want 502 naming GOP 2 of cls/x.mp4", tc.name, k, resps[k].StatusCode, bodies[k])
			case !damaged[k] && (resps[k].StatusCode != http.StatusOK || !bytes.Equal(bodies[k], intact[k])):
				t.Errorf("%s, batch %d (no clip of the damaged GOP): %d, %d bytes; want the intact file's", tc.name, k, resps[k].StatusCode, len(bodies[k]))
			}
		}
	}
}

// The case: a 322×242 H.264 (-bf 0 -g 30) indexed with the
// defaults is one chunk (under the default 8 MiB), so a check of the
// chunk as a whole would fail every clip of the file. One bit flipped at
// rest inside a P-frame of the third GOP fails only the batches holding
// that GOP's clips, 502 naming the file and the GOP; every other batch is
// 200 and the intact file's bytes. With --on-damaged-chunk=skip those
// batches are 200 without the GOP's clips, named in Brand-Missing-Keys,
// their other clips the intact file's.
func TestDamagedGOPFailsOnlyItsClips(t *testing.T) {
	dv := makeDamagedVideo(t, 2, 24, "-f", "lavfi", "-i", "testsrc2=size=322x242:rate=25:duration=4",
		"-c:v", "libx264", "-pix_fmt", "yuv420p", "-bf", "0", "-g", "30")
	const q = "clip=4&step=4&clip_start=first&batch_size=5"
	_, intact := clipBatches(t, dv.serve(t, dataset.InPlaceOptions{}, false, nil), q)
	// GOP 2's frames: 60..89; a clip of 4 starting at 57..89 reads it.
	damaged := make([]map[string]bool, len(intact))
	n, batches := 0, 0
	for k, body := range intact {
		damaged[k] = clipsOf(t, body, 57, 90)
		n += len(damaged[k])
		if len(damaged[k]) > 0 {
			batches++
		}
	}
	if n == 0 || batches == len(intact) {
		t.Fatalf("%d clips in %d of %d batches read the damaged GOP", n, batches, len(intact))
	}

	resps, bodies := clipBatches(t, dv.serve(t, dataset.InPlaceOptions{}, true, nil), q)
	logged := false
	for k := range intact {
		switch {
		case len(damaged[k]) > 0:
			if !logged {
				t.Logf("batch %d: %d %s", k, resps[k].StatusCode, bodies[k])
				logged = true
			}
			if resps[k].StatusCode != http.StatusBadGateway || !strings.Contains(string(bodies[k]), "GOP 2 of cls/x.mp4") {
				t.Errorf("batch %d, %d clips of the damaged GOP: %d %.300s; want 502 naming GOP 2 of cls/x.mp4", k, len(damaged[k]), resps[k].StatusCode, bodies[k])
			}
		case resps[k].StatusCode != http.StatusOK || !bytes.Equal(bodies[k], intact[k]):
			t.Errorf("batch %d (no clip of the damaged GOP): %d %.200s; want the intact file's bytes", k, resps[k].StatusCode, bodies[k])
		}
	}

	skip := func(c *gateway.Config) { c.OnDamagedChunk = gateway.OnDamagedSkip }
	resps, bodies = clipBatches(t, dv.serve(t, dataset.InPlaceOptions{}, true, skip), q)
	for k := range intact {
		if resps[k].StatusCode != http.StatusOK {
			t.Errorf("skip mode, batch %d: %d %.300s", k, resps[k].StatusCode, bodies[k])
			continue
		}
		want := map[string][]byte{}
		for _, s := range readTar(t, intact[k]) {
			if !damaged[k][s.key] {
				want[s.key] = s.files["frames.npy"]
			}
		}
		got := readTar(t, bodies[k])
		if len(got) != len(want) {
			t.Errorf("skip mode, batch %d: %d clips, want the %d of intact GOPs", k, len(got), len(want))
		}
		for _, s := range got {
			if w, ok := want[s.key]; !ok || !bytes.Equal(s.files["frames.npy"], w) {
				t.Errorf("skip mode, batch %d: clip %s is not the intact file's clip of an intact GOP", k, s.key)
			}
		}
		if m := resps[k].Header.Get(api.HeaderMissingSamples); m != strconv.Itoa(len(damaged[k])) && (m != "" || len(damaged[k]) > 0) {
			t.Errorf("skip mode, batch %d: %s %q, want %d", k, api.HeaderMissingSamples, m, len(damaged[k]))
		}
		keys := resps[k].Header.Get(api.HeaderMissingKeys)
		for key := range damaged[k] {
			if !strings.Contains(keys, key) {
				t.Errorf("skip mode, batch %d: %s %q does not name %s", k, api.HeaderMissingKeys, keys, key)
			}
		}
	}
}

// On a cluster, a damaged GOP's chunk is owned by one node and its clips
// are asked for on another: the owner leaves the GOP's sample out of its
// answer, and the asker fails the batches whose clips need it (502
// naming the GOP's sample) and serves every other batch exactly, or with
// skip serves them without those clips.
func TestDamagedGOPOnACluster(t *testing.T) {
	dv := makeDamagedVideo(t, 2, 5, "-f", "lavfi", "-i", "testsrc2=size=320x240:rate=25:duration=4",
		"-c:v", "libx264", "-pix_fmt", "yuv420p", "-bf", "0", "-g", "25", "-crf", "8")
	opts := dataset.InPlaceOptions{Options: format.Options{ChunkBytes: 256 << 10}} // chunks of 2 or 3 GOPs
	const q = "clip=4&step=4&clip_start=first&batch_size=2"
	_, intact := clipBatches(t, dv.serve(t, opts, false, nil), q)
	damaged := make([]map[string]bool, len(intact))
	n := 0
	for k, body := range intact {
		damaged[k] = clipsOf(t, body, 47, 75) // GOP 2: frames 50..74
		if len(damaged[k]) > 0 {
			n++
		}
	}
	if n == 0 || n == len(intact) {
		t.Fatalf("%d of %d batches hold the damaged GOP's clips", n, len(intact))
	}
	st := dv.store(t, opts, true)
	for _, skip := range []bool{false, true} {
		cl := startCluster(t, &fixture{store: st}, 2, nil, func(c *gateway.Config) {
			c.Datasets[0].Formats = []format.Format{video.Format{}}
			if skip {
				c.OnDamagedChunk = gateway.OnDamagedSkip
			}
		})
		for _, node := range cl {
			resps, bodies := clipBatches(t, node.srv.URL, q)
			for k := range intact {
				code := resps[k].StatusCode
				switch {
				case len(damaged[k]) == 0:
					if code != http.StatusOK || !bytes.Equal(bodies[k], intact[k]) {
						t.Errorf("skip %t, node %s, batch %d (no clip of the damaged GOP): %d %.200s; want the intact file's", skip, node.srv.URL, k, code, bodies[k])
					}
				case !skip:
					if code != http.StatusBadGateway || !strings.Contains(string(bodies[k]), "cls/x/000002") {
						t.Errorf("node %s, batch %d of the damaged GOP: %d %.300s; want 502 naming its sample cls/x/000002", node.srv.URL, k, code, bodies[k])
					}
				default:
					if code != http.StatusOK || len(readTar(t, bodies[k])) != len(readTar(t, intact[k]))-len(damaged[k]) {
						t.Errorf("skip, node %s, batch %d: %d %.200s; want it without the damaged GOP's %d clips", node.srv.URL, k, code, bodies[k], len(damaged[k]))
					}
				}
			}
		}
	}
}
