//go:build brand_libav

package visit_test

import (
	"bytes"
	"context"
	"os"
	"strings"
	"testing"

	"github.com/brandgw/brand/dataset"
	"github.com/brandgw/brand/format"
	"github.com/brandgw/brand/format/video"
	"github.com/brandgw/brand/internal/testsupport/stagetest"
	"github.com/brandgw/brand/internal/testsupport/videotest"
	"github.com/brandgw/brand/s3backend"
)

// TestClipBucketEpoch: a clip bucket job's epoch over a tree of videos,
// laid out (the decoding is TestClipBuckets'), its buckets —
// each 64x48 video of 75 frames in the square bucket of most frames it
// holds at stride 2, the .mov's 50 frames in the one of 8 —, a video too
// short for every bucket counted and refused with small=fail, and what
// does not go together refused naming why.
func TestClipBucketEpoch(t *testing.T) {
	made := videotest.Make(t, t.TempDir(), "h264.mp4", "h264-bframes.mp4", "h264-frag.mp4", "h264.mov")
	st, err := s3backend.NewLocal(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	for key, f := range map[string]string{"a/x.mp4": "h264.mp4", "a/y.mp4": "h264-bframes.mp4", "b/z.mp4": "h264-frag.mp4", "b/w.mov": "h264.mov"} {
		b, err := os.ReadFile(made[f])
		if err != nil {
			t.Skipf("ffmpeg made no %s", f)
		}
		if _, err := st.Put(context.Background(), key, bytes.NewReader(b), int64(len(b))); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := dataset.IndexInPlace(context.Background(), st, st, dataset.InPlaceOptions{
		Formats: []format.Format{video.Format{}}, Options: format.Options{ChunkBytes: 1 << 20}}); err != nil {
		t.Fatal(err)
	}
	s := stagetest.New(t, stagetest.Config{Datasets: stagetest.Videos(st)})
	ctx := context.Background()
	info, err := s.Epoch(ctx, "seed=3&buckets=24x24x32,32x16x32,24x24x8&budget=18432&stride=2", 0)
	if err != nil || info.Buckets == nil {
		t.Fatalf("epoch 0: %+v, %v", info, err)
	}
	// 75 frames hold 32 at stride 2 (a span of 63); the .mov's 50 hold 8
	// (a span of 15), not 32.
	bi := info.Buckets
	if len(bi.Buckets) != 3 || bi.Buckets[0].Samples != 3 || bi.Buckets[2].Samples != 1 || bi.Buckets[1].Samples != 0 ||
		bi.Buckets[0].BatchSize != 1 || bi.Buckets[2].BatchSize != 4 || bi.TooShort != 0 || info.Batches != 3 {
		t.Fatalf("epoch 0's buckets: %+v, %d steps", bi, info.Batches)
	}
	// The .mov too short for 30 frames at stride 2 (a span of 59).
	info, err = s.Epoch(ctx, "seed=3&buckets=24x24x30&budget=17280&stride=2", 0)
	if err != nil || info.Buckets.TooShort != 1 || info.Buckets.Buckets[0].Samples != 3 {
		t.Fatalf("a bucket of 30 frames: %+v, %v", info.Buckets, err)
	}
	for _, tc := range []struct{ q, says string }{
		{"buckets=24x24x30&budget=17280&small=fail&stride=2", "1 videos are too short"},
		// The table's rule, in its words (every refusal is the table's).
		{"buckets=24x24x8&budget=18432&clip=9", "clip does not apply to a bucket job: a clip bucket job's clips take their bucket's frames (buckets=HxWxT)"},
		{"buckets=24x24x8&budget=18432&transform=imagenet-train", "transform"},
		{"buckets=24x24x8,24x24&budget=18432", "not both"},
		{"buckets=24x24&budget=18432&clip=8", "(buckets=HxWxT)"},
		{"buckets=24x24x100&budget=18432000", "no video holds a clip of 100 frames"},
	} {
		_, err := s.Epoch(ctx, "seed=3&"+tc.q, 0)
		if st := stagetest.Status(err); st/100 != 4 || !strings.Contains(stagetest.Message(err), tc.says) {
			t.Errorf("%s: %d %v; want 4xx saying %q", tc.q, st, err, tc.says)
		}
	}
}
