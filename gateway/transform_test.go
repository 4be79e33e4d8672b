package gateway_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"image"
	"image/png"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/brandgw/brand/api"
	"github.com/brandgw/brand/chunkindex"
	"github.com/brandgw/brand/gateway"
	"github.com/brandgw/brand/internal/gen/photos"
	"github.com/brandgw/brand/planner"
	"github.com/brandgw/brand/s3backend"
	"github.com/brandgw/brand/transform"
)

// testPipelines are the pipelines the transform tests serve beside the
// built-ins: tiny ones, so that tests under the race detector stay
// quick, and the image's own size with and without EXIF orientation.
const testPipelines = `{"pipelines": {
	"tiny": {"ops": [{"op": "random_resized_crop", "size": [6, 8]}, {"op": "hflip"}]},
	"plain": {"ops": []},
	"upright": {"ops": [], "exif": "apply"}
}}`

func testTransforms(t testing.TB) transform.Config {
	t.Helper()
	c, err := transform.ParseConfig([]byte(testPipelines))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// imageFixture is a dataset whose samples carry images: sample id has
// key class{id%3}/sample{id}, a .cls member and the image image(id)
// names (its extension and bytes).
type imageFixture struct {
	store  *s3backend.Local
	index  *chunkindex.Index
	images map[string][]byte // key → the image's bytes
	ids    map[string]int    // key → sample ID
}

func newImageFixture(t testing.TB, chunks, perChunk int, image func(id int) (ext string, data []byte)) *imageFixture {
	t.Helper()
	store, err := s3backend.NewLocal(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	f := &imageFixture{store: store, images: map[string][]byte{}, ids: map[string]int{}}
	f.index = packSamples(t, store, chunks, perChunk, func(id, _ int) (string, []sampleFile) {
		key := fmt.Sprintf("class%d/sample%05d", id%3, id)
		ext, img := image(id)
		f.images[key], f.ids[key] = img, id
		return key, []sampleFile{{"cls", []byte(fmt.Sprint(id % 3))}, {ext, img}}
	})
	return f
}

// smallPhotos is an image function of photo-like JPEGs of 40 to 70
// pixels a side.
func smallPhotos(t testing.TB) func(int) (string, []byte) {
	return func(id int) (string, []byte) {
		p, err := photos.Sized(3, id, 40+id%31, 70-id%29, 90)
		if err != nil {
			t.Fatal(err)
		}
		return "jpg", p.JPEG
	}
}

// startTransforms runs a gateway over f's store serving the test
// pipelines.
func startTransforms(t testing.TB, f *imageFixture, mutate func(*gateway.Config)) (*gateway.Gateway, string) {
	t.Helper()
	g, srv := start(t, f.store, func(c *gateway.Config) {
		c.Transforms = testTransforms(t)
		c.TransformWorkers = 2
		if mutate != nil {
			mutate(c)
		}
	})
	return g, srv.URL
}

// tensorsOf is a transformed batch's members by key: each sample's
// files by extension.
func tensorsOf(t testing.TB, body []byte) map[string]map[string][]byte {
	t.Helper()
	out := map[string]map[string][]byte{}
	for _, s := range readTar(t, body) {
		if _, dup := out[s.key]; dup {
			t.Fatalf("sample %s twice in a batch", s.key)
		}
		out[s.key] = s.files
	}
	return out
}

// wantTensor is what the pipeline makes of key's image in epoch epoch of
// a job seeded seed over the dataset "test": the tensor, computed here
// from the image and the key rule alone.
func (f *imageFixture) wantTensor(t testing.TB, name string, seed, epoch uint64, key string) []byte {
	t.Helper()
	set, err := transform.NewSet(testTransforms(t), transform.Options{})
	if err != nil {
		t.Fatal(err)
	}
	p, err := set.Get(name)
	if err != nil {
		t.Fatal(err)
	}
	res, err := p.Apply(nil, f.images[key], transform.SampleKey(seed, "test", epoch, uint64(f.ids[key])), nil)
	if err != nil {
		t.Fatalf("%s: %v", key, err)
	}
	return res.Out
}

// TestTransformedBatches: a batch asked for with transform=NAME is named
// by Brand-Transform and by its ETag, which the bytes as stored and
// another pipeline do not share; a HEAD reads nothing and gives no
// length; If-None-Match revalidates it; the manifest names the pipeline.
// (Each image member the pipeline's tensor under the sample's key, the
// others as stored: client's TestTensors, the cluster tests here,
// internal/batch/visit's TestTransformKeys and internal/batch/tensorize'
// TestApplyRewritesImages; an ETag per definition of a pipeline:
// internal/batch/layout's TestTransformETags.)
func TestTransformedBatches(t *testing.T) {
	f := newImageFixture(t, 4, 8, smallPhotos(t))
	_, base := startTransforms(t, f, nil)
	q := "seed=7&batch_size=8&transform=tiny"
	resp, body := get(t, base+"/epoch/1/batch/2?"+q)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("%s: %s", resp.Status, body)
	}
	if got := resp.Header.Get(api.HeaderTransform); got != "tiny" {
		t.Errorf("Brand-Transform %q", got)
	}
	if resp.ContentLength != int64(len(body)) || len(body)%512 != 0 {
		t.Errorf("Content-Length %d for a body of %d bytes", resp.ContentLength, len(body))
	}
	if got := tensorsOf(t, body); len(got) != 8 {
		t.Errorf("%d samples", len(got))
	}
	raw, _ := get(t, base+"/epoch/1/batch/2?seed=7&batch_size=8")
	eval, _ := get(t, base+"/epoch/1/batch/2?seed=7&batch_size=8&transform=plain")
	etags := []string{resp.Header.Get("ETag"), raw.Header.Get("ETag"), eval.Header.Get("ETag")}
	if len(slices.Compact(slices.Sorted(slices.Values(etags)))) != 3 {
		t.Errorf("ETags of the batch tiny, raw, plain: %v; want three", etags)
	}
	if raw.Header.Get(api.HeaderTransform) != "" {
		t.Error("a raw batch names a pipeline")
	}
	head, _ := do(t, http.MethodHead, base+"/epoch/1/batch/2?"+q, nil)
	if head.StatusCode != http.StatusOK || head.Header.Get("ETag") != etags[0] || head.Header.Get("Content-Length") != "" ||
		head.Header.Get(api.HeaderTransform) != "tiny" {
		t.Errorf("HEAD: %s, ETag %s, Content-Length %q", head.Status, head.Header.Get("ETag"), head.Header.Get("Content-Length"))
	}
	if nm, _ := get(t, base+"/epoch/1/batch/2?"+q, "If-None-Match", etags[0]); nm.StatusCode != http.StatusNotModified {
		t.Errorf("If-None-Match: %s", nm.Status)
	}
	var m api.Manifest
	mr, mb := get(t, base+"/epoch/1/batch/2/manifest?"+q)
	if err := json.Unmarshal(mb, &m); err != nil || mr.StatusCode != http.StatusOK {
		t.Fatalf("manifest: %s %v", mr.Status, err)
	}
	if m.Transform != "tiny" || m.ETag != etags[0] || m.Bytes != 0 {
		t.Errorf("manifest: transform %q, ETag %s, bytes %d", m.Transform, m.ETag, m.Bytes)
	}
}

// TestTransformStatuses: what a transformed batch's request is answered
// when it cannot be served whole, over six samples: an undecodable JPEG,
// a truncated one and a pixel bomb (bad images), two photos, and a
// 1×100000 PNG (a good image, whose tensor through a resize to 256 is
// over --max-batch-bytes). A pipeline the server does not define is 400
// naming the ones it does, on a batch, /epoch and a manifest; a name no
// pipeline could have, 400 too; a tensor over the bound is 400 naming the
// bound and the sample, even with --on-bad-image=skip (it is no bad
// image); bad images fail the batch with 422 naming the sample and the
// flag, or with skip are left out and named (Brand-Missing-Keys and
// -Samples, the batch's samples counted, not cached). (What becomes of
// each bad image in each mode, and of a tensor over the bound:
// internal/batch/tensorize' TestBadImages and TestTensorOverTheBound; the tensors
// of odd images, TestOddImages.)
func TestTransformStatuses(t *testing.T) {
	read := func(name string) []byte {
		b, err := os.ReadFile(filepath.Join("..", "transform", "testdata", name))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	var wide bytes.Buffer
	if err := png.Encode(&wide, image.NewGray(image.Rect(0, 0, 100000, 1))); err != nil {
		t.Fatal(err)
	}
	small := smallPhotos(t)
	files := []struct {
		ext  string
		data []byte
	}{{"jpg", read("garbage.jpg")}, {"jpg", read("truncated.jpg")}, {"jpg", read("bomb.jpg")}, {"png", wide.Bytes()}}
	f := newImageFixture(t, 1, 6, func(id int) (string, []byte) {
		if id < len(files) {
			return files[id].ext, files[id].data
		}
		return small(id)
	})
	resize, err := transform.ParseConfig([]byte(`{"pipelines": {"resize": {"ops": [{"op": "resize", "size": 256}]}}}`))
	if err != nil {
		t.Fatal(err)
	}
	gateways := map[bool]string{} // by skip
	for _, skip := range []bool{false, true} {
		_, gateways[skip] = startTransforms(t, f, func(c *gateway.Config) {
			c.Transforms.Pipelines["resize"] = resize.Pipelines["resize"]
			if skip {
				c.OnBadImage = gateway.OnDamagedSkip
			}
		})
	}
	names := "imagenet-eval, imagenet-train, plain, resize, tiny, upright"
	if _, cuts := transform.Builtins()[transform.ImagenetTrainGPU]; cuts {
		names = "imagenet-eval, imagenet-train, imagenet-train-gpu, plain, resize, tiny, upright"
	}
	bad := "class0/sample00000,class1/sample00001,class2/sample00002"
	for _, tc := range []struct {
		skip   bool
		path   string
		status int
		says   []string
		header map[string]string
	}{
		{true, "/epoch/0/batch/0?transform=resnet-train", 400, []string{names}, nil},
		{true, "/epoch/0?transform=resnet-train", 400, []string{names}, nil},
		{true, "/epoch/0/batch/0/manifest?transform=resnet-train", 400, []string{names}, nil},
		{true, "/epoch/0/batch/0?transform=Resnet!", 400, []string{"pipeline's name"}, nil},
		{true, "/epoch/0/batch/0?batch_size=6&transform=resize", 400, []string{"--max-batch-bytes", "class0/sample00003"}, nil},
		{false, "/epoch/0/batch/0?batch_size=6&transform=upright", 422, []string{"sample \\\"class", "--on-bad-image=skip"}, nil},
		{true, "/epoch/0/batch/0?batch_size=6&transform=upright", 200, nil, map[string]string{api.HeaderMissingSamples: "3",
			api.HeaderBatchSamples: "3", "Cache-Control": "no-store", api.HeaderMissingKeys: bad}},
	} {
		resp, body := get(t, gateways[tc.skip]+tc.path)
		if resp.StatusCode != tc.status {
			t.Errorf("%s (skip %t): %s %.300s; want %d", tc.path, tc.skip, resp.Status, body, tc.status)
		}
		for _, says := range tc.says {
			if !strings.Contains(string(body), says) {
				t.Errorf("%s (skip %t): %.300s; want it saying %q", tc.path, tc.skip, body, says)
			}
		}
		for h, want := range tc.header {
			got := strings.Split(resp.Header.Get(h), ",")
			if slices.Sort(got); strings.Join(got, ",") != want {
				t.Errorf("%s (skip %t): %s %q, want %q", tc.path, tc.skip, h, resp.Header.Get(h), want)
			}
		}
		if tc.status == 200 && len(tensorsOf(t, body)) != 3 {
			t.Errorf("%s (skip %t): %d samples, want 3", tc.path, tc.skip, len(tensorsOf(t, body)))
		}
	}
}

// TestGPUCutBatches: transform=imagenet-train-gpu, in a build that cuts,
// serves each JPEG as its cut (….cut, a JPEG) and what is left to do
// (….cut.json, to 224×224), the labels as stored; the pure-Go build
// answers 400 naming the build tag (transform.ErrNeedsTurboJPEG). (The
// boxes and flips, imagenet-train's; the fallback to tensors and the
// room: internal/batch/tensorize's TestApplyCutsForGPU.)
func TestGPUCutBatches(t *testing.T) {
	f := newImageFixture(t, 2, 8, smallPhotos(t))
	_, base := startTransforms(t, f, nil)
	resp, body := get(t, base+"/epoch/1/batch/0?seed=7&batch_size=8&transform=imagenet-train-gpu")
	if _, cuts := transform.Builtins()[transform.ImagenetTrainGPU]; !cuts {
		if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(body), "brand_turbojpeg") {
			t.Errorf("the pure-Go build: %s %s", resp.Status, body)
		}
		return
	}
	if resp.StatusCode != http.StatusOK || resp.Header.Get(api.HeaderTransform) != transform.ImagenetTrainGPU {
		t.Fatalf("%s %.300s", resp.Status, body)
	}
	got := tensorsOf(t, body)
	if len(got) != 8 {
		t.Fatalf("%d samples", len(got))
	}
	for key, files := range got {
		var box struct {
			Size [2]int `json:"size"`
		}
		if err := json.Unmarshal(files["cut.json"], &box); err != nil || box.Size != [2]int{224, 224} ||
			!bytes.HasPrefix(files["cut"], []byte{0xff, 0xd8, 0xff}) || string(files["cls"]) != fmt.Sprint(f.ids[key]%3) {
			t.Errorf("%s: members %v, box %s, %v", key, slices.Sorted(maps.Keys(files)), files["cut.json"], err)
		}
	}
}

// TestPlanTransform: /plan with transform=NAME&images_per_sec=R answers
// from this node's costs of the pipeline: a calibration on generated
// photos, with its workers, until the node has transformed enough images,
// its own measure after; an unknown pipeline is 400 naming those defined.
// (What the answer makes of the costs: planner's TestForGatewayTransform;
// the calibration: internal/batch/tensorize' TestCalibrate.)
func TestPlanTransform(t *testing.T) {
	f := newImageFixture(t, 4, 32, smallPhotos(t))
	// A few photos calibrate as well as 40 for what is checked here, in a
	// tenth of the time (under the race detector the default's took most
	// of the test's 32 s).
	_, base := startTransforms(t, f, func(c *gateway.Config) { c.TransformCalibration = 4 })
	plan := func() planner.TransformPlan {
		resp, body := get(t, base+"/plan?transform=tiny&images_per_sec=1000&seed=1&batch_size=16&cache_size=200KiB")
		var p struct {
			Transform *planner.TransformPlan `json:"transform"`
		}
		if err := json.Unmarshal(body, &p); err != nil || resp.StatusCode != http.StatusOK || p.Transform == nil {
			t.Fatalf("/plan: %s %v: %s", resp.Status, err, body)
		}
		return *p.Transform
	}
	if tp := plan(); tp.Measured || tp.Pipeline != "tiny" || tp.CPUPerImageMs <= 0 || tp.Workers != 2 || tp.DecodedCache == nil {
		t.Errorf("calibrated: %+v", tp)
	}
	readRank(t, base, "seed=1&batch_size=32&transform=tiny", 0, 4)
	if tp := plan(); !tp.Measured {
		t.Errorf("after 128 images: %+v", tp)
	}
	resp, body := get(t, base+"/plan?transform=nope&images_per_sec=10")
	if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(body), "imagenet-train") {
		t.Errorf("an unknown pipeline: %s %s", resp.Status, body)
	}
}
