//go:build brand_libav

package visit_test

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"net/url"
	"path/filepath"
	"testing"

	"github.com/brandgw/brand/client"
	"github.com/brandgw/brand/dataset"
	"github.com/brandgw/brand/format"
	"github.com/brandgw/brand/format/video"
	"github.com/brandgw/brand/internal/testsupport/stagetest"
	"github.com/brandgw/brand/internal/testsupport/videotest"
	"github.com/brandgw/brand/s3backend"
)

// exactlyOnceInts fails unless seen holds the n ints 0..n-1, each
// counted once.
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

// A LeRobot v3 dataset (episodes encoded alone and concatenated as
// LeRobot does, an AV1 and an H.264 camera, the Parquet written by
// DuckDB) served with windows through the stages a node wires: each anchor row once an epoch, keyed by
// its row; each camera window's frames PyAV's decode of the frames shown
// at the episode's start in the file plus its rows' timestamps (within
// 1e-4 s); a column's window its rows' values stacked, clamped to the
// episode and marked as padding there; a column with no window the
// anchor's value.
func TestLeRobotClips(t *testing.T) {
	fx := videotest.LeRobot(t, "../../..", 0)
	st, err := s3backend.NewLocal(fx.Dir)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := dataset.IndexInPlace(context.Background(), st, st, dataset.InPlaceOptions{
		Formats: []format.Format{video.LeRobotFormat{}}, Options: format.Options{ChunkBytes: 2 << 10}}); err != nil {
		t.Fatal(err)
	}
	refs := map[string]videotest.Reference{}
	froms := map[[2]int]float64{} // episode, camera: from_timestamp
	for e, ep := range fx.Spec["episodes"].([]map[string]any) {
		for k, cam := range fx.Cameras {
			v := ep["videos"].(map[string]any)[cam].(map[string]any)
			froms[[2]int{e, k}] = v["from"].(float64)
			key := fmt.Sprintf("videos/%s/chunk-000/file-%03d.mp4", cam, v["file"].(int))
			if _, ok := refs[key]; !ok {
				refs[key] = videotest.Decode(t, filepath.Join(fx.Dir, key))
			}
		}
	}
	s := stagetest.New(t, stagetest.Config{Datasets: stagetest.Videos(st)})
	const fps = 10
	starts := []int{0, 12, 20, 35} // the episodes' rows
	q := "delta_timestamps=" + url.QueryEscape(videotest.CamFront+":-0.2,-0.1,0;action:0,0.1,0.2") + "&frames=-1,0&batch_size=4&seed=3"
	for epoch := range 2 {
		seen := map[int]int{}
		for m := range 9 {
			_, body, err := s.Batch(context.Background(), q, uint64(epoch), uint64(m))
			if err != nil {
				t.Fatalf("batch %d: %v", m, err)
			}
			for _, s := range stagetest.Samples(t, body) {
				var js struct {
					Row, Episode int
					Timestamp    float32
					Windows      map[string]struct {
						Rows    []int
						Pad     []bool
						Video   string
						PTS     []int64
						Seconds []float64
					}
				}
				if err := json.Unmarshal(s.Files["json"], &js); err != nil {
					t.Fatalf("%s: %v", s.Key, err)
				}
				r, e := js.Row, js.Episode
				seen[r]++
				file, at := 0, r
				if r >= 20 {
					file, at = 1, r-20
				}
				if want := fmt.Sprintf("data/chunk-000/file-%03d/%02d", file, at); s.Key != want {
					t.Errorf("row %d keyed %q, want %q", r, s.Key, want)
				}
				rowsAt := func(deltas ...int) (rows []int, pad []bool) {
					for _, d := range deltas {
						q := r + d
						pad = append(pad, q < starts[e] || q >= starts[e+1])
						rows = append(rows, max(starts[e], min(starts[e+1]-1, q)))
					}
					return rows, pad
				}
				// The columns: action windowed, the others the anchor's.
				wantRows, wantPad := rowsAt(0, 1, 2)
				var action []float32
				for _, q := range wantRows {
					action = append(action, float32(q), float32(-q))
				}
				checkArray(t, s, "action.npy", "<f4", []int{3, 2}, action)
				checkArray(t, s, "observation.state.npy", "<f4", []int{2}, []float32{float32(r) * 0.5, float32(e)})
				checkArray(t, s, "timestamp.npy", "<f4", []int{}, []float32{float32(r-starts[e]) / fps})
				if w := js.Windows["action"]; fmt.Sprint(w.Rows, w.Pad) != fmt.Sprint(wantRows, wantPad) {
					t.Errorf("row %d: action's window rows %v pad %v, want %v %v", r, w.Rows, w.Pad, wantRows, wantPad)
				}
				// The cameras: front at -2, -1, 0 frames; wrist at -1, 0.
				for k, cam := range fx.Cameras {
					deltas := []int{-2, -1, 0}
					if cam == videotest.CamWrist {
						deltas = []int{-1, 0}
					}
					rows, pad := rowsAt(deltas...)
					w := js.Windows[cam]
					if fmt.Sprint(w.Rows, w.Pad) != fmt.Sprint(rows, pad) {
						t.Fatalf("row %d, %s: rows %v pad %v, want %v %v", r, cam, w.Rows, w.Pad, rows, pad)
					}
					ref := refs[w.Video]
					arr, err := client.ParseNPY(s.Files[cam+".npy"])
					if err != nil || fmt.Sprint(arr.Shape) != fmt.Sprint([]int{len(rows), ref.Height, ref.Width, 3}) {
						t.Fatalf("row %d, %s: %v %v", r, cam, err, arr.Shape)
					}
					n := ref.Width * ref.Height * 3
					for i, pts := range w.PTS {
						if math.Abs(w.Seconds[i]-(froms[[2]int{e, k}]+float64(rows[i]-starts[e])/fps)) > 1e-4 {
							t.Errorf("row %d, %s: frame %d at %v s, row %d's time in the file is %v", r, cam, i, w.Seconds[i], rows[i], froms[[2]int{e, k}]+float64(rows[i]-starts[e])/fps)
						}
						if string(arr.Data[i*n:(i+1)*n]) != string(ref.Frames[pts]) {
							t.Fatalf("row %d, %s: frame %d (pts %d of %s) differs from PyAV's", r, cam, i, pts, w.Video)
						}
					}
				}
			}
		}
		exactlyOnceInts(t, seen, 35, fmt.Sprintf("epoch %d", epoch))
	}
}

// checkArray checks a sample's .npy member ext: its dtype, shape and
// float32 values.
func checkArray(t *testing.T, s stagetest.Sample, ext, descr string, shape []int, want []float32) {
	t.Helper()
	a, err := client.ParseNPY(s.Files[ext])
	if err != nil || a.DType != descr || fmt.Sprint(a.Shape) != fmt.Sprint(shape) || len(a.Data) != 4*len(want) {
		t.Fatalf("%s: %s: %v %s %v, want %s %v", s.Key, ext, err, a.DType, a.Shape, descr, shape)
	}
	for i, w := range want {
		if got := math.Float32frombits(binary.LittleEndian.Uint32(a.Data[4*i:])); got != w {
			t.Fatalf("%s: %s[%d] = %v, want %v", s.Key, ext, i, got, w)
		}
	}
}
