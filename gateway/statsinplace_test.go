package gateway_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/brandgw/brand/api"
	"github.com/brandgw/brand/format"
	"github.com/brandgw/brand/format/formattest"
	"github.com/brandgw/brand/gateway"
	"github.com/brandgw/brand/s3backend"
)

// readCounter is a store that counts the bytes read of its data objects
// (*.lines): what a gateway serving a dataset in place reads from the
// store.
type readCounter struct {
	s3backend.Store
	bytes atomic.Int64
}

func (r *readCounter) ReadRange(ctx context.Context, key, etag string, off int64, p []byte) error {
	err := r.Store.ReadRange(ctx, key, etag, off, p)
	if err == nil && strings.HasSuffix(key, ".lines") {
		r.bytes.Add(int64(len(p)))
	}
	return err
}

// /stats counts as backend bytes what loads of a dataset served in place
// read from the store — the chunks' store extents — by every path a load
// takes: prefetch, a chunk read through a cache too small to hold it, a
// batch whose chunks do not fit together (assembled in parts), a mixture
// batch's parts read under one pin beside a tar dataset (whose chunks are
// read whole), and a job naming columns=.
func TestStatsCountStoreBytesInPlace(t *testing.T) {
	tar := newFixtureNamed(t, t.TempDir(), "web-", 4, 10, 0)
	var tarBytes int64
	for c := range tar.index.NumChunks() {
		tarBytes += tar.index.Chunk(c).Size
	}
	samples := 120 // inPlaceStore's lines
	for _, tt := range []struct {
		name  string
		cache int64
		query string
		mix   bool
		short bool // bounds a quarter of what chunks need: each learns its size
	}{
		{"prefetch", 64 << 20, "", false, false},
		{"prefetch, columns", 64 << 20, "columns=txt", false, false},
		{"read through", 1 << 10, "", false, false},
		{"assembled in parts", 45 << 10, "", false, false},
		{"mixture with tar", 64 << 20, "mix=test:1,web:1", true, false},
		{"chunks that grow", 64 << 20, "", false, true},
		{"chunks that grow, columns", 64 << 20, "columns=len", false, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			f := formattest.Lines{Short: tt.short}
			st, _ := inPlaceStore(t, f)
			counted := &readCounter{Store: st}
			_, srv := start(t, counted, func(c *gateway.Config) {
				c.Datasets[0].Formats = []format.Format{f}
				c.Datasets = append(c.Datasets, gateway.DatasetSpec{Name: "web", URL: "file:///web", Store: tar.store})
				c.CacheSize = tt.cache
				c.Defaults = gateway.Defaults{BatchSize: 8, Window: 2, Seed: 3}
			})
			n := samples
			if tt.mix {
				n += tar.index.NumSamples()
			}
			for e := range 2 {
				for m := range (n + 7) / 8 {
					if resp, body := get(t, fmt.Sprintf("%s/epoch/%d/batch/%d?%s", srv.URL, e, m, tt.query)); resp.StatusCode != 200 {
						t.Fatalf("epoch %d batch %d: %d %s", e, m, resp.StatusCode, body)
					}
				}
			}
			_, body := get(t, srv.URL+"/stats")
			var stats struct {
				Jobs     []api.JobStat `json:"jobs"`
				Mixtures []api.MixStat `json:"mixtures"`
			}
			if err := json.Unmarshal(body, &stats); err != nil {
				t.Fatal(err)
			}
			read := counted.bytes.Load()
			if read == 0 {
				t.Fatal("nothing read from the store")
			}
			var lines int64 // what /stats says the jobs of the lines dataset read
			for _, j := range stats.Jobs {
				if j.Dataset == "test" {
					lines += j.BackendBytes
				}
				if tt.mix && j.Dataset == "test:1,web:1" {
					// A mixture is one job: less its tar chunks, each read once.
					lines += j.BackendBytes - tarBytes
				}
			}
			if lines != read {
				t.Errorf("/stats jobs: %d bytes from the store, the store served %d", lines, read)
			}
			if tt.short && tt.cache >= 64<<20 {
				// The cache holds the dataset: each chunk read from the
				// store once, grown or not (the read that found it needs
				// more room is the one it is decoded from).
				if whole := storeBytes(t, st); read != whole {
					t.Errorf("the store served %d bytes, the dataset's objects are %d: a chunk was read twice", read, whole)
				}
			}
			if !tt.mix {
				return
			}
			if len(stats.Mixtures) != 1 || len(stats.Mixtures[0].Components) != 2 {
				t.Fatalf("/stats mixtures: %+v", stats.Mixtures)
			}
			for _, c := range stats.Mixtures[0].Components {
				want := read
				if c.Dataset == "web" {
					want = tarBytes // each tar chunk read whole, once: the cache holds them all
				}
				if c.BackendBytes != want {
					t.Errorf("/stats mixture component %s: %d bytes from the store, want %d", c.Dataset, c.BackendBytes, want)
				}
			}
		})
	}
}

// storeBytes is the size of every object under st (the lines files: no
// index objects are read by a gateway's loads).
func storeBytes(t *testing.T, st s3backend.Store) int64 {
	t.Helper()
	objs, err := st.List(context.Background(), "data/")
	if err != nil {
		t.Fatal(err)
	}
	var n int64
	for _, o := range objs {
		n += o.Size
	}
	return n
}
