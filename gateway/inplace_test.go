package gateway_test

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/brandgw/brand/cluster"
	"github.com/brandgw/brand/dataset"
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

// A dataset served in place reads like any other: every sample once an
// epoch, each with the members its format makes of it; columns= reads
// some of them; what a layout cannot know before decoding (lengths) is
// not claimed.
//
// A format whose metadata could not bound its chunks (Short: every bound a
// quarter of what the chunk needs) serves the same: each chunk learns its
// size on its first load.
func TestInPlaceEpoch(t *testing.T) {
	for _, short := range []bool{false, true} {
		t.Run(fmt.Sprintf("short=%v", short), func(t *testing.T) { testInPlaceEpoch(t, formattest.Lines{Short: short}) })
	}
}

func testInPlaceEpoch(t *testing.T, f formattest.Lines) {
	st, want := inPlaceStore(t, f)
	srv := startInPlace(t, st, f)
	for _, tc := range []struct {
		columns string
		exts    []string
	}{{"", []string{"cls", "txt"}}, {"txt", []string{"txt"}}, {"len", []string{"cls"}}} {
		t.Run("columns="+tc.columns, func(t *testing.T) {
			q := "batch_size=16&seed=5"
			if tc.columns != "" {
				q += "&columns=" + tc.columns
			}
			seen := map[string]bool{}
			for m := range 8 {
				resp, body := get(t, fmt.Sprintf("%s/epoch/1/batch/%d?%s", srv.URL, m, q))
				if resp.StatusCode != http.StatusOK {
					t.Fatalf("batch %d: %d %s", m, resp.StatusCode, body)
				}
				for _, s := range readTar(t, body) {
					if seen[s.key] {
						t.Fatalf("%s served twice", s.key)
					}
					seen[s.key] = true
					var exts []string
					for e := range s.files {
						exts = append(exts, e)
					}
					sort.Strings(exts)
					if strings.Join(exts, ",") != strings.Join(tc.exts, ",") {
						t.Fatalf("%s: members %v", s.key, exts)
					}
					if d, ok := s.files["txt"]; ok && string(d) != want[s.key] {
						t.Fatalf("%s: %q, want %q", s.key, d, want[s.key])
					}
					if d, ok := s.files["cls"]; ok && string(d) != strconv.Itoa(len(want[s.key])) {
						t.Fatalf("%s: len %q", s.key, d)
					}
				}
			}
			if len(seen) != len(want) {
				t.Fatalf("%d samples of %d in the epoch", len(seen), len(want))
			}
		})
	}
	all, _ := get(t, srv.URL+"/epoch/1/batch/0?batch_size=16&seed=5")
	some, _ := get(t, srv.URL+"/epoch/1/batch/0?batch_size=16&seed=5&columns=txt")
	if all.Header.Get("ETag") == some.Header.Get("ETag") {
		t.Error("one ETag for two selections of fields")
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
			ix, err := dataset.ReadIndex(context.Background(), st)
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
				n.store.mu.Lock()
				for k, r := range n.store.reads {
					if strings.HasSuffix(k, ".lines") {
						reads += r
					}
				}
				n.store.mu.Unlock()
			}
			if reads != ix.NumChunks() {
				t.Errorf("the cluster read the store %d times for %d chunks over two epochs; want each once", reads, ix.NumChunks())
			}
		})
	}
}
