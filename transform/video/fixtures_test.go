package video

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// The test videos are written by an independent encoder, Debian's ffmpeg
// CLI (scripts/ensure-ffmpeg.sh), and read by the reference, Debian's
// PyAV (python3-av): testdata/pyav_dump.py demuxes each one's packets and
// decodes the whole file with frame.to_ndarray(format="rgb24"). Both are
// made once per machine and kept under the user's cache directory, keyed
// by the commands, the tools' versions and the script.

// fixture is one test video: ffmpeg's arguments after the input.
type fixture struct {
	name string
	// in is the lavfi source; args the encoding.
	in   string
	args []string
	// frames is the source's length.
	frames int
	// packetsOnly skips PyAV's decode (the benchmark's video).
	packetsOnly bool
	// remux, when set, is a second pass's arguments, copying the
	// stream (-c copy): what sets a display matrix in ffmpeg 5.1.
	remux []string
	// what the video exercises, for failure messages.
	what string
}

// The source: testsrc2 moves and has fine detail, so P and B frames carry
// real prediction; 176×100 is not a multiple of 16 high, so the coded
// frame is cropped.
const small = "testsrc2=size=176x100:rate=25"

var fixtures = []fixture{
	{name: "h264-nob-1s", in: small, frames: 60, what: "H.264 without B-frames, a keyframe every second",
		args: []string{"-c:v", "libx264", "-bf", "0", "-g", "25", "-keyint_min", "25", "-sc_threshold", "0", "-pix_fmt", "yuv420p"}},
	{name: "h264-b-1s", in: small, frames: 60, what: "H.264 with B-frames (pyramid), a keyframe every second",
		args: []string{"-c:v", "libx264", "-bf", "3", "-g", "25", "-keyint_min", "25", "-sc_threshold", "0", "-pix_fmt", "yuv420p"}},
	{name: "h264-b-10s", in: "testsrc2=size=176x100:rate=10", frames: 230, what: "H.264 with B-frames, a keyframe every ten seconds",
		args: []string{"-c:v", "libx264", "-bf", "3", "-g", "100", "-keyint_min", "100", "-sc_threshold", "0", "-pix_fmt", "yuv420p"}},
	{name: "h264-opengop", in: small, frames: 80, what: "H.264 with open GOPs (leading B-frames reference the group before)",
		args: []string{"-c:v", "libx264", "-bf", "3", "-g", "25", "-keyint_min", "25", "-sc_threshold", "0", "-x264-params", "open-gop=1", "-pix_fmt", "yuv420p"}},
	{name: "h264-vfr", in: small, frames: 90, what: "H.264 at a variable frame rate",
		args: []string{"-vf", "select='lt(mod(n,5),3)+between(n,20,29)'", "-fps_mode", "vfr",
			"-c:v", "libx264", "-bf", "2", "-g", "20", "-keyint_min", "20", "-sc_threshold", "0", "-pix_fmt", "yuv420p"}},
	{name: "h264-fullrange-709", in: small, frames: 30, what: "H.264, full range, tagged BT.709 (PyAV 10 converts as BT.601 all the same)",
		args: []string{"-c:v", "libx264", "-bf", "2", "-g", "25", "-pix_fmt", "yuvj420p", "-colorspace", "bt709", "-color_primaries", "bt709", "-color_trc", "bt709"}},
	{name: "h264-444", in: small, frames: 30, what: "H.264 High 4:4:4",
		args: []string{"-c:v", "libx264", "-bf", "2", "-g", "25", "-pix_fmt", "yuv444p"}},
	{name: "h264-rotate90", in: small, frames: 30, what: "H.264 with a 90° display matrix",
		args:  []string{"-c:v", "libx264", "-bf", "2", "-g", "25", "-pix_fmt", "yuv420p"},
		remux: []string{"-metadata:s:v:0", "rotate=90"}},
	{name: "h264-odd", in: "testsrc2=size=171x97:rate=25", frames: 30, what: "H.264 at an odd size (4:4:4, as 4:2:0 needs even sides)",
		args: []string{"-c:v", "libx264", "-bf", "2", "-g", "10", "-pix_fmt", "yuv444p"}},
	{name: "hevc-1s", in: small, frames: 60, what: "H.265 with B-frames and open GOPs (CRA, RASL pictures)",
		args: []string{"-c:v", "libx265", "-x265-params", "keyint=25:min-keyint=25:scenecut=0:log-level=error", "-pix_fmt", "yuv420p", "-tag:v", "hvc1"}},
	{name: "hevc-10bit", in: small, frames: 30, what: "H.265 Main 10",
		args: []string{"-c:v", "libx265", "-x265-params", "keyint=10:min-keyint=10:scenecut=0:log-level=error", "-pix_fmt", "yuv420p10le", "-tag:v", "hvc1"}},
	{name: "vp9-1s", in: small, frames: 60, what: "VP9 with hidden alt-ref frames (superframes)",
		args: []string{"-c:v", "libvpx-vp9", "-g", "25", "-keyint_min", "25", "-auto-alt-ref", "1", "-lag-in-frames", "16", "-deadline", "good", "-cpu-used", "8", "-b:v", "300k"}},
	{name: "vp9-odd", in: "testsrc2=size=171x97:rate=25", frames: 30, what: "VP9 4:2:0 at an odd size (chroma planes rounded up)",
		args: []string{"-c:v", "libvpx-vp9", "-g", "10", "-deadline", "realtime", "-cpu-used", "8", "-b:v", "200k", "-pix_fmt", "yuv420p"}},
	{name: "av1-1s", in: small, frames: 30, what: "AV1 (decoded by libdav1d, as PyAV decodes it)",
		args: []string{"-c:v", "libsvtav1", "-g", "25", "-preset", "12", "-pix_fmt", "yuv420p"}},
}

