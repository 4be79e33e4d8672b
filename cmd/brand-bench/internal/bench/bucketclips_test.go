package bench

import (
	"strings"
	"testing"

	"github.com/brandgw/brand/bucket"
)

// TestBucketsClipTree holds the clip half's videos to what it measures:
// over the default clip buckets, every video fits one (none too short,
// none scaled up), and the tree fills every aspect ratio at both clip
// lengths.
func TestBucketsClipTree(t *testing.T) {
	shapes, err := bucket.Parse(DefaultClipBuckets)
	if err != nil {
		t.Fatal(err)
	}
	used := map[bucket.Shape]int{}
	for i := range len(bucketClipSizes) * len(bucketClipFrames) {
		w, h, frames := bucketClipVideo(i)
		k, ok := bucket.NearestClip(w, h, frames, 1, shapes)
		if !ok {
			t.Fatalf("video %d (%dx%d, %d frames) fits no bucket of %s", i, w, h, frames, DefaultClipBuckets)
		}
		if c := bucket.Cover(w, h, shapes[k]); c > 1.2 {
			t.Errorf("video %d (%dx%d) scaled up %.2f× into %s", i, w, h, c, shapes[k])
		}
		used[shapes[k]]++
	}
	for _, s := range shapes {
		if used[s] == 0 {
			t.Errorf("no video in bucket %s", s)
		}
	}
}

// TestBucketsClipsText: the clip half's table names both loaders and
// gives the ratio of their trainer CPU.
func TestBucketsClipsText(t *testing.T) {
	c := &BucketsClipsReport{Videos: 2, Sizes: bucketClipSizes, Frames: bucketClipFrames, Buckets: DefaultClipBuckets, Budget: 1,
		Rows:    []BucketsRow{{Mode: "pyav", Images: 10, TrainerMsPerImage: 40}, {Mode: "brand-clips", Images: 10, TrainerMsPerImage: 0.8, GatewayMsPerImage: 30}},
		Summary: map[string][3]float64{"pyav": {40, 40, 40}, "brand-clips": {0.8, 0.8, 0.8}}, WorstRate: worstRatio([]BucketsRow{{Mode: "pyav", TrainerMsPerImage: 40}, {Mode: "brand-clips", TrainerMsPerImage: 0.8}}, "brand-clips", "pyav")}
	var sb strings.Builder
	c.writeText(&sb)
	for _, want := range []string{"(1) PyAV + PIL bucketing in DataLoader workers", "(2) brand.Buckets (clip buckets)", "brand.Buckets ÷ PyAV + PIL: 0.0200"} {
		if !strings.Contains(sb.String(), want) {
			t.Errorf("the clip table lacks %q:\n%s", want, sb.String())
		}
	}
}
