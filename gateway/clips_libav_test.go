//go:build brand_libav

package gateway_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"testing"

	"github.com/brandgw/brand/client"
	"github.com/brandgw/brand/internal/testsupport/videotest"
)

// clipJSON is a tree's clip's .json member.
type clipJSON struct {
	Sample, Segment, Label int
	Video                  string
	Frames                 []int
	PTS                    []int64
	Seconds                []float64
}

// Every frame of every clip served over HTTP — H.264 with and without
// B-frames, a keyframe every second and every ten, variable frame rate,
// moov first and last, fragmented, an open GOP, H.265, VP9 — is PyAV's
// decode of the frame its JSON names, every clip is served once an
// epoch, its label is its class folder's, and clip_layout=tchw is the
// same frames transposed.
func TestClipFramesArePyAVs(t *testing.T) {
	files := map[string]string{}
	for i, f := range []string{"h264.mp4", "h264-bframes.mp4", "h264-gop10s.mp4", "h264-vfr.mp4", "h264-frag.mp4", "h264-opengop.mp4", "hevc.mp4", "vp9.mp4"} {
		files[fmt.Sprintf("class%d/v%d.mp4", i%3, i)] = f
	}
	st, paths := videoStore(t, 4<<10, files)
	refs := map[string]videotest.Reference{}
	for key, p := range paths {
		refs[key] = videotest.Decode(t, p)
	}
	srv := startVideos(t, st, nil)
	for _, q := range []string{"clip=8&stride=2", "clip=5&fps=7&step=1&clip_start=first"} {
		for epoch := range 2 {
			resp, body := get(t, fmt.Sprintf("%s/epoch/%d?%s&batch_size=3", srv.URL, epoch, q))
			var info struct{ Samples, Batches int }
			if err := json.Unmarshal(body, &info); resp.StatusCode != http.StatusOK || err != nil {
				t.Fatalf("%s: %d %s", q, resp.StatusCode, body)
			}
			seen := map[int]int{}
			frames := 0
			for m := range info.Batches {
				url := fmt.Sprintf("%s/epoch/%d/batch/%d?%s&batch_size=3", srv.URL, epoch, m, q)
				resp, body := get(t, url)
				if resp.StatusCode != http.StatusOK {
					t.Fatalf("%s: %d %s", url, resp.StatusCode, body)
				}
				tchw := map[string][]byte{}
				if m == 0 {
					_, b := get(t, url+"&clip_layout=tchw")
					for _, s := range readTar(t, b) {
						tchw[s.key] = s.files["frames.npy"]
					}
				}
				for _, s := range readTar(t, body) {
					var js clipJSON
					if err := json.Unmarshal(s.files["json"], &js); err != nil {
						t.Fatalf("%s: %v", s.key, err)
					}
					seen[js.Sample]++
					ref := refs[js.Video]
					arr, err := client.ParseNPY(s.files["frames.npy"])
					if err != nil || arr.DType != "|u1" || fmt.Sprint(arr.Shape) != fmt.Sprint([]int{len(js.PTS), ref.Height, ref.Width, 3}) {
						t.Fatalf("%s: frames %v %s %v; want (%d, %d, %d, 3) uint8", s.key, err, arr.DType, arr.Shape, len(js.PTS), ref.Height, ref.Width)
					}
					n := ref.Width * ref.Height * 3
					for i, pts := range js.PTS {
						want, ok := ref.Frames[pts]
						if !ok {
							t.Fatalf("%s: frame %d names pts %d, which PyAV's decode of %s has not", s.key, i, pts, js.Video)
						}
						if got := arr.Data[i*n : (i+1)*n]; string(got) != string(want) {
							t.Fatalf("%s (%s, %s): frame %d (pts %d) differs from PyAV's", s.key, js.Video, files[js.Video], i, pts)
						}
						frames++
					}
					var class int
					if _, err := fmt.Sscanf(js.Video, "class%d/", &class); err != nil || string(s.files["cls"]) != fmt.Sprint(class) || js.Label != class {
						t.Errorf("%s: label %q (json %d), its class folder is %d", s.key, s.files["cls"], js.Label, class)
					}
					if b, ok := tchw[s.key]; ok {
						ta, err := client.ParseNPY(b)
						if err != nil || fmt.Sprint(ta.Shape) != fmt.Sprint([]int{len(js.PTS), 3, ref.Height, ref.Width}) {
							t.Fatalf("%s: tchw %v %v", s.key, err, ta.Shape)
						}
						hw := ref.Width * ref.Height
						for i := range len(js.PTS) * hw * 3 {
							tt, rest := i/(3*hw), i%(3*hw)
							c, p := rest/hw, rest%hw
							if ta.Data[i] != arr.Data[tt*n+p*3+c] {
								t.Fatalf("%s: tchw differs from thwc transposed at %d", s.key, i)
							}
						}
					}
				}
			}
			exactlyOnceInts(t, seen, info.Samples, fmt.Sprintf("%s, epoch %d", q, epoch))
			t.Logf("%s, epoch %d: %d clips, %d frames equal to PyAV's", q, epoch, info.Samples, frames)
		}
	}
}

func exactlyOnceInts(t *testing.T, seen map[int]int, n int, what string) {
	t.Helper()
	if len(seen) != n {
		t.Errorf("%s: %d distinct samples, want %d", what, len(seen), n)
	}
	for k, c := range seen {
		if c != 1 || k < 0 || k >= n {
			t.Errorf("%s: sample %d served %d times", what, k, c)
		}
	}
}
