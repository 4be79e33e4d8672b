//go:build cgo && brand_libav

package video

import (
	"context"
	"errors"
	"fmt"
	"github.com/brandgw/brand/format/video/framesize"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
)

// decodeAll decodes runs of d with dec, wanting every frame they give
// exactly, and returns the most frames the decoder context held at once
// (brand_get_buffer's count).
func decodeAll(t testing.TB, dec *Decoder, runs []Run, each func(Frame) error) int {
	t.Helper()
	peak := 0
	for _, r := range runs {
		_, exact, err := runFrames(r)
		if err != nil {
			t.Fatal(err)
		}
		var want []int64
		for i, p := range r.Packets {
			if exact[i] {
				want = append(want, p.PTS)
			}
		}
		if err := dec.Decode(context.Background(), r, want, each); err != nil {
			t.Fatal(err)
		}
		dec.mu.Lock()
		for _, p := range dec.idle {
			peak = max(peak, p.c.(*libav).framesPeak())
		}
		dec.mu.Unlock()
	}
	return peak
}

// groups is every keyframe group of d as a run, and the whole stream.
func groups(d *dump) []Run {
	var rs []Run
	for _, p := range d.infos() {
		if p.Key {
			r, _ := wholeGroup(d, len(rs))
			rs = append(rs, r)
		}
	}
	return append(rs, d.run(Span{Start: 0, End: len(d.Packets), First: true}))
}

// heldFixtures are H.264 streams at the edges of what the frame count
// reads (packets only: their frames are not compared here): all intra
// with no reference and no bitstream restriction, 16 references and 16
// B-frames, zero latency, B-frames without a pyramid, open GOPs with 8
// references.
var heldFixtures = []fixture{
	{name: "held-intra", in: small, frames: 20, packetsOnly: true, args: []string{"-c:v", "libx264", "-g", "1", "-pix_fmt", "yuv420p"}},
	{name: "held-b16", in: small, frames: 60, packetsOnly: true, args: []string{"-c:v", "libx264", "-bf", "16", "-refs", "16", "-g", "50", "-pix_fmt", "yuv420p"}},
	{name: "held-zerolatency", in: small, frames: 60, packetsOnly: true, args: []string{"-c:v", "libx264", "-tune", "zerolatency", "-pix_fmt", "yuv420p"}},
	{name: "held-bnopyramid", in: small, frames: 60, packetsOnly: true, args: []string{"-c:v", "libx264", "-bf", "5", "-x264-params", "b-pyramid=none:b-adapt=0", "-pix_fmt", "yuv420p"}},
	{name: "held-opengop-8refs", in: small, frames: 80, packetsOnly: true, args: []string{"-c:v", "libx264", "-bf", "8", "-refs", "8", "-x264-params", "open-gop=1:keyint=20:min-keyint=20:scenecut=0", "-pix_fmt", "yuv420p"}},
}

// TestHeldFrames: for every test video, and the H.264 streams at the
// edges of what the count reads, the most frames libavcodec's decoder
// holds at once — over a decode of each keyframe group and of the whole
// stream, on one pooled context, held to the count — is within what the
// stream's parameter sets state (enforcedFrames) where they state it,
// and within the codec's slots (dpbFrames) always: Footprint counts no
// fewer frames than a decode takes, and no stream is refused for
// holding the frames its SPS allows.
func TestHeldFrames(t *testing.T) {
	for _, f := range append(fixtures[:len(fixtures):len(fixtures)], heldFixtures...) {
		d := load(t, f)
		c, err := parseCodec(d.Codec)
		if err != nil {
			t.Fatal(err)
		}
		dec := NewDecoder(Options{})
		peak := decodeAll(t, dec, groups(d), func(Frame) error { return nil })
		dec.Close()
		reorder := reorderDepth(d.run(Span{Start: 0, End: len(d.Packets)}).Packets)
		bound, enforced := heldFrames(d.stream(), c, reorder), enforcedFrames(d.stream(), c, reorder)
		if int64(peak) > bound || peak == 0 && decoderName(c) != "libdav1d" {
			t.Errorf("%s: the decoder held %d frames at once; Footprint counts %d", f.name, peak, bound)
		}
		sps, _ := parseAVCSPS(d.extra)
		t.Logf("%s: held %d frames at most; counted %d (enforced: %d; SPS refs %d, reorder %d; run's reorder %d)", f.name, peak, bound, enforced, sps.refs, sps.reorder, reorder)
	}
}

