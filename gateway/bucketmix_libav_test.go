//go:build brand_libav

package gateway_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/brandgw/brand/api"
	"github.com/brandgw/brand/dataset"
	"github.com/brandgw/brand/format"
	"github.com/brandgw/brand/format/video"
	"github.com/brandgw/brand/gateway"
	"github.com/brandgw/brand/internal/codec/npy"
	"github.com/brandgw/brand/internal/testsupport/videotest"
	"github.com/brandgw/brand/s3backend"
)

// TestImageVideoBucketedMixture: a bucketed mixture of an image dataset
// and a tree of 24 videos ffmpeg writes (sizes of two aspect ratios,
// 6 to 20 frames) at 0.3/0.7, each source its own list (the images' of
// HxW, the videos' of HxWxT): every step one bucket of one source, an
// image step's images the bucket pipeline's tensors, a video step's
// clips of its bucket's frames (frames.npy of T×H×W×3), the sources'
// steps within one of their weights' shares at every step, and every
// video once a pass of its source.
func TestImageVideoBucketedMixture(t *testing.T) {
	spec := func(i int) (key string, w, h, f int) {
		sizes := [][2]int{{64, 36}, {36, 64}}
		s := sizes[i%2]
		return fmt.Sprintf("c%d/v%03d.mp4", i%3, i), s[0], s[1], 6 + i%15
	}
	paths := videotest.Sized(t, t.TempDir(), 24, spec)
	vst, err := s3backend.NewLocal(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	for key, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := vst.Put(context.Background(), key, bytes.NewReader(b), int64(len(b))); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := dataset.IndexInPlace(context.Background(), vst, vst, dataset.InPlaceOptions{
		Formats: []format.Format{video.Format{}}, Options: format.Options{ChunkBytes: 64 << 10}}); err != nil {
		t.Fatal(err)
	}
	img := newImageFixture(t, 4, 20, bucketPhotos(t))
	if _, err := dataset.WriteSizes(context.Background(), img.store, img.index, 0, 2); err != nil {
		t.Fatal(err)
	}
	_, srv := start(t, nil, func(c *gateway.Config) {
		c.Datasets = []gateway.DatasetSpec{{Name: "photos", URL: "file:///photos", Store: img.store},
			{Name: "clips", URL: "file:///clips", Store: vst, Formats: []format.Format{video.Format{}}}}
		c.Transforms = testTransforms(t)
		c.TransformWorkers = 2
	})
	q := "seed=3&mix=photos:0.3,clips:0.7&budget=6912&world=2&buckets=" + url.QueryEscape("photos:32x32,24x48;clips:18x32x4,32x18x4,18x32x6")
	resp, body := get(t, srv.URL+"/epoch/0?"+q)
	var info api.EpochInfo
	if resp.StatusCode != http.StatusOK || json.Unmarshal(body, &info) != nil || info.Mix == nil || len(info.Mix.Components) != 2 {
		t.Fatalf("/epoch/0: %s %s", resp.Status, body)
	}
	if b := info.Mix.Components[1].Buckets; b == nil || len(b.Buckets) != 3 || b.TooShort != 0 {
		t.Fatalf("/epoch/0's video source: %+v", b)
	}
	count := [2]int{}
	videos := map[string]int{} // a video's clips, by pass
	for m := range info.Batches / 2 {
		var comp int
		for rank := range 2 {
			resp, body := get(t, fmt.Sprintf("%s/epoch/0/batch/%d?%s&rank=%d", srv.URL, m, q, rank))
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("step %d rank %d: %s %s", m, rank, resp.Status, body)
			}
			comps := strings.Split(resp.Header.Get(api.HeaderMixComponents), ",")
			if comp, err = strconv.Atoi(comps[0]); err != nil {
				t.Fatalf("step %d: %s %q", m, api.HeaderMixComponents, comps)
			}
			name := resp.Header.Get(api.HeaderTransform)
			samples := readTar(t, body)
			if len(samples) != len(comps) || len(samples) == 0 {
				t.Fatalf("step %d: %d samples, components %v", m, len(samples), comps)
			}
			for _, s := range samples {
				if comp == 0 {
					if s.files["npy"] == nil || string(s.files["npy"]) != string(img.wantBucket(t, name, 0, 0, s.key)) && !anyPass(t, img, name, s.key, s.files["npy"]) {
						t.Fatalf("step %d: image %s is not its bucket pipeline's tensor", m, s.key)
					}
					continue
				}
				h, _, err := npy.Read(s.files["frames.npy"])
				spec, serr := bucketShape(name)
				if err != nil || serr != nil || len(h.Shape) != 4 || h.Shape[1] != int64(spec[0]) || h.Shape[2] != int64(spec[1]) {
					t.Fatalf("step %d: a clip of %v in bucket %s (%v %v)", m, h.Shape, name, err, serr)
				}
				var js struct{ Video string }
				if err := json.Unmarshal(s.files["json"], &js); err != nil {
					t.Fatal(err)
				}
				videos[js.Video]++
			}
		}
		count[comp]++
		for c, w := range []float64{0.3, 0.7} {
			if d := float64(count[c]) - w*float64(m+1); d <= -1 || d >= 1 {
				t.Fatalf("after %d steps source %d has %d, its share %.1f", m+1, c, count[c], w*float64(m+1))
			}
		}
	}
	if count[1] == 0 || len(videos) == 0 {
		t.Fatalf("no video step among %v", count)
	}
	t.Logf("%d steps, %v a source; %d videos served", info.Batches/2, count, len(videos))
}

// anyPass reports whether tensor is bucket pipeline name's of key's
// image in any of the first passes of dataset photos, seed 3.
func anyPass(t *testing.T, f *imageFixture, name, key string, tensor []byte) bool {
	for pass := range uint64(4) {
		if string(tensor) == string(f.wantBucketOf(t, name, "photos", 3, pass, key)) {
			return true
		}
	}
	return false
}

// bucketShape is a bucket pipeline name's H and W.
func bucketShape(name string) ([2]int, error) {
	var h, w int
	_, err := fmt.Sscanf(strings.TrimPrefix(name, "bucket:"), "%dx%d", &h, &w)
	return [2]int{h, w}, err
}
