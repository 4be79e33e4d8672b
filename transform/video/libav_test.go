//go:build cgo && brand_libav

package video

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"testing"
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
