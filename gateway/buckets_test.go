package gateway_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/brandgw/brand/api"
	"github.com/brandgw/brand/bucket"
	"github.com/brandgw/brand/dataset"
	"github.com/brandgw/brand/internal/gen/photos"
	"github.com/brandgw/brand/transform"
)

// bucketPhotos are JPEGs of five aspect ratios, 30 to 90 pixels a side,
// every ninth 10 pixels a side (too small for any bucket).
func bucketPhotos(t testing.TB) func(int) (string, []byte) {
	return func(id int) (string, []byte) {
		sides := [][2]int{{60, 60}, {90, 45}, {45, 90}, {80, 60}, {50, 70}}
		s := sides[id%len(sides)]
		if id%9 == 8 {
			s = [2]int{10, 10}
		}
		p, err := photos.Sized(4, id, s[0]+id%5, s[1]+id%3, 90)
		if err != nil {
			t.Fatal(err)
		}
		return "jpg", p.JPEG
	}
}

const bucketQuery = "seed=5&buckets=32x32,24x48,48x24&budget=2048&flip=0.5"

// TestBucketBatches: over HTTP, a bucket job's epoch names its buckets,
// each batch is one bucket's images as CHW tensors of its shape, each the
// bucket pipeline's of the image under the sample's key, named by
// Brand-Transform, with each image's size and crop in
// Brand-Bucket-Geometry; the bucket semantics themselves are
// internal/batch/units/buckets's and package bucket's tests.
func TestBucketBatches(t *testing.T) {
	f := newImageFixture(t, 4, 20, bucketPhotos(t))
	_, base := startTransforms(t, f, nil)
	resp, body := get(t, base+"/epoch/0?"+bucketQuery)
	if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(body), "brand index --sizes") {
		t.Fatalf("a bucket job over a dataset without sizes: %s %s", resp.Status, body)
	}
	if _, err := dataset.WriteSizes(context.Background(), f.store, f.index, 0, 2); err != nil {
		t.Fatal(err)
	}
	_, base = startTransforms(t, f, nil)
	resp, body = get(t, base+"/epoch/0?"+bucketQuery)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("/epoch/0: %s %s", resp.Status, body)
	}
	var info api.EpochInfo
	if err := json.Unmarshal(body, &info); err != nil || info.Buckets == nil {
		t.Fatalf("/epoch/0: %s: %v", body, err)
	}
	if bi := info.Buckets; len(bi.Buckets) != 3 || bi.TooSmall != 8 || bi.Budget != 2048 || info.Batches == 0 {
		t.Fatalf("/epoch/0's buckets: %+v", bi)
	}
	shapes, _ := bucket.Parse("32x32,24x48,48x24")
	served := 0
	for m := range info.Batches {
		resp, body := get(t, fmt.Sprintf("%s/epoch/0/batch/%d?%s", base, m, bucketQuery))
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("batch %d: %s %s", m, resp.Status, body)
		}
		name := resp.Header.Get(api.HeaderTransform)
		spec, err := transform.BucketSpec(name)
		if err != nil {
			t.Fatalf("batch %d: Brand-Transform %q: %v", m, name, err)
		}
		h, w := spec.Ops[0].Size.H, spec.Ops[0].Size.W
		geo := strings.Split(resp.Header.Get(api.HeaderBucketGeometry), ";")
		samples := readTar(t, body)
		if len(samples) != len(geo) || len(samples) == 0 {
			t.Fatalf("batch %d: %d samples, geometry of %d", m, len(samples), len(geo))
		}
		for i, s := range samples {
			npy := s.files["npy"]
			if npy == nil {
				t.Fatalf("batch %d sample %s: members %v", m, s.key, keysOf(s.files))
			}
			if want := f.wantBucket(t, name, 5, 0, s.key); string(npy) != string(want) {
				t.Fatalf("batch %d sample %s: not the bucket pipeline's tensor", m, s.key)
			}
			var gw, gh, left, top, flip int
			if _, err := fmt.Sscanf(geo[i], "%d,%d,%d,%d,%d", &gw, &gh, &left, &top, &flip); err != nil {
				t.Fatalf("geometry %q: %v", geo[i], err)
			}
			sh := shapes[bucket.Nearest(gw, gh, shapes)]
			_, _, wl, wt := bucket.Crop(gw, gh, sh)
			if sh.H != h || sh.W != w || wl != left || wt != top || flip > 1 {
				t.Fatalf("batch %d sample %s: geometry %q in bucket %dx%d", m, s.key, geo[i], h, w)
			}
		}
		served += len(samples)
	}
	if served == 0 || served > 80-8 {
		t.Errorf("%d images served of the 72 that fit", served)
	}
	// /plan is what the epochs serve: their steps and buckets.
	resp, body = get(t, base+"/plan?"+bucketQuery+"&epochs=2")
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("/plan: %s %s", resp.Status, body)
	}
	var plan struct {
		Buckets         []api.BucketPlanEpoch `json:"buckets"`
		Epochs          []api.PlanEpoch       `json:"epochs"`
		BatchesPerEpoch int                   `json:"batches_per_epoch"`
	}
	if err := json.Unmarshal(body, &plan); err != nil || len(plan.Buckets) != 2 || len(plan.Epochs) != 2 {
		t.Fatalf("/plan: %s: %v", body, err)
	}
	for e := range 2 {
		_, body := get(t, fmt.Sprintf("%s/epoch/%d?%s", base, e, bucketQuery))
		var in api.EpochInfo
		if err := json.Unmarshal(body, &in); err != nil {
			t.Fatal(err)
		}
		got, _ := json.Marshal(plan.Buckets[e].BucketsInfo)
		want, _ := json.Marshal(in.Buckets)
		if string(got) != string(want) || plan.Epochs[e].Batches != in.Batches || plan.Buckets[e].Steps != in.Batches {
			t.Errorf("/plan's epoch %d: %s, %+v; /epoch/%d: %s, %d steps", e, got, plan.Epochs[e], e, want, in.Batches)
		}
	}
	if plan.BatchesPerEpoch != info.Batches {
		t.Errorf("/plan's batches_per_epoch %d, /epoch/0's %d", plan.BatchesPerEpoch, info.Batches)
	}
	// crop=random: each image cut at its drawn box, which the geometry
	// names, within the image resized to cover its bucket.
	for m := range min(info.Batches, 4) {
		resp, body := get(t, fmt.Sprintf("%s/epoch/0/batch/%d?%s&crop=random", base, m, bucketQuery))
		name := resp.Header.Get(api.HeaderTransform)
		if resp.StatusCode != http.StatusOK || !strings.Contains(name, ":crop=random") {
			t.Fatalf("crop=random, batch %d: %s %q %s", m, resp.Status, name, body)
		}
		spec, _ := transform.BucketSpec(name)
		h, w := spec.Ops[0].Size.H, spec.Ops[0].Size.W
		geo := strings.Split(resp.Header.Get(api.HeaderBucketGeometry), ";")
		for i, smp := range readTar(t, body) {
			if want := f.wantBucket(t, name, 5, 0, smp.key); string(smp.files["npy"]) != string(want) {
				t.Fatalf("crop=random, batch %d sample %s: not the bucket pipeline's tensor", m, smp.key)
			}
			var gw, gh, left, top, flip int
			fmt.Sscanf(geo[i], "%d,%d,%d,%d,%d", &gw, &gh, &left, &top, &flip)
			nw, nh, _, _ := bucket.Crop(gw, gh, bucket.Shape{H: h, W: w})
			if left < 0 || top < 0 || left+w > nw || top+h > nh {
				t.Fatalf("crop=random, batch %d sample %s: geometry %q outside the %dx%d cover", m, smp.key, geo[i], nw, nh)
			}
		}
	}
	resp, body = get(t, base+"/epoch/0/batch/0?"+bucketQuery+"&batch_size=4")
	if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(body), "resume=WORLD:STEPS") {
		t.Errorf("batch_size= beside buckets=: %s %s", resp.Status, body)
	}
}

