package videotest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/brandgw/brand/internal/testsupport/nodetest"
)

// Camera is one camera of a LeRobot dataset WriteLeRobot writes: its
// feature's name, its frames' size ("WxH") and ffmpeg's output options
// (an encoder and its settings).
type Camera struct {
	Name, Size string
	Args       []string
}

// LeRobotSpec describes a LeRobot v3 dataset to write: its rate, its
// episodes' lengths in frames, its cameras, which episodes each of a
// camera's files holds (nil: every episode in one file) and each data
// file's episodes (nil: every episode in one file), and how far each
// camera's episodes' from_timestamp are moved (a dataset out of sync).
type LeRobotSpec struct {
	FPS       int
	Lengths   []int
	Cameras   []Camera
	Files     map[string][][]int
	DataFiles [][]int
	Shift     map[string]float64
}

// WriteLeRobot writes spec's dataset into dir as LeRobot writes one (its
// lerobot_dataset's encode_video_frames and concatenate_video_files):
// each episode's video of each camera encoded alone by ffmpeg from
// testsrc2 (started 20 frames further for each episode, so that they
// differ), then a camera's episodes concatenated into its files with
// FFmpeg's concat demuxer (stream copy, moov first), the episodes'
// from_timestamp the durations before them in the file (ffprobe's); the
// Parquet files written by DuckDB (root's format/video/testdata/lerobot.cjs,
// node with the modules at modules); meta/info.json. ffmpeg and ffprobe
// are found on PATH. For a benchmark as for a test: it needs no testing.T.
func WriteLeRobot(ctx context.Context, root, node, modules, dir string, spec LeRobotSpec) (*LeRobotFixture, error) {
	fx := &LeRobotFixture{Dir: dir, FPS: spec.FPS, Lengths: spec.Lengths}
	for _, c := range spec.Cameras {
		fx.Cameras = append(fx.Cameras, c.Name)
	}
	tmp, err := os.MkdirTemp("", "lerobot-episodes-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp)
	all := make([]int, len(spec.Lengths))
	for e := range all {
		all[e] = e
	}
	eps := make([]map[string]any, len(spec.Lengths))
	for e, n := range spec.Lengths {
		eps[e] = map[string]any{"length": n, "task": e % 2, "videos": map[string]any{}}
	}
	for _, cam := range spec.Cameras {
		files := spec.Files[cam.Name]
		if files == nil {
			files = [][]int{all}
		}
		for fi, members := range files {
			var parts []string
			from := 0.0
			for _, e := range members {
				p := filepath.Join(tmp, fmt.Sprintf("%s-%d.mp4", strings.ReplaceAll(cam.Name, "/", "_"), e))
				in := []string{"-hide_banner", "-loglevel", "error", "-nostdin", "-y", "-f", "lavfi", "-i",
					fmt.Sprintf("testsrc2=size=%s:rate=%d", cam.Size, spec.FPS), "-vf",
					fmt.Sprintf("trim=start_frame=%d:end_frame=%d,setpts=PTS-STARTPTS", 20*e, 20*e+spec.Lengths[e])}
				if _, err := run(ctx, "ffmpeg", append(append(in, cam.Args...), "-map_metadata", "-1", "-fflags", "+bitexact", p)...); err != nil {
					return nil, err
				}
				d, err := duration(ctx, p)
				if err != nil {
					return nil, err
				}
				s := spec.Shift[cam.Name]
				eps[e]["videos"].(map[string]any)[cam.Name] = map[string]any{"file": fi, "from": from + s, "to": from + d + s}
				from += d
				parts = append(parts, p)
			}
			dst := filepath.Join(dir, "videos", cam.Name, "chunk-000", fmt.Sprintf("file-%03d.mp4", fi))
			if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
				return nil, err
			}
			if err := concat(ctx, dst, parts...); err != nil {
				return nil, err
			}
		}
	}
	data := spec.DataFiles
	if data == nil {
		data = [][]int{all}
	}
	fx.Spec = map[string]any{"fps": spec.FPS, "cameras": fx.Cameras, "tasks": []string{"pick the cube", "place the cube"},
		"data_files": data, "episodes": eps}
	specPath := filepath.Join(tmp, "spec.json")
	if err := writeFile(specPath, fx.Spec); err != nil {
		return nil, err
	}
	cmd := exec.CommandContext(ctx, node, filepath.Join(root, "format", "video", "testdata", "lerobot.cjs"), specPath, dir)
	cmd.Env = append(os.Environ(), "NODE_PATH="+modules)
	if b, err := cmd.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("node lerobot.cjs: %v\n%s", err, b)
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
	for _, cam := range spec.Cameras {
		var w, h int
		if _, err := fmt.Sscanf(cam.Size, "%dx%d", &w, &h); err != nil {
			return nil, fmt.Errorf("camera %s: size %q: %v", cam.Name, cam.Size, err)
		}
		features[cam.Name] = map[string]any{"dtype": "video", "shape": []int{h, w, 3}, "names": []string{"height", "width", "channels"}}
	}
	total := 0
	for _, n := range spec.Lengths {
		total += n
	}
	info := map[string]any{
		"codebase_version": "v3.0", "robot_type": "test", "fps": spec.FPS, "features": features,
		"total_episodes": len(spec.Lengths), "total_frames": total, "total_tasks": 2,
		"chunks_size": 1000, "data_files_size_in_mb": 100, "video_files_size_in_mb": 200,
		"data_path":  "data/chunk-{chunk_index:03d}/file-{file_index:03d}.parquet",
		"video_path": "videos/{video_key}/chunk-{chunk_index:03d}/file-{file_index:03d}.mp4",
		"splits":     map[string]string{"train": fmt.Sprintf("0:%d", len(spec.Lengths))},
	}
	if err := writeFile(filepath.Join(dir, "meta", "info.json"), info); err != nil {
		return nil, err
	}
	return fx, nil
}

