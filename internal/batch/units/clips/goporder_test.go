package clips_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"slices"
	"testing"

	"github.com/rs/zerolog"

	"github.com/brandgw/brand/api"
	"github.com/brandgw/brand/dataset"
	"github.com/brandgw/brand/format"
	"github.com/brandgw/brand/format/video"
	"github.com/brandgw/brand/format/video/clips"
	"github.com/brandgw/brand/internal/batch/layout"
	"github.com/brandgw/brand/internal/batch/units"
	"github.com/brandgw/brand/internal/batch/units/unitstest"
	"github.com/brandgw/brand/internal/job/catalog"
	"github.com/brandgw/brand/internal/testsupport/videotest"
	"github.com/brandgw/brand/s3backend"
)

// videoTree indexes the named test videos (videotest) in place, a
// chunk of about chunk bytes.
func videoTree(t *testing.T, chunk int64, names ...string) *catalog.Dataset {
	t.Helper()
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
	if _, err := dataset.IndexInPlace(ctx, st, st, dataset.InPlaceOptions{Formats: formats, Options: format.Options{ChunkBytes: chunk}}); err != nil {
		t.Fatal(err)
	}
	ds, err := catalog.Load(ctx, catalog.Spec{Name: "v", URL: "file://" + dir, Store: st, Formats: formats}, s3backend.Config{}, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	return ds
}

// served lays out the global batches [from, to) of job's epoch (each
// rank's, in rank order) and returns their clips, in epoch order.
func served(t *testing.T, o *layout.Orders, ds *catalog.Dataset, job api.Job, epoch uint64, from, to int) []clips.Clip {
	t.Helper()
	var out []clips.Clip
	for m := from; m < to; m++ {
		for r := range job.World {
			j := job
			j.Rank = r
			b, err := o.Layout(context.Background(), layout.Source{DS: ds}, j, epoch, uint64(m))
			if err != nil {
				t.Fatalf("epoch %d batch %d rank %d: %v", epoch, m, r, err)
			}
			out = append(out, unitstest.Clips(b).Clips...)
		}
	}
	return out
}

func samplesOf(cs []clips.Clip) []int {
	out := make([]int, len(cs))
	for i, c := range cs {
		out[i] = c.Sample
	}
	return out
}

// TestGOPOrderOnceAndResumed: a clip job with gop_window= (docs/shuffle.md
// §17) serves every clip of an epoch once, in one order at every world
// size, resumed exactly at another world size from any position
// (offset=); each window holds the default order's clips, regrouped so
// that with gop_window=1 a GOP's clips (by their first GOP) are one run
// of the window and with gop_window=2 at most two GOPs' clips share a
// run; the order moves with the epoch and the seed.
func TestGOPOrderOnceAndResumed(t *testing.T) {
	tree := videoTree(t, 4<<10, "h264.mp4", "h264-bframes.mp4", "h264-gop10s.mp4", "h264-opengop.mp4", "hevc.mp4")
	robot := lerobot(t)
	o := units.Orders(nil)
	for _, base := range []string{"clip=4&stride=2&step=3", "clip=2&step=1&clip_start=first", "delta_timestamps=-0.2,-0.1,0"} {
		ds := tree
		if base[0] == 'd' {
			ds = robot
		}
		plain := unitstest.ParseJob(t, base+"&window=2", 4)
		for _, size := range []int{1, 2} {
			raw := fmt.Sprintf("%s&window=2&gop_window=%d", base, size)
			for epoch := range uint64(2) {
				job := unitstest.ParseJob(t, raw, 4)
				_, n, err := o.Extent(layout.Source{DS: ds}, job, epoch)
				if err != nil || n < 35 {
					t.Fatalf("%s: %d clips (%v)", raw, n, err)
				}
				batches := (n + 3) / 4
				one := served(t, o, ds, job, epoch, 0, batches)
				order := samplesOf(one)
				if got := slices.Compact(slices.Sorted(slices.Values(order))); len(order) != n || len(got) != n || got[0] != 0 || got[n-1] != n-1 {
					t.Fatalf("%s, epoch %d: %d clips served, %d distinct, of %d", raw, epoch, len(order), len(got), n)
				}
				// World 4, batch 1: the same order.
				w4 := unitstest.ParseJob(t, raw+"&world=4", 1)
				if got := samplesOf(served(t, o, ds, w4, epoch, 0, (n+3)/4)); !slices.Equal(got, order) {
					t.Fatalf("%s, epoch %d: world 4 serves another order", raw, epoch)
				}
				// Resumed at world 3 from each of a few positions.
				for _, p := range []int{1, 7, n / 2, n - 1} {
					w3 := unitstest.ParseJob(t, fmt.Sprintf("%s&world=3&offset=%d", raw, p), 2)
					rest := samplesOf(served(t, o, ds, w3, epoch, 0, (n-p+5)/6))
					if !slices.Equal(rest, order[p:]) {
						t.Fatalf("%s, epoch %d: resumed at %d with world 3, %v; the epoch's positions from there are %v", raw, epoch, p, rest, order[p:])
					}
				}
				// The windows' clips are the default order's; within each,
				// a GOP's clips in runs of at most size GOPs.
				defaults := samplesOf(served(t, o, ds, plain, epoch, 0, batches))
				eo, err := o.Epoch(layout.StreamOf(ds, job), epoch)
				if err != nil {
					t.Fatal(err)
				}
				if slices.Equal(defaults, order) {
					t.Fatalf("%s, epoch %d: the default order", raw, epoch)
				}
				for w := range eo.NumWindows() {
					lo, hi := eo.WindowStart(w), eo.WindowStart(w+1)
					a, b := slices.Sorted(slices.Values(order[lo:hi])), slices.Sorted(slices.Values(defaults[lo:hi]))
					if !slices.Equal(a, b) {
						t.Fatalf("%s, epoch %d: window %d holds other clips than the default order's", raw, epoch, w)
					}
					checkRuns(t, fmt.Sprintf("%s, epoch %d, window %d", raw, epoch, w), one[lo:hi], size)
				}
			}
		}
	}
	// Another seed, another order.
	ds := tree
	a := samplesOf(served(t, o, ds, unitstest.ParseJob(t, "clip=4&stride=2&gop_window=1", 4), 0, 0, 3))
	b := samplesOf(served(t, o, ds, unitstest.ParseJob(t, "clip=4&stride=2&gop_window=1&seed=6", 4), 0, 0, 3))
	if slices.Equal(a, b) {
		t.Error("seeds 5 and 6 serve one order")
	}
}

// checkRuns fails unless cs, a window in GOP-then-sample order with GOP
// windows of size groups (a clip's group: its first GOP), holds each
// group's clips in one GOP window, each GOP window at most size groups.
func checkRuns(t *testing.T, what string, cs []clips.Clip, size int) {
	t.Helper()
	run := map[clips.GOP]int{} // group → its run
	k, in := -1, map[clips.GOP]bool{}
	for i, c := range cs {
		g := c.GOPs[0]
		if _, ok := run[g]; ok {
			if run[g] != k {
				t.Fatalf("%s: clip %d's GOP %+v back after another run", what, i, g)
			}
			continue
		}
		if k < 0 || len(in) == size {
			k++
			in = map[clips.GOP]bool{}
		}
		in[g] = true
		run[g] = k
	}
}

// lerobot is videotest's LeRobot v3 dataset (two cameras, three episodes
// at 30 fps), indexed in place.
func lerobot(t *testing.T) *catalog.Dataset {
	t.Helper()
	fx := videotest.LeRobotAt(t, "../../../..", 30, 0)
	st, err := s3backend.NewLocal(fx.Dir)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	formats := []format.Format{video.LeRobotFormat{}}
	if _, err := dataset.IndexInPlace(ctx, st, st, dataset.InPlaceOptions{Formats: formats, Options: format.Options{ChunkBytes: 2 << 10}}); err != nil {
		t.Fatal(err)
	}
	ds, err := catalog.Load(ctx, catalog.Spec{Name: "r", URL: "file://" + fx.Dir, Store: st, Formats: formats}, s3backend.Config{}, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	return ds
}
