//go:build brand_libav

package visit_test

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"testing"

	"github.com/brandgw/brand/client"
	"github.com/brandgw/brand/dataset"
	"github.com/brandgw/brand/format"
	"github.com/brandgw/brand/format/video"
	"github.com/brandgw/brand/internal/testsupport/stagetest"
	"github.com/brandgw/brand/internal/testsupport/videotest"
	"github.com/brandgw/brand/s3backend"
)

// TestLeRobotEpisodesDecodedOnce: LeRobot-shaped episodes written by ffmpeg
// (three cameras at 30 frames a second, H.264 with a keyframe
// every 2 s, two with B-frames), each sample's four frames of each camera
// (frames=-3,-2,-1,0), in the default order and in GOP-then-sample order
// (gop_window=1), through the stages a node wires with its decoded-GOP
// cache: every camera frame of every sample is PyAV's decode of the frame
// its rows name (SHA-256 of the rgb24 bytes), every row once an epoch,
// one order at world 1 and, resumed from a position at world 3, the same
// rows from there; the node decodes a few frames a sample (each GOP once
// a horizon, where a loader decoding each sample's frames passes through
// about thirty a camera), and opens its decoders once (FFmpeg's codec
// lock off the hot path: contexts are reused from batch to batch).
//
// The episodes are LeRobot-shaped but for their frames' size, 160×120:
// what is proved (which GOPs and frames are decoded, each frame's bytes
// PyAV's, the rows and the contexts) does not depend on it, and the
// bytes it moves do. At 640×480 the test moved 8 GB of frames through
// Go memory over its six passes (120 rows, 3 cameras, 4 frames of
// 900 KiB each a sample: npy members, the tar, the test's reads and
// digests), each byte checked by the race detector's shadow memory: 174 s
// under -race on an idle 2-core machine, 6 minutes beside other work,
// 81 % of its CPU in the detector's runtime and 360 frames decoded in
// all. At 160×120 it moves 1/16 of that.
func TestLeRobotEpisodesDecodedOnce(t *testing.T) {
	lengths := []int{40, 25, 55}
	const width, height = 160, 120
	spec := videotest.LeRobotShaped(lengths...)
	for i := range spec.Cameras {
		spec.Cameras[i].Size = fmt.Sprintf("%dx%d", width, height)
	}
	fx := videotest.LeRobotWith(t, "../../..", spec)
	st, err := s3backend.NewLocal(fx.Dir)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := dataset.IndexInPlace(context.Background(), st, st, dataset.InPlaceOptions{
		Formats: []format.Format{video.LeRobotFormat{}}, Options: format.Options{ChunkBytes: 1 << 20}}); err != nil {
		t.Fatal(err)
	}
	refs := map[string]videotest.Digests{}
	for _, cam := range fx.Cameras {
		key := fmt.Sprintf("videos/%s/chunk-000/file-000.mp4", cam)
		refs[key] = videotest.DecodeDigests(t, filepath.Join(fx.Dir, key))
	}
	starts := []int{0}
	for _, n := range lengths {
		starts = append(starts, starts[len(starts)-1]+n)
	}
	rows := starts[len(starts)-1]
	for _, order := range []string{"", "&gop_window=1"} {
		s := stagetest.New(t, stagetest.Config{Datasets: stagetest.Videos(st), Workers: 2})
		base := "frames=-3,-2,-1,0&window=2&seed=3" + order
		// read serves the global batches from the first of query q's
		// epoch 0 at world size world, every rank's, and returns the
		// rows in order, each sample's camera frames checked.
		read := func(q string, world int) []int {
			var out []int
			for m := 0; ; m++ {
				n := 0
				for r := range world {
					_, body, err := s.Batch(context.Background(), fmt.Sprintf("%s&world=%d&rank=%d", q, world, r), 0, uint64(m))
					if err != nil {
						if m > 0 && r == 0 {
							return out
						}
						t.Fatalf("%s, batch %d rank %d: %v", q, m, r, err)
					}
					for _, smp := range stagetest.Samples(t, body) {
						var js struct {
							Row, Episode int
							Windows      map[string]struct {
								Rows  []int
								Video string
								PTS   []int64
							}
						}
						if err := json.Unmarshal(smp.Files["json"], &js); err != nil {
							t.Fatal(err)
						}
						e, row := js.Episode, js.Row
						var want []int
						for d := -3; d <= 0; d++ {
							want = append(want, max(starts[e], min(starts[e+1]-1, row+d)))
						}
						for _, cam := range fx.Cameras {
							w := js.Windows[cam]
							ref := refs[w.Video]
							arr, err := client.ParseNPY(smp.Files[cam+".npy"])
							if err != nil || !slices.Equal(w.Rows, want) || len(w.PTS) != 4 || fmt.Sprint(arr.Shape) != fmt.Sprint([]int{4, height, width, 3}) {
								t.Fatalf("row %d, %s: rows %v (want %v), %d frames, shape %v (%v)", row, cam, w.Rows, want, len(w.PTS), arr.Shape, err)
							}
							size := width * height * 3
							for i, pts := range w.PTS {
								if sha256.Sum256(arr.Data[i*size:(i+1)*size]) != ref.Frames[pts] {
									t.Fatalf("row %d, %s: frame %d (pts %d) differs from PyAV's", row, cam, i, pts)
								}
							}
						}
						out = append(out, row)
						n++
					}
				}
				if n == 0 {
					return out
				}
			}
		}
		f0 := s.Stage.ClipFigures()
		one := read(base+"&batch_size=8", 1)
		f1 := s.Stage.ClipFigures()
		if got := slices.Compact(slices.Sorted(slices.Values(one))); len(one) != rows || len(got) != rows {
			t.Fatalf("%q: %d rows served, %d distinct, of %d", order, len(one), len(got), rows)
		}
		perSample := float64(f1.Decoded-f0.Decoded) / float64(rows)
		t.Logf("%q: %d rows: %d GOPs and %d frames decoded (%.2f a sample, %d left out), %d GOPs and %d frames from the cache",
			order, rows, f1.GOPs-f0.GOPs, f1.Decoded-f0.Decoded, perSample, f1.Disposable-f0.Disposable, f1.Hits-f0.Hits, f1.Cached-f0.Cached)
		if perSample > 8 {
			t.Errorf("%q: %.2f frames decoded a sample", order, perSample)
		}
		// Resumed at world 3 after the first three global batches of
		// world 4 (8 rows each): the rows from there, in order.
		const p = 3 * 4 * 2
		head := read(base+"&batch_size=2", 4)
		tail := read(fmt.Sprintf("%s&batch_size=3&offset=%d", base, p), 3)
		if !slices.Equal(head, one) || !slices.Equal(tail, one[p:]) {
			t.Fatalf("%q: world 4 serves %v…, resumed at world 3 from %d %v…; world 1 %v…", order, head[:8], p, tail[:8], one[:8])
		}
		if d := s.Stage.VideoStats(); d.ContextsOpened > 2*3 {
			t.Errorf("%q: %d decoder contexts opened over three passes' batches of three cameras, two workers", order, d.ContextsOpened)
		}
	}
}
