package client_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/brandgw/brand/api"
	"github.com/brandgw/brand/client"
	"github.com/brandgw/brand/dataset"
	"github.com/brandgw/brand/gateway"
	"github.com/brandgw/brand/s3backend"
	"github.com/brandgw/brand/shuffle"
)

// sameKeyMix is a mixture of two datasets that store the same keys with
// other extensions: pack sorts a sample's members by name, so a sample of
// "left" is k.cls, k.jpg and one of "right" k.aaa, k.cls. A left sample
// followed by a right one of the same key is k.cls k.jpg k.aaa k.cls,
// which grouping by key cuts after k.aaa: two samples, as many as sent,
// with the wrong files.
var sameKeyMix = api.Mix{{Dataset: "left", Weight: "0.5"}, {Dataset: "right", Weight: "0.5"}}

var sameKeyExts = map[string][]string{"left": {"cls", "jpg"}, "right": {"aaa", "cls"}}

const sameKeys = 4

// sameKeyFile is the contents of a member of the mixture's datasets.
func sameKeyFile(ds, key, ext string) []byte {
	return []byte(fmt.Sprintf("%s/%s.%s", ds, key, ext))
}

// sameKeyGateway serves sameKeyMix's datasets. It counts manifest
// requests; with chunked it sends bodies without a length, which the
// client decodes as they stream; edit, if set, changes the manifests it
// sends.
type sameKeyGateway struct {
	URL       string
	manifests atomic.Int32
	chunked   atomic.Bool
	edit      atomic.Pointer[func(*api.Manifest)]
}

func startSameKeyGateway(t *testing.T) *sameKeyGateway {
	t.Helper()
	var specs []gateway.DatasetSpec
	for _, c := range sameKeyMix {
		src, dir := t.TempDir(), t.TempDir()
		for i := range sameKeys {
			key := fmt.Sprintf("k%d", i)
			for _, ext := range sameKeyExts[c.Dataset] {
				if err := os.WriteFile(filepath.Join(src, key+"."+ext), sameKeyFile(c.Dataset, key, ext), 0o644); err != nil {
					t.Fatal(err)
				}
			}
		}
		store, err := s3backend.NewLocal(dir)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := dataset.Pack(context.Background(), src, store, dataset.PackOptions{ChunkSize: 1 << 10, Shuffle: true, Seed: 3, Name: c.Dataset}); err != nil {
			t.Fatal(err)
		}
		specs = append(specs, gateway.DatasetSpec{Name: c.Dataset, URL: "file://" + dir, Store: store})
	}
	g := loadedGateway(t, gateway.Config{Datasets: specs, CacheSize: 1 << 20, NoPrefault: true, IndexPoll: -1})
	s := &sameKeyGateway{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		manifest := r.URL.Query().Get(api.ParamFormat) == "json" || strings.HasSuffix(r.URL.Path, "/manifest")
		if manifest {
			s.manifests.Add(1)
		}
		edit := s.edit.Load()
		if !s.chunked.Load() && (!manifest || edit == nil) {
			g.ServeHTTP(w, r)
			return
		}
		rec := httptest.NewRecorder()
		g.ServeHTTP(rec, r)
		body := rec.Body.Bytes()
		if manifest && edit != nil && rec.Code == http.StatusOK {
			var m api.Manifest
			if err := json.Unmarshal(body, &m); err != nil {
				t.Error(err)
			}
			(*edit)(&m)
			body, _ = json.Marshal(m)
		}
		maps.Copy(w.Header(), rec.Header())
		w.Header().Del("Content-Length")
		w.WriteHeader(rec.Code)
		w.(http.Flusher).Flush() // no length known: chunked
		w.Write(body)
	}))
	t.Cleanup(srv.Close)
	s.URL = srv.URL
	return s
}

