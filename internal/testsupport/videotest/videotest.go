// Package videotest makes the video files format/video's tests read, with
// an independent writer — the ffmpeg command (Debian's FFmpeg 5.1, which
// scripts/ensure-ffmpeg.sh installs) — and reads what an independent
// reader, ffprobe, finds in them. Without the commands a test skips, or
// fails when CI=true.
package videotest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// Tools returns the paths of ffmpeg and ffprobe.
func Tools(t testing.TB) (ffmpeg, ffprobe string) {
	t.Helper()
	ffmpeg, err1 := exec.LookPath("ffmpeg")
	ffprobe, err2 := exec.LookPath("ffprobe")
	if err1 != nil || err2 != nil {
		msg := "no ffmpeg or ffprobe (run scripts/ensure-ffmpeg.sh)"
		if os.Getenv("CI") == "true" {
			t.Fatal(msg + "; CI=true: failing")
		}
		t.Skip(msg)
	}
	return ffmpeg, ffprobe
}

// A Fixture is a video ffmpeg writes from its test source: Args are
// ffmpeg's output options, Encoder the encoder it needs.
type Fixture struct {
	Name    string
	Input   []string // the input options (a lavfi source)
	Args    []string
	Encoder string
}

// source is a small test picture, d seconds at r frames a second.
func source(size string, r, d int) []string {
	return []string{"-f", "lavfi", "-i", fmt.Sprintf("testsrc2=size=%s:rate=%d:duration=%d", size, r, d)}
}

// Fixtures are the videos the tests read: H.264 with and without
// B-frames, a keyframe every second and every ten seconds, variable frame
// rate, moov first and last, fragmented, an open GOP, audio interleaved,
// a cut with an edit list, QuickTime, H.265, VP9 and AV1.
var Fixtures = []Fixture{
	{"h264.mp4", source("64x48", 25, 3), []string{"-c:v", "libx264", "-pix_fmt", "yuv420p", "-bf", "0", "-g", "25"}, "libx264"},
	{"h264-bframes.mp4", source("64x48", 25, 3), []string{"-c:v", "libx264", "-pix_fmt", "yuv420p", "-bf", "2", "-g", "25", "-movflags", "+faststart"}, "libx264"},
	{"h264-gop10s.mp4", source("64x48", 10, 12), []string{"-c:v", "libx264", "-pix_fmt", "yuv420p", "-bf", "3", "-g", "100", "-keyint_min", "100", "-sc_threshold", "0"}, "libx264"},
	{"h264-vfr.mp4", source("64x48", 25, 4), []string{"-vf", "select='lt(mod(n\\,10)\\,6)+eq(n\\,37)'", "-fps_mode", "vfr", "-c:v", "libx264", "-pix_fmt", "yuv420p", "-bf", "2", "-g", "12"}, "libx264"},
	{"h264-frag.mp4", source("64x48", 25, 3), []string{"-c:v", "libx264", "-pix_fmt", "yuv420p", "-bf", "2", "-g", "25", "-movflags", "frag_keyframe+empty_moov"}, "libx264"},
	{"h264-frag-sidx.mp4", source("64x48", 25, 3), []string{"-c:v", "libx264", "-pix_fmt", "yuv420p", "-bf", "2", "-g", "10", "-movflags", "dash+frag_keyframe+empty_moov+global_sidx+default_base_moof"}, "libx264"},
	{"h264-opengop.mp4", source("64x48", 25, 3), []string{"-c:v", "libx264", "-pix_fmt", "yuv420p", "-bf", "3", "-g", "20", "-x264-params", "open-gop=1:keyint=20:min-keyint=20:scenecut=0"}, "libx264"},
	{"h264-audio.mp4", append(source("64x48", 25, 3), "-f", "lavfi", "-i", "sine=frequency=440:duration=3"), []string{"-c:v", "libx264", "-pix_fmt", "yuv420p", "-bf", "2", "-g", "25", "-c:a", "aac", "-b:a", "32k"}, "libx264"},
	{"h264.mov", source("64x48", 25, 2), []string{"-c:v", "libx264", "-pix_fmt", "yuv420p", "-bf", "1", "-g", "15"}, "libx264"},
	{"hevc.mp4", source("64x48", 25, 3), []string{"-c:v", "libx265", "-tag:v", "hvc1", "-x265-params", "keyint=25:min-keyint=25:bframes=3:log-level=error"}, "libx265"},
	{"hevc-hev1.mp4", source("64x48", 25, 2), []string{"-c:v", "libx265", "-x265-params", "keyint=10:log-level=error", "-movflags", "+faststart"}, "libx265"},
	{"vp9.mp4", source("64x48", 25, 3), []string{"-c:v", "libvpx-vp9", "-g", "25", "-deadline", "realtime", "-cpu-used", "8"}, "libvpx-vp9"},
	{"av1.mp4", source("64x64", 25, 3), []string{"-c:v", "libsvtav1", "-g", "25", "-preset", "12", "-svtav1-params", "log-level=0"}, "libsvtav1"},
}

