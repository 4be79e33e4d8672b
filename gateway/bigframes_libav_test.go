//go:build brand_libav

package gateway_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strings"
	"testing"

	"github.com/brandgw/brand/client"
	"github.com/brandgw/brand/dataset"
	"github.com/brandgw/brand/format"
	"github.com/brandgw/brand/format/video"
	"github.com/brandgw/brand/gateway"
	"github.com/brandgw/brand/internal/testsupport/videotest"
	"github.com/brandgw/brand/s3backend"
)

// An 8K UHD H.264 that ffmpeg writes (1 s at 2 fps, libx264's
// ultrafast, a keyframe every other frame: about 3 MB) is indexed and
// its clips served at the default memory limit, each frame PyAV's
// decode: the decoder reserves what its stream needs (637 MB), not every
// frame slot H.264 allows (before: 2.2 GB, more than the default 1.8 GB
// of decodes, and every clip was 422). Two rows over the one bound on
// frames (format/video/framesize) is refused when the tree is indexed,
// naming the bound. transform/video's TestBoundAgrees holds the index and
// the decoder to the same bound at its other edges (DCI 8K, 16000×2000).
// The decode takes about 0.4 GB, the batch and its tensor 0.1 GB each.
func TestClipBigFrames(t *testing.T) {
	ffmpeg, _ := videotest.Tools(t)
	// The 8K bodies and tensors collected as they go, not piled up.
	defer debug.SetGCPercent(debug.SetGCPercent(25))
	budget, err := gateway.MemoryBudget(gateway.Config{Datasets: []gateway.DatasetSpec{{Name: "x", URL: "file:///x"}}, CacheSize: 64 << 20})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("the default memory budget's decodes: %d bytes", budget.Decodes)
	cases := []struct {
		size string
		says string // the index's refusal; "" if served
	}{
		{"7680x4320", ""},
		{"8192x4354", "at most 16384 a side and 35651584 pixels"},
	}
	for _, tc := range cases {
		t.Run(tc.size, func(t *testing.T) {
			src := filepath.Join(t.TempDir(), "v.mp4")
			videotest.Run(t, ffmpeg, "-hide_banner", "-loglevel", "error", "-nostdin", "-y", "-f", "lavfi",
				"-i", "testsrc2=size="+tc.size+":rate=2:duration=1", "-c:v", "libx264", "-preset", "ultrafast", "-g", "2",
				"-pix_fmt", "yuv420p", "-map_metadata", "-1", "-fflags", "+bitexact", src)
			b, err := os.ReadFile(src)
			if err != nil {
				t.Fatal(err)
			}
			st, err := s3backend.NewLocal(t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			if _, err := st.Put(context.Background(), "a/v.mp4", bytes.NewReader(b), int64(len(b))); err != nil {
				t.Fatal(err)
			}
			_, err = dataset.IndexInPlace(context.Background(), st, st, dataset.InPlaceOptions{
				Formats: []format.Format{video.Format{}}, Options: format.Options{ChunkBytes: 1 << 20}})
			if tc.says != "" {
				if err == nil || !strings.Contains(err.Error(), tc.says) {
					t.Fatalf("indexing a %s video: %v; want a refusal saying %q", tc.size, err, tc.says)
				}
				return
			}
			if err != nil {
				t.Fatalf("indexing a %s video: %v", tc.size, err)
			}
			// PyAV's frames as their digests, so that the test holds no
			// more than one 8K frame beside the gateway's.
			ref := videotest.Decode(t, src)
			w, h, want := ref.Width, ref.Height, map[int64][32]byte{}
			for pts, f := range ref.Frames {
				want[pts] = sha256.Sum256(f)
			}
			ref = videotest.Reference{}
			runtime.GC()
			srv := startVideos(t, st, nil)
			for m := range 2 {
				url := fmt.Sprintf("%s/epoch/0/batch/%d?clip=1&batch_size=1", srv.URL, m)
				resp, body := get(t, url)
				if resp.StatusCode != http.StatusOK {
					t.Fatalf("%s: %d %s", url, resp.StatusCode, body)
				}
				for _, s := range readTar(t, body) {
					var js clipJSON
					if err := json.Unmarshal(s.files["json"], &js); err != nil || len(js.PTS) != 1 {
						t.Fatalf("%s: %v, %+v", s.key, err, js)
					}
					arr, err := client.ParseNPY(s.files["frames.npy"])
					if err != nil || fmt.Sprint(arr.Shape) != fmt.Sprint([]int{1, h, w, 3}) {
						t.Fatalf("%s: %v %v", s.key, err, arr.Shape)
					}
					if d, ok := want[js.PTS[0]]; !ok || sha256.Sum256(arr.Data) != d {
						t.Fatalf("%s: the frame of pts %d is not PyAV's (%v)", s.key, js.PTS[0], ok)
					}
				}
			}
		})
	}
}
