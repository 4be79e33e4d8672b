//go:build cgo && brand_libav

package video

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/brandgw/brand/format/video/framesize"
	"github.com/brandgw/brand/format/video/mp4"
	"github.com/brandgw/brand/internal/testsupport/videotest"
)

// TestBoundAgrees: the index (format/video/mp4 with its default limits)
// and the decoder (a Decoder with its default bound, reserving from a
// node's default decodes share) take and refuse the same videos, real
// H.264s ffmpeg writes at the bound's edges (1 s at 2 fps, ultrafast, a
// keyframe every other frame): DCI 8K and a 16000×2000 panorama are
// indexed and every frame decodes within the reservation; two rows over
// the pixel bound is refused by the index, and by the decoder from the
// same size. (Before, the index allowed 8192 a side and 8192 × 4320
// pixels, the decoder 16,384 and 7680 × 4352: the panorama was refused at
// index, DCI 8K indexed and refused at every clip.) A side over 16,384
// is past what libx264 writes; framesize's own test holds that edge.
// Each decode takes about 0.4 GB of C heap, one at a time.
func TestBoundAgrees(t *testing.T) {
	ffmpeg, _ := videotest.Tools(t)
	cases := []struct {
		size    string
		w, h    int
		indexed bool
	}{
		{"8192x4320", 8192, 4320, true},
		{"16000x2000", 16000, 2000, true},
		{"8192x4354", 8192, 4354, false},
	}
	for _, tc := range cases {
		t.Run(tc.size, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "v.mp4")
			videotest.Run(t, ffmpeg, "-hide_banner", "-loglevel", "error", "-nostdin", "-y", "-f", "lavfi",
				"-i", "testsrc2=size="+tc.size+":rate=2:duration=1", "-c:v", "libx264", "-preset", "ultrafast", "-g", "2",
				"-pix_fmt", "yuv420p", path)
			b, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			f, ierr := mp4.Index(context.Background(), mp4.Bytes(b), int64(len(b)), mp4.Limits{})
			_, ferr := Footprint(Stream{Codec: "h264", Width: tc.w, Height: tc.h}, framesize.Bound{})
			if !tc.indexed {
				if !errors.Is(ierr, mp4.ErrLimit) || !errors.Is(ferr, ErrTooLarge) {
					t.Fatalf("the index: %v; the decoder: %v; want both refusing", ierr, ferr)
				}
				return
			}
			if ierr != nil || ferr != nil {
				t.Fatalf("the index: %v; the decoder: %v; want both taking it", ierr, ferr)
			}
			tr := f.Video
			r := Run{Stream: Stream{Codec: tr.Codec, Width: tr.Width, Height: tr.Height, Extradata: tr.Extradata}, First: true}
			var want []int64
			for _, s := range tr.Samples {
				r.Packets = append(r.Packets, Packet{PTS: s.PTS, DTS: s.DTS, Key: s.Key, Data: b[s.Off : s.Off+int64(s.Size)]})
				want = append(want, s.PTS)
			}
			budget := &testBudget{size: eightKBudget}
			dec := NewDecoder(Options{Budget: budget})
			defer dec.Close()
			got := 0
			if err := dec.Decode(context.Background(), r, want, func(fr Frame) error {
				if fr.Width != tc.w || fr.Height != tc.h || len(fr.RGB) != tc.w*tc.h*3 {
					t.Fatalf("a frame of %d×%d, %d bytes", fr.Width, fr.Height, len(fr.RGB))
				}
				got++
				return nil
			}); err != nil || got != len(want) {
				t.Fatalf("decoding: %v; %d of %d frames", err, got, len(want))
			}
			t.Logf("%s: reserved %d bytes of %d", tc.size, budget.most, budget.size)
		})
	}
}
