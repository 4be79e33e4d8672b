package gateway_test

import (
	"archive/tar"
	"bytes"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"testing"

	"github.com/brandgw/brand/chunkindex"
	"github.com/brandgw/brand/format/formattest"
)

// GET /samples/{key} answers each sample of a dataset of packed tar
// chunks and of one served in place as the tar of its members a batch
// serves it in: the same bytes as the sample's part of a batch that
// holds it, ending in the end-of-archive marker, its Content-Length the
// body's; a HEAD claims no other length. (The reproduction: a 1,024-byte
// tar for every sample of a dataset served in place, whose length came
// from its deferred index, where it is 0.) What each format's decoder
// makes of a sample is its package's (format/parquet, format/mds,
// format/megatron), read by internal/batch/reader's TestReadInPlace.
func TestSampleByKey(t *testing.T) {
	cases := map[string]func(t *testing.T) (url string, samples int){
		"tar": func(t *testing.T) (string, int) {
			f := newFixture(t, 3, 7)
			_, srv := start(t, f.store, nil)
			return srv.URL, 21
		},
		"in place": func(t *testing.T) (string, int) {
			st, want := inPlaceStore(t, formattest.Lines{})
			return startInPlace(t, st, formattest.Lines{}).URL, len(want)
		},
	}
	for name, setup := range cases {
		t.Run(name, func(t *testing.T) {
			base, n := setup(t)
			resp, body := get(t, base+"/epoch/0/batch/0?batch_size="+strconv.Itoa(n))
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("batch: %s %s", resp.Status, body)
			}
			keys, inBatch := tarSamples(t, body)
			if len(keys) != n {
				t.Fatalf("batch 0 holds %d samples, want all %d", len(keys), n)
			}
			for _, key := range keys {
				u := base + "/samples/" + (&url.URL{Path: key}).EscapedPath()
				resp, got := get(t, u)
				want := append(bytes.Clone(inBatch[key]), make([]byte, 1024)...)
				if resp.StatusCode != http.StatusOK || !bytes.Equal(got, want) {
					t.Fatalf("/samples/%s: %s, %d bytes, want the batch's %d bytes of it and the end-of-archive marker (equal: %t)",
						key, resp.Status, len(got), len(want), bytes.Equal(got, want))
				}
				if cl := resp.Header.Get("Content-Length"); cl != strconv.Itoa(len(got)) {
					t.Fatalf("/samples/%s: Content-Length %s, body %d bytes", key, cl, len(got))
				}
				head, _ := do(t, http.MethodHead, u, nil)
				if cl := head.Header.Get("Content-Length"); head.StatusCode != http.StatusOK || cl != "" && cl != strconv.Itoa(len(got)) {
					t.Fatalf("HEAD /samples/%s: %s, Content-Length %q; the GET's body is %d bytes", key, head.Status, cl, len(got))
				}
			}
		})
	}
}

// tarSamples splits a body of tar samples (a batch, a sample) into each
// sample's bytes — its members' headers, data and padding — by key, in
// order, and checks the body ends in the end-of-archive marker.
func tarSamples(t testing.TB, body []byte) (keys []string, samples map[string][]byte) {
	t.Helper()
	cr := &offsetReader{r: bytes.NewReader(body)}
	tr := tar.NewReader(cr)
	samples = map[string][]byte{}
	start, end := int64(0), int64(0) // of the sample being read, its last member's end
	for {
		at := end
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("not a tar: %v", err)
		}
		key, _ := chunkindex.SplitKey(h.Name)
		if len(keys) == 0 || keys[len(keys)-1] != key {
			if len(keys) > 0 {
				samples[keys[len(keys)-1]] = body[start:at]
			}
			keys, start = append(keys, key), at
		}
		if _, err := io.Copy(io.Discard, tr); err != nil {
			t.Fatal(err)
		}
		// The data read, the reader stands at its end; the padding
		// follows.
		end = cr.n + (chunkindex.BlockSize-h.Size%chunkindex.BlockSize)%chunkindex.BlockSize
	}
	if len(keys) > 0 {
		samples[keys[len(keys)-1]] = body[start:end]
	}
	if rest := body[end:]; !bytes.Equal(rest, make([]byte, len(chunkindex.EndOfArchive))) {
		t.Fatalf("the body ends in %d bytes after its last member, not the end-of-archive marker", len(rest))
	}
	return keys, samples
}

// offsetReader counts the bytes read through it.
type offsetReader struct {
	r io.Reader
	n int64
}

func (o *offsetReader) Read(p []byte) (int, error) {
	n, err := o.r.Read(p)
	o.n += int64(n)
	return n, err
}