// sameKeyBatches returns, in a fixed order, the first batches of epochs
// 0..19 in which a left sample is followed by a right one of the same
// key (split), and those without two adjacent samples of equal keys
// (plain).
func sameKeyBatches(t *testing.T, c *client.Client) (split, plain []int) {
	t.Helper()
	for epoch := range 20 {
		m, err := c.Manifest(context.Background(), epoch, 0)
		if err != nil {
			t.Fatal(err)
		}
		adjacent, crossed := false, false
		for i := 1; i < len(m.Samples); i++ {
			a, b := m.Samples[i-1], m.Samples[i]
			if a.Key == b.Key {
				adjacent = true
				crossed = crossed || a.Dataset == "left" && b.Dataset == "right"
			}
		}
		switch {
		case crossed:
			split = append(split, epoch)
		case !adjacent:
			plain = append(plain, epoch)
		}
	}
	if len(split) == 0 || len(plain) == 0 {
		t.Fatalf("%d batches with left k before right k, %d without adjacent equal keys; want some of both", len(split), len(plain))
	}
	return split, plain
}

func sameKeyClient(t *testing.T, url string) *client.Client {
	return newMixClient(t, url, client.Options{Job: api.Job{Mix: sameKeyMix,
		Params: shuffle.Params{Seed: 5, BatchSize: 8, World: 1}}})
}

// TestMixSameKeysAdjacent reads mixture batches in which a left sample is
// followed by a right one of the same key, and checks that every sample
// has its own files, and that a batch without adjacent equal keys costs
// no manifest request.
func TestMixSameKeysAdjacent(t *testing.T) {
	gw := startSameKeyGateway(t)
	c := sameKeyClient(t, gw.URL)
	split, plain := sameKeyBatches(t, c)
	check := func(t *testing.T, epoch int) {
		t.Helper()
		b, err := c.Batch(context.Background(), epoch, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer b.Release()
		if len(b.Samples) != 8 {
			t.Fatalf("epoch %d: %d samples, want 8", epoch, len(b.Samples))
		}
		for i, s := range b.Samples {
			want := map[string][]byte{}
			for _, ext := range sameKeyExts[s.Dataset] {
				want[ext] = sameKeyFile(s.Dataset, s.Key, ext)
			}
			if !maps.EqualFunc(s.Files, want, bytes.Equal) {
				t.Fatalf("epoch %d sample %d (%s of %s): files %q, want %q", epoch, i, s.Key, s.Dataset, s.Files, want)
			}
		}
	}
	for _, streamed := range []bool{false, true} {
		gw.chunked.Store(streamed)
		t.Run(fmt.Sprintf("streamed=%t", streamed), func(t *testing.T) {
			for _, epoch := range split {
				check(t, epoch)
			}
			gw.manifests.Store(0)
			for _, epoch := range plain {
				check(t, epoch)
			}
			if n := gw.manifests.Load(); n != 0 {
				t.Errorf("%d manifest requests for batches without adjacent equal keys", n)
			}
		})
	}
}

// TestMixSameKeysBadManifest checks that a manifest that does not fit
// the body is a bad response, not samples cut at the wrong place.
func TestMixSameKeysBadManifest(t *testing.T) {
	gw := startSameKeyGateway(t)
	c := sameKeyClient(t, gw.URL)
	split, _ := sameKeyBatches(t, c)
	m, err := c.Manifest(context.Background(), split[0], 0)
	if err != nil {
		t.Fatal(err)
	}
	i := 1 // the first of two adjacent samples with equal keys
	for m.Samples[i-1].Key != m.Samples[i].Key {
		i++
	}
	tests := []struct {
		name string
		edit func(m *api.Manifest)
	}{
		{"cut inside a member", func(m *api.Manifest) { m.Samples[i-1].Length += 512; m.Samples[i].Length -= 512 }},
		{"key renamed", func(m *api.Manifest) { m.Samples[i].Key = "other" }},
		{"dataset renamed", func(m *api.Manifest) { m.Samples[i].Dataset = "other" }},
		{"one sample short", func(m *api.Manifest) { m.Samples = m.Samples[:len(m.Samples)-1] }},
		{"last sample short", func(m *api.Manifest) { m.Samples[len(m.Samples)-1].Length -= 512 }},
		{"other ETag", func(m *api.Manifest) { m.ETag = `"other"` }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			gw.edit.Store(&tt.edit)
			defer gw.edit.Store(nil)
			_, err := c.Batch(context.Background(), split[0], 0)
			if !errors.Is(err, client.ErrBadResponse) {
				t.Fatalf("got %v, want ErrBadResponse", err)
			}
		})
	}
}
