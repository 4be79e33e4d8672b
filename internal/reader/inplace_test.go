package reader

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"path"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"github.com/brandgw/brand/api"
	"github.com/brandgw/brand/dataset"
	"github.com/brandgw/brand/format"
	"github.com/brandgw/brand/format/formattest"
	"github.com/brandgw/brand/internal/catalog"
	"github.com/brandgw/brand/internal/order"
	"github.com/brandgw/brand/s3backend"
	"github.com/brandgw/brand/shuffle"
)

// linesDataset is a dataset of 3 .lines files of 40 lines each served in
// place by f, chunks of about 300 bytes (several a file), loaded as the
// gateway loads it, in a catalog of its own; want is each sample's line.
func linesDataset(t *testing.T, f formattest.Lines) (ds *catalog.Dataset, cat *catalog.Catalog, want map[string]string) {
	t.Helper()
	ctx := context.Background()
	st, err := s3backend.NewLocal(t.TempDir())
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
	cat = catalog.New([]string{"lines"}, "lines", catalog.NewMetrics(prometheus.NewRegistry()), zerolog.Nop())
	cat.Add(ds)
	cat.MarkReady()
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
				r, _, _ := newReader(t, 64<<20, catalog.NewLoader(cat, time.Minute, 1), false)
				orders := order.New(nil)
				job := api.Job{Params: shuffle.Params{BatchSize: 16, Seed: 5, World: 1, Window: 2}}
				seen := map[string]bool{}
				for m := range uint64((len(want) + 15) / 16) {
					b, err := orders.Layout(context.Background(), order.Source{DS: view}, job, 1, m)
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

// untar is the samples of a tar stream of samples' members (key.ext),
// by key, each its members' contents by extension.
func untar(t *testing.T, b []byte) map[string]map[string]string {
	t.Helper()
	out := map[string]map[string]string{}
	tr := tar.NewReader(bytes.NewReader(b))
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		d, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		ext := path.Ext(h.Name)
		key := strings.TrimSuffix(h.Name, ext)
		if out[key] == nil {
			out[key] = map[string]string{}
		}
		out[key][strings.TrimPrefix(ext, ".")] = string(d)
	}
}
