package mp4

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/brandgw/brand/format"
)

// FuzzIndex: no file makes Index panic or allocate past its limits, and
// what it accepts is consistent: every sample inside the file, GOPs that
// tile the samples from a sync sample each, ranges that are their
// samples' bytes, frames in presentation order naming samples that are
// shown. Seeded with the testdata files, the synthetic shapes of
// TestSynth, the refusals of TestRefused and an mp4v entry's esds.
func FuzzIndex(f *testing.F) {
	files, _ := filepath.Glob("testdata/*.mp4")
	for _, p := range files {
		b, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	for _, s := range []synth{gop, bframes} {
		f.Add(s.bytes())
		s.frag = true
		f.Add(s.bytes())
		s.frag, s.moovFirst, s.co64 = false, true, true
		f.Add(s.bytes())
	}
	mjpeg := gop
	mjpeg.entry, mjpeg.config = "mp4v", mjpegESDS
	f.Add(mjpeg.bytes())
	f.Add([]byte("not a movie"))
	lim := Limits{MetaBytes: 1 << 20, Samples: 1 << 12, Boxes: 1 << 12}
	f.Fuzz(func(t *testing.T, b []byte) {
		file, err := Index(context.Background(), Bytes(b), int64(len(b)), lim)
		if err != nil {
			if !isKind(err) {
				t.Fatalf("an error of no kind: %v", err)
			}
			return
		}
		v := file.Video
		if len(v.Samples) == 0 || len(v.Samples) > lim.Samples || len(v.Frames) == 0 || len(v.GOPs) == 0 {
			t.Fatalf("%d samples, %d frames, %d GOPs", len(v.Samples), len(v.Frames), len(v.GOPs))
		}
		for i, s := range v.Samples {
			if s.Off < 0 || s.Off+int64(s.Size) > int64(len(b)) {
				t.Fatalf("sample %d at %d+%d past %d bytes", i, s.Off, s.Size, len(b))
			}
		}
		var next int32
		for g, gp := range v.GOPs {
			if gp.First != next || gp.End <= gp.First || g > 0 && !v.Samples[gp.First].Key {
				t.Fatalf("GOP %d is samples [%d, %d) after %d", g, gp.First, gp.End, next)
			}
			next = gp.End
			var rs []format.Range
			for i := gp.First; i < gp.End; i++ {
				if s := v.Samples[i]; s.Size > 0 {
					rs = append(rs, format.Range{Off: s.Off, Len: int64(s.Size)})
				}
			}
			rs = format.Merge(rs)
			if len(rs) != len(gp.Ranges) || format.Concat(rs) != gp.Bytes {
				t.Fatalf("GOP %d: ranges %v, its samples' %v", g, gp.Ranges, rs)
			}
		}
		if int(next) != len(v.Samples) {
			t.Fatalf("GOPs end at %d of %d samples", next, len(v.Samples))
		}
		for i, fr := range v.Frames {
			if v.Samples[fr.Sample].Discard || v.Samples[fr.Sample].PTS != fr.PTS || i > 0 && v.Frames[i-1].PTS > fr.PTS {
				t.Fatalf("frame %d: %+v", i, fr)
			}
		}
	})
}
