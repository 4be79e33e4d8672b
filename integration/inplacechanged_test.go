package integration

import (
	"archive/tar"
	"bytes"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	pq "github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/compress"

	"github.com/brandgw/brand/chunkindex"
	"github.com/brandgw/brand/internal/testsupport/miniotest"
	"github.com/brandgw/brand/s3backend"
)

// changedRows is the rows of changedParquet.
const changedRows = 90

// changedValue is row i's 4 KiB value, which no other row has.
func changedValue(i int) []byte {
	r := rand.New(rand.NewPCG(uint64(i), 53))
	b := make([]byte, 4096)
	for j := range b {
		b[j] = byte(r.Uint32())
	}
	return b
}

// changedParquet is a Parquet file of a binary column "data" (uncompressed
// and without a dictionary, as Hub image columns are stored: the gateway
// decodes it as it arrives from S3) and an integer "label", 30 rows a row
// group, and the offset of a byte in its middle, in a row's value.
func changedParquet(t *testing.T) ([]byte, int64) {
	t.Helper()
	sc := arrow.NewSchema([]arrow.Field{{Name: "data", Type: arrow.BinaryTypes.Binary}, {Name: "label", Type: arrow.PrimitiveTypes.Int64}}, nil)
	var recs []arrow.RecordBatch
	for g := range changedRows / 30 {
		recs = append(recs, newRecord(sc, func(b *array.RecordBuilder) {
			for i := g * 30; i < (g+1)*30; i++ {
				b.Field(0).(*array.BinaryBuilder).Append(changedValue(i))
				b.Field(1).(*array.Int64Builder).Append(int64(i % 7))
			}
		}))
	}
	file := writeParquet(t, sc, pq.NewWriterProperties(pq.WithCompression(compress.Codecs.Uncompressed), pq.WithDictionaryDefault(false)), recs...)
	at := bytes.Index(file, changedValue(changedRows/2))
	if at < 64<<10 || at > len(file)-64<<10 {
		t.Fatalf("row %d's value is at %d of %d bytes, not in the middle", changedRows/2, at, len(file))
	}
	return file, int64(at + 2000)
}

