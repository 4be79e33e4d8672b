package video

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/brandgw/brand/format"
	"github.com/brandgw/brand/format/internal/formattest"
	"github.com/brandgw/brand/format/video/internal/videotest"
)

// leRobotFixture is a LeRobot v3 dataset built as LeRobot builds one:
// each episode's video encoded alone, then concatenated into a camera's
// file with FFmpeg's concat demuxer (stream copy, moov first), the
// episodes' from_timestamp the durations before them in the file; the
// Parquet files written by DuckDB.
type leRobotFixture struct {
	dir     string
	fps     int
	lengths []int
	cameras []string
	spec    map[string]any
}

const (
	camFront = "observation.images.front"
	camWrist = "observation.images.wrist"
)

// makeLeRobot builds the fixture in a temporary directory: three
// episodes of 12, 8 and 15 frames at 10 fps; the front camera AV1 as
// LeRobot's encoder makes it (SVT-AV1, a keyframe every 2 frames), its
// first two episodes in file 0 and the third in file 1; the wrist camera
// H.264 with B-frames and a keyframe every 5 frames, all three in one
// file; the rows in two data files (episodes 0–1, then 2). shift moves
// every episode's from_timestamp of the wrist camera, to make a dataset
// out of sync.
func makeLeRobot(t *testing.T, shift float64) *leRobotFixture {
	t.Helper()
	node, modules := videotest.DuckDB(t, "../..")
	fx := &leRobotFixture{dir: t.TempDir(), fps: 10, lengths: []int{12, 8, 15}, cameras: []string{camFront, camWrist}}
	tmp := t.TempDir()
	encoders := map[string][]string{
		camFront: {"-c:v", "libsvtav1", "-g", "2", "-preset", "12", "-pix_fmt", "yuv420p", "-svtav1-params", "log-level=0"},
		camWrist: {"-c:v", "libx264", "-g", "5", "-bf", "2", "-pix_fmt", "yuv420p"},
	}
	files := map[string][][]int{camFront: {{0, 1}, {2}}, camWrist: {{0, 1, 2}}}
	sizes := map[string]string{camFront: "64x64", camWrist: "64x48"}
	eps := make([]map[string]any, len(fx.lengths))
	for e, n := range fx.lengths {
		eps[e] = map[string]any{"length": n, "task": e % 2, "videos": map[string]any{}}
	}
	for _, cam := range fx.cameras {
		for fi, members := range files[cam] {
			var parts []string
			from := 0.0
			for _, e := range members {
				p := filepath.Join(tmp, fmt.Sprintf("%s-%d.mp4", cam, e))
				videotest.Encode(t, p, sizes[cam], fx.fps, fx.lengths[e], 20*e, encoders[cam]...)
				d := videotest.Duration(t, p)
				s := 0.0
				if cam == camWrist {
					s = shift
				}
				eps[e]["videos"].(map[string]any)[cam] = map[string]any{"file": fi, "from": from + s, "to": from + d + s}
				from += d
				parts = append(parts, p)
			}
			dst := filepath.Join(fx.dir, "videos", cam, "chunk-000", fmt.Sprintf("file-%03d.mp4", fi))
			if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
				t.Fatal(err)
			}
			videotest.Concat(t, dst, parts...)
		}
	}
	fx.spec = map[string]any{"fps": fx.fps, "cameras": fx.cameras, "tasks": []string{"pick the cube", "place the cube"},
		"data_files": [][]int{{0, 1}, {2}}, "episodes": eps}
	specPath := filepath.Join(tmp, "spec.json")
	writeJSON(t, specPath, fx.spec)
	cmd := exec.Command(node, "testdata/lerobot.cjs", specPath, fx.dir)
	cmd.Env = append(os.Environ(), "NODE_PATH="+modules)
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("node testdata/lerobot.cjs: %v\n%s", err, b)
	}
	features := map[string]any{
		"observation.state": map[string]any{"dtype": "float32", "shape": []int{2}},
		"action":            map[string]any{"dtype": "float32", "shape": []int{2}},
		"timestamp":         map[string]any{"dtype": "float32", "shape": []int{1}},
		"frame_index":       map[string]any{"dtype": "int64", "shape": []int{1}},
		"episode_index":     map[string]any{"dtype": "int64", "shape": []int{1}},
		"index":             map[string]any{"dtype": "int64", "shape": []int{1}},
		"task_index":        map[string]any{"dtype": "int64", "shape": []int{1}},
	}
	for _, cam := range fx.cameras {
		features[cam] = map[string]any{"dtype": "video", "shape": []int{48, 64, 3}, "names": []string{"height", "width", "channels"}}
	}
	total := 0
	for _, n := range fx.lengths {
		total += n
	}
	writeJSON(t, filepath.Join(fx.dir, "meta", "info.json"), map[string]any{
		"codebase_version": "v3.0", "robot_type": "test", "fps": fx.fps, "features": features,
		"total_episodes": len(fx.lengths), "total_frames": total, "total_tasks": 2,
		"chunks_size": 1000, "data_files_size_in_mb": 100, "video_files_size_in_mb": 200,
		"data_path":  "data/chunk-{chunk_index:03d}/file-{file_index:03d}.parquet",
		"video_path": "videos/{video_key}/chunk-{chunk_index:03d}/file-{file_index:03d}.mp4",
		"splits":     map[string]string{"train": "0:3"},
	})
	return fx
}

