package gateway_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"reflect"
	"strings"
	"testing"

	"github.com/brandgw/brand/api"
	"github.com/brandgw/brand/dataset"
	"github.com/brandgw/brand/format"
	"github.com/brandgw/brand/format/video"
	"github.com/brandgw/brand/gateway"
	"github.com/brandgw/brand/internal/testsupport/videotest"
	"github.com/brandgw/brand/s3backend"
	tvideo "github.com/brandgw/brand/transform/video"
)

// videoStore is a tree of videos written by ffmpeg (videotest.Fixtures
// named by files, each key's folder its class), indexed in place with
// chunks of about chunk bytes; it returns the store and each key's file.
func videoStore(t *testing.T, chunk int64, files map[string]string) (s3backend.Store, map[string]string) {
	t.Helper()
	var names []string
	for _, f := range files {
		names = append(names, f)
	}
	made := videotest.Make(t, t.TempDir(), names...)
	st, err := s3backend.NewLocal(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	paths := map[string]string{}
	for key, f := range files {
		p, ok := made[f]
		if !ok {
			t.Skipf("ffmpeg made no %s", f)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := st.Put(context.Background(), key, bytes.NewReader(b), int64(len(b))); err != nil {
			t.Fatal(err)
		}
		paths[key] = p
	}
	if _, err := dataset.IndexInPlace(context.Background(), st, st, dataset.InPlaceOptions{
		Formats: []format.Format{video.Format{}}, Options: format.Options{ChunkBytes: chunk}}); err != nil {
		t.Fatal(err)
	}
	return st, paths
}

func startVideos(t *testing.T, st s3backend.Store, mutate func(*gateway.Config)) *httptest.Server {
	t.Helper()
	_, srv := start(t, st, func(c *gateway.Config) {
		c.Datasets[0].Formats = []format.Format{video.Format{}, video.LeRobotFormat{}}
		c.ClipsWithoutDecoder = true // the plain build's layouts and plans (TestClipJobRefusedWithoutDecoder: its refusal)
		if mutate != nil {
			mutate(c)
		}
	})
	return srv
}

// A clip job's parameters that do not go together, or that a dataset
// cannot serve, are 400 naming why; on a build without libavcodec a clip
// batch is 501 naming the build, and with Config.ClipsWithoutDecoder
// (startVideos') its epoch is laid out all the same.
func TestClipRefused(t *testing.T) {
	st, _ := videoStore(t, 1<<20, map[string]string{"a/x.mp4": "h264.mp4", "b/y.mp4": "h264-bframes.mp4"})
	srv := startVideos(t, st, nil)
	for _, tc := range []struct{ q, says string }{
		{"stride=2", "applies only to a clip job"},
		{"clip=0", "clip: an integer in [1, 4096]"},
		{"clip=8&fps=-1", "fps"},
		{"clip=8&clip_layout=hwc", "thwc, tchw or cthw"},
		{"clip=8&seq=16", "seq and clip"},
		{"clip=8&columns=gop", "columns and clip"},
		{"clip=8&delta_timestamps=-0.1,0", "not both"},
		{"delta_timestamps=-0.1,0", "is a tree of videos: give clip=T"},
		{"frames=x:1", "frames"},
		{"clip=1000", "no video holds a clip of 1000 frames"},
	} {
		resp, body := get(t, srv.URL+"/epoch/0/batch/0?"+tc.q)
		if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(body), tc.says) {
			t.Errorf("%s: %d %s; want 400 saying %q", tc.q, resp.StatusCode, body, tc.says)
		}
	}
	// 3 s at 25 fps in each video: 75 frames, 61 starts of a clip of a
	// span of 15, in 5 segments of 15.
	resp, body := get(t, srv.URL+"/epoch/0?clip=8&stride=2&batch_size=2")
	var info api.EpochInfo
	if err := json.Unmarshal(body, &info); resp.StatusCode != http.StatusOK || err != nil || info.Clips == nil ||
		info.Samples != 10 || info.Batches != 5 || !reflect.DeepEqual(*info.Clips, api.ClipInfo{Kind: "video", Units: 2, Videos: 2, Frames: 8, Layout: "thwc"}) {
		t.Fatalf("the epoch: %d %s", resp.StatusCode, body)
	}
	// /plan: the clips' exact demand, before anything is decoded.
	resp, body = get(t, srv.URL+"/plan?clip=8&stride=2&batch_size=2&epochs=2&cache_size=64MiB")
	var plan struct{ Clips api.ClipPlan }
	if err := json.Unmarshal(body, &plan); resp.StatusCode != http.StatusOK || err != nil || len(plan.Clips.Epochs) != 2 {
		t.Fatalf("/plan of a clip job: %d %s", resp.StatusCode, body)
	}
	for _, e := range plan.Clips.Epochs {
		if e.Clips != 10 || e.Frames != 80 || e.CoveringBytes <= 0 || e.FramesDecoded < e.Frames || e.GOPs < 2 {
			t.Errorf("/plan, epoch %d: %+v", e.Epoch, e)
		}
	}
	if e := plan.Clips.Epochs[0]; e.StoreBytes < e.CoveringBytes {
		t.Errorf("/plan: a cold epoch reads %d bytes for GOPs of %d", e.StoreBytes, e.CoveringBytes)
	}
	if !tvideo.Available() {
		resp, body := get(t, srv.URL+"/epoch/0/batch/0?clip=8")
		if resp.StatusCode != http.StatusNotImplemented || !strings.Contains(string(body), "built without -tags brand_libav") {
			t.Errorf("a clip batch without libavcodec: %d %s", resp.StatusCode, body)
		}
	}
	// A dataset that is not a video one.
	plain := newFixture(t, 2, 4)
	_, psrv := start(t, plain.store, func(c *gateway.Config) { c.ClipsWithoutDecoder = true })
	if resp, body := get(t, psrv.URL+"/epoch/0/batch/0?clip=8"); resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(body), "clip jobs read a video dataset") {
		t.Errorf("clips of a tar dataset: %d %s", resp.StatusCode, body)
	}
}
