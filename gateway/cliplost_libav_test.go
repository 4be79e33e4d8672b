//go:build brand_libav

package gateway_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
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

// A video of a running clip job that vanishes from the store (deleted),
// or whose packets stop decoding (its media zeroed in place, its size and
// time kept, so that every packet still parses as NAL units and only the
// decoder can tell), fails each batch holding one of its clips by
// default — a 502 naming the file, or the decoder's 422 — and no other
// batch. With --on-damaged-chunk=skip every batch is served: those
// clips are left out, counted and named in the Brand-Missing-* headers
// and in /stats (video.clips_skipped), and every other clip is the one
// the intact tree serves, byte for byte. The tree is indexed with
// --checksums=false: with the GOPs' CRC32Cs (the default) media changed
// under a kept size and time is damage at rest, caught before a decode
// (TestDamagedGOPFailsOnlyItsClips); without them only the decoder can
// tell, which is the path this test holds.
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

	// serve indexes the tree, starts a gateway in mode and then loses
	// the file as how says.
	serve := func(mode, how string) string {
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
		url := startVideos(t, st, func(c *gateway.Config) { c.OnDamagedChunk = mode }).URL
		p := filepath.Join(dir, filepath.FromSlash(lost))
		switch how {
		case "deleted":
			if err := os.Remove(p); err != nil {
				t.Fatal(err)
			}
		case "undecodable":
			zeroMedia(t, p)
		}
		return url
	}
	type batch struct {
		code    int
		body    []byte
		missing int
		keys    string
	}
	epoch := func(url string) []batch {
		var info struct{ Batches int }
		if resp, body := get(t, url+"/epoch/0?"+q); resp.StatusCode != http.StatusOK || json.Unmarshal(body, &info) != nil {
			t.Fatalf("the epoch: %d %s", resp.StatusCode, body)
		}
		out := make([]batch, info.Batches)
		for m := range out {
			resp, body := get(t, fmt.Sprintf("%s/epoch/0/batch/%d?%s", url, m, q))
			n, _ := strconv.Atoi(resp.Header.Get(api.HeaderMissingSamples))
			out[m] = batch{resp.StatusCode, body, n, resp.Header.Get(api.HeaderMissingKeys)}
		}
		return out
	}
	intact := epoch(serve("fail", ""))
	// The clips of the lost file, by batch.
	of := make([][]string, len(intact))
	held := 0
	for m, b := range intact {
		if b.code != http.StatusOK {
			t.Fatalf("intact tree, batch %d: %d %s", m, b.code, b.body)
		}
		for _, s := range readTar(t, b.body) {
			var js clipJSON
			if err := json.Unmarshal(s.files["json"], &js); err != nil {
				t.Fatal(err)
			}
			if js.Video == lost {
				of[m] = append(of[m], s.key)
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
			for m, b := range epoch(serve("fail", how)) {
				switch {
				case len(of[m]) > 0 && (b.code != want || !strings.Contains(string(b.body), lost)):
					t.Errorf("default, batch %d holding %s: %d %.300s; want %d naming %s", m, of[m], b.code, b.body, want, lost)
				case len(of[m]) == 0 && (b.code != http.StatusOK || !bytes.Equal(b.body, intact[m].body)):
					t.Errorf("default, batch %d (no clip of %s): %d %.300s; want the intact tree's", m, lost, b.code, b.body)
				}
			}
			url := serve(gateway.OnDamagedSkip, how)
			skipped := 0
			for m, b := range epoch(url) {
				if b.code != http.StatusOK {
					t.Errorf("skip, batch %d: %d %.300s", m, b.code, b.body)
					continue
				}
				if b.missing != len(of[m]) || b.keys != strings.Join(of[m], ",") {
					t.Errorf("skip, batch %d: %s %d (%q), want %d (%q)", m, api.HeaderMissingSamples, b.missing, b.keys, len(of[m]), strings.Join(of[m], ","))
				}
				skipped += b.missing
				// Every clip but the lost file's is the intact tree's.
				want := map[string][]byte{}
				for _, s := range readTar(t, intact[m].body) {
					for ext, v := range s.files {
						want[s.key+"."+ext] = v
					}
				}
				got := readTar(t, b.body)
				for _, s := range got {
					for ext, v := range s.files {
						if !bytes.Equal(v, want[s.key+"."+ext]) {
							t.Errorf("skip, batch %d: %s.%s differs from the intact tree's", m, s.key, ext)
						}
					}
				}
				if len(got)+len(of[m]) != len(readTar(t, intact[m].body)) {
					t.Errorf("skip, batch %d: %d clips and %d left out, the intact tree's %d", m, len(got), len(of[m]), len(readTar(t, intact[m].body)))
				}
			}
			if skipped != held {
				t.Errorf("skip: %d clips left out in the epoch, want %d", skipped, held)
			}
			var stats struct{ Video *api.VideoStats }
			if resp, body := get(t, url+"/stats"); resp.StatusCode != http.StatusOK || json.Unmarshal(body, &stats) != nil || stats.Video == nil {
				t.Fatalf("/stats: %d %s", resp.StatusCode, body)
			}
			if stats.Video.ClipsSkipped != int64(held) {
				t.Errorf("/stats: video.clips_skipped %d, want %d", stats.Video.ClipsSkipped, held)
			}
		})
	}
}

// zeroMedia rewrites every video packet of the MP4 at p in place as one
// NAL unit of a slice of zeros, keeping its size and modification time:
// each packet still parses as length-prefixed NAL units filling it, as
// bit rot that leaves a local file's identity might, and only the
// decoder can tell.
func zeroMedia(t *testing.T, p string) {
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