func writeJSON(t testing.TB, path string, v any) {
	t.Helper()
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestLeRobot indexes a LeRobot v3 dataset as it is and checks what it
// found against what was written: the episodes' rows and spans, each
// row's chunk and key, every chunk decoded (the rows by format/parquet,
// the GOPs as their bytes), and each camera's episode chunks holding the
// GOPs shown in its span.
func TestLeRobot(t *testing.T) {
	fx := makeLeRobot(t, 0)
	st := formattest.LoadDir(t, fx.dir)
	objs := st.List()
	if !(LeRobotFormat{}).Detect(objs) || (Format{}).Detect(objs) {
		t.Fatal("a LeRobot dataset is LeRobot's, not a tree of videos")
	}
	d, rows, stats, err := IndexLeRobot(context.Background(), st, objs, format.Options{})
	if err != nil {
		t.Fatal(err)
	}
	l := d.LeRobot
	if l.FPS != fx.fps || l.Rows != 35 || len(l.Episodes) != 3 || strings.Join(l.Cameras, ",") != camFront+","+camWrist || len(d.Videos) != 3 {
		t.Fatalf("fps %d, %d rows, %d episodes, cameras %v, %d videos", l.FPS, l.Rows, len(l.Episodes), l.Cameras, len(d.Videos))
	}
	if want := "action,episode_index,frame_index,index,observation.state,task_index,timestamp"; strings.Join(l.Columns, ",") != want {
		t.Errorf("columns %v, want %s", l.Columns, want)
	}
	lay, err := d.layout(rows)
	if err != nil {
		t.Fatal(err)
	}
	dec, err := LeRobotFormat{}.Open(lay.Meta)
	if err != nil {
		t.Fatal(err)
	}
	// Each row is where the layout says, keyed as format/parquet keys it.
	first := make([]int, len(lay.Chunks)+1)
	for c, ch := range lay.Chunks {
		first[c+1] = first[c] + ch.Samples
	}
	for r := range l.Rows {
		c, s, ok := l.Row(r)
		if !ok {
			t.Fatalf("row %d has no chunk", r)
		}
		file, at := 0, r
		if r >= 20 {
			file, at = 1, r-20
		}
		if want := fmt.Sprintf("data/chunk-000/file-%03d/%02d", file, at); lay.Keys[first[c]+s] != want {
			t.Errorf("row %d: key %q, want %q", r, lay.Keys[first[c]+s], want)
		}
		if math.Abs(float64(l.Timestamps[r])-float64(r-l.Episodes[l.EpisodeOf(r)].From)/10) > 1e-6 {
			t.Errorf("row %d: timestamp %v", r, l.Timestamps[r])
		}
	}
	// Every chunk decodes; with the cameras alone, rows are .null.
	formattest.DecodeAll(t, st, lay, dec, nil)
	cams, err := format.Select(dec.Fields(), []string{camFront})
	if err != nil {
		t.Fatal(err)
	}
	formattest.DecodeAll(t, st, lay, dec, cams)
	// Each episode's chunks of each camera hold the GOPs whose frames are
	// shown in its span.
	for e, ep := range l.Episodes {
		for k, ev := range ep.Videos {
			v := d.Videos[ev.Video]
			if ev.Chunks[1] <= ev.Chunks[0] {
				t.Fatalf("episode %d, %s: no chunk", e, l.Cameras[k])
			}
			for c := ev.Chunks[0]; c < ev.Chunks[1]; c++ {
				ch := d.Chunks[c]
				if ch.Unit != e || ch.Video != ev.Video {
					t.Errorf("chunk %d of episode %d's %s is of unit %d, video %d", c, e, l.Cameras[k], ch.Unit, ch.Video)
				}
				for g := ch.First; g < ch.End; g++ {
					s := v.Track.Seconds(v.Track.Samples[v.Track.GOPs[g].First].PTS)
					if s < ev.From-0.05 || s >= ev.To {
						t.Errorf("episode %d [%v, %v) of %s holds GOP %d at %v s", e, ev.From, ev.To, v.Key, g, s)
					}
				}
			}
		}
	}
	t.Logf("%d videos: %d reads of %d bytes; %d bytes of JSON and Parquet columns; %v", stats.Files, stats.Reads, stats.BytesRead, stats.OtherBytes, stats.Elapsed)
}

// TestLeRobotRefused: a dataset whose rows and videos are out of sync, an
// older layout, a missing video, each refused with what is wrong.
func TestLeRobotRefused(t *testing.T) {
	ctx := context.Background()
	t.Run("out of sync", func(t *testing.T) {
		fx := makeLeRobot(t, 0.05)
		st := formattest.LoadDir(t, fx.dir)
		_, _, _, err := IndexLeRobot(ctx, st, st.List(), format.Options{})
		if err == nil || !errors.Is(err, format.ErrInvalid) || !strings.Contains(err.Error(), "out of sync") {
			t.Fatalf("%v", err)
		}
	})
	fx := makeLeRobot(t, 0)
	cases := []struct {
		name   string
		change func(st *formattest.Store)
		kind   error
		says   string
	}{
		{"v2.1", func(st *formattest.Store) {
			st.Objs["meta/info.json"] = []byte(strings.Replace(string(st.Objs["meta/info.json"]), `"v3.0"`, `"v2.1"`, 1))
		}, format.ErrUnsupported, "LeRobot dataset v2.1; Brand reads v3.0"},
		{"a missing video", func(st *formattest.Store) {
			delete(st.Objs, "videos/"+camFront+"/chunk-000/file-001.mp4")
		}, format.ErrInvalid, "episode 2's video videos/observation.images.front/chunk-000/file-001.mp4 is not in the dataset"},
		{"a missing data file", func(st *formattest.Store) {
			delete(st.Objs, "data/chunk-000/file-001.parquet")
		}, format.ErrInvalid, "episode 2 has rows [20, 35) of 20"},
		{"no info.json fps", func(st *formattest.Store) {
			st.Objs["meta/info.json"] = []byte(strings.Replace(string(st.Objs["meta/info.json"]), `"fps": 10`, `"fps": 0`, 1))
		}, format.ErrInvalid, "fps 0"},
		{"a truncated video", func(st *formattest.Store) {
			k := "videos/" + camWrist + "/chunk-000/file-000.mp4"
			st.Objs[k] = st.Objs[k][:len(st.Objs[k])/2]
		}, format.ErrInvalid, "file-000.mp4: mp4"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			st := formattest.LoadDir(t, fx.dir)
			tc.change(st)
			_, _, _, err := IndexLeRobot(ctx, st, st.List(), format.Options{})
			if err == nil || !errors.Is(err, tc.kind) || !strings.Contains(err.Error(), tc.says) {
				t.Fatalf("%v; want %v saying %q", err, tc.kind, tc.says)
			}
		})
	}
}
