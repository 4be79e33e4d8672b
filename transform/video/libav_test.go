//go:build cgo && brand_libav

package video

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/brandgw/brand/internal/codec/npy"
	"github.com/brandgw/brand/transform"
)

// decodeSpans decodes each span of d's packets wanting want, checks
// every frame handed out against PyAV's, and returns how many were.
func decodeSpans(t *testing.T, dec *Decoder, d *dump, spans []Span, want []int64) int {
	t.Helper()
	n := 0
	for _, sp := range spans {
		run := d.run(sp)
		var in []int64
		for _, pts := range want {
			if i := indexOf(d, pts); i >= sp.Start && i < sp.End {
				in = append(in, pts)
			}
		}
		seen := map[int64]bool{}
		err := dec.Decode(context.Background(), run, in, func(f Frame) error {
			ref, ok := d.frame(f.PTS)
			if !ok {
				return fmt.Errorf("frame pts %d: PyAV's whole-file decode gives no such frame", f.PTS)
			}
			if seen[f.PTS] {
				return fmt.Errorf("frame pts %d handed out twice", f.PTS)
			}
			seen[f.PTS] = true
			if f.Width != d.Width || f.Height != d.Height {
				return fmt.Errorf("frame pts %d is %d×%d", f.PTS, f.Width, f.Height)
			}
			if !bytes.Equal(f.RGB, ref) {
				return fmt.Errorf("frame pts %d (packet %d of a run from %d, %s): %s", f.PTS, f.Packet, sp.Start, f.Format, diff(f.RGB, ref, d.Width))
			}
			n++
			return nil
		})
		if err != nil {
			t.Fatalf("%s: span %+v: %v", d.fixture.name, sp, err)
		}
		for _, pts := range in {
			if !seen[pts] {
				t.Fatalf("%s: span %+v: frame pts %d wanted, not handed out", d.fixture.name, sp, pts)
			}
		}
	}
	return n
}

func indexOf(d *dump, pts int64) int {
	for i, p := range d.Packets {
		if p.PTS == pts {
			return i
		}
	}
	return -1
}

// diff describes how two RGB frames differ.
func diff(a, b []byte, w int) string {
	if len(a) != len(b) {
		return fmt.Sprintf("%d bytes against %d", len(a), len(b))
	}
	n, most, first := 0, 0, -1
	for i := range a {
		if a[i] != b[i] {
			if first < 0 {
				first = i
			}
			n++
			most = max(most, int(a[i])-int(b[i]), int(b[i])-int(a[i]))
		}
	}
	return fmt.Sprintf("%d of %d bytes differ, by up to %d; the first at x %d y %d", n, len(a), most, first/3%w, first/3/w)
}

// TestMatchesPyAV decodes every test video's frames group by group —
// each keyframe group's frames wanted together, from runs Cover plans
// (from the group before, for an open GOP's leading pictures) — and
// requires each frame equal, byte for byte, to PyAV's rgb24 of the same
// frame from its decode of the whole file, and every frame PyAV gives
// to be handed out.
func TestMatchesPyAV(t *testing.T) {
	dec := NewDecoder(Options{})
	defer dec.Close()
	for _, f := range fixtures {
		t.Run(f.name, func(t *testing.T) {
			d := load(t, f)
			if len(d.Frames) != len(d.Packets) {
				t.Fatalf("PyAV decoded %d frames of %d packets", len(d.Frames), len(d.Packets))
			}
			infos := d.infos()
			total := 0
			groups := 0
			for start := 0; start < len(infos); {
				end := start + 1
				for end < len(infos) && !infos[end].Key {
					end++
				}
				var want []int64
				for _, p := range infos[start:end] {
					want = append(want, p.PTS)
				}
				spans, err := Cover(infos, want)
				if err != nil {
					t.Fatal(err)
				}
				total += decodeSpans(t, dec, d, spans, want)
				groups++
				start = end
			}
			if total != len(d.Frames) {
				t.Fatalf("%d frames handed out, PyAV gives %d", total, len(d.Frames))
			}
			t.Logf("%s: %d frames in %d groups equal to PyAV's (%s, %s)", f.what, total, groups, d.Codec, d.Frames[0].Format)
		})
	}
}

