package gateway_test

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/brandgw/brand/cluster"
	"github.com/brandgw/brand/dataset"
	"github.com/brandgw/brand/dataset/stored"
	"github.com/brandgw/brand/format"
	"github.com/brandgw/brand/format/formattest"
	"github.com/brandgw/brand/gateway"
	"github.com/brandgw/brand/s3backend"
)

// inPlaceStore is a store of .lines files indexed in place: 3 files of
// 40 lines each, chunks of about 300 bytes (several a file).
func inPlaceStore(t *testing.T, f formattest.Lines) (s3backend.Store, map[string]string) {
	t.Helper()
	st, err := s3backend.NewLocal(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{}
	files := map[string][]string{}
	for f := range 3 {
		for l := range 40 {
			line := fmt.Sprintf("file %d line %d %s", f, l, strings.Repeat("x", (f*40+l)%23))
			files[fmt.Sprintf("data/f%d.lines", f)] = append(files[fmt.Sprintf("data/f%d.lines", f)], line)
			want[fmt.Sprintf("data/f%d/%d", f, l)] = line
		}
	}
	for k, b := range formattest.Write(files) {
		if _, err := st.Put(context.Background(), k, bytes.NewReader(b), int64(len(b))); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := dataset.IndexInPlace(context.Background(), st, st, dataset.InPlaceOptions{
		Formats: []format.Format{f}, Options: format.Options{ChunkBytes: 300}}); err != nil {
		t.Fatal(err)
	}
	return st, want
}

func startInPlace(t *testing.T, st s3backend.Store, f formattest.Lines) *httptest.Server {
	t.Helper()
	_, srv := start(t, st, func(c *gateway.Config) {
		c.Datasets[0].Formats = []format.Format{f}
	})
	return srv
}

// A dataset served in place, over HTTP (what its batches hold, every
// sample once with the members of the fields named, is internal/batch/reader's
// TestReadInPlace): a batch's ETag differs with the fields read, a HEAD
// claims no Content-Length (not known before decoding), and columns= a
// dataset cannot give is 400.
func TestInPlaceHTTP(t *testing.T) {
	st, _ := inPlaceStore(t, formattest.Lines{})
	srv := startInPlace(t, st, formattest.Lines{})
	all, _ := get(t, srv.URL+"/epoch/1/batch/0?batch_size=16&seed=5")
	some, _ := get(t, srv.URL+"/epoch/1/batch/0?batch_size=16&seed=5&columns=txt")
	if all.StatusCode != http.StatusOK || some.StatusCode != http.StatusOK || all.Header.Get("ETag") == some.Header.Get("ETag") {
		t.Errorf("all fields: %d %s; columns=txt: %d %s: want 200s, two ETags", all.StatusCode, all.Header.Get("ETag"), some.StatusCode, some.Header.Get("ETag"))
	}
	head, _ := do(t, http.MethodHead, srv.URL+"/epoch/1/batch/0?batch_size=16&seed=5", nil)
	if head.StatusCode != http.StatusOK || head.Header.Get("Content-Length") != "" {
		t.Errorf("HEAD: %d, Content-Length %q: not known before decoding", head.StatusCode, head.Header.Get("Content-Length"))
	}
	for _, q := range []string{"columns=nope", "columns=txt,txt", "columns=txt,,len"} {
		if resp, body := get(t, srv.URL+"/epoch/1/batch/0?"+q); resp.StatusCode != http.StatusBadRequest {
			t.Errorf("%s: %d %s", q, resp.StatusCode, body)
		}
	}
}

// A cluster of 3 serves a dataset in place exactly once per epoch, each
// chunk decoded from one read of the store by its owner alone — with some
// fields read (columns=), and with chunks that learn their size — and any
// node answers any rank's batch with the same bytes.
func TestInPlaceCluster(t *testing.T) {
	for _, tc := range []struct {
		name    string
		f       formattest.Lines
		columns string
	}{{"all fields", formattest.Lines{}, ""}, {"columns, growing", formattest.Lines{Short: true}, "&columns=txt"}} {
		t.Run(tc.name, func(t *testing.T) {
			st, want := inPlaceStore(t, tc.f)
			local := st.(*s3backend.Local)
			const nodes, world, batch = 3, 6, 4
			cl := startCluster(t, &fixture{store: local}, nodes, nil, func(c *gateway.Config) {
				c.Datasets[0].Formats = []format.Format{tc.f}
			})
			ix, err := stored.ReadIndex(context.Background(), st)
			if err != nil {
				t.Fatal(err)
			}
			batches := (len(want) + world*batch - 1) / (world * batch)
			for epoch := range 2 {
				seen := map[string]int{}
				bodies := map[string][]byte{}
				for r := range world {
					q := fmt.Sprintf("seed=7&window=4&batch_size=%d&world=%d&rank=%d%s", batch, world, r, tc.columns)
					home := cl[cluster.Home(r, world, nodes)]
					for m, body := range readRank(t, home.srv.URL, q, epoch, batches) {
						for _, s := range readTar(t, body) {
							seen[s.key]++
							if string(s.files["txt"]) != want[s.key] {
								t.Fatalf("%s: %q, want %q", s.key, s.files["txt"], want[s.key])
							}
						}
						bodies[fmt.Sprintf("%d/%d", r, m)] = body
					}
				}
				exactlyOnce(t, seen, len(want), fmt.Sprintf("epoch %d over all ranks", epoch))
				for k, n := range cl {
					q := fmt.Sprintf("seed=7&window=4&batch_size=%d&world=%d&rank=%d%s", batch, world, 5, tc.columns)
					resp, body := get(t, fmt.Sprintf("%s/epoch/%d/batch/0?%s", n.srv.URL, epoch, q))
					if resp.StatusCode != http.StatusOK || !bytes.Equal(body, bodies["5/0"]) {
						t.Fatalf("node %d answered rank 5's batch 0 otherwise (%d)", k, resp.StatusCode)
					}
				}
			}
			var reads int
			for _, n := range cl {
				for k, c := range n.store.Total() {
					if strings.HasSuffix(k, ".lines") {
						reads += c.Reads
					}
				}
			}
			if reads != ix.NumChunks() {
				t.Errorf("the cluster read the store %d times for %d chunks over two epochs; want each once", reads, ix.NumChunks())
			}
		})
	}
}
