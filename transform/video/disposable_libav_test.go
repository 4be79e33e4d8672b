//go:build cgo && brand_libav

package video

import (
	"bytes"
	"context"
	"math/rand/v2"
	"slices"
	"testing"
)

// TestSkipsDisposable decodes every test video's frames wanted the ways
// clips want them — every other frame, every third, strided clips from
// drawn starts, a group's last frame alone — from runs Cover plans, the
// disposable packets whose frames are not wanted left out, and requires
// every wanted frame to be PyAV's whole-file decode of it, byte for byte.
// It requires the H.264 and H.265 videos with B-frames to have left some
// out (the decoder gave no more frames than the packets it was sent) and
// VP9 and AV1, whose
// references this package does not read, none.
func TestSkipsDisposable(t *testing.T) {
	dec := NewDecoder(Options{})
	defer dec.Close()
	r := rand.New(rand.NewPCG(93, 2))
	for _, f := range fixtures {
		t.Run(f.name, func(t *testing.T) {
			d := load(t, f)
			infos := d.infos()
			pts := make([]int64, len(d.Frames)) // presentation order
			for i, fr := range d.Frames {
				pts[i] = fr.PTS
			}
			var patterns [][]int64
			for _, step := range []int{2, 3} {
				var w []int64
				for i := r.IntN(step); i < len(pts); i += step {
					w = append(w, pts[i])
				}
				patterns = append(patterns, w)
			}
			for range 4 {
				var w []int64
				for i := r.IntN(max(len(pts)-16, 1)); i < len(pts) && len(w) < 8; i += 2 {
					w = append(w, pts[i])
				}
				patterns = append(patterns, w)
			}
			var last []int64 // each group's last packet's frame
			for i := range infos {
				if i+1 == len(infos) || infos[i+1].Key {
					last = append(last, infos[i].PTS)
				}
			}
			patterns = append(patterns, last)
			sent, skipped := 0, 0
			for _, want := range patterns {
				want = slices.Sorted(slices.Values(want))
				spans, err := Cover(infos, want)
				if err != nil {
					t.Fatal(err)
				}
				for _, sp := range spans {
					run := d.run(sp)
					var in []int64
					for _, p := range run.Packets {
						if _, ok := slices.BinarySearch(want, p.PTS); ok {
							in = append(in, p.PTS)
						}
					}
					before := dec.Stats().Frames
					got := 0
					fig, err := dec.DecodeRun(context.Background(), run, in, func(fr Frame) error {
						ref, ok := d.frame(fr.PTS)
						if !ok || !bytes.Equal(fr.RGB, ref) {
							t.Fatalf("pts %d (run from %d, %d packets left out): %s", fr.PTS, sp.Start, skippedIn(run, in, d), diff(fr.RGB, ref, d.Width))
						}
						got++
						return nil
					})
					if err != nil {
						t.Fatalf("span %+v: %v", sp, err)
					}
					if got != len(in) || fig.Sent+fig.Skipped != len(run.Packets) {
						t.Fatalf("span %+v: %d of %d wanted frames; %d sent and %d left out of %d packets", sp, got, len(in), fig.Sent, fig.Skipped, len(run.Packets))
					}
					if gave := dec.Stats().Frames - before; gave > int64(fig.Sent) {
						t.Fatalf("span %+v: the decoder gave %d frames for %d packets sent", sp, gave, fig.Sent)
					}
					sent, skipped = sent+fig.Sent, skipped+fig.Skipped
				}
			}
			switch {
			case (f.name == "h264-b-1s" || f.name == "h264-b-10s" || f.name == "hevc-1s") && skipped == 0:
				t.Errorf("no disposable packet left out of %d", sent)
			case (d.Codec == "vp9" || d.Codec == "av1") && skipped > 0:
				t.Errorf("%d packets of %s left out", skipped, d.Codec)
			}
			t.Logf("%s: %d packets sent, %d left out, every wanted frame PyAV's", f.what, sent, skipped)
		})
	}
}

// skippedIn counts the run's packets DecodeRun leaves out wanting in.
func skippedIn(run Run, in []int64, d *dump) int {
	c, _ := parseCodec(d.Codec)
	rule := disposableRule(run.Stream, c)
	n := 0
	for _, p := range run.Packets {
		if rule != nil && !slices.Contains(in, p.PTS) && rule(p.Data) {
			n++
		}
	}
	return n
}