// LeRobotWith writes spec's dataset (WriteLeRobot) into a temporary
// directory, or skips without ffmpeg or DuckDB (fails with CI=true).
func LeRobotWith(t testing.TB, root string, spec LeRobotSpec) *LeRobotFixture {
	t.Helper()
	Tools(t)
	node, modules := nodetest.Find(t, nodetest.DuckDB)
	fx, err := WriteLeRobot(t.Context(), root, node, modules, t.TempDir(), spec)
	if err != nil {
		t.Fatal(err)
	}
	return fx
}

// LeRobotShaped is the spec of the episodes issue 93 names: three
// cameras at 640×480 and 30 frames a second, H.264 (B-frames, but one
// camera's) with a keyframe every 2 s, and episodes of lengths frames.
func LeRobotShaped(lengths ...int) LeRobotSpec {
	h264 := func(bf string) []string {
		return []string{"-c:v", "libx264", "-preset", "veryfast", "-g", "60", "-keyint_min", "60", "-sc_threshold", "0", "-bf", bf, "-pix_fmt", "yuv420p"}
	}
	return LeRobotSpec{FPS: 30, Lengths: lengths, Cameras: []Camera{
		{Name: "observation.images.front", Size: "640x480", Args: h264("2")},
		{Name: "observation.images.top", Size: "640x480", Args: h264("3")},
		{Name: "observation.images.wrist", Size: "640x480", Args: h264("0")},
	}}
}

func run(ctx context.Context, name string, args ...string) ([]byte, error) {
	var stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("%s %s: %v\n%s", name, strings.Join(args, " "), err, stderr.Bytes())
	}
	return out, nil
}

// duration is Duration without a test.
func duration(ctx context.Context, path string) (float64, error) {
	out, err := run(ctx, "ffprobe", "-v", "error", "-select_streams", "v:0", "-show_entries", "stream=duration_ts,time_base", "-of", "json", path)
	if err != nil {
		return 0, err
	}
	var raw struct {
		Streams []struct {
			DurationTS int64  `json:"duration_ts"`
			TimeBase   string `json:"time_base"`
		} `json:"streams"`
	}
	if err := json.Unmarshal(out, &raw); err != nil || len(raw.Streams) != 1 {
		return 0, fmt.Errorf("ffprobe %s: %v", path, err)
	}
	var num, den int64
	if _, err := fmt.Sscanf(raw.Streams[0].TimeBase, "%d/%d", &num, &den); err != nil || den == 0 {
		return 0, fmt.Errorf("ffprobe %s: time base %q", path, raw.Streams[0].TimeBase)
	}
	return float64(raw.Streams[0].DurationTS) * float64(num) / float64(den), nil
}

// concat is Concat without a test.
func concat(ctx context.Context, dst string, srcs ...string) error {
	var list strings.Builder
	list.WriteString("ffconcat version 1.0\n")
	for _, s := range srcs {
		abs, err := filepath.Abs(s)
		if err != nil {
			return err
		}
		fmt.Fprintf(&list, "file '%s'\n", abs)
	}
	lf := dst + ".ffconcat"
	if err := os.WriteFile(lf, []byte(list.String()), 0o644); err != nil {
		return err
	}
	defer os.Remove(lf)
	_, err := run(ctx, "ffmpeg", "-hide_banner", "-loglevel", "error", "-nostdin", "-y", "-f", "concat", "-safe", "0", "-i", lf, "-c", "copy", "-movflags", "+faststart", dst)
	return err
}

func writeFile(path string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	return os.WriteFile(path, b, 0o644)
}