// Make writes the named fixtures (every one when names is empty) into
// dir and returns their paths by name. A fixture whose encoder this
// ffmpeg lacks is left out (the tests name the encoders they need).
func Make(t testing.TB, dir string, names ...string) map[string]string {
	t.Helper()
	ffmpeg, _ := Tools(t)
	have := encoders(t, ffmpeg)
	out := map[string]string{}
	for _, f := range Fixtures {
		if len(names) > 0 && !contains(names, f.Name) {
			continue
		}
		if !have[f.Encoder] {
			t.Logf("ffmpeg has no %s encoder: no %s", f.Encoder, f.Name)
			continue
		}
		path := filepath.Join(dir, f.Name)
		args := append([]string{"-hide_banner", "-loglevel", "error", "-nostdin", "-y"}, f.Input...)
		args = append(append(args, f.Args...), "-map_metadata", "-1", "-fflags", "+bitexact", path)
		Run(t, ffmpeg, args...)
		out[f.Name] = path
	}
	return out
}

// Cut writes a copy of src from ss seconds on with stream copy, as a
// user trimming a video does: its edit list starts inside a GOP.
func Cut(t testing.TB, src, dst string, ss string) {
	t.Helper()
	ffmpeg, _ := Tools(t)
	Run(t, ffmpeg, "-hide_banner", "-loglevel", "error", "-nostdin", "-y", "-ss", ss, "-i", src, "-c", "copy", dst)
}

// Concat writes the videos srcs one after the other into dst without
// re-encoding, with moov first, as LeRobot's concatenate_video_files does
// (FFmpeg's concat demuxer, stream copy, faststart).
func Concat(t testing.TB, dst string, srcs ...string) {
	t.Helper()
	ffmpeg, _ := Tools(t)
	var list strings.Builder
	list.WriteString("ffconcat version 1.0\n")
	for _, s := range srcs {
		abs, err := filepath.Abs(s)
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&list, "file '%s'\n", abs)
	}
	lf := dst + ".ffconcat"
	if err := os.WriteFile(lf, []byte(list.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	defer os.Remove(lf)
	Run(t, ffmpeg, "-hide_banner", "-loglevel", "error", "-nostdin", "-y", "-f", "concat", "-safe", "0", "-i", lf, "-c", "copy", "-movflags", "+faststart", dst)
}

// Run runs a command and fails the test with its output if it fails.
func Run(t testing.TB, name string, args ...string) []byte {
	t.Helper()
	var stderr bytes.Buffer
	cmd := exec.Command(name, args...)
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, stderr.Bytes())
	}
	return out
}

func encoders(t testing.TB, ffmpeg string) map[string]bool {
	out := Run(t, ffmpeg, "-hide_banner", "-encoders")
	have := map[string]bool{}
	for _, line := range strings.Split(string(out), "\n") {
		// " V....D libx264   libx264 H.264 ...": capabilities, then the name.
		if f := strings.Fields(line); len(f) >= 2 && len(f[0]) == 6 && (f[0][0] == 'V' || f[0][0] == 'A') {
			have[f[1]] = true
		}
	}
	return have
}

func contains(ss []string, s string) bool {
	for _, x := range ss {
		if x == s {
			return true
		}
	}
	return false
}

// Packet is one packet of the first video stream as ffprobe shows it.
type Packet struct {
	PTS, DTS int64
	Size     int64
	Pos      int64
	Key      bool
	Discard  bool
	Hash     string // "SHA256:..." of its bytes
}

// Frame is one decoded frame as ffprobe shows it.
type Frame struct {
	PTS    int64
	PktPos int64
	Key    bool
}

// Stream is the first video stream as ffprobe shows it.
type Stream struct {
	Codec         string
	Width, Height int
	TimeBase      string
	ExtradataSize int
	ExtradataHash string
	Rotation      int // the display matrix's rotation, counterclockwise degrees as FFmpeg states it
}

// Probe is what ffprobe finds in a file's first video stream.
type Probe struct {
	Stream  Stream
	Packets []Packet
	Frames  []Frame
}

