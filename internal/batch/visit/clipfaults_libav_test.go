//go:build brand_libav

package visit_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/brandgw/brand/dataset"
	"github.com/brandgw/brand/format"
	"github.com/brandgw/brand/format/video"
	"github.com/brandgw/brand/internal/testsupport/stagetest"
	"github.com/brandgw/brand/internal/testsupport/videotest"
	"github.com/brandgw/brand/s3backend"
)

// clipJSON is a clip's json member: its video and its frames.
type clipJSON struct {
	Video  string
	Frames []int
}

// clipsOf returns the keys of a batch's clips whose first frame is in
// [from, to).
func clipsOf(t *testing.T, body []byte, from, to int) map[string]bool {
	t.Helper()
	out := map[string]bool{}
	for _, s := range stagetest.Samples(t, body) {
		var js clipJSON
		if err := json.Unmarshal(s.Files["json"], &js); err != nil {
			t.Fatal(err)
		}
		if js.Frames[0] >= from && js.Frames[0] < to {
			out[s.Key] = true
		}
	}
	return out
}

// A video of a running clip job that vanishes from the store (deleted),
// or whose packets stop decoding (its media zeroed in place, its size and
// time kept, so that every packet still parses as NAL units and only the
// decoder can tell), fails each batch holding one of its clips by
// default — a 502 naming the file, or the decoder's 422 — and no other
// batch. With --on-damaged-chunk=skip every batch is served: those
// clips are left out, counted and named (the Brand-Missing-* headers)
// and in the clip stage's figures (/stats' video.clips_skipped), and
// every other clip is the one the intact tree serves, byte for byte. The
// tree is indexed with --checksums=false: with the GOPs' CRC32Cs (the
// default) media changed under a kept size and time is damage at rest,
// caught before a decode (TestDamagedGOPFailsOnlyItsClips); without them
// only the decoder can tell, which is the path this test holds.
func TestClipOfALostVideo(t *testing.T) {
	videotest.Tools(t)
	src := t.TempDir()
	// Three videos of 2 s at 10 fps, a keyframe a second: a clip of 4
	// frames every 4 from the first, 5 clips a video, 15 in all.
	keys := []string{"a/x.mp4", "a/y.mp4", "b/z.mp4"}
	files := map[string][]byte{}
	for i, k := range keys {
		p := filepath.Join(src, strconv.Itoa(i)+".mp4")
		videotest.Encode(t, p, "64x48", 10, 20, 7*i, "-c:v", "libx264", "-pix_fmt", "yuv420p", "-bf", "0", "-g", "10", "-sc_threshold", "0")
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		files[k] = b
	}
	const lost = "a/y.mp4"
	const q = "clip=4&step=4&clip_start=first&batch_size=2&seed=3"

	// serve indexes the tree, wires the stages (skipping or not) and
	// then loses the file as how says.
	serve := func(skip bool, how string) *stagetest.Stages {
		dir := t.TempDir()
		st, err := s3backend.NewLocal(dir)
		if err != nil {
			t.Fatal(err)
		}
		for _, k := range keys {
			if _, err := st.Put(context.Background(), k, bytes.NewReader(files[k]), int64(len(files[k]))); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := dataset.IndexInPlace(context.Background(), st, st, dataset.InPlaceOptions{
			Formats: []format.Format{video.Format{}}, Options: format.Options{ChunkBytes: 4 << 10}, NoChecksums: true}); err != nil {
			t.Fatal(err)
		}
		s := stagetest.New(t, stagetest.Config{Datasets: stagetest.Videos(st), SkipDamaged: skip})
		p := filepath.Join(dir, filepath.FromSlash(lost))
		switch how {
		case "deleted":
			if err := os.Remove(p); err != nil {
				t.Fatal(err)
			}
		case "undecodable":
			stagetest.ZeroMedia(t, p)
		}
		return s
	}
	intact := serve(false, "").EpochBatches(t, q, 0)
	// The clips of the lost file, by batch.
	of := make([][]string, len(intact))
	held := 0
	for m, b := range intact {
		if b.Err != nil {
			t.Fatalf("intact tree, batch %d: %v", m, b.Err)
		}
		for _, s := range stagetest.Samples(t, b.Body) {
			var js clipJSON
			if err := json.Unmarshal(s.Files["json"], &js); err != nil {
				t.Fatal(err)
			}
			if js.Video == lost {
				of[m] = append(of[m], s.Key)
				held++
			}
		}
	}
	if held != 5 {
		t.Fatalf("%d clips of %s in the epoch, want 5", held, lost)
	}

	for _, how := range []string{"deleted", "undecodable"} {
		t.Run(how, func(t *testing.T) {
			want := map[string]int{"deleted": http.StatusBadGateway, "undecodable": http.StatusUnprocessableEntity}[how]
			for m, b := range serve(false, how).EpochBatches(t, q, 0) {
				switch {
				case len(of[m]) > 0 && (b.Err == nil || stagetest.Status(b.Err) != want || !strings.Contains(stagetest.Message(b.Err), lost)):
					t.Errorf("default, batch %d holding %s: %v; want %d naming %s", m, of[m], b.Err, want, lost)
				case len(of[m]) == 0 && (b.Err != nil || !bytes.Equal(b.Body, intact[m].Body)):
					t.Errorf("default, batch %d (no clip of %s): %v; want the intact tree's", m, lost, b.Err)
				}
			}
			s := serve(true, how)
			skipped := 0
			for m, b := range s.EpochBatches(t, q, 0) {
				if b.Err != nil {
					t.Errorf("skip, batch %d: %v", m, b.Err)
					continue
				}
				if keys := strings.Join(b.Batch.MissingKeys, ","); len(b.Batch.Missing) != len(of[m]) || keys != strings.Join(of[m], ",") {
					t.Errorf("skip, batch %d: %d missing (%q), want %d (%q)", m, len(b.Batch.Missing), keys, len(of[m]), strings.Join(of[m], ","))
				}
				skipped += len(b.Batch.Missing)
				// Every clip but the lost file's is the intact tree's.
				want := map[string][]byte{}
				for _, s := range stagetest.Samples(t, intact[m].Body) {
					for ext, v := range s.Files {
						want[s.Key+"."+ext] = v
					}
				}
				got := stagetest.Samples(t, b.Body)
				for _, s := range got {
					for ext, v := range s.Files {
						if !bytes.Equal(v, want[s.Key+"."+ext]) {
							t.Errorf("skip, batch %d: %s.%s differs from the intact tree's", m, s.Key, ext)
						}
					}
				}
				if n := len(stagetest.Samples(t, intact[m].Body)); len(got)+len(of[m]) != n {
					t.Errorf("skip, batch %d: %d clips and %d left out, the intact tree's %d", m, len(got), len(of[m]), n)
				}
			}
			if skipped != held {
				t.Errorf("skip: %d clips left out in the epoch, want %d", skipped, held)
			}
			if got := s.Stage.VideoStats(); got == nil || got.ClipsSkipped != int64(held) {
				t.Errorf("video.clips_skipped %+v, want %d", got, held)
			}
		})
	}
}

// A packet damaged at rest so that it still parses decodes without an
// error. A tree indexed with the defaults (per-GOP CRC32Cs, checked on
// every load before a packet is decoded) or --checksums fails only the
// batches whose clips need the damaged GOP, 502 naming the file and the
// GOP, though the GOP's chunk holds others (256 KiB chunks of two or
// three GOPs): no other batch changes. Indexed with the checksums refused
// (--checksums=false), nothing sees the damage and the GOP's clips are
// served with wrong frames: what that choice gives up.
func TestClipOfADamagedPacket(t *testing.T) {
	// 4 s of 320×240 at 25 fps, a keyframe a second, no B-frames: about
	// 1 MB; the damage lies in the third GOP, past the first and last
	// 64 KiB a content ETag reads (docs/format.md §6.9).
	dv := stagetest.NewDamagedVideo(t, 2, 5, "-f", "lavfi", "-i", "testsrc2=size=320x240:rate=25:duration=4",
		"-c:v", "libx264", "-pix_fmt", "yuv420p", "-bf", "0", "-g", "25", "-crf", "8")
	if dv.At < 64<<10 || dv.At >= int64(len(dv.Good))-64<<10 {
		t.Fatalf("the damage at %d of %d is not past the content ETag's ends", dv.At, len(dv.Good))
	}
	chunks := format.Options{ChunkBytes: 256 << 10} // chunks of 2 or 3 GOPs of about 95 KB
	serve := func(opts dataset.InPlaceOptions, damage bool) []stagetest.Served {
		return stagetest.New(t, stagetest.Config{Datasets: stagetest.Videos(dv.Store(t, opts, damage))}).EpochBatches(t, q13, 0)
	}
	intact := serve(dataset.InPlaceOptions{Options: chunks}, false)
	// The damaged GOP's frames: 50..74, in clips of 4 from frame 0.
	damaged := map[int]bool{}
	n := 0
	for k, b := range intact {
		if b.Err != nil {
			t.Fatalf("intact file, batch %d: %v", k, b.Err)
		}
		damaged[k] = len(clipsOf(t, b.Body, 48, 75)) > 0
		if damaged[k] {
			n++
		}
	}
	if n == 0 || n == len(intact) {
		t.Fatalf("%d of %d batches hold the damaged GOP's clips", n, len(intact))
	}

	wrong := 0
	got := serve(dataset.InPlaceOptions{Options: chunks, NoChecksums: true}, true)
	for k := range intact {
		if got[k].Err != nil {
			t.Fatalf("checksums refused, batch %d: %v; the damaged packet was to decode without an error", k, got[k].Err)
		}
		if !bytes.Equal(got[k].Body, intact[k].Body) {
			if !damaged[k] {
				t.Errorf("checksums refused, batch %d differs from the intact file's and holds no clip of the damaged GOP", k)
			}
			wrong++
		}
	}
	if wrong == 0 {
		t.Fatalf("checksums refused, every batch is the intact file's: the damage decoded to the same frames")
	}
	t.Logf("checksums refused: %d of %d batches served with wrong frames", wrong, len(intact))

	for _, tc := range []struct {
		name string
		opts dataset.InPlaceOptions
	}{
		{"default", dataset.InPlaceOptions{Options: chunks}},
		{"--checksums", dataset.InPlaceOptions{Options: chunks, Checksums: true}},
	} {
		got := serve(tc.opts, true)
		for k := range intact {
			b := got[k]
			switch {
			case damaged[k] && (b.Err == nil || stagetest.Status(b.Err) != http.StatusBadGateway || !strings.Contains(stagetest.Message(b.Err), "GOP 2 of cls/x.mp4")):
				t.Errorf("%s, batch %d of the damaged GOP: %v; want 502 naming GOP 2 of cls/x.mp4", tc.name, k, b.Err)
			case !damaged[k] && (b.Err != nil || !bytes.Equal(b.Body, intact[k].Body)):
				t.Errorf("%s, batch %d (no clip of the damaged GOP): %v, %d bytes; want the intact file's", tc.name, k, b.Err, len(b.Body))
			}
		}
	}
}

// q13 is TestClipOfADamagedPacket's job: 13 batches, the 7 clips of the
// damaged GOP leave some batches out.
const q13 = "clip=4&step=4&clip_start=first&batch_size=2"

// The case: a 322×242 H.264 (-bf 0 -g 30) indexed with the
// defaults is one chunk (under the default 8 MiB), so a check of the
// chunk as a whole would fail every clip of the file. One bit flipped at
// rest inside a P-frame of the third GOP fails only the batches holding
// that GOP's clips, 502 naming the file and the GOP; every other batch is
// the intact file's bytes. With --on-damaged-chunk=skip those batches
// are served without the GOP's clips, each named (Brand-Missing-Keys),
// their other clips the intact file's.
func TestDamagedGOPFailsOnlyItsClips(t *testing.T) {
	dv := stagetest.NewDamagedVideo(t, 2, 24, "-f", "lavfi", "-i", "testsrc2=size=322x242:rate=25:duration=4",
		"-c:v", "libx264", "-pix_fmt", "yuv420p", "-bf", "0", "-g", "30")
	const q = "clip=4&step=4&clip_start=first&batch_size=5"
	serve := func(damage, skip bool) []stagetest.Served {
		return stagetest.New(t, stagetest.Config{Datasets: stagetest.Videos(dv.Store(t, dataset.InPlaceOptions{}, damage)), SkipDamaged: skip}).EpochBatches(t, q, 0)
	}
	intact := serve(false, false)
	// GOP 2's frames: 60..89; a clip of 4 starting at 57..89 reads it.
	damaged := make([]map[string]bool, len(intact))
	n, batches := 0, 0
	for k, b := range intact {
		if b.Err != nil {
			t.Fatalf("intact file, batch %d: %v", k, b.Err)
		}
		damaged[k] = clipsOf(t, b.Body, 57, 90)
		n += len(damaged[k])
		if len(damaged[k]) > 0 {
			batches++
		}
	}
	if n == 0 || batches == len(intact) {
		t.Fatalf("%d clips in %d of %d batches read the damaged GOP", n, batches, len(intact))
	}

	got := serve(true, false)
	logged := false
	for k := range intact {
		b := got[k]
		switch {
		case len(damaged[k]) > 0:
			if !logged {
				t.Logf("batch %d: %v", k, b.Err)
				logged = true
			}
			if b.Err == nil || stagetest.Status(b.Err) != http.StatusBadGateway || !strings.Contains(stagetest.Message(b.Err), "GOP 2 of cls/x.mp4") {
				t.Errorf("batch %d, %d clips of the damaged GOP: %v; want 502 naming GOP 2 of cls/x.mp4", k, len(damaged[k]), b.Err)
			}
		case b.Err != nil || !bytes.Equal(b.Body, intact[k].Body):
			t.Errorf("batch %d (no clip of the damaged GOP): %v; want the intact file's bytes", k, b.Err)
		}
	}

	got = serve(true, true)
	for k := range intact {
		b := got[k]
		if b.Err != nil {
			t.Errorf("skip mode, batch %d: %v", k, b.Err)
			continue
		}
		want := map[string][]byte{}
		for _, s := range stagetest.Samples(t, intact[k].Body) {
			if !damaged[k][s.Key] {
				want[s.Key] = s.Files["frames.npy"]
			}
		}
		served := stagetest.Samples(t, b.Body)
		if len(served) != len(want) {
			t.Errorf("skip mode, batch %d: %d clips, want the %d of intact GOPs", k, len(served), len(want))
		}
		for _, s := range served {
			if w, ok := want[s.Key]; !ok || !bytes.Equal(s.Files["frames.npy"], w) {
				t.Errorf("skip mode, batch %d: clip %s is not the intact file's clip of an intact GOP", k, s.Key)
			}
		}
		if m := len(b.Batch.Missing); m != len(damaged[k]) {
			t.Errorf("skip mode, batch %d: %d missing, want %d", k, m, len(damaged[k]))
		}
		keys := strings.Join(b.Batch.MissingKeys, ",")
		for key := range damaged[k] {
			if !strings.Contains(keys, key) {
				t.Errorf("skip mode, batch %d: missing keys %q do not name %s", k, keys, key)
			}
		}
	}
}
