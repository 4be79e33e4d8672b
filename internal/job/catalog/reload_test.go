package catalog

import (
	"bytes"
	"context"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/rs/zerolog"

	"github.com/brandgw/brand/chunkindex"
	"github.com/brandgw/brand/dataset"
	"github.com/brandgw/brand/format"
	"github.com/brandgw/brand/format/formattest"
	"github.com/brandgw/brand/internal/server/stopper"
	"github.com/brandgw/brand/s3backend"
)

// TestReload: a dataset re-packed in its store is swapped in when the
// catalog looks — asked (SIGHUP, Gateway.Reload), on its poll's tick, or
// poked (a chunk found changed) — as version 2 with the new index's ID
// and ETag, counted in brand_index_reloads_total, the version it replaced
// still held; an index unchanged is not reloaded. (gateway's
// TestReloadIndex keeps what a client sees of it: /datasets, the batch's
// ETag, Brand-Index and bytes.) In a synctest bubble, so that the poll's
// interval passes at once.
func TestReload(t *testing.T) {
	const poll = 30 * time.Second
	tests := []struct {
		name   string
		repack bool
		how    string // "asked", "polled" or "poked"
	}{
		{"unchanged, asked", false, "asked"},
		{"unchanged, polled", false, "polled"},
		{"re-packed, asked", true, "asked"},
		{"re-packed, polled", true, "polled"},
		{"re-packed, poked", true, "poked"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				local := packedStore(t, 2, 3)
				ds, cat := loadCatalog(t, local)
				part := stopper.New().Group("poll")
				defer part.Stop()
				if tc.how != "asked" {
					cat.Poll(part, poll)
				}
				if tc.repack {
					packChunks(t, local, 3, 5)
				}
				var reloaded []string
				var err error
				switch tc.how {
				case "asked":
					if reloaded, err = cat.Reload(context.Background()); err != nil {
						t.Fatal(err)
					}
				case "polled":
					time.Sleep(poll + time.Second)
				case "poked":
					cat.Poke()
				}
				synctest.Wait() // the poller's check done
				cur, err := cat.Get("test")
				if err != nil {
					t.Fatal(err)
				}
				if !tc.repack {
					if cur != ds || len(reloaded) != 0 {
						t.Fatalf("an unchanged index: version %d, Reload = %v; want version 1, nothing", cur.Version, reloaded)
					}
					return
				}
				if tc.how == "asked" && !slices.Equal(reloaded, []string{"test"}) {
					t.Errorf("Reload = %v, want [test]", reloaded)
				}
				if cur.Version != 2 || cur.ID() == ds.ID() || cur.IndexETag == ds.IndexETag || cur.Index.NumSamples() != 15 {
					t.Errorf("after the re-pack: version %d, ID %s (was %s), index ETag %s (was %s), %d samples; want version 2 of the new index's 15",
						cur.Version, cur.ID(), ds.ID(), cur.IndexETag, ds.IndexETag, cur.Index.NumSamples())
				}
				if old, err := cat.Version("test", ds.ID()); old != ds || err != nil {
					t.Errorf("the replaced version: %v, %v; want it still held", old, err)
				}
				if got := testutil.ToFloat64(cat.metrics.indexReloads.WithLabelValues("test")); got != 1 {
					t.Errorf("brand_index_reloads_total = %v, want 1", got)
				}
			})
		})
	}
}

// TestReloadBetweenIndexAndManifest: brand index writes a dataset served
// in place's new index before its manifest. A reload that finds the new
// index beside the old manifest cannot open it yet and says so; the next
// one, once the manifest is written, loads it. (The first check used to
// mark the index seen before opening it, and the version was never
// loaded.)
func TestReloadBetweenIndexAndManifest(t *testing.T) {
	ctx := context.Background()
	st, err := s3backend.NewLocal(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	put := func(k string, b []byte) {
		t.Helper()
		if _, err := st.Put(ctx, k, bytes.NewReader(b), int64(len(b))); err != nil {
			t.Fatal(err)
		}
	}
	lines := func(name string, n int) {
		for k, b := range formattest.Write(map[string][]string{name: slices.Repeat([]string{"a line"}, n)}) {
			put(k, b)
		}
	}
	formats := []format.Format{formattest.Lines{}}
	lines("a.lines", 20)
	if _, err := dataset.IndexInPlace(ctx, st, st, dataset.InPlaceOptions{Formats: formats, Options: format.Options{ChunkBytes: 100}}); err != nil {
		t.Fatal(err)
	}
	ds, err := Load(ctx, Spec{Name: "test", URL: "file:///test", Store: st, Formats: formats}, s3backend.Config{}, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	cat := New([]string{"test"}, "test", NewMetrics(prometheus.NewRegistry()), zerolog.Nop())
	cat.Add(ds)
	cat.MarkReady()
	read := func(k string) []byte {
		t.Helper()
		info, err := st.Stat(ctx, k)
		if err != nil {
			t.Fatal(err)
		}
		b := make([]byte, info.Size)
		if err := st.ReadRange(ctx, k, info.ETag, 0, b); err != nil {
			t.Fatal(err)
		}
		return b
	}
	oldManifest := read(chunkindex.ManifestKey)
	lines("b.lines", 10)
	if _, err := dataset.AppendInPlace(ctx, st, st, dataset.AppendOptions{Formats: formats, Options: format.Options{ChunkBytes: 100}}); err != nil {
		t.Fatal(err)
	}
	newManifest := read(chunkindex.ManifestKey)
	put(chunkindex.ManifestKey, oldManifest) // the index written, its manifest not yet
	if reloaded, err := cat.Reload(ctx); err == nil || len(reloaded) != 0 {
		t.Fatalf("a reload between the index and its manifest: %v, %v; want an error and nothing loaded", reloaded, err)
	}
	put(chunkindex.ManifestKey, newManifest)
	if reloaded, err := cat.Reload(ctx); err != nil || !slices.Equal(reloaded, []string{"test"}) {
		t.Fatalf("the reload after the manifest: %v, %v", reloaded, err)
	}
	if cur, _ := cat.Get("test"); cur.Index.NumSamples() != 30 {
		t.Fatalf("the dataset after the reload has %d samples; want 30", cur.Index.NumSamples())
	}
}