// TestHeldFramesEnforced: a decoder held to fewer frames than its
// stream keeps fails the run with ErrDecode saying so, having held no
// more than it was allowed: a bitstream keeping more reference or
// reordered frames than its SPS states (an in-band SPS other than the
// avcC's) cannot take more memory than Footprint reserved for it.
func TestHeldFramesEnforced(t *testing.T) {
	d := fixtureNamed(t, "h264-b-1s")
	r, _ := wholeGroup(d, 0)
	c, _ := parseCodec(d.Codec)
	reorder := reorderDepth(r.Packets)
	need := enforcedFrames(d.stream(), c, reorder)
	if need == 0 {
		t.Fatal("the fixture's SPS states no frame count")
	}
	cc, err := openCodec(r.Stream, c, framesize.MaxPixels, reorder, 2)
	if err != nil {
		t.Fatal(err)
	}
	defer cc.close()
	var failed error
	for i := range r.Packets {
		if err := cc.send(&r.Packets[i]); err != nil {
			failed = err
			break
		}
		for {
			_, got, err := cc.receive()
			if err != nil {
				failed = err
			}
			if err != nil || got != recvFrame {
				break
			}
		}
		if failed != nil {
			break
		}
	}
	if !errors.Is(failed, ErrDecode) || !strings.Contains(failed.Error(), "more than the 2 frames") {
		t.Fatalf("a decoder held to 2 frames (the stream needs up to %d): %v", need, failed)
	}
	if p := cc.(*libav).framesPeak(); p > 2 {
		t.Fatalf("held %d frames, allowed 2", p)
	}
}

// eightK is a real 8K UHD H.264 video, as small as one can be: two
// frames (1 s at 2 fps), libx264's ultrafast preset, a keyframe every
// other frame; about 2.7 MB.
var eightK = fixture{name: "h264-8k", in: "testsrc2=size=7680x4320:rate=2", frames: 2, packetsOnly: true,
	what: "7680×4320 H.264, ultrafast",
	args: []string{"-c:v", "libx264", "-preset", "ultrafast", "-g", "2", "-pix_fmt", "yuv420p"}}

// measureEnv names the fixture a child process of TestFootprintMeasured
// decodes ("" in the parent); measureDecode says whether it decodes or
// only loads (the baseline).
const measureEnv, measureDecode = "BRAND_FOOTPRINT_CHILD", "BRAND_FOOTPRINT_DECODE"

// TestFootprintMeasured holds Footprint to a decode's measured peak in
// two ways, for the 8K video and the small ones of each codec: the C
// heap's growth (glibc's count, libavcodec's frames, pools and tables
// and libswscale's) plus the RGB frame, sampled at every frame; and the
// growth of a child process's peak resident set (getrusage's maxrss)
// over a child that loads the same packets and decodes nothing. Each
// must be within Footprint, and the 8K reservation within the default
// decodes share of a node (1.8 GB): an 8K video is served at the default
// memory limit. It logs reservation/measured, the margin.
//
// The 8K child decodes two 7680×4320 frames (about 0.5 GB resident);
// the test runs the children one at a time.
func TestFootprintMeasured(t *testing.T) {
	if name := os.Getenv(measureEnv); name != "" {
		measureChild(t, name)
		return
	}
	for _, name := range []string{eightK.name, "h264-nob-1s", "h264-b-1s", "h264-444", "hevc-1s", "vp9-1s"} {
		f := fixtureOrEightK(t, name)
		d := load(t, f)
		fp, err := Footprint(d.stream(), framesize.Bound{})
		if err != nil {
			t.Fatal(err)
		}
		c, _ := parseCodec(d.Codec)
		reorder := reorderDepth(d.run(Span{Start: 0, End: len(d.Packets)}).Packets)
		fp = max(fp, footprint(d.stream(), c, reorder))
		heap, frames := heapPeak(t, d)
		base, used := childMaxRSS(t, f.name, false), childMaxRSS(t, f.name, true)
		rss := used - base
		if heap > fp || rss > fp {
			t.Errorf("%s: a decode took %d bytes (C heap and RGB frame), %d (resident set); its footprint is %d", f.name, heap, rss, fp)
		}
		t.Logf("%s (%dx%d): footprint %d bytes (%d frames); measured %d (C heap and RGB frame, %.2f×; %d frames held), %d (peak resident set over a child's that decodes nothing, %d; %.2f×)",
			f.name, d.Width, d.Height, fp, heldFrames(d.stream(), c, reorder), heap, float64(fp)/float64(heap), frames, rss, base, float64(fp)/float64(max(rss, 1)))
		if f.name == eightK.name && fp > eightKBudget {
			t.Errorf("8K's footprint %d is over a node's default decodes share (%d): refused at the default memory limit", fp, eightKBudget)
		}
	}
}

