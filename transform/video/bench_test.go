//go:build cgo && brand_libav

package video

import (
	"context"
	"encoding/json"
	"flag"
	"github.com/brandgw/brand/format/video/framesize"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// The decoder's throughput (docs/transform.md §12). Run as
//
//	go test -tags brand_libav -run '^$' -bench . -benchtime 20x ./transform/video/ -args -figures /tmp/video.jsonl
//
// on a 640×360 H.264 video (ffmpeg's libx264 at its default preset, B-frames,
// a keyframe every 2 s at 25 fps: 50-frame groups; testsrc2 with noise,
// so the bitstream is about 1 Mbit/s). Each iteration decodes one group
// on one goroutine, through the pool; cpu-ms/frame is the process's CPU
// time (user + system, getrusage) per frame. BenchmarkPyAV has PyAV
// (Debian's python3-av) decode the same file whole with
// frame.to_ndarray(format="rgb24") and time itself with
// time.process_time.
var benchFigures = flag.String("figures", "", "append each benchmark's figures to this file as JSON lines")

var benchVideo = fixture{name: "bench-h264-640x360", in: "testsrc2=size=640x360:rate=25,noise=alls=12:allf=t", frames: 250, packetsOnly: true,
	what: "640×360 H.264, 2 s groups",
	args: []string{"-c:v", "libx264", "-bf", "3", "-g", "50", "-keyint_min", "50", "-sc_threshold", "0", "-b:v", "1M", "-pix_fmt", "yuv420p"}}

func processCPU(b *testing.B) time.Duration {
	var ru unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func benchFigure(b *testing.B, frames int, cpu, wall time.Duration, extra map[string]any) {
	perFrame := cpu.Seconds() * 1e3 / float64(frames)
	b.ReportMetric(perFrame, "cpu-ms/frame")
	b.ReportMetric(float64(frames)/wall.Seconds(), "frames/s")
	if *benchFigures == "" {
		return
	}
	rec := map[string]any{"name": b.Name(), "frames": frames, "cpu_ms_per_frame": perFrame,
		"frames_per_s": float64(frames) / wall.Seconds()}
	for k, v := range extra {
		rec[k] = v
	}
	line, _ := json.Marshal(rec)
	f, err := os.OpenFile(*benchFigures, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	if _, err := f.Write(append(line, '\n')); err != nil {
		b.Fatal(err)
	}
}

// BenchmarkDecode decodes a group per iteration: "rgb" hands every frame
// out as PyAV's rgb24 (the decode, the conversion and one copy),
// "decode-only" wants none (libavcodec alone). It also reports the C
// heap's peak over one group on a fresh decoder (libavcodec's frames and
// tables, libswscale's), with the RGB frame: a group's decode memory, and
// the Footprint reserved for it.
func BenchmarkDecode(b *testing.B) {
	d := load(b, benchVideo)
	var groups []Run
	var wants [][]int64
	for g := range 5 {
		r, want := wholeGroup(d, g)
		groups = append(groups, r)
		wants = append(wants, want)
	}
	// The peak over one group, on a fresh decoder.
	dec := NewDecoder(Options{})
	base := cHeap()
	var peak int64
	if err := dec.Decode(context.Background(), groups[1], wants[1], func(Frame) error {
		peak = max(peak, cHeap()-base)
		return nil
	}); err != nil {
		b.Fatal(err)
	}
	dec.Close()
	peak += int64(d.Width * d.Height * 3)
	fp, _ := Footprint(d.stream(), framesize.Bound{})
	for _, mode := range []string{"rgb", "decode-only"} {
		b.Run(mode, func(b *testing.B) {
			dec := NewDecoder(Options{})
			defer dec.Close()
			frames := 0
			each := func(Frame) error { frames++; return nil }
			b.ResetTimer()
			c0, t0 := processCPU(b), time.Now()
			decoded := dec.Stats().Frames
			for i := range b.N {
				want := wants[i%len(groups)]
				if mode == "decode-only" {
					want = nil
				}
				if err := dec.Decode(context.Background(), groups[i%len(groups)], want, each); err != nil {
					b.Fatal(err)
				}
			}
			n := int(dec.Stats().Frames - decoded)
			benchFigure(b, n, processCPU(b)-c0, time.Since(t0), map[string]any{"size": "640x360", "codec": "h264",
				"group_frames": len(wants[1]), "peak_bytes_per_group": peak, "footprint_bytes": fp, "handed_out": frames})
			b.ReportMetric(float64(peak)/(1<<20), "peak-MiB/group")
		})
	}
}

// BenchmarkPyAV: PyAV decoding the same video whole, each frame to an
// rgb24 ndarray, in one Python process timing itself.
func BenchmarkPyAV(b *testing.B) {
	d := load(b, benchVideo)
	_, python := tools(b)
	prog := `import av, sys, time
n = 0
t = time.process_time()
for _ in range(int(sys.argv[2])):
    with av.open(sys.argv[1]) as c:
        for f in c.decode(video=0):
            f.to_ndarray(format="rgb24")
            n += 1
print(n, time.process_time() - t)`
	for _, threads := range []string{"default"} {
		b.Run(threads, func(b *testing.B) {
			reps := max(1, b.N*len(wants(d))/len(d.Packets))
			t0 := time.Now()
			out, err := exec.Command(python, "-c", prog, d.file, strconv.Itoa(reps)).Output()
			if err != nil {
				b.Fatal(err)
			}
			f := strings.Fields(string(out))
			n, _ := strconv.Atoi(f[0])
			cpu, _ := strconv.ParseFloat(f[1], 64)
			benchFigure(b, n, time.Duration(cpu*float64(time.Second)), time.Since(t0), map[string]any{"size": "640x360", "codec": "h264", "pyav": true})
		})
	}
}

// wants is the frames per iteration of BenchmarkDecode: a group's.
func wants(d *dump) []int64 {
	_, w := wholeGroup(d, 1)
	return w
}
