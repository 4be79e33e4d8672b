package integration

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/brandgw/brand/api"
	"github.com/brandgw/brand/chunkindex"
	"github.com/brandgw/brand/format/hostiletest"
	"github.com/brandgw/brand/internal/testsupport/miniotest"
	"github.com/brandgw/brand/internal/testsupport/promtest"
	"github.com/brandgw/brand/s3backend"
)

// damagedInput is a dataset served in place of two chunks: one intact,
// and one — the object bad, of samples samples — whose bytes do not
// decode.
type damagedInput struct {
	name    string
	objs    map[string][]byte
	bad     string // the damaged object's key
	stem    string // its samples' keys' prefix
	samples int    // in each chunk
	cause   string // what the 502 says of why
}

// TestDamagedInPlaceOnMinIO is the first defect as it was found,
// with `brand index` and `brand serve`, on a local store and on MinIO: a
// Hub-style Parquet file of 60 rows written by DuckDB with ZSTD pages,
// 1,000 bytes in its middle overwritten, answered `GET
// /epoch/0/batch/0` with 200 and none of its 60 samples,
// Brand-Batch-Samples counting them, no Brand-Missing-* header, nothing
// logged at error level, the empty chunk cached; the same for gzip and
// Snappy pages that inflate past their stated size, a value past its
// page, and MDS ZSTD and gzip shards that inflate past raw_data.bytes.
// Now (--on-damaged-chunk=fail, the default) each is a 502 naming the
// dataset, the chunk and the cause, logged at error level, counted in
// /metrics, and read — and refused — again by a second request; with
// --on-damaged-chunk=skip each is a 200 that names every sample it left
// out, twice alike.
func TestDamagedInPlaceOnMinIO(t *testing.T) {
	node, nodeEnv := duckDB(t)
	srv := miniotest.ForTest(t)
	bin := buildBrand(t)
	env := brandEnv(srv)

	work := t.TempDir()
	hub := filepath.Join(work, "hub.parquet")
	runDuckDB(t, node, nodeEnv, "hub", hub, "zstd", "60")
	good, err := os.ReadFile(hub)
	if err != nil {
		t.Fatal(err)
	}
	corpus := hostiletest.ParquetDamaged()
	pair := func(codec string, bad []byte) map[string][]byte {
		return map[string][]byte{"data/a.parquet": hostiletest.Parquet(hostiletest.Honest(hostiletest.Image, codec, 100)), "data/b.parquet": bad}
	}
	mdsPair := func(codec string) map[string][]byte {
		return hostiletest.MDS(hostiletest.MDSShard{Codec: codec, Samples: 40}, hostiletest.MDSShard{Codec: codec, Samples: 40, Hostile: "past"})
	}
	inputs := []damagedInput{
		{"hub-zstd", map[string][]byte{"data/train-00000-of-00002.parquet": good, "data/train-00001-of-00002.parquet": hostiletest.Overwrite(good, 1000)},
			"data/train-00001-of-00002.parquet", "data/train-00001-of-00002/", 60, "zstd"},
		{"gzip-past", pair(hostiletest.Gzip, corpus["gzip-past"]), "data/b.parquet", "data/b/", 100, "inflates past its stated size"},
		{"snappy-past", pair(hostiletest.Snappy, corpus["snappy-past"]), "data/b.parquet", "data/b/", 100, "its header says"},
		{"value-past-page", pair("", corpus["value-past-page"]), "data/b.parquet", "data/b/", 100, "a value of 1073741824 bytes"},
		{"mds-zstd-past", mdsPair(hostiletest.ZSTD), "shard.00001.mds.zstd", "shard.00001/", 40, "index.json says"},
		{"mds-gz-past", mdsPair(hostiletest.Gzip), "shard.00001.mds.gz", "shard.00001/", 40, "decompresses past the"},
	}

	// Every input on both stores, damaged before it is indexed (indexing
	// reads metadata alone), each indexed in place by `brand index`.
	bucket := srv.NewBucket(t)
	minio, err := s3backend.Open(t.Context(), "s3://"+bucket, srv.Config())
	if err != nil {
		t.Fatal(err)
	}
	var datasets []string
	for _, in := range inputs {
		dir := filepath.Join(work, "local", in.name)
		for k, b := range in.objs {
			if err := os.MkdirAll(filepath.Dir(filepath.Join(dir, k)), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, k), b, 0o644); err != nil {
				t.Fatal(err)
			}
			putBytes(t, minio, in.name+"/"+k, b)
		}
		for _, u := range []string{"file://" + dir, "s3://" + bucket + "/" + in.name} {
			out := runBrand(t, bin, env, "index", "--src", u, "--s3-endpoint", srv.URL())
			if !strings.Contains(out, fmt.Sprintf("indexed %d samples", 2*in.samples)) {
				t.Fatalf("brand index --src %s: %s", u, out)
			}
		}
		datasets = append(datasets, "--dataset", "local-"+in.name+"=file://"+dir, "--dataset", "minio-"+in.name+"=s3://"+bucket+"/"+in.name)
	}

	for _, mode := range []string{"fail", "skip"} {
		t.Run(mode, func(t *testing.T) {
			gw := serveProc(t, bin, env, srv.URL(), append([]string{"--cache-size", "64MiB", "--prefetch-concurrency", "0", "--on-damaged-chunk", mode}, datasets...)...)
			for _, in := range inputs {
				for _, where := range []string{"local-", "minio-"} {
					name := where + in.name
					t.Run(name, func(t *testing.T) {
						url := fmt.Sprintf("%s/epoch/0/batch/0?dataset=%s&batch_size=%d&seed=3", gw.url, name, 2*in.samples)
						var failures []float64
						for attempt := range 2 {
							resp, err := http.Get(url)
							if err != nil {
								t.Fatal(err)
							}
							body, err := io.ReadAll(resp.Body)
							resp.Body.Close()
							if err != nil {
								t.Fatal(err)
							}
							failures = append(failures, promValue(t, gw.url, "brand_chunk_decode_failures_total"))
							if mode == "fail" {
								var e api.Error
								if err := json.Unmarshal(body, &e); err != nil || resp.StatusCode != http.StatusBadGateway {
									t.Fatalf("attempt %d: %s %.300s; want a 502", attempt, resp.Status, body)
								}
								for _, says := range []string{"dataset " + name, "chunk " + in.bad + "#", "damaged at rest", in.cause} {
									if !strings.Contains(e.Error, says) {
										t.Errorf("attempt %d: %q does not say %q", attempt, e.Error, says)
									}
								}
								continue
							}
							if resp.StatusCode != http.StatusOK {
								t.Fatalf("attempt %d: %s %.300s", attempt, resp.Status, body)
							}
							missing := strings.Split(resp.Header.Get(api.HeaderMissingKeys), ",")
							if resp.Header.Get(api.HeaderMissingSamples) != strconv.Itoa(in.samples) || len(missing) != in.samples {
								t.Fatalf("attempt %d: %s %q, %d keys named; want the damaged chunk's %d", attempt, api.HeaderMissingSamples,
									resp.Header.Get(api.HeaderMissingSamples), len(missing), in.samples)
							}
							for _, k := range missing {
								if !strings.HasPrefix(k, name+"/"+in.stem) && !strings.HasPrefix(k, in.stem) {
									t.Errorf("attempt %d: %s names %s, not a sample of %s", attempt, api.HeaderMissingKeys, k, in.bad)
								}
							}
							served := tarKeys(t, body)
							if resp.Header.Get(api.HeaderBatchSamples) != strconv.Itoa(len(served)) || len(served) != in.samples {
								t.Errorf("attempt %d: %d samples served, %s says %s; want the intact chunk's %d",
									attempt, len(served), api.HeaderBatchSamples, resp.Header.Get(api.HeaderBatchSamples), in.samples)
							}
							for _, k := range served {
								if strings.Contains(k, in.stem) {
									t.Errorf("attempt %d: %s of the damaged chunk served", attempt, k)
								}
							}
						}
						if failures[0] <= 0 || failures[1] <= failures[0] {
							t.Errorf("brand_chunk_decode_failures_total went %v: the second request did not read the chunk again", failures)
						}
						// Logged at error level, naming the dataset, the chunk
						// and the fault, once a request.
						b, err := os.ReadFile(gw.logPath)
						if err != nil {
							t.Fatal(err)
						}
						n := 0
						for line := range strings.Lines(string(b)) {
							var e struct{ Level, Dataset, Chunk, Fault string }
							if json.Unmarshal([]byte(line), &e) == nil && e.Level == "error" && e.Dataset == name &&
								strings.HasPrefix(e.Chunk, in.bad+"#") && strings.Contains(e.Fault, in.cause) {
								n++
							}
						}
						if n != 2 {
							t.Errorf("%d error-level log lines naming %s's damaged chunk and why, want 2", n, name)
						}
					})
				}
			}
			if mode == "fail" {
				if got := promValue(t, gw.url, "brand_http_errors_total", `reason="damaged_chunk"`); got != float64(4*len(inputs)) {
					t.Errorf("brand_http_errors_total{reason=\"damaged_chunk\"} = %v, want %d", got, 4*len(inputs))
				}
			}
		})
	}
}

// promValue sums the series of metric name on a gateway's /metrics that
// carry every one of labels (promtest.Scrape.Sum).
func promValue(t *testing.T, base, name string, labels ...string) float64 {
	t.Helper()
	s, err := promtest.Read(bytes.NewReader(fetch(t, base+"/metrics")))
	if err != nil {
		t.Fatal(err)
	}
	return s.Sum(name, labels...)
}

// tarKeys are the samples' keys of a batch's tar, in order.
func tarKeys(t *testing.T, body []byte) []string {
	t.Helper()
	var keys []string
	if _, err := chunkindex.ScanTar(bytes.NewReader(body), func(s chunkindex.TarSample) error {
		keys = append(keys, s.Key)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return keys
}
