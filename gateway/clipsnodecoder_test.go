package gateway_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/brandgw/brand/format"
	"github.com/brandgw/brand/format/video"
	"github.com/brandgw/brand/gateway"
	tvideo "github.com/brandgw/brand/transform/video"
)

// TestClipJobRefusedWithoutDecoder: a build without a video decoder
// refuses a clip job where it is first named — /epoch/N and /plan, as
// its batches and their manifests — with the batch's 501 naming the
// missing decoder, where it answered /epoch and /plan 200 (the plan even
// estimating the decode's CPU) and failed only at the first batch. What
// the request gets wrong is still its own answer first (a dataset that
// does not exist, 404). With Config.ClipsWithoutDecoder it plans and
// lays out as a decoding build does, the frames alone 501.
func TestClipJobRefusedWithoutDecoder(t *testing.T) {
	if tvideo.Available() {
		t.Skip("this build decodes video (-tags brand_libav): TestClips serves its clips")
	}
	st, _ := videoStore(t, 1<<20, map[string]string{"a/x.mp4": "h264.mp4", "b/y.mp4": "h264-bframes.mp4"})
	_, srv := start(t, st, func(c *gateway.Config) {
		c.Datasets[0].Formats = []format.Format{video.Format{}, video.LeRobotFormat{}}
	})
	const job = "clip=8&stride=2&batch_size=2"
	for _, path := range []string{
		"/epoch/0?" + job,
		"/epoch/3?" + job,
		"/plan?" + job + "&epochs=2&cache_size=64MiB",
		"/epoch/0/batch/0?" + job,
		"/epoch/0/batch/0?format=json&" + job,
		"/epoch/0/batch/0?delta_timestamps=-0.1,0&batch_size=2",
	} {
		resp, body := get(t, srv.URL+path)
		if resp.StatusCode != http.StatusNotImplemented || !strings.Contains(string(body), "built without -tags brand_libav") {
			t.Errorf("%s: %d %s; want 501 naming the missing decoder", path, resp.StatusCode, body)
		}
	}
	if resp, body := get(t, srv.URL+"/epoch/0?dataset=nope&"+job); resp.StatusCode != http.StatusNotFound {
		t.Errorf("a clip job of a dataset that does not exist: %d %s; want 404", resp.StatusCode, body)
	}
	if resp, body := get(t, srv.URL+"/epoch/0?batch_size=2"); resp.StatusCode != http.StatusOK {
		t.Errorf("a job of samples as stored over the same dataset: %d %s", resp.StatusCode, body)
	}
	plans := startVideos(t, st, func(c *gateway.Config) { c.ClipsWithoutDecoder = true })
	for path, want := range map[string]int{
		"/epoch/0?" + job: http.StatusOK,
		"/plan?" + job + "&epochs=2&cache_size=64MiB": http.StatusOK,
		"/epoch/0/batch/0?format=json&" + job:         http.StatusOK,
		"/epoch/0/batch/0?" + job:                     http.StatusNotImplemented,
	} {
		if resp, body := get(t, plans.URL+path); resp.StatusCode != want {
			t.Errorf("ClipsWithoutDecoder: %s: %d %s; want %d", path, resp.StatusCode, body, want)
		}
	}
}
