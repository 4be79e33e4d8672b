package client_test

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/brandgw/brand/api"
	"github.com/brandgw/brand/client"
	"github.com/brandgw/brand/dataset"
	"github.com/brandgw/brand/gateway"
	"github.com/brandgw/brand/internal/gen/photos"
	"github.com/brandgw/brand/s3backend"
	"github.com/brandgw/brand/shuffle"
	"github.com/brandgw/brand/transform"
)

// tensorGateway serves datasets a and b, both the same 16 photos of 40
// to 70 pixels a side (keys s00 to s15, each with a .cls member), through
// the pipeline tiny (a random crop to 6×8 and a flip). want is the tensor
// tiny makes of sample key of dataset ds in a job seeded seed, in pass
// pass of the dataset (transform.SampleKey), computed here from the image.
func tensorGateway(t *testing.T) (url string, want func(seed uint64, ds, key string, pass uint64) []byte) {
	t.Helper()
	src := t.TempDir()
	images := map[string][]byte{}
	for i := range 16 {
		p, err := photos.Sized(3, i, 40+i%31, 70-i%29, 90)
		if err != nil {
			t.Fatal(err)
		}
		key := fmt.Sprintf("s%02d", i)
		images[key] = p.JPEG
		for ext, b := range map[string][]byte{"jpg": p.JPEG, "cls": []byte(fmt.Sprint(i % 3))} {
			if err := os.WriteFile(filepath.Join(src, key+"."+ext), b, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	store, err := s3backend.NewLocal(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	res, err := dataset.Pack(context.Background(), src, store, dataset.PackOptions{ChunkSize: 8 << 10})
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := transform.ParseConfig([]byte(`{"pipelines": {"tiny": {"ops": [{"op": "random_resized_crop", "size": [6, 8]}, {"op": "hflip"}]}}}`))
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(loadedGateway(t, gateway.Config{Datasets: []gateway.DatasetSpec{{Name: "a", URL: "file:///a", Store: store},
		{Name: "b", URL: "file:///b", Store: store}}, CacheSize: 1 << 20, Transforms: cfg, TransformWorkers: 2, NoPrefault: true, IndexPoll: -1}))
	t.Cleanup(srv.Close)
	set, err := transform.NewSet(cfg, transform.Options{})
	if err != nil {
		t.Fatal(err)
	}
	tiny, err := set.Get("tiny")
	if err != nil {
		t.Fatal(err)
	}
	return srv.URL, func(seed uint64, ds, key string, pass uint64) []byte {
		id, ok, err := res.Index.Lookup(context.Background(), key)
		if err != nil || !ok {
			t.Fatalf("no sample %s: %v", key, err)
		}
		r, err := tiny.Apply(nil, images[key], transform.SampleKey(seed, ds, pass, uint64(id)), nil)
		if err != nil {
			t.Fatal(err)
		}
		return r.Out
	}
}

// cls is the .cls member tensorGateway's sample key holds.
func cls(key string) string {
	var i int
	fmt.Sscanf(key, "s%d", &i)
	return fmt.Sprint(i % 3)
}

// TestTensors: a job naming a pipeline (api.Job.Transform) reads its
// batches through it: each batch says so (Brand-Transform, Batch.Transform),
// and each sample's .npy member, read in place with ParseNPY, is a uint8
// tensor of the pipeline's shape, the pipeline's tensor of the sample's
// image under the sample's key; its other members are as stored.
func TestTensors(t *testing.T) {
	url, want := tensorGateway(t)
	c, err := client.New(url, client.Options{Job: api.Job{Dataset: "a", Transform: "tiny", Params: shuffle.Params{Seed: 2, BatchSize: 5}}})
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for b, err := range c.Epoch(context.Background(), 1) {
		if err != nil {
			t.Fatal(err)
		}
		if b.Transform != "tiny" {
			t.Errorf("batch %d: Transform %q", b.Index, b.Transform)
		}
		for _, s := range b.Samples {
			tn, err := client.ParseNPY(s.Files["npy"])
			if err != nil || tn.DType != "|u1" || !slices.Equal(tn.Shape, []int{3, 6, 8}) {
				t.Fatalf("%s: %+v %v", s.Key, tn, err)
			}
			if !bytes.Equal(s.Files["npy"], want(2, "a", s.Key, 1)) {
				t.Errorf("%s: tensor differs from the pipeline's under the sample's key", s.Key)
			}
			if _, ok := s.Files["jpg"]; ok || string(s.Files["cls"]) != cls(s.Key) {
				t.Errorf("%s: members %v", s.Key, slices.Sorted(maps.Keys(s.Files)))
			}
			n++
		}
		b.Release()
	}
	if n != 16 {
		t.Errorf("%d samples in the epoch", n)
	}
}

// TestMixtureTensorsOfOneKey: a transformed mixture batch in which two
// adjacent samples share a key (a's and b's, or two passes of a's) is read
// as its samples, each its component's tensor of some pass: grouping by
// key alone merges them, and the manifest's lengths, which would cut them
// apart, are the stored samples', not the tensors'.
func TestMixtureTensorsOfOneKey(t *testing.T) {
	url, want := tensorGateway(t)
	c, err := client.New(url, client.Options{Job: api.Job{Transform: "tiny", Mix: api.Mix{{Dataset: "a", Weight: "3"}, {Dataset: "b", Weight: "1"}},
		MixSamples: 64, Params: shuffle.Params{Seed: 4, BatchSize: 16}}})
	if err != nil {
		t.Fatal(err)
	}
	for epoch := range 20 {
		for m := range 4 {
			man, err := c.Manifest(context.Background(), epoch, m)
			if err != nil {
				t.Fatal(err)
			}
			adjacent := false
			for i := 1; i < len(man.Samples); i++ {
				adjacent = adjacent || man.Samples[i].Key == man.Samples[i-1].Key
			}
			if !adjacent {
				continue
			}
			b, err := c.Batch(context.Background(), epoch, m)
			if err != nil {
				t.Fatalf("epoch %d batch %d: %v", epoch, m, err)
			}
			defer b.Release()
			if len(b.Samples) != 16 {
				t.Fatalf("epoch %d batch %d: %d samples", epoch, m, len(b.Samples))
			}
			for _, s := range b.Samples {
				if !slices.ContainsFunc([]uint64{0, 1, 2}, func(pass uint64) bool { return bytes.Equal(s.Files["npy"], want(4, s.Dataset, s.Key, pass)) }) {
					t.Errorf("epoch %d batch %d: %s of %s is not its tensor", epoch, m, s.Key, s.Dataset)
				}
			}
			return
		}
	}
	t.Fatal("no batch with two adjacent samples of one key")
}
