package client_test

import (
	"context"
	"errors"
	"fmt"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/brandgw/brand/api"
	"github.com/brandgw/brand/client"
	"github.com/brandgw/brand/dataset"
	"github.com/brandgw/brand/gateway"
	"github.com/brandgw/brand/internal/gen/photos"
	"github.com/brandgw/brand/internal/job/features"
	"github.com/brandgw/brand/s3backend"
	"github.com/brandgw/brand/shuffle"
)

// bucketMixGateway serves two datasets of photos of five aspect ratios,
// photos (60) and wide (40), packed with their image sizes.
func bucketMixGateway(t *testing.T) string {
	t.Helper()
	var specs []gateway.DatasetSpec
	for _, d := range []struct {
		name string
		n    int
	}{{"photos", 60}, {"wide", 40}} {
		src := t.TempDir()
		for i := range d.n {
			sides := [][2]int{{60, 60}, {90, 45}, {45, 90}, {80, 60}, {50, 70}}
			s := sides[i%len(sides)]
			p, err := photos.Sized(4, i, s[0]+i%5, s[1]+i%3, 90)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(src, fmt.Sprintf("s%03d.jpg", i)), p.JPEG, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		store, err := s3backend.NewLocal(t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		res, err := dataset.Pack(context.Background(), src, store, dataset.PackOptions{ChunkSize: 16 << 10})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := dataset.WriteSizes(context.Background(), store, res.Index, 0, 2); err != nil {
			t.Fatal(err)
		}
		specs = append(specs, gateway.DatasetSpec{Name: d.name, URL: "file:///" + d.name, Store: store})
	}
	srv := httptest.NewServer(loadedGateway(t, gateway.Config{Datasets: specs, CacheSize: 4 << 20, TransformWorkers: 2, NoPrefault: true, IndexPoll: -1}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// TestBucketedMixture: the Go client reads a bucketed mixture (mix=,
// each source's list, a staged budget) as any job, every rank's batch of
// a step one source's (Sample.Dataset), of equal steps; and refuses what
// the table refuses with it before any request, in the table's words.
func TestBucketedMixture(t *testing.T) {
	url := bucketMixGateway(t)
	mix, err := api.ParseMix("photos:0.4,wide:0.6")
	if err != nil {
		t.Fatal(err)
	}
	job := api.Job{Mix: mix, Params: shuffle.Params{Seed: 3, World: 2, Window: 2},
		Buckets: api.Buckets{Shapes: "photos:32x32,24x48,48x24;wide:32x32,24x48", PixelStages: "0@2048|5@3072"}}
	var steps [2][]string
	for rank := range 2 {
		j := job
		j.Rank = rank
		c := newMixClient(t, url, client.Options{Job: j})
		for b, err := range c.Epoch(context.Background(), 0) {
			if err != nil {
				t.Fatalf("rank %d: %v", rank, err)
			}
			src := ""
			for _, s := range b.Samples {
				if src != "" && s.Dataset != src || s.Dataset == "" {
					t.Fatalf("rank %d batch %d: samples of %q and %q", rank, b.Index, src, s.Dataset)
				}
				src = s.Dataset
			}
			steps[rank] = append(steps[rank], src)
		}
	}
	if len(steps[0]) < 6 || fmt.Sprint(steps[0]) != fmt.Sprint(steps[1]) {
		t.Fatalf("the ranks' steps' sources: %v and %v", steps[0], steps[1])
	}
	refused := job
	refused.Transform = "imagenet-train"
	_, err = client.New("http://127.0.0.1:1", client.Options{Job: refused})
	want := features.Refusal(features.Lookup(features.Buckets, features.Transform))
	if !errors.Is(err, features.ErrIncompatible) || !strings.HasSuffix(err.Error(), want.Error()) {
		t.Fatalf("a bucketed mixture with transform=: %v; want the table's %v", err, want)
	}
}

// TestBucketedMixtureStoredStages: a bucketed mixture's stages stored
// with its schedule under its name (StoreSchedule with stages), read
// with buckets=stored and budget=stored, and an edit of them from a step
// not read (EditSchedule with stages): the answers carry the stages as
// stored, the job's steps read as any job's, and the edit from a step
// read is refused naming the first editable step.
func TestBucketedMixtureStoredStages(t *testing.T) {
	url := bucketMixGateway(t)
	job := api.Job{Name: "staged", ScheduleVersion: "latest", Params: shuffle.Params{Seed: 3, World: 1, Window: 2},
		Buckets: api.Buckets{Shapes: api.Stored, PixelStages: api.Stored}}
	c := newMixClient(t, url, client.Options{Job: job})
	ctx := context.Background()
	lists := "0@photos:32x32,24x48,48x24;wide:32x32,24x48|20@photos:24x48,48x24;wide:24x48"
	v, err := c.StoreSchedule(ctx, "0:photos:0.4,wide:0.6", api.BucketStages{Buckets: lists, Budget: "0@2048|20@3072"})
	if err != nil || v.Buckets != lists || v.Budget != "0@2048|20@3072" {
		t.Fatalf("stored: %+v, %v", v, err)
	}
	n := 0
	for b, err := range c.Epoch(ctx, 0) {
		if err != nil {
			t.Fatal(err)
		}
		if n++; n == 4 {
			break
		}
		if len(b.Samples) == 0 {
			t.Fatalf("batch %d: no sample", b.Index)
		}
	}
	_, err = c.EditSchedule(ctx, "1:photos:0.5,wide:0.5", api.EditFrom{Step: 1}, api.BucketStages{Buckets: "1@photos:32x32;wide:32x32"})
	var ae *client.APIError
	if !errors.As(err, &ae) || ae.FirstEditableStep == nil || *ae.FirstEditableStep < 4 {
		t.Fatalf("an edit from a step read: %v", err)
	}
	e, err := c.EditSchedule(ctx, "next:photos:0.5,wide:0.5", api.EditFrom{Next: true}, api.BucketStages{Buckets: "next@photos:32x32;wide:32x32"})
	if err != nil || !strings.HasSuffix(e.Buckets, fmt.Sprintf("|%d@photos:32x32;wide:32x32", e.FromStep)) || e.Budget != v.Budget {
		t.Fatalf("edited: %+v, %v", e, err)
	}
}

// TestBucketJobExclusion: the Go client's Exclude of a named bucket job
// (its buckets and budget sent as its batches' are) cuts the epoch at the
// step: the answer's PassStep, the steps before the edit's the job's
// unedited, none after it of an excluded image.
func TestBucketJobExclusion(t *testing.T) {
	url := bucketMixGateway(t)
	job := api.Job{Dataset: "photos", Name: "gen", Params: shuffle.Params{Seed: 3, World: 1, Window: 2},
		Buckets: api.Buckets{Shapes: "32x32,24x48,48x24", Pixels: 2048}}
	ctx := context.Background()
	read := func(j api.Job) [][]string {
		var out [][]string
		for b, err := range newMixClient(t, url, client.Options{Job: j}).Epoch(ctx, 0) {
			if err != nil {
				t.Fatal(err)
			}
			var keys []string
			for _, s := range b.Samples {
				keys = append(keys, s.Key)
			}
			out = append(out, keys)
		}
		return out
	}
	unnamed := job
	unnamed.Name = ""
	before := read(unnamed)
	const cut = 3
	if len(before) < cut+3 {
		t.Fatalf("%d steps", len(before))
	}
	keys := []string{before[0][0], before[cut+1][0], before[cut+2][0]}
	x, err := newMixClient(t, url, client.Options{Job: job}).Exclude(ctx, cut, keys)
	if err != nil || x.PassStep == nil || *x.PassStep != cut || x.Epoch != 0 || x.Samples != len(keys) {
		t.Fatalf("the exclusion: %+v, %v", x, err)
	}
	after := read(job)
	if fmt.Sprint(after[:cut]) != fmt.Sprint(before[:cut]) {
		t.Fatalf("the steps before the exclusion's: %v, unedited %v", after[:cut], before[:cut])
	}
	for m, step := range after[cut:] {
		for _, k := range step {
			if k == keys[0] || k == keys[1] || k == keys[2] {
				t.Fatalf("%s, excluded from step %d, served at step %d", k, cut, cut+m)
			}
		}
	}
}