// ProbeFile runs ffprobe on path: its first video stream, every packet of
// it (with its bytes' SHA-256) and every frame its decoder outputs.
func ProbeFile(t testing.TB, path string) Probe {
	t.Helper()
	_, ffprobe := Tools(t)
	// Packets and frames in two runs: together ffprobe interleaves them
	// in one list.
	out := Run(t, ffprobe, "-v", "error", "-select_streams", "v:0", "-show_data_hash", "sha256",
		"-show_streams", "-show_packets",
		"-show_entries", "stream=codec_name,width,height,time_base,extradata_size,extradata_hash:stream_side_data=rotation:packet=pts,dts,size,pos,flags,data_hash",
		"-of", "json", path)
	frames := Run(t, ffprobe, "-v", "error", "-select_streams", "v:0", "-show_frames",
		"-show_entries", "frame=pts,pkt_pos,key_frame", "-of", "json", path)
	var raw struct {
		Streams []struct {
			Codec         string `json:"codec_name"`
			Width         int    `json:"width"`
			Height        int    `json:"height"`
			TimeBase      string `json:"time_base"`
			ExtradataSize int    `json:"extradata_size"`
			ExtradataHash string `json:"extradata_hash"`
			SideData      []struct {
				Rotation int `json:"rotation"`
			} `json:"side_data_list"`
		} `json:"streams"`
		Packets []struct {
			PTS   *int64 `json:"pts"`
			DTS   *int64 `json:"dts"`
			Size  string `json:"size"`
			Pos   string `json:"pos"`
			Flags string `json:"flags"`
			Hash  string `json:"data_hash"`
		} `json:"packets"`
		Frames []struct {
			PTS    *int64 `json:"pts"`
			PktPos string `json:"pkt_pos"`
			Key    int    `json:"key_frame"`
		} `json:"frames"`
	}
	if err := json.Unmarshal(out, &raw); err != nil {
		t.Fatalf("ffprobe %s: %v", path, err)
	}
	if err := json.Unmarshal(frames, &raw); err != nil {
		t.Fatalf("ffprobe %s: %v", path, err)
	}
	var p Probe
	if len(raw.Streams) != 1 {
		t.Fatalf("ffprobe %s: %d video streams", path, len(raw.Streams))
	}
	s := raw.Streams[0]
	p.Stream = Stream{Codec: s.Codec, Width: s.Width, Height: s.Height, TimeBase: s.TimeBase, ExtradataSize: s.ExtradataSize, ExtradataHash: s.ExtradataHash}
	for _, sd := range s.SideData {
		p.Stream.Rotation = sd.Rotation
	}
	num := func(s string) int64 {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			t.Fatalf("ffprobe %s: %q: %v", path, s, err)
		}
		return n
	}
	for _, k := range raw.Packets {
		if k.PTS == nil || k.DTS == nil {
			t.Fatalf("ffprobe %s: a packet without timestamps", path)
		}
		p.Packets = append(p.Packets, Packet{PTS: *k.PTS, DTS: *k.DTS, Size: num(k.Size), Pos: num(k.Pos),
			Key: strings.Contains(k.Flags, "K"), Discard: strings.Contains(k.Flags, "D"), Hash: k.Hash})
	}
	for _, f := range raw.Frames {
		if f.PTS == nil {
			t.Fatalf("ffprobe %s: a frame without a PTS", path)
		}
		p.Frames = append(p.Frames, Frame{PTS: *f.PTS, PktPos: num(f.PktPos), Key: f.Key == 1})
	}
	return p
}

// Duration is a video's first video stream's duration in seconds, as
// LeRobot's get_video_duration_in_s takes it (the stream's duration times
// its time base), from ffprobe.
func Duration(t testing.TB, path string) float64 {
	t.Helper()
	_, ffprobe := Tools(t)
	out := Run(t, ffprobe, "-v", "error", "-select_streams", "v:0", "-show_entries", "stream=duration_ts,time_base", "-of", "json", path)
	var raw struct {
		Streams []struct {
			DurationTS int64  `json:"duration_ts"`
			TimeBase   string `json:"time_base"`
		} `json:"streams"`
	}
	if err := json.Unmarshal(out, &raw); err != nil || len(raw.Streams) != 1 {
		t.Fatalf("ffprobe %s: %v", path, err)
	}
	var num, den int64
	if _, err := fmt.Sscanf(raw.Streams[0].TimeBase, "%d/%d", &num, &den); err != nil || den == 0 {
		t.Fatalf("ffprobe %s: time base %q", path, raw.Streams[0].TimeBase)
	}
	return float64(raw.Streams[0].DurationTS) * float64(num) / float64(den)
}