func keysOf(m map[string][]byte) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

// wantBucket is the bucket pipeline name's tensor of key's image in an
// epoch of a job seeded seed over the dataset "test".
func (f *imageFixture) wantBucket(t testing.TB, name string, seed, epoch uint64, key string) []byte {
	t.Helper()
	set, err := transform.NewSet(transform.Config{}, transform.Options{})
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

// TestBucketRefusals: a bucket job the gateway cannot serve as asked is
// refused, saying why. The reproductions: a budget that holds more images
// a rank than a batch may was cut to 2^20 silently; small=fail named a
// sample's number, not its key; a budget larger than the data answered
// 200 with 0 steps and no word; a clip bucket list over a tree of images
// answered 501 "built without libav" before saying it is no tree of
// videos.
func TestBucketRefusals(t *testing.T) {
	f := newImageFixture(t, 4, 20, bucketPhotos(t))
	if _, err := dataset.WriteSizes(context.Background(), f.store, f.index, 0, 2); err != nil {
		t.Fatal(err)
	}
	_, base := startTransforms(t, f, nil)
	for _, c := range []struct {
		name, query string
		status      int
		says        string
	}{
		{"more than a batch holds", "buckets=8x8&budget=" + fmt.Sprint(8*8*70000), http.StatusBadRequest, "over the most a batch holds (the server's --max-batch-size, 65536)"},
		{"small=fail names the key", "buckets=32x32,24x48,48x24&budget=2048&small=fail", http.StatusUnprocessableEntity, "(the first: "},
		{"a budget larger than the data", "buckets=32x32&budget=" + fmt.Sprint(32*32*100), http.StatusUnprocessableEntity, "has no step: bucket 32x32 holds"},
		{"clip buckets over images", "buckets=16x16x8&budget=4096", http.StatusBadRequest, "clip jobs read a video dataset"},
	} {
		t.Run(c.name, func(t *testing.T) {
			resp, body := get(t, base+"/epoch/0?seed=5&"+c.query)
			if resp.StatusCode != c.status || !strings.Contains(string(body), c.says) {
				t.Fatalf("%s: %s %s; want %d saying %q", c.query, resp.Status, body, c.status, c.says)
			}
			if strings.Contains(c.query, "small=fail") {
				// The first too small is one of the 10-pixel images (every
				// ninth), named by its key.
				named := false
				for id := 8; id < f.index.NumSamples(); id += 9 {
					named = named || strings.Contains(string(body), "(the first: "+f.index.SampleKey(id)+")")
				}
				if !named {
					t.Fatalf("small=fail: %s names no too small image's key", body)
				}
			}
		})
	}
}

// TestBucketEdits: a named bucket job's exclusion over HTTP (POST
// /jobs/{job}/exclude) cuts its pass at the stated step: a step served
// is refused (409, naming the first editable step), the steps before the
// edit's keep their bytes and ETags, none after it serves an excluded
// image, no image is served twice in the epoch, /epoch/N and /plan count
// the edited steps, and the next epoch serves none of them. The rule of
// the cut itself (the pass's images left stepped afresh, appends joining
// them) is internal/batch/units/buckets's TestEditsCutAtStep.
func TestBucketEdits(t *testing.T) {
	f := newImageFixture(t, 4, 20, bucketPhotos(t))
	if _, err := dataset.WriteSizes(context.Background(), f.store, f.index, 0, 2); err != nil {
		t.Fatal(err)
	}
	_, base := startTransforms(t, f, nil)
	job := "dataset=test&seed=5&buckets=32x32,24x48,48x24&budget=2048&world=2&job=gen"
	type served struct {
		keys   []string
		etags  [2]string
		bodies [2][]byte
	}
	read := func(epoch int) []served {
		t.Helper()
		var info api.EpochInfo
		if resp, body := get(t, fmt.Sprintf("%s/epoch/%d?%s", base, epoch, job)); resp.StatusCode != http.StatusOK || json.Unmarshal(body, &info) != nil {
			t.Fatalf("/epoch/%d: %s %s", epoch, resp.Status, body)
		}
		var out []served
		for m := range info.Batches {
			var s served
			for r := range 2 {
				resp, body := get(t, fmt.Sprintf("%s/epoch/%d/batch/%d?rank=%d&%s", base, epoch, m, r, job))
				if resp.StatusCode != http.StatusOK {
					t.Fatalf("epoch %d step %d rank %d: %s %s", epoch, m, r, resp.Status, body)
				}
				s.etags[r], s.bodies[r] = resp.Header.Get("ETag"), body
				for _, smp := range readTar(t, body) {
					s.keys = append(s.keys, smp.key)
				}
			}
			out = append(out, s)
		}
		return out
	}
	before := read(0)
	if len(before) < 12 {
		t.Fatalf("epoch 0 has %d steps; the test wants 12 or more", len(before))
	}
	// Excluded: images of steps after the cut, and two served before it.
	const cut = 5
	keys := []string{before[0].keys[0], before[3].keys[0]}
	for _, s := range before[cut+1:] {
		keys = append(keys, s.keys[0])
	}
	gone := map[string]bool{}
	for _, k := range keys {
		gone[k] = true
	}
	body, _ := json.Marshal(map[string]any{"from_step": 2, "keys": keys})
	resp, b := do(t, http.MethodPost, base+"/jobs/gen/exclude?"+job, body)
	var e api.Error
	if resp.StatusCode != http.StatusConflict || json.Unmarshal(b, &e) != nil || e.FirstEditableStep == nil || *e.FirstEditableStep != uint64(len(before)) {
		t.Fatalf("an exclusion from a step served: %s %s; want 409 naming step %d", resp.Status, b, len(before))
	}
	// The job restarted (the gateway anew, no step served), excluded
	// from step 5.
	_, base = startTransforms(t, f, nil)
	body, _ = json.Marshal(map[string]any{"from_step": cut, "keys": keys})
	resp, b = do(t, http.MethodPost, base+"/jobs/gen/exclude?"+job, body)
	var x api.StoredExclusion
	if resp.StatusCode != http.StatusCreated || json.Unmarshal(b, &x) != nil || x.PassStep == nil || *x.PassStep != cut || x.Epoch != 0 || x.FromPosition != 2*cut || x.Samples != len(keys) {
		t.Fatalf("the exclusion: %s %s; want 201 from step %d of epoch 0's pass, its items from %d", resp.Status, b, cut, 2*cut)
	}
	after := read(0)
	seen := map[string]bool{}
	for m, s := range after {
		if m < cut && (s.etags != before[m].etags || !bytes.Equal(s.bodies[0], before[m].bodies[0]) || !bytes.Equal(s.bodies[1], before[m].bodies[1])) {
			t.Fatalf("step %d, before the exclusion's step %d, changed: ETags %v, were %v", m, cut, s.etags, before[m].etags)
		}
		for _, k := range s.keys {
			if seen[k] {
				t.Fatalf("%s served twice in epoch 0 (again at step %d)", k, m)
			}
			seen[k] = true
			if m >= cut && gone[k] {
				t.Fatalf("%s, excluded from step %d, served at step %d", k, cut, m)
			}
		}
	}
	if len(after) >= len(before) {
		t.Fatalf("the exclusion of %d images left %d steps of %d", len(keys), len(after), len(before))
	}
	for m, s := range read(1) {
		for _, k := range s.keys {
			if gone[k] {
				t.Fatalf("%s, excluded, served at step %d of epoch 1", k, m)
			}
		}
	}
	// /plan is what the edited epochs serve.
	resp, b = get(t, base+"/plan?"+job+"&epochs=2")
	var plan struct {
		Buckets []api.BucketPlanEpoch `json:"buckets"`
	}
	if resp.StatusCode != http.StatusOK || json.Unmarshal(b, &plan) != nil || len(plan.Buckets) != 2 || plan.Buckets[0].Steps != len(after) {
		t.Fatalf("/plan of the edited job: %s %s; want epoch 0's %d steps", resp.Status, b, len(after))
	}
}