// dump is what pyav_dump.py wrote of a video.
type dump struct {
	Codec     string   `json:"codec"`
	Width     int      `json:"width"`
	Height    int      `json:"height"`
	PixFmt    string   `json:"pix_fmt"`
	Extradata string   `json:"extradata"`
	TimeBase  [2]int64 `json:"time_base"`
	Rotation  int      `json:"rotation"`
	Packets   []struct {
		PTS    int64 `json:"pts"`
		DTS    int64 `json:"dts"`
		Key    bool  `json:"key"`
		Offset int64 `json:"offset"`
		Size   int64 `json:"size"`
	} `json:"packets"`
	Frames []struct {
		PTS    int64  `json:"pts"`
		Width  int    `json:"width"`
		Height int    `json:"height"`
		Format string `json:"format"`
	} `json:"frames"`

	dir     string
	data    []byte // packets.bin
	pixels  []byte // frames.raw
	extra   []byte
	byPTS   map[int64]int // frame index of a pts
	file    string        // the video
	fixture fixture
}

// stream is the dump's Stream.
func (d *dump) stream() Stream {
	return Stream{Codec: d.Codec, Width: d.Width, Height: d.Height, Extradata: d.extra, Rotation: d.Rotation}
}

// infos is the index's packets.
func (d *dump) infos() []PacketInfo {
	ps := make([]PacketInfo, len(d.Packets))
	for i, p := range d.Packets {
		ps[i] = PacketInfo{PTS: p.PTS, DTS: p.DTS, Key: p.Key}
	}
	return ps
}

// run is packets [sp.Start, sp.End) as a Run.
func (d *dump) run(sp Span) Run {
	r := Run{Stream: d.stream(), First: sp.First}
	for _, p := range d.Packets[sp.Start:sp.End] {
		r.Packets = append(r.Packets, Packet{PTS: p.PTS, DTS: p.DTS, Key: p.Key, Data: d.data[p.Offset : p.Offset+p.Size]})
	}
	return r
}

// frame is PyAV's rgb24 pixels of the frame of pts.
func (d *dump) frame(pts int64) ([]byte, bool) {
	i, ok := d.byPTS[pts]
	if !ok {
		return nil, false
	}
	n := d.Width * d.Height * 3
	return d.pixels[i*n : (i+1)*n], true
}

// tools finds ffmpeg and a Python with PyAV and numpy, or skips (fails
// with CI=true).
func tools(t testing.TB) (ffmpeg, python string) {
	t.Helper()
	missing := func(what string) {
		if os.Getenv("CI") == "true" {
			t.Fatalf("%s (scripts/ensure-ffmpeg.sh installs Debian's ffmpeg and python3-av; CI=true: failing)", what)
		}
		t.Skipf("%s (scripts/ensure-ffmpeg.sh installs it)", what)
	}
	ff, err := exec.LookPath("ffmpeg")
	if err != nil {
		missing("no ffmpeg")
	}
	for _, p := range []string{os.Getenv("PYTHON"), "/usr/bin/python3", "python3"} {
		if p == "" {
			continue
		}
		if path, err := exec.LookPath(p); err == nil && exec.Command(path, "-c", "import av, numpy").Run() == nil {
			return ff, path
		}
	}
	missing("no Python 3 with PyAV and numpy")
	return "", ""
}

var fixtureCache struct {
	sync.Mutex
	dumps map[string]*dump
}