// TestEachFrameAlone decodes every frame of the B-frame and open-GOP
// videos on its own: a run from its keyframe (or the one before) to its
// own packet, drained there.
func TestEachFrameAlone(t *testing.T) {
	dec := NewDecoder(Options{})
	defer dec.Close()
	for _, name := range []string{"h264-b-1s", "h264-opengop", "hevc-1s", "vp9-1s", "h264-vfr"} {
		t.Run(name, func(t *testing.T) {
			d := fixtureNamed(t, name)
			infos := d.infos()
			for _, fr := range d.Frames {
				spans, err := Cover(infos, []int64{fr.PTS})
				if err != nil {
					t.Fatal(err)
				}
				if n := decodeSpans(t, dec, d, spans, []int64{fr.PTS}); n != 1 {
					t.Fatalf("pts %d: %d frames", fr.PTS, n)
				}
			}
		})
	}
}

// TestLeadingPictures: an open GOP's leading pictures, decoded from
// their own keyframe, are not what the whole-file decode gives; Decode
// refuses them from such a run, and Cover starts their run a group
// earlier.
func TestLeadingPictures(t *testing.T) {
	dec := NewDecoder(Options{})
	defer dec.Close()
	for _, name := range []string{"h264-opengop", "hevc-1s"} {
		t.Run(name, func(t *testing.T) {
			d := fixtureNamed(t, name)
			infos := d.infos()
			k := -1
			for i, p := range infos {
				if i > 0 && p.Key {
					k = i
					break
				}
			}
			if k < 0 || infos[k+1].PTS > infos[k].PTS {
				t.Fatalf("the second keyframe (packet %d) has no leading picture: not an open GOP", k)
			}
			lead := infos[k+1].PTS
			run := d.run(Span{Start: k, End: len(infos)})
			err := dec.Decode(context.Background(), run, []int64{lead}, func(Frame) error { return nil })
			if !errors.Is(err, ErrRun) {
				t.Fatalf("a leading picture from its own keyframe: %v, want ErrRun", err)
			}
			spans, err := Cover(infos, []int64{lead})
			if err != nil || len(spans) != 1 || spans[0].End != k+2 || spans[0].Start >= k {
				t.Fatalf("Cover of the leading picture: %+v, %v", spans, err)
			}
			decodeSpans(t, dec, d, spans, []int64{lead})
		})
	}
}

// pillowPython returns a Python 3 with PIL, or skips (fails with CI=true).
func pillowPython(t *testing.T) string {
	for _, p := range []string{os.Getenv("PYTHON"), "/usr/bin/python3", "python3"} {
		if p == "" {
			continue
		}
		if path, err := exec.LookPath(p); err == nil && exec.Command(path, "-c", "import PIL").Run() == nil {
			return path
		}
	}
	if os.Getenv("CI") == "true" {
		t.Fatal("no Python 3 with PIL (scripts/ensure-pil.sh installs python3-pil; CI=true: failing)")
	}
	t.Skip("no Python 3 with PIL (python3-pil)")
	return ""
}

// windowClips is a window's clips of frames of d: t frames each, every
// stride-th, starting at the given presentation positions; overlapping.
func windowClips(d *dump, starts []int, t, stride int) []Clip {
	var clips []Clip
	for i, s := range starts {
		c := Clip{Key: transform.Key{Seed: 7, Epoch: 1, Sample: uint64(100 + i)}}
		for k := range t {
			j := min(s+k*stride, len(d.Frames)-1) // past the end: the last frame again, as a padded window
			c.Frames = append(c.Frames, d.Frames[j].PTS)
		}
		clips = append(clips, c)
	}
	return clips
}

