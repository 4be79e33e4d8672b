package gateway_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/brandgw/brand/api"
)

// TestClipBucketEpoch: a clip bucket job over a tree of videos, laid out
// on any build (the decoding is TestClipBuckets'): /epoch/N names its
// buckets — each 64x48 video of 75 frames in the square bucket of most
// frames it holds at stride 2, the one of 60 frames too short for every
// bucket —, /plan's buckets are /epoch's, and what does not go together
// is 400 naming why.
func TestClipBucketEpoch(t *testing.T) {
	st, _ := videoStore(t, 1<<20, map[string]string{"a/x.mp4": "h264.mp4", "a/y.mp4": "h264-bframes.mp4",
		"b/z.mp4": "h264-frag.mp4", "b/w.mp4": "h264.mov"})
	srv := startVideos(t, st, nil)
	const q = "seed=3&buckets=24x24x32,32x16x32,24x24x8&budget=18432&stride=2"
	resp, body := get(t, srv.URL+"/epoch/0?"+q)
	var info api.EpochInfo
	if err := json.Unmarshal(body, &info); resp.StatusCode != http.StatusOK || err != nil || info.Buckets == nil {
		t.Fatalf("/epoch/0: %d %s", resp.StatusCode, body)
	}
	bi := info.Buckets
	// 75 frames hold 32 at stride 2 (a span of 63); the .mov's 50 hold 8
	// (a span of 15), not 32.
	if len(bi.Buckets) != 3 || bi.Buckets[0].Samples != 3 || bi.Buckets[2].Samples != 1 || bi.Buckets[1].Samples != 0 ||
		bi.Buckets[0].BatchSize != 1 || bi.Buckets[2].BatchSize != 4 || bi.TooShort != 0 || info.Batches != 3 {
		t.Fatalf("/epoch/0's buckets: %s", body)
	}
	resp, body = get(t, srv.URL+"/plan?"+q+"&epochs=2")
	var plan struct {
		Buckets []api.BucketPlanEpoch `json:"buckets"`
	}
	if err := json.Unmarshal(body, &plan); resp.StatusCode != http.StatusOK || err != nil || len(plan.Buckets) != 2 {
		t.Fatalf("/plan: %d %s", resp.StatusCode, body)
	}
	got, _ := json.Marshal(plan.Buckets[0].BucketsInfo)
	want, _ := json.Marshal(bi)
	if string(got) != string(want) {
		t.Errorf("/plan's buckets %s, /epoch/0's %s", got, want)
	}
	// A video too short for every bucket (the .mov's 50 frames, for 30
	// at stride 2, a span of 59): counted, and refused with small=fail.
	resp, body = get(t, srv.URL+"/epoch/0?seed=3&buckets=24x24x30&budget=17280&stride=2")
	info = api.EpochInfo{}
	if err := json.Unmarshal(body, &info); resp.StatusCode != http.StatusOK || err != nil || info.Buckets.TooShort != 1 || info.Buckets.Buckets[0].Samples != 3 {
		t.Fatalf("/epoch/0 with a bucket of 30 frames: %d %s", resp.StatusCode, body)
	}
	for _, tc := range []struct{ q, says string }{
		{"buckets=24x24x8&budget=18432&clip=9", "give no clip= or step="},
		{"buckets=24x24x8&budget=18432&transform=imagenet-train", "transform"},
		{"buckets=24x24x8,24x24&budget=18432", "not both"},
		{"buckets=24x24x30&budget=17280&small=fail&stride=2", "1 videos are too short"},
		{"buckets=24x24x100&budget=18432000", "no video holds a clip of 100 frames"},
	} {
		resp, body := get(t, srv.URL+"/epoch/0?seed=3&"+tc.q)
		if resp.StatusCode/100 != 4 || !strings.Contains(string(body), tc.says) {
			t.Errorf("%s: %d %s; want 4xx saying %q", tc.q, resp.StatusCode, body, tc.says)
		}
	}
}