// A dataset served in place whose file changes after `brand index`, on
// MinIO and on a local disk, indexed with and without --checksums, through
// the processes a user runs. Before the change a batch of every sample
// is served, each sample's /samples/{key} is its bytes in the batch, and
// If-None-Match with the batch's ETag is 304. After a same-size edit of
// the file's middle a gateway that reads it answers 502 for the batch and
// for the conditional GET, and its log names the file. With the original
// bytes put back, the batch is served again under its ETag, with its
// bytes — but for a local file indexed without checksums, whose
// modification time has moved: it stays 502 until indexed again.
func TestInPlaceFileChanged(t *testing.T) {
	ctx := context.Background()
	srv := miniotest.ForTest(t)
	bin, env := buildBrand(t), brandEnv(srv)
	file, middle := changedParquet(t)
	edited := bytes.Clone(file)
	edited[middle] ^= 0x5a
	const key = "data/train-00000.parquet"

	type where struct {
		src, dataset string
		put          func(b []byte) // replaces the file's bytes
	}
	minio := func(t *testing.T) where {
		hub, own := srv.NewBucket(t), srv.NewBucket(t)
		st, err := s3backend.Open(ctx, "s3://"+hub, srv.Config())
		if err != nil {
			t.Fatal(err)
		}
		put := func(b []byte) { putBytes(t, st, key, b) }
		put(file)
		return where{src: "s3://" + hub, dataset: "s3://" + own + "/d", put: put}
	}
	local := func(t *testing.T) where {
		dir := t.TempDir()
		name := filepath.Join(dir, filepath.FromSlash(key))
		if err := os.MkdirAll(filepath.Dir(name), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(name, file, 0o644); err != nil {
			t.Fatal(err)
		}
		put := func(b []byte) { // in place, as an editor or a bad copy writes
			f, err := os.OpenFile(name, os.O_WRONLY, 0)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			if _, err := f.WriteAt(b, 0); err != nil {
				t.Fatal(err)
			}
		}
		return where{src: dir, dataset: t.TempDir(), put: put}
	}
	for _, tt := range []struct {
		name      string
		where     func(*testing.T) where
		checksums bool
		restored  int // the status once the original bytes are back
	}{
		{"minio", minio, false, http.StatusOK},
		{"minio, checksums", minio, true, http.StatusOK},
		{"local", local, false, http.StatusBadGateway},
		{"local, checksums", local, true, http.StatusOK},
	} {
		t.Run(tt.name, func(t *testing.T) {
			w := tt.where(t)
			args := []string{"index", "--src", w.src, "--dst", w.dataset, "--s3-endpoint", srv.URL()}
			if tt.checksums {
				args = append(args, "--checksums")
			}
			if out := runBrand(t, bin, env, args...); tt.checksums != strings.Contains(out, "checksums:") {
				t.Fatalf("brand index printed\n%s", out)
			}
			serve := func() *clusterProc {
				return serveProc(t, bin, env, srv.URL(), "--cache-size", "64MiB", "--dataset", "d="+w.dataset)
			}
			batch := fmt.Sprintf("/epoch/0/batch/0?batch_size=%d", changedRows)

			gw := serve()
			resp, indexed := httpGet(t, gw.url+batch)
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("before: %s %s", resp.Status, indexed)
			}
			etag := resp.Header.Get("ETag")
			keys, inBatch := splitSamples(t, indexed)
			if len(keys) != changedRows {
				t.Fatalf("batch 0 holds %d samples, want %d", len(keys), changedRows)
			}
			for _, k := range keys[:5] {
				if resp, b := httpGet(t, gw.url+"/samples/"+k); resp.StatusCode != http.StatusOK || !bytes.Equal(b, append(bytes.Clone(inBatch[k]), make([]byte, 1024)...)) {
					t.Fatalf("/samples/%s: %s, %d bytes; its bytes in the batch and the end-of-archive marker are %d", k, resp.Status, len(b), len(inBatch[k])+1024)
				}
			}
			if resp, _ := httpGet(t, serve().url+batch, "If-None-Match", etag); resp.StatusCode != http.StatusNotModified {
				t.Fatalf("before, If-None-Match: %s, want 304", resp.Status)
			}

			w.put(edited)
			gw = serve()
			resp, body := httpGet(t, gw.url+batch)
			if resp.StatusCode != http.StatusBadGateway || !bytes.Contains(body, []byte("store no longer matches")) && !bytes.Contains(body, []byte("checksum")) {
				t.Fatalf("after a same-size edit of the middle: %s %s, want 502 (the indexed bytes: %t)", resp.Status, body, bytes.Equal(body, indexed))
			}
			if resp, body := httpGet(t, gw.url+batch, "If-None-Match", etag); resp.StatusCode != http.StatusBadGateway {
				t.Fatalf("after the edit, If-None-Match: %s %s, want 502", resp.Status, body)
			}
			if log, err := os.ReadFile(gw.logPath); err != nil || !bytes.Contains(log, []byte("train-00000.parquet")) {
				t.Fatalf("the log does not name the file (%v):\n%s", err, log)
			}

			w.put(file)
			resp, body = httpGet(t, serve().url+batch)
			if resp.StatusCode != tt.restored || resp.StatusCode == http.StatusOK && (!bytes.Equal(body, indexed) || resp.Header.Get("ETag") != etag) {
				t.Fatalf("the original bytes put back: %s (the indexed bytes: %t, ETag %s, was %s), want %d",
					resp.Status, bytes.Equal(body, indexed), resp.Header.Get("ETag"), etag, tt.restored)
			}
		})
	}
}

// httpGet GETs url with the headers hdr (name, value, ...) and reads the
// body whole.
func httpGet(t *testing.T, url string, hdr ...string) (*http.Response, []byte) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, b
}

// splitSamples splits a body of tar samples (a batch) into each sample's
// bytes — its members' headers, data and padding — by key, in order, and
// checks the body ends in the end-of-archive marker.
func splitSamples(t *testing.T, body []byte) (keys []string, samples map[string][]byte) {
	t.Helper()
	cr := &countingBody{r: bytes.NewReader(body)}
	tr := tar.NewReader(cr)
	samples = map[string][]byte{}
	start, end := int64(0), int64(0)
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
		// The data read, the reader stands at its end; the padding follows.
		end = cr.n + (chunkindex.BlockSize-h.Size%chunkindex.BlockSize)%chunkindex.BlockSize
	}
	if len(keys) > 0 {
		samples[keys[len(keys)-1]] = body[start:end]
	}
	if !bytes.Equal(body[end:], make([]byte, 1024)) {
		t.Fatalf("the body ends in %d bytes after its last member, not the end-of-archive marker", len(body)-int(end))
	}
	return keys, samples
}

// countingBody counts the bytes read through it.
type countingBody struct {
	r io.Reader
	n int64
}

func (c *countingBody) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}
