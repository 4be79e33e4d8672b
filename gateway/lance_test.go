package gateway_test

import (
	"bytes"
	"context"
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/brandgw/brand/dataset"
	"github.com/brandgw/brand/format"
	"github.com/brandgw/brand/format/lance"
	"github.com/brandgw/brand/gateway"
	"github.com/brandgw/brand/s3backend"
)

// lanceDir is a format.Store over a Lance fixture's directory.
type lanceDir string

func (d lanceDir) ReadRange(_ context.Context, key, _ string, off int64, p []byte) error {
	f, err := os.Open(filepath.Join(string(d), filepath.FromSlash(key)))
	if err != nil {
		return err
	}
	defer f.Close()
	_, err = f.ReadAt(p, off)
	return err
}

// TestLanceInPlace: a Lance dataset written by Lance's own writer
// (format/lance's fixtures: several fragments, versions, deletion files,
// nulls; images of 80–120 KiB stored as zstd per value) indexed in place
// and served by a gateway: an epoch holds each live row of the latest
// version once, keyed by its row address, and each member — every
// column, and only the column columns= names — is the value
// format/lance's Dataset.Column reads (itself held to Lance's reader).
func TestLanceInPlace(t *testing.T) {
	ctx := context.Background()
	for _, name := range []string{"basic", "images"} {
		t.Run(name, func(t *testing.T) {
			root := filepath.Join("..", "format", "lance", "testdata", name+".lance")
			st, err := s3backend.NewLocal(t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			var objs []format.Object
			err = filepath.WalkDir(root, func(p string, e fs.DirEntry, err error) error {
				if err != nil || e.IsDir() {
					return err
				}
				b, err := os.ReadFile(p)
				if err != nil {
					return err
				}
				rel, _ := filepath.Rel(root, p)
				objs = append(objs, format.Object{Key: filepath.ToSlash(rel), Size: int64(len(b))})
				_, err = st.Put(ctx, filepath.ToSlash(rel), bytes.NewReader(b), int64(len(b)))
				return err
			})
			if err != nil {
				t.Fatal(err)
			}
			formats := []format.Format{lance.Format{}}
			res, err := dataset.IndexInPlace(ctx, st, st, dataset.InPlaceOptions{Formats: formats, Options: format.Options{ChunkBytes: 8 << 10}})
			if err != nil {
				t.Fatal(err)
			}
			if res.Index.NumChunks() < 2 {
				t.Fatalf("%d chunks; the test wants several", res.Index.NumChunks())
			}
			ds, err := lance.Open(ctx, lanceDir(root), objs, 0, lance.Options{})
			if err != nil {
				t.Fatal(err)
			}
			want := map[string]map[string][]byte{} // key → column → value (absent: null)
			var cols []string
			for _, f := range ds.Manifest.Fields {
				if f.ParentID != -1 {
					continue
				}
				cols = append(cols, f.Name)
				vals, addrs, err := ds.Column(ctx, f.Name)
				if err != nil {
					t.Fatal(err)
				}
				for i, a := range addrs {
					k := strconv.FormatUint(a, 10)
					if want[k] == nil {
						want[k] = map[string][]byte{}
					}
					if v, ok := vals.Value(i); ok {
						want[k][f.Name] = v
					}
				}
			}
			if total := res.Index.NumSamples(); total != len(want) {
				t.Fatalf("%d samples indexed, %d live rows", total, len(want))
			}
			_, srv := start(t, st, func(c *gateway.Config) { c.Datasets[0].Formats = formats })
			for _, sel := range []string{"", cols[len(cols)-1]} {
				q := fmt.Sprintf("batch_size=%d&seed=7", len(want))
				if sel != "" {
					q += "&columns=" + sel
				}
				resp, body := get(t, srv.URL+"/epoch/0/batch/0?"+q)
				if resp.StatusCode != http.StatusOK {
					t.Fatalf("%s: %s %s", q, resp.Status, body)
				}
				seen := map[string]bool{}
				for _, s := range readTar(t, body) {
					if seen[s.key] {
						t.Fatalf("%s: row %s twice", q, s.key)
					}
					seen[s.key] = true
					w, ok := want[s.key]
					if !ok {
						t.Fatalf("%s: row %s is no live row", q, s.key)
					}
					n := 0
					for _, c := range cols {
						if sel != "" && c != sel {
							continue
						}
						v, valid := w[c]
						got, has := s.files[c]
						if valid != has || !bytes.Equal(v, got) {
							t.Fatalf("%s: row %s column %s: %d bytes (%v), want %d (%v)", q, s.key, c, len(got), has, len(v), valid)
						}
						if valid {
							n++
						}
					}
					if _, null := s.files["null"]; null != (n == 0) || len(s.files) != max(n, 1) {
						t.Fatalf("%s: row %s: %d members, %d valid values", q, s.key, len(s.files), n)
					}
				}
				if len(seen) != len(want) {
					t.Fatalf("%s: %d rows in the epoch, %d live", q, len(seen), len(want))
				}
			}
		})
	}
}