// load makes (once per machine) and reads the fixture's video and dump.
func load(t testing.TB, f fixture) *dump {
	t.Helper()
	fixtureCache.Lock()
	defer fixtureCache.Unlock()
	if d, ok := fixtureCache.dumps[f.name]; ok {
		return d
	}
	ffmpeg, python := tools(t)
	script, err := filepath.Abs("testdata/pyav_dump.py")
	if err != nil {
		t.Fatal(err)
	}
	src, err := os.ReadFile(script)
	if err != nil {
		t.Fatal(err)
	}
	version, _ := exec.Command(ffmpeg, "-version").Output()
	pyav, _ := exec.Command(python, "-c", "import av; print(av.__version__, av.library_versions)").Output()
	args := append([]string{"-v", "error", "-y", "-f", "lavfi", "-i", f.in, "-frames:v", fmt.Sprint(f.frames)}, f.args...)
	h := sha256.New()
	fmt.Fprintf(h, "%q\n%q\n%v\n%s\n%s\n%s", args, f.remux, f.packetsOnly, version, pyav, src)
	base, err := os.UserCacheDir()
	if err != nil {
		base = os.TempDir()
	}
	dir := filepath.Join(base, "brand", "video-fixtures", f.name+"-"+hex.EncodeToString(h.Sum(nil))[:16])
	file := filepath.Join(dir, f.name+".mp4")
	if _, err := os.Stat(filepath.Join(dir, "done")); err != nil {
		// Made beside, then renamed into place: another test process
		// making the same fixture at once finds either none or all of it.
		if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
			t.Fatal(err)
		}
		tmp, err := os.MkdirTemp(filepath.Dir(dir), filepath.Base(dir)+".tmp-")
		if err != nil {
			t.Fatal(err)
		}
		defer os.RemoveAll(tmp)
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		video := filepath.Join(tmp, f.name+".mp4")
		out, err := exec.CommandContext(ctx, ffmpeg, append(args, video)...).CombinedOutput()
		if err != nil {
			t.Fatalf("ffmpeg %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		if f.remux != nil {
			pass := append(append([]string{"-v", "error", "-y", "-i", video, "-c", "copy"}, f.remux...), video+".mp4")
			if out, err := exec.CommandContext(ctx, ffmpeg, pass...).CombinedOutput(); err != nil {
				t.Fatalf("ffmpeg %s: %v\n%s", strings.Join(pass, " "), err, out)
			}
			if err := os.Rename(video+".mp4", video); err != nil {
				t.Fatal(err)
			}
		}
		dumpArgs := []string{script, video, tmp}
		if f.packetsOnly {
			dumpArgs = append(dumpArgs, "--packets-only")
		}
		if out, err := exec.CommandContext(ctx, python, dumpArgs...).CombinedOutput(); err != nil {
			t.Fatalf("pyav_dump.py %s: %v\n%s", f.name, err, out)
		}
		if err := os.WriteFile(filepath.Join(tmp, "done"), nil, 0o644); err != nil {
			t.Fatal(err)
		}
		if _, done := os.Stat(filepath.Join(dir, "done")); done != nil {
			os.RemoveAll(dir) // a partial one an interrupted run left
		}
		if err := os.Rename(tmp, dir); err != nil {
			if _, done := os.Stat(filepath.Join(dir, "done")); done != nil {
				t.Fatal(err)
			}
		}
	}
	d := &dump{dir: dir, file: file, fixture: f}
	b, err := os.ReadFile(filepath.Join(dir, "stream.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, d); err != nil {
		t.Fatal(err)
	}
	if d.data, err = os.ReadFile(filepath.Join(dir, "packets.bin")); err != nil {
		t.Fatal(err)
	}
	if d.pixels, err = os.ReadFile(filepath.Join(dir, "frames.raw")); err != nil {
		t.Fatal(err)
	}
	if d.extra, err = hex.DecodeString(d.Extradata); err != nil {
		t.Fatal(err)
	}
	d.byPTS = make(map[int64]int, len(d.Frames))
	if !f.packetsOnly && len(d.Frames) == 0 {
		t.Fatalf("%s: PyAV decoded no frame", f.name)
	}
	for i, fr := range d.Frames {
		if fr.Width != d.Width || fr.Height != d.Height {
			t.Fatalf("%s: PyAV's frame %d is %d×%d, the stream %d×%d", f.name, i, fr.Width, fr.Height, d.Width, d.Height)
		}
		d.byPTS[fr.PTS] = i
	}
	if len(d.pixels) != len(d.Frames)*d.Width*d.Height*3 {
		t.Fatalf("%s: frames.raw has %d bytes for %d frames", f.name, len(d.pixels), len(d.Frames))
	}
	if fixtureCache.dumps == nil {
		fixtureCache.dumps = map[string]*dump{}
	}
	fixtureCache.dumps[f.name] = d
	return d
}

func fixtureNamed(t testing.TB, name string) *dump {
	for _, f := range fixtures {
		if f.name == name {
			return load(t, f)
		}
	}
	t.Fatalf("no fixture %q", name)
	return nil
}
