package reader_test

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"github.com/brandgw/brand/api"
	"github.com/brandgw/brand/chunkindex"
	"github.com/brandgw/brand/dataset"
	"github.com/brandgw/brand/format"
	"github.com/brandgw/brand/format/formattest"
	"github.com/brandgw/brand/internal/batch/layout"
	"github.com/brandgw/brand/internal/batch/reader"
	"github.com/brandgw/brand/internal/batch/units"
	"github.com/brandgw/brand/internal/cache/chunkcache"
	"github.com/brandgw/brand/internal/job/catalog"
	"github.com/brandgw/brand/internal/job/features"
	"github.com/brandgw/brand/internal/testsupport/catalogtest"
	"github.com/brandgw/brand/s3backend"
	"github.com/brandgw/brand/shuffle"
)

// linesDataset is a dataset of 3 .lines files of 40 lines each served in
// place by f, chunks of about 300 bytes (several a file), loaded as the
// gateway loads it, in a catalog of its own; want is each sample's line.
func linesDataset(t *testing.T, f formattest.Lines) (ds *catalog.Dataset, cat *catalog.Catalog, want map[string]string) {
	return countedLines(t, f, nil)
}

// countedLines is linesDataset served by a store reporting its reads to
// counted, if not nil; the reads of indexing and loading the dataset are
// not counted.
func countedLines(t *testing.T, f formattest.Lines, counted *storeReads) (ds *catalog.Dataset, cat *catalog.Catalog, want map[string]string) {
	t.Helper()
	ctx := context.Background()
	cfg := s3backend.Config{}
	if counted != nil {
		cfg.Observer = counted
	}
	st, err := s3backend.Open(ctx, "file://"+t.TempDir(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	want = map[string]string{}
	files := map[string][]string{}
	for f := range 3 {
		name := fmt.Sprintf("data/f%d.lines", f)
		for l := range 40 {
			line := fmt.Sprintf("file %d line %d %s", f, l, strings.Repeat("x", (f*40+l)%23))
			files[name] = append(files[name], line)
			want[fmt.Sprintf("data/f%d/%d", f, l)] = line
		}
	}
	for k, b := range formattest.Write(files) {
		if _, err := st.Put(ctx, k, bytes.NewReader(b), int64(len(b))); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := dataset.IndexInPlace(ctx, st, st, dataset.InPlaceOptions{
		Formats: []format.Format{f}, Options: format.Options{ChunkBytes: 300}}); err != nil {
		t.Fatal(err)
	}
	ds, err = catalog.Load(ctx, catalog.Spec{Name: "lines", URL: "file:///lines", Store: st, Formats: []format.Format{f}}, s3backend.Config{}, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	cat = catalog.New([]string{"lines", "web"}, "lines", catalog.NewMetrics(prometheus.NewRegistry()), zerolog.Nop())
	cat.Add(ds)
	cat.MarkReady()
	if counted != nil {
		counted.bytes.Store(0)
	}
	return ds, cat, want
}

// A dataset served in place reads like any other: every sample once an
// epoch, each with the members its format makes of it (the line as txt,
// its length as cls); a view of some fields (columns=) reads those
// members alone. A format whose metadata could not bound its chunks
// (Short: every bound a quarter of what the chunk needs) reads the same:
// each chunk learns its size on its first load.
func TestReadInPlace(t *testing.T) {
	for _, short := range []bool{false, true} {
		ds, cat, want := linesDataset(t, formattest.Lines{Short: short})
		for _, tc := range []struct {
			fields []string
			exts   []string
		}{{nil, []string{"cls", "txt"}}, {[]string{"txt"}, []string{"txt"}}, {[]string{"len"}, []string{"cls"}}} {
			t.Run(fmt.Sprintf("short=%v/fields=%s", short, tc.fields), func(t *testing.T) {
				view, err := ds.Select(tc.fields)
				if err != nil {
					t.Fatal(err)
				}
				r, _, _ := reader.NewCachedReader(t, 64<<20, catalog.NewLoader(cat, time.Minute, 1), false)
				orders := units.Orders(nil)
				job := api.Job{Params: shuffle.Params{BatchSize: 16, Seed: 5, World: 1, Window: 2}}
				seen := map[string]bool{}
				for m := range uint64((len(want) + 15) / 16) {
					b, err := orders.Layout(context.Background(), layout.Source{DS: view}, job, 1, m)
					if err != nil {
						t.Fatal(err)
					}
					res, err := r.ReadBatch(context.Background(), b)
					if err != nil {
						t.Fatalf("batch %d: %v", m, err)
					}
					var body bytes.Buffer
					for _, p := range res.Parts {
						body.Write(p)
					}
					res.Release()
					for key, files := range untar(t, body.Bytes()) {
						if seen[key] {
							t.Fatalf("%s served twice", key)
						}
						seen[key] = true
						exts := slices.Sorted(func(yield func(string) bool) {
							for e := range files {
								if !yield(e) {
									return
								}
							}
						})
						if !slices.Equal(exts, tc.exts) {
							t.Fatalf("%s: members %v, want %v", key, exts, tc.exts)
						}
						if d, ok := files["txt"]; ok && d != want[key] {
							t.Fatalf("%s: %q, want %q", key, d, want[key])
						}
						if d, ok := files["cls"]; ok && d != strconv.Itoa(len(want[key])) {
							t.Fatalf("%s: len %q, want %d", key, d, len(want[key]))
						}
					}
				}
				if len(seen) != len(want) {
					t.Fatalf("%d samples of %d in the epoch", len(seen), len(want))
				}
			})
		}
	}
}

// untar is the samples of a tar stream of samples' members, by key, each
// its members' contents by extension.
func untar(t *testing.T, b []byte) map[string]map[string]string {
	t.Helper()
	out := map[string]map[string]string{}
	if _, err := chunkindex.ScanTar(bytes.NewReader(b), func(s chunkindex.TarSample) error {
		out[s.Key] = map[string]string{}
		for _, m := range s.Files {
			at := s.Offset + m.DataOffset
			out[s.Key][m.Ext] = string(b[at : at+m.Size])
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return out
}

// storeReads counts the bytes a store that reports to it (its Observer)
// reads for GETs. Loads read only the data objects: what it counts from
// its reset on is what loads read.
type storeReads struct{ bytes atomic.Int64 }

func (s *storeReads) ObserveBackend(op string, n int64, _ time.Duration, err error) {
	if op == s3backend.OpGet && err == nil {
		s.bytes.Add(n)
	}
}

// byDataset loads dataset web's chunks with the test store, the others
// with the catalog's loader.
type byDataset struct {
	web     *reader.Store
	catalog chunkcache.Loader
}

func (l byDataset) Load(ctx context.Context, k chunkcache.Key, buf []byte) error {
	if k.Dataset == "web" {
		return l.web.Load(ctx, k, buf)
	}
	return l.catalog.Load(ctx, k, buf)
}

// A read's figures count as store bytes what loads of a dataset served in
// place read from the store — the chunks' store extents, not their
// resident sizes — by every path a read takes: chunks that fit, a chunk
// read through a cache too small to hold it, a batch whose chunks do not
// fit together (assembled in parts), a job naming some fields, chunks
// that learn their size on their first load (each read from the store
// once: the read that found it needs more room is the one it is decoded
// from), and a mixture batch's parts read under one pin beside a tar
// dataset, each part's figures its own.
func TestStoreBytesInPlace(t *testing.T) {
	for _, tt := range []struct {
		name   string
		cache  int64 // 0: one and a half of the largest chunk
		fields []string
		mix    bool
		short  bool
	}{
		{"fits", 64 << 20, nil, false, false},
		{"fits, columns", 64 << 20, []string{"txt"}, false, false},
		{"read through", 1 << 10, nil, false, false},
		{"assembled in parts", 0, nil, false, false},
		{"mixture with tar", 64 << 20, nil, true, false},
		{"chunks that grow", 64 << 20, nil, false, true},
		{"chunks that grow, columns", 64 << 20, []string{"len"}, false, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ctx := context.Background()
			counted := &storeReads{}
			lines, cat, _ := countedLines(t, formattest.Lines{Short: tt.short}, counted)
			view, err := lines.Select(tt.fields)
			if err != nil {
				t.Fatal(err)
			}
			web := catalogtest.Dataset(t, "web", 4, 10)
			tarStore := &reader.Store{}
			capacity := tt.cache
			if capacity == 0 {
				for c := range view.Index.NumChunks() {
					capacity = max(capacity, view.ChunkSize(c))
				}
				capacity += capacity / 2
			}
			r, _, _ := reader.NewCachedReader(t, capacity, byDataset{web: tarStore, catalog: catalog.NewLoader(cat, time.Minute, 1)}, false)
			orders := units.Orders(nil)
			job := api.Job{Params: shuffle.Params{BatchSize: 8, Seed: 3, World: 1, Window: 2}}
			src := layout.Source{DS: view}
			n := view.Index.NumSamples()
			if tt.mix {
				if job.Mix, err = api.ParseMix("lines:1,web:1"); err != nil {
					t.Fatal(err)
				}
				m, err := orders.Compose(orders.UnitOf(features.Requested(job)), []*catalog.Dataset{view, web}, job)
				if err != nil {
					t.Fatal(err)
				}
				src = layout.Source{Unit: m}
				n += web.Index.NumSamples()
			}
			var linesBytes, webBytes int64
			inParts := false
			for e := range uint64(2) {
				for m := range uint64((n + 7) / 8) {
					b, err := orders.Layout(ctx, src, job, e, m)
					if err != nil {
						t.Fatal(err)
					}
					res, err := r.ReadBatch(ctx, b)
					if err != nil {
						t.Fatalf("epoch %d batch %d: %v", e, m, err)
					}
					for i, p := range b.Parts {
						if p.Samples.DS.Name == "web" {
							webBytes += res.PerPart[i].StoreBytes
						} else {
							linesBytes += res.PerPart[i].StoreBytes
						}
					}
					inParts = inParts || res.InParts
					res.Release()
				}
			}
			read := counted.bytes.Load()
			if read == 0 || linesBytes != read {
				t.Errorf("the reads' figures say %d store bytes of the dataset served in place; the store served %d", linesBytes, read)
			}
			if tt.short {
				// The cache holds the dataset: each chunk read once, grown
				// or not (a .lines chunk is read whole whatever its fields).
				objs, err := lines.Store.List(ctx, "data/")
				if err != nil {
					t.Fatal(err)
				}
				var whole int64
				for _, o := range objs {
					whole += o.Size
				}
				if read != whole {
					t.Errorf("the store served %d bytes, the dataset's objects are %d: a chunk was read twice", read, whole)
				}
			}
			if tt.cache == 0 && !inParts {
				t.Error("no batch was assembled in parts")
			}
			if tt.mix {
				loads := tarStore.Loads()
				if want := int64(loads) * 10 * catalogtest.SampleSize; webBytes != want || loads != web.Index.NumChunks() {
					t.Errorf("the tar part's figures say %d store bytes; %d loads of %d chunks read %d", webBytes, loads, web.Index.NumChunks(), want)
				}
			}
		})
	}
}
