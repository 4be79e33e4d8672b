package clips_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"testing"

	"github.com/brandgw/brand/internal/batch/units/unitstest"

	"github.com/brandgw/brand/internal/batch/layout"
	"github.com/brandgw/brand/internal/batch/units"

	"github.com/rs/zerolog"

	"github.com/brandgw/brand/dataset"
	"github.com/brandgw/brand/format"
	"github.com/brandgw/brand/format/video"
	"github.com/brandgw/brand/internal/job/catalog"
	"github.com/brandgw/brand/internal/testsupport/videotest"
	"github.com/brandgw/brand/s3backend"
)

// TestClipEpochOnce: a clip job's epoch over a tree of videos (its index
// alone: nothing is decoded) lays out every clip of the space once, at
// every world size, each clip naming the GOPs its frames are in, each
// read once in its batch. (The frames a clip's GOPs decode to are
// internal/batch/tensorize's TestClipFramesArePyAVs.)
func TestClipEpochOnce(t *testing.T) {
	names := []string{"h264.mp4", "h264-bframes.mp4", "h264-gop10s.mp4", "h264-opengop.mp4"}
	made := videotest.Make(t, t.TempDir(), names...)
	dir := t.TempDir()
	st, err := s3backend.NewLocal(dir)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for i, f := range names {
		p, ok := made[f]
		if !ok {
			t.Skipf("ffmpeg made no %s", f)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := st.Put(ctx, fmt.Sprintf("class%d/v%d.mp4", i%3, i), bytes.NewReader(b), int64(len(b))); err != nil {
			t.Fatal(err)
		}
	}
	formats := []format.Format{video.Format{}}
	if _, err := dataset.IndexInPlace(ctx, st, st, dataset.InPlaceOptions{Formats: formats, Options: format.Options{ChunkBytes: 4 << 10}}); err != nil {
		t.Fatal(err)
	}
	ds, err := catalog.Load(ctx, catalog.Spec{Name: "v", URL: "file://" + dir, Store: st, Formats: formats}, s3backend.Config{}, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	o := units.Orders(nil)
	for _, raw := range []string{"clip=8&stride=2&batch_size=3", "clip=5&fps=7&step=1&clip_start=first&batch_size=3&world=4"} {
		job := unitstest.ParseJob(t, raw, 3)
		for epoch := range uint64(2) {
			batches, samples, err := o.Extent(layout.Source{DS: ds}, job, epoch)
			if err != nil || samples < 20 {
				t.Fatalf("%s: %d batches of %d clips (%v)", raw, batches, samples, err)
			}
			seen := map[int]int{}
			for m := range uint64(batches) {
				for r := range job.World {
					j := job
					j.Rank = r
					b, err := o.Layout(ctx, layout.Source{DS: ds}, j, epoch, m)
					if err != nil {
						t.Fatalf("%s: epoch %d batch %d rank %d: %v", raw, epoch, m, r, err)
					}
					cb := unitstest.Clips(b)
					if cb == nil || len(cb.Clips) != len(cb.Keys) || b.Reads() != len(cb.GOPs) {
						t.Fatalf("%s: batch %d rank %d: %d clips, %d reads of %d GOPs", raw, m, r, len(cb.Clips), b.Reads(), len(cb.GOPs))
					}
					for _, c := range cb.Clips {
						seen[c.Sample]++
						for _, g := range c.GOPs {
							if _, ok := cb.GOPs[g]; !ok {
								t.Fatalf("%s: clip %d's GOP %+v is not read in its batch", raw, c.Sample, g)
							}
						}
					}
				}
			}
			if len(seen) != samples {
				t.Errorf("%s, epoch %d: %d distinct clips, want %d", raw, epoch, len(seen), samples)
			}
			for n, c := range seen {
				if c != 1 || n < 0 || n >= samples {
					t.Errorf("%s, epoch %d: clip %d laid out %d times", raw, epoch, n, c)
				}
			}
		}
	}
}
