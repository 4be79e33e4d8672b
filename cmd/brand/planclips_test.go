package main

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/brandgw/brand/api"
	"github.com/brandgw/brand/dataset"
	"github.com/brandgw/brand/format"
	"github.com/brandgw/brand/format/video"
	"github.com/brandgw/brand/gateway"
	"github.com/brandgw/brand/internal/testsupport/videotest"
	"github.com/brandgw/brand/planner"
	"github.com/brandgw/brand/s3backend"
)

// `brand plan --clip` plans a clip job of a tree of videos as a gateway
// serving it answers GET /plan?clip=…: the same clips, covering GOPs,
// store bytes and decode per epoch. With a cache that holds every GOP,
// the first epoch reads the covering GOPs' bytes once and the next reads
// nothing; with a smaller one it reads more. Parameters that are not a
// clip job's, and flags of other plans, are refused naming them.
func TestPlanClipJob(t *testing.T) {
	made := videotest.Make(t, t.TempDir(), "h264.mp4", "h264-bframes.mp4", "h264-gop10s.mp4")
	data := t.TempDir()
	for i, name := range []string{"h264.mp4", "h264-bframes.mp4", "h264-gop10s.mp4"} {
		p, ok := made[name]
		if !ok {
			t.Fatalf("ffmpeg made no %s", name)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		dir := filepath.Join(data, []string{"cat", "dog"}[i%2])
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	ctx := context.Background()
	store, err := s3backend.NewLocal(data)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := dataset.IndexInPlace(ctx, store, store, dataset.InPlaceOptions{
		Formats: []format.Format{video.Format{}}, Options: format.Options{ChunkBytes: 4 << 10}}); err != nil {
		t.Fatal(err)
	}
	g, err := gateway.New(gateway.Config{
		Datasets:  []gateway.DatasetSpec{{Name: "d", URL: "file:///videos", Store: store, Formats: formats()}},
		CacheSize: 64 << 20,
		Planner:   planner.ForGateway{},
		// Planned as a build that decodes plans: this one may not.
		ClipsWithoutDecoder: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(g.Close)
	if err := g.Load(ctx); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(g)
	t.Cleanup(srv.Close)

	plan := func(args ...string) api.ClipPlan {
		t.Helper()
		args = append([]string{"plan", "--src", data, "--clip", "clip=8&stride=2", "--seed", "7", "--batch-size", "2", "--window", "2", "--epochs", "2", "--json"}, args...)
		code, out, stderr := brand(t, args...)
		if code != 0 {
			t.Fatalf("brand %s: exit %d: %s", strings.Join(args, " "), code, stderr)
		}
		var p struct{ Clips api.ClipPlan }
		if err := json.Unmarshal([]byte(out), &p); err != nil || len(p.Clips.Epochs) != 2 {
			t.Fatalf("brand %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return p.Clips
	}
	served := func(cache string) api.ClipPlan {
		t.Helper()
		resp, err := http.Get(srv.URL + "/plan?clip=8&stride=2&seed=7&batch_size=2&window=2&epochs=2&cache_size=" + cache)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		var p struct{ Clips api.ClipPlan }
		if err := json.Unmarshal(body, &p); resp.StatusCode != http.StatusOK || err != nil {
			t.Fatalf("GET /plan: %d %s", resp.StatusCode, body)
		}
		return p.Clips
	}
	for _, tc := range []struct {
		cache string
		fits  bool
	}{{"64MiB", true}, {"12KiB", false}} {
		got, want := plan("--cache-size", tc.cache), served(tc.cache)
		if !reflect.DeepEqual(got, want) {
			t.Errorf("cache %s: brand plan --clip answers\n%+v\nGET /plan answers\n%+v", tc.cache, got, want)
		}
		e0, e1 := got.Epochs[0], got.Epochs[1]
		t.Logf("cache %s: %d clips an epoch; epoch 0 reads %d of covering GOPs of %d, epoch 1 %d of %d", tc.cache, got.Clips, e0.StoreBytes, e0.CoveringBytes, e1.StoreBytes, e1.CoveringBytes)
		switch {
		case got.Kind != "video" || e0.Clips != got.Clips || e0.GOPs < 3 || e0.CoveringBytes <= 0:
			t.Errorf("cache %s: %+v", tc.cache, got)
		case tc.fits && (e0.StoreBytes != e0.CoveringBytes || e1.StoreBytes != 0):
			t.Errorf("cache %s holds every GOP: epochs read %d and %d, want the covering %d and 0", tc.cache, e0.StoreBytes, e1.StoreBytes, e0.CoveringBytes)
		case !tc.fits && e1.StoreBytes == 0:
			t.Errorf("cache %s holds less than the covering GOPs (%d): a second epoch reads nothing", tc.cache, e0.CoveringBytes)
		}
	}
	// The text report: a row an epoch with the store and covering bytes.
	code, out, stderr := brand(t, "plan", "--src", data, "--clip", "clip=8&stride=2", "--batch-size", "2")
	if code != 0 || !strings.Contains(out, "covering GOP bytes") || !strings.Contains(out, "store/covering") || strings.Count(out, "\n") != 5 {
		t.Errorf("brand plan --clip, text: exit %d\n%s%s", code, out, stderr)
	}
	for _, tc := range []struct {
		args []string
		says string
	}{
		{[]string{"--clip", "stride=2"}, "give clip=T"},
		{[]string{"--clip", "clip=8&seed=3"}, "seed is not a clip parameter"},
		{[]string{"--clip", "clip=8", "--disk-cache-size", "1GiB"}, "--disk-cache-size plan(s) another"},
		{[]string{"--clip", "clip=8", "--nodes-after", "2"}, "--nodes-after"},
		{[]string{"--clip", "clip=1000"}, "no video holds a clip of 1000 frames"},
	} {
		code, _, stderr := brand(t, append([]string{"plan", "--src", data}, tc.args...)...)
		if code == 0 || !strings.Contains(stderr, tc.says) {
			t.Errorf("brand plan %s: exit %d %s; want it refused saying %q", strings.Join(tc.args, " "), code, stderr, tc.says)
		}
	}
}