// Encode writes a video of frames frames at fps, size size, with the
// ffmpeg output options args (an encoder and its settings), from
// testsrc2 started seek frames in so that episodes differ.
func Encode(t testing.TB, dst, size string, fps, frames, seek int, args ...string) {
	t.Helper()
	ffmpeg, _ := Tools(t)
	in := []string{"-hide_banner", "-loglevel", "error", "-nostdin", "-y", "-f", "lavfi", "-i",
		fmt.Sprintf("testsrc2=size=%s:rate=%d", size, fps), "-vf", fmt.Sprintf("trim=start_frame=%d:end_frame=%d,setpts=PTS-STARTPTS", seek, seek+frames)}
	Run(t, ffmpeg, append(append(in, args...), "-map_metadata", "-1", "-fflags", "+bitexact", dst)...)
}

// LeRobotFixture is a LeRobot v3 dataset built as LeRobot builds one:
// each episode's video encoded alone, then concatenated into a camera's
// file with FFmpeg's concat demuxer (stream copy, moov first), the
// episodes' from_timestamp the durations before them in the file; the
// Parquet files written by DuckDB.
type LeRobotFixture struct {
	Dir     string
	FPS     int
	Lengths []int
	Cameras []string
	Spec    map[string]any
}

// The fixture's cameras.
const (
	CamFront = "observation.images.front"
	CamWrist = "observation.images.wrist"
)

// LeRobot builds the fixture in a temporary directory: three
// episodes of 12, 8 and 15 frames at 10 fps; the front camera AV1 as
// LeRobot's encoder makes it (SVT-AV1, a keyframe every 2 frames), its
// first two episodes in file 0 and the third in file 1; the wrist camera
// H.264 with B-frames and a keyframe every 5 frames, all three in one
// file; the rows in two data files (episodes 0–1, then 2). shift moves
// every episode's from_timestamp of the wrist camera, to make a dataset
// out of sync.
func LeRobot(t testing.TB, root string, shift float64) *LeRobotFixture {
	t.Helper()
	return LeRobotAt(t, root, 10, shift)
}

// LeRobotAt is LeRobot at fps frames a second: at 30, FFmpeg 5.1's
// concat demuxer starts each episode after the first a fraction of a
// millisecond after the durations before it, as LeRobot's own files do.
func LeRobotAt(t testing.TB, root string, fps int, shift float64) *LeRobotFixture {
	t.Helper()
	return LeRobotWith(t, root, LeRobotSpec{FPS: fps, Lengths: []int{12, 8, 15},
		Cameras: []Camera{
			{Name: CamFront, Size: "64x64", Args: []string{"-c:v", "libsvtav1", "-g", "2", "-preset", "12", "-pix_fmt", "yuv420p", "-svtav1-params", "log-level=0"}},
			{Name: CamWrist, Size: "64x48", Args: []string{"-c:v", "libx264", "-g", "5", "-bf", "2", "-pix_fmt", "yuv420p"}},
		},
		Files:     map[string][][]int{CamFront: {{0, 1}, {2}}, CamWrist: {{0, 1, 2}}},
		DataFiles: [][]int{{0, 1}, {2}},
		Shift:     map[string]float64{CamWrist: shift},
	})
}

// Sized writes n short H.264 videos of ffmpeg's testsrc2 into dir, two
// ffmpeg processes at a time: video i is spec(i)'s key, width, height
// (even) and frames, at 10 fps, a keyframe every 6 frames, B-frames. It
// returns each key's file.
func Sized(t testing.TB, dir string, n int, spec func(i int) (key string, w, h, frames int)) map[string]string {
	t.Helper()
	ffmpeg, _ := Tools(t)
	paths := make(map[string]string, n)
	errs := make([]error, n)
	files := make([]string, n)
	keys := make([]string, n)
	work := make(chan int)
	var wg sync.WaitGroup
	for range 2 {
		wg.Go(func() {
			for i := range work {
				key, w, h, f := spec(i)
				keys[i], files[i] = key, filepath.Join(dir, fmt.Sprintf("v%05d.mp4", i))
				cmd := exec.Command(ffmpeg, "-hide_banner", "-loglevel", "error", "-nostdin", "-y", "-f", "lavfi",
					"-i", fmt.Sprintf("testsrc2=size=%dx%d:rate=10", w, h), "-frames:v", strconv.Itoa(f),
					"-c:v", "libx264", "-pix_fmt", "yuv420p", "-bf", "2", "-g", "6", "-map_metadata", "-1", "-fflags", "+bitexact", files[i])
				if out, err := cmd.CombinedOutput(); err != nil {
					errs[i] = fmt.Errorf("ffmpeg, video %d: %v: %s", i, err, out)
				}
			}
		})
	}
	for i := range n {
		work <- i
	}
	close(work)
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
		paths[keys[i]] = files[i]
	}
	return paths
}