// eightKBudget is a node's default decodes share with the default image
// pixel bound (gateway.MemoryBudget: the most an 8192×8192 image takes
// to decode, 27 bytes a pixel), what the probe of issue 66 was refused
// against.
const eightKBudget = 1_824_760_498

// heapPeak is a decode of the whole stream's C heap growth on a fresh
// decoder, sampled at each frame and at the end, plus the RGB frame; and
// the most frames the decoder held.
func heapPeak(t *testing.T, d *dump) (int64, int) {
	dec := NewDecoder(Options{})
	defer dec.Close()
	base := cHeap()
	var peak int64
	frames := decodeAll(t, dec, []Run{d.run(Span{Start: 0, End: len(d.Packets), First: true})}, func(Frame) error {
		peak = max(peak, cHeap()-base)
		return nil
	})
	peak = max(peak, cHeap()-base)
	return peak + int64(d.Width*d.Height*3), frames
}

// childMaxRSS runs this test in a child process for the fixture, which
// decodes it or not, and returns the child's peak resident set.
func childMaxRSS(t *testing.T, name string, decode bool) int64 {
	cmd := exec.Command(os.Args[0], "-test.run=^TestFootprintMeasured$", "-test.count=1")
	cmd.Env = append(os.Environ(), measureEnv+"="+name, measureDecode+"="+strconv.FormatBool(decode))
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("the child for %s: %v\n%s", name, err, out)
	}
	_, after, ok := strings.Cut(string(out), hwmMark)
	kb, err := strconv.ParseInt(strings.Fields(after + " x")[0], 10, 64)
	if !ok || err != nil {
		t.Fatalf("the child for %s said no peak:\n%s", name, out)
	}
	return kb << 10
}

// hwmMark starts the child's line giving its peak resident set: the
// kernel's VmHWM of its own address space (getrusage's maxrss of a
// child counts the parent's, whose address space it started in).
const hwmMark = "child peak resident set, kB: "

// reportHWM prints the process's VmHWM after hwmMark.
func reportHWM(t *testing.T) {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			fmt.Println(hwmMark + strings.Fields(v)[0])
			return
		}
	}
	t.Fatal("no VmHWM in /proc/self/status")
}

func fixtureOrEightK(t *testing.T, name string) fixture {
	for _, g := range append([]fixture{eightK}, fixtures...) {
		if g.name == name {
			return g
		}
	}
	t.Fatalf("no fixture %q", name)
	return fixture{}
}

// measureChild loads the fixture (made by the parent) and, if told,
// decodes it whole once on a fresh decoder.
func measureChild(t *testing.T, name string) {
	d := load(t, fixtureOrEightK(t, name))
	defer reportHWM(t)
	if os.Getenv(measureDecode) != "true" {
		return
	}
	dec := NewDecoder(Options{})
	defer dec.Close()
	decodeAll(t, dec, []Run{d.run(Span{Start: 0, End: len(d.Packets), First: true})}, func(fr Frame) error {
		if len(fr.RGB) != d.Width*d.Height*3 {
			return fmt.Errorf("a frame of %d bytes", len(fr.RGB))
		}
		return nil
	})
}
