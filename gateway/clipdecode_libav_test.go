//go:build brand_libav

package gateway_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"testing"

	"github.com/brandgw/brand/api"
	"github.com/brandgw/brand/dataset"
	"github.com/brandgw/brand/format"
	"github.com/brandgw/brand/format/video"
	"github.com/brandgw/brand/gateway"
	"github.com/brandgw/brand/internal/testsupport/videotest"
	"github.com/brandgw/brand/s3backend"
)

// videoFigures are /stats' clip figures.
func videoFigures(t *testing.T, srv string) api.VideoStats {
	t.Helper()
	resp, body := get(t, srv+"/stats")
	var st struct{ Video *api.VideoStats }
	if err := json.Unmarshal(body, &st); resp.StatusCode != http.StatusOK || err != nil {
		t.Fatalf("/stats: %d %s", resp.StatusCode, body)
	}
	if st.Video == nil {
		return api.VideoStats{GOPCache: &api.GOPCacheStats{}}
	}
	return *st.Video
}

// TestClipPlanDecodesWhatAnEpochDecodes: /plan of a clip job predicts, for
// each epoch, the GOPs the node then decodes, the frames of their runs and
// the GOPs its batches take decoded from its decoded-GOP cache, as /stats
// counts them after the epoch, exactly: over a tree of videos (H.264 with
// and without B-frames, long GOPs, an open GOP, H.265, VP9) and a LeRobot
// dataset (an AV1 and an H.264 camera); in the default order and in
// GOP-then-sample order (gop_window=); with a cache that holds every GOP a
// horizon wants (each then decoded once a horizon) and with one that holds
// a few frames (GOPs then decoded again, the one taken being that wanted
// latest), where the node's one transform worker takes a batch's GOPs in
// the order the plan does. And the plan's decode is never more than
// decoding each clip alone.
func TestClipPlanDecodesWhatAnEpochDecodes(t *testing.T) {
	files := map[string]string{}
	for i, f := range []string{"h264.mp4", "h264-bframes.mp4", "h264-gop10s.mp4", "h264-opengop.mp4", "hevc.mp4", "vp9.mp4"} {
		files[fmt.Sprintf("class%d/v%d.mp4", i%2, i)] = f
	}
	tree, _ := videoStore(t, 4<<10, files)
	fx := videotest.LeRobotAt(t, "..", 30, 0)
	robot, err := s3backend.NewLocal(fx.Dir)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := dataset.IndexInPlace(context.Background(), robot, robot, dataset.InPlaceOptions{
		Formats: []format.Format{video.LeRobotFormat{}}, Options: format.Options{ChunkBytes: 2 << 10}}); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name  string
		store s3backend.Store
		q     string
	}{
		{"tree", tree, "clip=6&stride=2&step=4&window=3&batch_size=3"},
		{"tree, gop_window=2", tree, "clip=6&stride=2&step=4&window=3&batch_size=3&gop_window=2"},
		{"tree, two ranks", tree, "clip=4&step=3&window=2&batch_size=2&world=2"},
		{"lerobot", robot, "delta_timestamps=" + url.QueryEscape("-0.1,-0.0666666667,-0.0333333333,0") + "&batch_size=4&window=2"},
		{"lerobot, gop_window=1", robot, "delta_timestamps=" + url.QueryEscape("-0.1,-0.0666666667,-0.0333333333,0") + "&batch_size=4&window=2&gop_window=1"},
	} {
		for _, cache := range []int64{256 << 20, 40 << 10} {
			name := fmt.Sprintf("%s, a cache of %d bytes", tc.name, cache)
			_, srv := start(t, tc.store, func(c *gateway.Config) {
				c.Datasets[0].Formats = []format.Format{video.Format{}, video.LeRobotFormat{}}
				c.GOPCacheBytes = cache
				c.TransformWorkers = 1
			})
			resp, body := get(t, fmt.Sprintf("%s/plan?%s&epochs=2", srv.URL, tc.q))
			var plan struct{ Clips api.ClipPlan }
			if err := json.Unmarshal(body, &plan); resp.StatusCode != http.StatusOK || err != nil || len(plan.Clips.Epochs) != 2 {
				t.Fatalf("%s: /plan: %d %s", name, resp.StatusCode, body)
			}
			if plan.Clips.GOPCacheBytes != cache {
				t.Errorf("%s: /plan plans with a cache of %d bytes", name, plan.Clips.GOPCacheBytes)
			}
			before := videoFigures(t, srv.URL)
			world := 1
			if q, _ := url.ParseQuery(tc.q); q.Get("world") == "2" {
				world = 2
			}
			for epoch, e := range plan.Clips.Epochs {
				resp, body := get(t, fmt.Sprintf("%s/epoch/%d?%s", srv.URL, epoch, tc.q))
				var info struct{ Batches int }
				if err := json.Unmarshal(body, &info); resp.StatusCode != http.StatusOK || err != nil {
					t.Fatalf("%s: epoch %d: %d %s", name, epoch, resp.StatusCode, body)
				}
				for m := range info.Batches {
					for r := range world {
						if resp, body := get(t, fmt.Sprintf("%s/epoch/%d/batch/%d?%s&rank=%d", srv.URL, epoch, m, tc.q, r)); resp.StatusCode != http.StatusOK {
							t.Fatalf("%s: epoch %d, batch %d: %d %s", name, epoch, m, resp.StatusCode, body)
						}
					}
				}
				after := videoFigures(t, srv.URL)
				got := [3]int64{after.GOPsDecoded - before.GOPsDecoded, after.FramesDecoded - before.FramesDecoded, after.GOPCache.Hits - before.GOPCache.Hits}
				want := [3]int64{e.GOPsDecoded, e.FramesDecoded, e.GOPHits}
				t.Logf("%s, epoch %d: %d clips; GOPs decoded, frames decoded, GOPs taken decoded: /plan %v, /stats %v; %.2f frames a clip, %.2f× fewer than each clip alone",
					name, epoch, e.Clips, want, got, e.FramesDecodedPerClip, e.Reuse)
				if got != want {
					t.Errorf("%s, epoch %d: /plan predicts %v GOPs decoded, frames decoded and GOPs taken decoded; /stats counts %v", name, epoch, want, got)
				}
				if e.FramesDecoded > e.FramesDecodedAlone || e.Reuse < 1 {
					t.Errorf("%s, epoch %d: %d frames decoded, more than each clip alone (%d)", name, epoch, e.FramesDecoded, e.FramesDecodedAlone)
				}
				if cache > 1<<20 && e.GOPHits == 0 {
					t.Errorf("%s, epoch %d: no GOP taken decoded", name, epoch)
				}
				before = after
			}
			if st := videoFigures(t, srv.URL).GOPCache; st.Held > st.Limit || st.Limit != cache {
				t.Errorf("%s: the cache holds %d bytes of %d (its bound %d)", name, st.Held, st.Limit, cache)
			}
		}
	}
}
