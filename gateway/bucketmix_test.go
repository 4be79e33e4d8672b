package gateway_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"

	"github.com/brandgw/brand/api"
	"github.com/brandgw/brand/dataset"
	"github.com/brandgw/brand/gateway"
	"github.com/brandgw/brand/transform"
)

// bucketMixQuery is a bucketed mixture of two image datasets, each its
// own list (photos' of three aspect ratios, wide's of two).
var bucketMixQuery = "seed=5&mix=photos:0.4,wide:0.6&budget=2048&flip=0.5&buckets=" +
	url.QueryEscape("photos:32x32,24x48,48x24;wide:32x32,24x48")

// TestBucketedMixtureBatches: over HTTP, a bucketed mixture's /epoch/N
// names each source's buckets; every batch is one bucket of one source
// (Brand-Mix-Components, Brand-Transform), its images the bucket
// pipeline's tensors of that source's images under their keys in the
// source's pass, and the sources' steps keep their weights within one
// step; /plan names the same steps. The mixture's rules are
// internal/batch/units/buckets's TestBucketedMixture.
func TestBucketedMixtureBatches(t *testing.T) {
	fx := map[string]*imageFixture{"photos": newImageFixture(t, 4, 20, bucketPhotos(t)), "wide": newImageFixture(t, 3, 20, bucketPhotos(t))}
	var specs []gateway.DatasetSpec
	for _, name := range []string{"photos", "wide"} {
		f := fx[name]
		if _, err := dataset.WriteSizes(context.Background(), f.store, f.index, 0, 2); err != nil {
			t.Fatal(err)
		}
		specs = append(specs, gateway.DatasetSpec{Name: name, URL: "file:///" + name, Store: f.store})
	}
	_, srv := start(t, nil, func(c *gateway.Config) {
		c.Datasets = specs
		c.Transforms = testTransforms(t)
		c.TransformWorkers = 2
	})
	base := srv.URL
	resp, body := get(t, base+"/epoch/0?"+bucketMixQuery)
	var info api.EpochInfo
	if resp.StatusCode != http.StatusOK || json.Unmarshal(body, &info) != nil || info.Mix == nil || len(info.Mix.Components) != 2 {
		t.Fatalf("/epoch/0: %s %s", resp.Status, body)
	}
	for i, c := range info.Mix.Components {
		if c.Buckets == nil || len(c.Buckets.Buckets) != []int{3, 2}[i] {
			t.Fatalf("/epoch/0's source %s: %+v", c.Dataset, c.Buckets)
		}
	}
	names := []string{"photos", "wide"}
	count := [2]int{}
	for m := range info.Batches {
		resp, body := get(t, fmt.Sprintf("%s/epoch/0/batch/%d?%s", base, m, bucketMixQuery))
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("batch %d: %s %s", m, resp.Status, body)
		}
		comps := strings.Split(resp.Header.Get(api.HeaderMixComponents), ",")
		comp, err := strconv.Atoi(comps[0])
		if err != nil {
			t.Fatalf("batch %d: %s %q", m, api.HeaderMixComponents, comps)
		}
		name := resp.Header.Get(api.HeaderTransform)
		if _, err := transform.BucketSpec(name); err != nil {
			t.Fatalf("batch %d: Brand-Transform %q: %v", m, name, err)
		}
		samples := readTar(t, body)
		if len(samples) != len(comps) || len(samples) == 0 {
			t.Fatalf("batch %d: %d samples, components %v", m, len(samples), comps)
		}
		f := fx[names[comp]]
		for i, s := range samples {
			if comps[i] != comps[0] {
				t.Fatalf("batch %d: components %v", m, comps)
			}
			// Its source's pass: a step of epoch 0 of the mixture reads
			// pass 0 or 1 of a source (the weightier one's passes run
			// out first).
			ok := false
			for pass := range uint64(3) {
				if string(s.files["npy"]) == string(f.wantBucketOf(t, name, names[comp], 5, pass, s.key)) {
					ok = true
				}
			}
			if !ok {
				t.Fatalf("batch %d sample %s of %s: not the bucket pipeline's tensor of its image", m, s.key, names[comp])
			}
		}
		count[comp]++
		for c, w := range []float64{0.4, 0.6} {
			if d := float64(count[c]) - w*float64(m+1); d <= -1 || d >= 1 {
				t.Fatalf("after %d steps source %s has %d, its share %.1f", m+1, names[c], count[c], w*float64(m+1))
			}
		}
	}
	resp, body = get(t, base+"/plan?"+bucketMixQuery+"&epochs=2")
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("/plan: %s %s", resp.Status, body)
	}
	var plan struct {
		Epochs []api.PlanEpoch `json:"epochs"`
		Mix    []struct {
			Steps   int `json:"steps"`
			Sources []struct {
				Dataset string `json:"dataset"`
				Steps   int    `json:"steps"`
				Buckets []struct {
					Steps, Samples int
					Bytes          int64
					Fill           float64
				} `json:"buckets"`
			} `json:"sources"`
		} `json:"bucketed_mixture"`
		Simulation struct {
			Policy struct {
				StoreReads int `json:"store_reads"`
			} `json:"policy"`
		} `json:"simulation"`
	}
	if err := json.Unmarshal(body, &plan); err != nil || len(plan.Epochs) != 2 || plan.Epochs[0].Batches != info.Batches || len(plan.Mix) != 2 {
		t.Fatalf("/plan: %s (epoch 0 has %d steps): %v", body, info.Batches, err)
	}
	for c, src := range plan.Mix[0].Sources {
		steps := 0
		for _, b := range src.Buckets {
			steps += b.Steps
			if b.Samples == 0 || b.Bytes == 0 || !(b.Fill > 0 && b.Fill <= 1) {
				t.Errorf("/plan's epoch 0, source %s: a bucket of %+v", src.Dataset, b)
			}
		}
		if src.Dataset != names[c] || src.Steps != count[c] || steps != count[c] {
			t.Errorf("/plan's epoch 0: source %s of %d steps (%d by bucket); served %d", src.Dataset, src.Steps, steps, count[c])
		}
	}
	if plan.Simulation.Policy.StoreReads != 7 {
		t.Errorf("/plan reads %d chunks from the store in two epochs under the gateway's policy; the sources have 7 chunks, each read once: %s", plan.Simulation.Policy.StoreReads, body)
	}
}

// wantBucketOf is wantBucket of key's image in the pass pass of a job
// seeded seed over dataset ds.
func (f *imageFixture) wantBucketOf(t testing.TB, name, ds string, seed, pass uint64, key string) []byte {
	t.Helper()
	set, err := transform.NewSet(transform.Config{}, transform.Options{})
	if err != nil {
		t.Fatal(err)
	}
	p, err := set.Get(name)
	if err != nil {
		t.Fatal(err)
	}
	res, err := p.Apply(nil, f.images[key], transform.SampleKey(seed, ds, pass, uint64(f.ids[key])), nil)
	if err != nil {
		t.Fatalf("%s: %v", key, err)
	}
	return res.Out
}
