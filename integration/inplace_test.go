package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"github.com/brandgw/brand/internal/testsupport/nodetest"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	pq "github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"

	"github.com/brandgw/brand/api"
	"github.com/brandgw/brand/client"
	"github.com/brandgw/brand/internal/testsupport/cmdtest"
	"github.com/brandgw/brand/internal/testsupport/miniotest"
	"github.com/brandgw/brand/s3backend"
)

// This file holds what the tests of datasets served in place share: a
// proxy in front of MinIO that counts what Brand's processes read and
// refuses writes to the source buckets, DuckDB found as the format
// packages' tests find it, Parquet written with arrow-go, and `brand
// index` and `brand serve` run as processes.

// storeProxy sits between Brand's processes and MinIO: it forwards every
// request, records each GET of an object (its key, its Range header and
// the body bytes it carried), and refuses every write to a read-only
// bucket — a Hub mirror a team may not write to — with S3's AccessDenied,
// counting them.
type storeProxy struct {
	*httptest.Server
	target    *url.URL
	transport *http.Transport
	readOnly  map[string]bool

	mu      sync.Mutex
	gets    []proxiedGet
	refused []string
}

// proxiedGet is one GET of an object that went through the proxy.
type proxiedGet struct {
	bucket, key string
	rng         string // the Range header; "" for a whole object
	status      int
	bytes       int64 // body bytes forwarded
}

func newStoreProxy(t *testing.T, target string, readOnly ...string) *storeProxy {
	t.Helper()
	u, err := url.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	p := &storeProxy{target: u, transport: &http.Transport{DisableCompression: true, MaxIdleConnsPerHost: 64},
		readOnly: map[string]bool{}}
	for _, b := range readOnly {
		p.readOnly[b] = true
	}
	p.Server = httptest.NewServer(p)
	t.Cleanup(p.Close)
	t.Cleanup(p.transport.CloseIdleConnections)
	return p
}

func (p *storeProxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	bucket, key, _ := strings.Cut(strings.TrimPrefix(r.URL.Path, "/"), "/")
	if r.Method != http.MethodGet && r.Method != http.MethodHead && p.readOnly[bucket] {
		p.mu.Lock()
		p.refused = append(p.refused, r.Method+" "+r.URL.Path)
		p.mu.Unlock()
		w.Header().Set("Content-Type", "application/xml")
		w.WriteHeader(http.StatusForbidden)
		fmt.Fprintf(w, `<?xml version="1.0" encoding="UTF-8"?><Error><Code>AccessDenied</Code><Message>%s is read-only</Message></Error>`, bucket)
		return
	}
	out := r.Clone(r.Context())
	out.URL.Scheme, out.URL.Host = p.target.Scheme, p.target.Host
	out.Host = r.Host // the host the request was signed for
	out.RequestURI = ""
	resp, err := p.transport.RoundTrip(out)
	if err != nil {
		http.Error(w, "store proxy: "+err.Error(), http.StatusBadGateway)
		return
	}
	defer resp.Body.Close()
	for k, v := range resp.Header {
		w.Header()[k] = v
	}
	w.WriteHeader(resp.StatusCode)
	n, _ := io.Copy(w, resp.Body)
	if r.Method == http.MethodGet && key != "" && r.URL.RawQuery == "" {
		p.mu.Lock()
		p.gets = append(p.gets, proxiedGet{bucket: bucket, key: key, rng: r.Header.Get("Range"), status: resp.StatusCode, bytes: n})
		p.mu.Unlock()
	}
}

// take returns the GETs of objects in bucket whose keys end in suffix
// since the last take, and forgets every GET recorded.
func (p *storeProxy) take(bucket, suffix string) []proxiedGet {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []proxiedGet
	for _, g := range p.gets {
		if g.bucket == bucket && strings.HasSuffix(g.key, suffix) {
			out = append(out, g)
		}
	}
	p.gets = nil
	return out
}

// writesRefused returns the writes to read-only buckets refused so far.
func (p *storeProxy) writesRefused() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.refused)
}

// getBytes sums the body bytes of gets.
func getBytes(gets []proxiedGet) int64 {
	var n int64
	for _, g := range gets {
		n += g.bytes
	}
	return n
}

// brandEnv is the environment Brand's processes run with: the store's
// credentials.
func brandEnv(srv *miniotest.Server) []string {
	return append(os.Environ(), "AWS_ACCESS_KEY_ID="+srv.AccessKey, "AWS_SECRET_ACCESS_KEY="+srv.SecretKey, "AWS_REGION=us-east-1")
}