// decodeClips decodes what the clips want of d, run by run as Cover plans
// them, into the clips.
func decodeClips(t *testing.T, dec *Decoder, d *dump, c *Clips) [][]byte {
	t.Helper()
	want := c.Want()
	spans, err := Cover(d.infos(), want)
	if err != nil {
		t.Fatal(err)
	}
	for _, sp := range spans {
		run := d.run(sp)
		if err := dec.Decode(context.Background(), run, c.WantIn(run), c.Put); err != nil {
			t.Fatal(err)
		}
	}
	out, err := c.Out()
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestClipsMatchPillow: a window of overlapping clips (some padded past
// the last frame), each drawn a random resized crop and a flip once from
// its key, made from the decoded frames, equals the same clips made by
// Pillow from PyAV's frames with the same boxes and flips (torchvision's
// RandomResizedCrop and RandomHorizontalFlip on PIL images); each frame
// wanted by several clips is decoded once.
func TestClipsMatchPillow(t *testing.T) {
	python := pillowPython(t)
	p, err := transform.New("clip-train", transform.Spec{Ops: []transform.Op{
		{Op: transform.OpRandomResizedCrop, Size: transform.Size{H: 64, W: 96}, Scale: &[2]float64{0.3, 1}},
		{Op: transform.OpHFlip},
	}}, transform.Options{})
	if err != nil {
		t.Fatal(err)
	}
	dec := NewDecoder(Options{})
	defer dec.Close()
	type pilCase struct {
		Dump   string `json:"dump"`
		Width  int    `json:"width"`
		Height int    `json:"height"`
		Frames []int  `json:"frames"`
		Box    [4]int `json:"box"`
		Size   [2]int `json:"size"`
		Flip   bool   `json:"flip"`
	}
	var cases []pilCase
	var got [][]byte
	for _, name := range []string{"h264-b-1s", "h264-opengop", "hevc-1s", "vp9-1s"} {
		d := fixtureNamed(t, name)
		clips := windowClips(d, []int{0, 3, 20, 22, 40, 55}, 8, 2)
		c, err := NewClips(p, d.stream(), clips, THWC, nil)
		if err != nil {
			t.Fatal(err)
		}
		before := dec.Stats().Served
		out := decodeClips(t, dec, d, c)
		if served := dec.Stats().Served - before; served != int64(len(c.Want())) {
			t.Fatalf("%s: %d frames handed out for %d distinct frames wanted", name, served, len(c.Want()))
		}
		flips := 0
		for i, cl := range clips {
			g, err := p.Geometry(d.Width, d.Height, cl.Key)
			if err != nil {
				t.Fatal(err)
			}
			dr := g.Draws()
			w, h := g.Size()
			pc := pilCase{Dump: d.dir, Width: d.Width, Height: d.Height, Box: [4]int{dr.Crops[0].X, dr.Crops[0].Y, dr.Crops[0].W, dr.Crops[0].H},
				Size: [2]int{w, h}, Flip: dr.Flips[0]}
			if pc.Flip {
				flips++
			}
			for _, pts := range cl.Frames {
				pc.Frames = append(pc.Frames, d.byPTS[pts])
			}
			hdr, data, err := npy.Read(out[i])
			if err != nil {
				t.Fatal(err)
			}
			if fmt.Sprint(hdr.Shape) != fmt.Sprint([]int{8, 64, 96, 3}) || len(out[i]) != c.Sizes()[i] {
				t.Fatalf("%s clip %d: shape %v, %d bytes (Sizes says %d)", name, i, hdr.Shape, len(out[i]), c.Sizes()[i])
			}
			cases = append(cases, pc)
			got = append(got, data)
		}
		if flips == 0 || flips == len(clips) {
			t.Fatalf("%s: %d of %d clips flipped", name, flips, len(clips))
		}
	}
	dir := t.TempDir()
	b, _ := json.Marshal(cases)
	if err := os.WriteFile(filepath.Join(dir, "cases.json"), b, 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(python, "testdata/pil_clips.py", filepath.Join(dir, "cases.json"), dir).CombinedOutput(); err != nil {
		t.Fatalf("pil_clips.py: %v\n%s", err, out)
	}
	for i := range cases {
		want, err := os.ReadFile(filepath.Join(dir, fmt.Sprintf("%d.raw", i)))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got[i], want) {
			t.Fatalf("clip %d (%+v): differs from Pillow's: %s", i, cases[i], diff(got[i], want, 96))
		}
	}
	t.Logf("%d clips of 8 frames equal to Pillow's from PyAV's frames", len(cases))
}

// TestClipLayouts: TCHW and CTHW are THWC's axes moved, nothing else.
func TestClipLayouts(t *testing.T) {
	d := fixtureNamed(t, "h264-b-1s")
	p, err := transform.New("eval", transform.Spec{Ops: []transform.Op{
		{Op: transform.OpResize, Size: transform.Size{H: 50, W: 50, Square: true}},
		{Op: transform.OpCenterCrop, Size: transform.Size{H: 48, W: 64}},
	}}, transform.Options{})
	if err != nil {
		t.Fatal(err)
	}
	dec := NewDecoder(Options{})
	defer dec.Close()
	clips := windowClips(d, []int{1, 30}, 5, 3)
	outs := map[Layout][][]byte{}
	for _, l := range []Layout{THWC, TCHW, CTHW} {
		c, err := NewClips(p, d.stream(), clips, l, nil)
		if err != nil {
			t.Fatal(err)
		}
		outs[l] = decodeClips(t, dec, d, c)
	}
	for i := range clips {
		hdr, base, _ := npy.Read(outs[THWC][i])
		T, H, W := int(hdr.Shape[0]), int(hdr.Shape[1]), int(hdr.Shape[2])
		for _, l := range []Layout{TCHW, CTHW} {
			h, arr, _ := npy.Read(outs[l][i])
			want := []int{T, 3, H, W}
			if l == CTHW {
				want = []int{3, T, H, W}
			}
			if fmt.Sprint(h.Shape) != fmt.Sprint(want) {
				t.Fatalf("%s shape %v, want %v", l, h.Shape, want)
			}
			for tt := range T {
				for ch := range 3 {
					for px := range H * W {
						at := (tt*3+ch)*H*W + px
						if l == CTHW {
							at = (ch*T+tt)*H*W + px
						}
						if arr[at] != base[(tt*H*W+px)*3+ch] {
							t.Fatalf("%s clip %d: frame %d channel %d pixel %d differs from THWC's", l, i, tt, ch, px)
						}
					}
				}
			}
		}
	}
}

// TestRotationReported: a stream's display matrix (90° here, as ffprobe
// reads it) is reported with its clips, and the frames are served as
// stored — 176×100, equal to PyAV's, which does not turn them.
func TestRotationReported(t *testing.T) {
	d := fixtureNamed(t, "h264-rotate90")
	if d.Rotation != 90 {
		t.Fatalf("the fixture's rotation is %d, want 90", d.Rotation)
	}
	c, err := NewClips(nil, d.stream(), windowClips(d, []int{0}, 4, 1), THWC, nil)
	if err != nil {
		t.Fatal(err)
	}
	dec := NewDecoder(Options{})
	defer dec.Close()
	out := decodeClips(t, dec, d, c)
	hdr, data, _ := npy.Read(out[0])
	if c.Rotation() != 90 || fmt.Sprint(hdr.Shape) != "[4 100 176 3]" {
		t.Fatalf("rotation %d, shape %v", c.Rotation(), hdr.Shape)
	}
	for k := range 4 {
		ref, _ := d.frame(d.Frames[k].PTS)
		if !bytes.Equal(data[k*len(ref):(k+1)*len(ref)], ref) {
			t.Fatalf("frame %d differs from PyAV's", k)
		}
	}
}