// runBrand runs a `brand` command that ends (pack, index) and returns its
// output; a failure fails the test.
func runBrand(t *testing.T, bin string, env []string, args ...string) string {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Env = env
	out, err := runBounded(cmd, 3*time.Minute)
	if err != nil {
		t.Fatalf("brand %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// serveProc is a `brand serve` process on a free loopback port with
// args after the common ones, through the store at endpoint, started and
// stopped with the test.
func serveProc(t *testing.T, bin string, env []string, endpoint string, args ...string) *clusterProc {
	t.Helper()
	port := freePorts(t, 1)[0]
	p := &clusterProc{url: fmt.Sprintf("http://127.0.0.1:%d", port), logPath: filepath.Join(t.TempDir(), "serve.log"),
		args: append([]string{"serve", "--listen", fmt.Sprintf("127.0.0.1:%d", port), "--s3-endpoint", endpoint,
			"--cache-prefault=false", "--index-poll", "0", "--log-format", "json", "--shutdown-timeout", "10s"}, args...)}
	p.start(t, bin, env)
	t.Cleanup(func() {
		p.stop(t)
		if t.Failed() {
			t.Logf("brand serve's warnings:\n%s", warnings(p.logPath))
		}
	})
	return p
}

// duckDB returns node and the environment that lets it load DuckDB's
// node package (scripts/ensure-duckdb.sh installs it), as format/parquet's
// tests find them: without them the test skips, or fails with CI=true.
func duckDB(t *testing.T) (node string, env []string) {
	t.Helper()
	node, mods := nodetest.Find(t, nodetest.DuckDB)
	return node, append(os.Environ(), "NODE_PATH="+mods)
}

// runDuckDB runs testdata/inplace_duckdb.cjs with args.
func runDuckDB(t *testing.T, node string, env []string, args ...string) {
	t.Helper()
	cmd := exec.Command(node, append([]string{filepath.Join("testdata", "inplace_duckdb.cjs")}, args...)...)
	cmd.Env = env
	if out, err := runBounded(cmd, 2*time.Minute); err != nil {
		t.Fatalf("node inplace_duckdb.cjs %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

// writeParquet writes recs as one Parquet file with arrow-go's writer, a
// row group per record batch.
func writeParquet(t *testing.T, sc *arrow.Schema, props *pq.WriterProperties, recs ...arrow.RecordBatch) []byte {
	t.Helper()
	var buf bytes.Buffer
	w, err := pqarrow.NewFileWriter(sc, &buf, props, pqarrow.DefaultWriterProps())
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range recs {
		if err := w.Write(r); err != nil {
			t.Fatal(err)
		}
		r.Release()
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// newRecord builds a record batch of sc with fill.
func newRecord(sc *arrow.Schema, fill func(b *array.RecordBuilder)) arrow.RecordBatch {
	b := array.NewRecordBuilder(memory.DefaultAllocator, sc)
	defer b.Release()
	fill(b)
	return b.NewRecordBatch()
}

// columnChunk is where one column chunk of a Parquet file lies, as its
// footer says (read by arrow-go, independently of format/parquet).
type columnChunk struct {
	rowGroup int
	column   string // its path, dot-separated
	off, len int64  // from its first page (the dictionary's, if any), total_compressed_size
}

// columnChunks reads the column chunks of a Parquet file.
func columnChunks(t *testing.T, b []byte) []columnChunk {
	t.Helper()
	r, err := file.NewParquetReader(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	var out []columnChunk
	md := r.MetaData()
	for g := range md.NumRowGroups() {
		rg := md.RowGroup(g)
		for c := range rg.NumColumns() {
			cc, err := rg.ColumnChunk(c)
			if err != nil {
				t.Fatal(err)
			}
			off := cc.DataPageOffset()
			if cc.HasDictionaryPage() && cc.DictionaryPageOffset() > 0 && cc.DictionaryPageOffset() < off {
				off = cc.DictionaryPageOffset()
			}
			out = append(out, columnChunk{rowGroup: g, column: cc.PathInSchema().String(), off: off, len: cc.TotalCompressedSize()})
		}
	}
	return out
}

// putObjects uploads files (key → bytes) under a store, directly to
// MinIO.
func putObjects(t *testing.T, st s3backend.Store, files map[string][]byte) {
	t.Helper()
	for k, b := range files {
		putBytes(t, st, k, b)
	}
}

// listing is every object under st by key: its size, ETag and time.
func listing(t *testing.T, st s3backend.Store) map[string]s3backend.ObjectInfo {
	t.Helper()
	objs, err := st.List(context.Background(), "")
	if err != nil {
		t.Fatal(err)
	}
	out := make(map[string]s3backend.ObjectInfo, len(objs))
	for _, o := range objs {
		out[o.Key] = o
	}
	return out
}

// sameListing fails the test if a store's objects changed since before.
func sameListing(t *testing.T, what string, before, after map[string]s3backend.ObjectInfo) {
	t.Helper()
	for k, a := range after {
		b, ok := before[k]
		if !ok {
			t.Errorf("%s: object %s appeared", what, k)
		} else if a.Size != b.Size || a.ETag != b.ETag || !a.ModTime.Equal(b.ModTime) {
			t.Errorf("%s: object %s changed: %+v, was %+v", what, k, a, b)
		}
	}
	for k := range before {
		if _, ok := after[k]; !ok {
			t.Errorf("%s: object %s disappeared", what, k)
		}
	}
}

// readEpochOf reads epoch of job on every rank of world through the Go
// client from url and calls each with every sample (the batch's memory is
// released after it).
func readEpochOf(t *testing.T, url string, job api.Job, epoch int, each func(rank int, b *client.Batch, s client.Sample)) {
	t.Helper()
	world := max(job.World, 1)
	for rank := range world {
		j := job
		j.World, j.Rank = world, rank
		c, err := client.New(url, client.Options{Job: j, Ahead: 2})
		if err != nil {
			t.Fatal(err)
		}
		for b, err := range c.Epoch(context.Background(), epoch) {
			if err != nil {
				t.Fatalf("epoch %d rank %d of %s: %v", epoch, rank, job.Dataset+job.Mix.String(), err)
			}
			for _, s := range b.Samples {
				each(rank, b, s)
			}
			b.Release()
		}
	}
}

// statsBackendBytes is what a gateway's /stats says the jobs of dataset
// read from the store.
func statsBackendBytes(t *testing.T, url, dataset string) int64 {
	t.Helper()
	var stats struct {
		Jobs []api.JobStat `json:"jobs"`
	}
	if err := json.Unmarshal(fetch(t, url+"/stats"), &stats); err != nil {
		t.Fatal(err)
	}
	var n int64
	for _, j := range stats.Jobs {
		if j.Dataset == dataset {
			n += j.BackendBytes
		}
	}
	return n
}

// buildBrand builds the brand binary for the test (cmdtest.Build).
func buildBrand(t *testing.T) string { return cmdtest.Build(t, "brand") }
