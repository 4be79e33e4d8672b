package gateway_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/rs/zerolog"

	"github.com/brandgw/brand/api"
	"github.com/brandgw/brand/chunkindex"
	"github.com/brandgw/brand/dataset"
	"github.com/brandgw/brand/format"
	"github.com/brandgw/brand/format/hostiletest"
	"github.com/brandgw/brand/format/mds"
	"github.com/brandgw/brand/format/parquet"
	"github.com/brandgw/brand/gateway"
	"github.com/brandgw/brand/s3backend"
)

// damagedSource is a dataset served in place of two chunks, one intact
// and one whose bytes do not decode.
type damagedSource struct {
	name  string
	objs  map[string][]byte
	bad   string // the object whose chunk does not decode
	cause string // what the 502 says of why
	store s3backend.Store
	index *chunkindex.Index
}

// damagedSources are the inputs, each beside an intact chunk of
// its kind: a Hub-style Parquet file with ZSTD pages, 1,000 bytes in its
// middle overwritten; gzip and Snappy pages that inflate past their
// stated size; a value past its page; MDS shards, ZSTD and gzip, that
// inflate past raw_data.bytes.
func damagedSources(t *testing.T) []*damagedSource {
	t.Helper()
	corpus := hostiletest.ParquetDamaged()
	parquetPair := func(codec string, bad []byte) map[string][]byte {
		return map[string][]byte{"data/a.parquet": hostiletest.Parquet(hostiletest.Honest(hostiletest.Image, codec, 100)), "data/b.parquet": bad}
	}
	mdsPair := func(codec string) map[string][]byte {
		return hostiletest.MDS(hostiletest.MDSShard{Codec: codec, Samples: 40}, hostiletest.MDSShard{Codec: codec, Samples: 40, Hostile: "past"})
	}
	srcs := []*damagedSource{
		{name: "hub-zstd", objs: map[string][]byte{
			"data/train-00000-of-00002.parquet": hostiletest.Hub(hostiletest.ZSTD, 60),
			"data/train-00001-of-00002.parquet": hostiletest.Overwrite(hostiletest.Hub(hostiletest.ZSTD, 60), 1000),
		}, bad: "data/train-00001-of-00002.parquet", cause: "zstd"},
		{name: "gzip-past", objs: parquetPair(hostiletest.Gzip, corpus["gzip-past"]), bad: "data/b.parquet", cause: "inflates past its stated size"},
		{name: "snappy-past", objs: parquetPair(hostiletest.Snappy, corpus["snappy-past"]), bad: "data/b.parquet", cause: "its header says"},
		{name: "value-past-page", objs: parquetPair("", corpus["value-past-page"]), bad: "data/b.parquet", cause: "a value of 1073741824 bytes"},
		{name: "mds-zstd-past", objs: mdsPair(hostiletest.ZSTD), bad: "shard.00001.mds.zstd", cause: "index.json says"},
		{name: "mds-gz-past", objs: mdsPair(hostiletest.Gzip), bad: "shard.00001.mds.gz", cause: "decompresses past the"},
	}
	ctx := context.Background()
	for _, s := range srcs {
		st, err := s3backend.NewLocal(t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		// Damaged before it is indexed: indexing reads metadata alone, so
		// bit rot in the data is found when a chunk is read.
		for k, b := range s.objs {
			if _, err := st.Put(ctx, k, bytes.NewReader(b), int64(len(b))); err != nil {
				t.Fatal(err)
			}
		}
		res, err := dataset.IndexInPlace(ctx, st, st, dataset.InPlaceOptions{Formats: []format.Format{parquet.Format{}, mds.Format{}}})
		if err != nil {
			t.Fatalf("%s: %v", s.name, err)
		}
		if res.Index.NumChunks() != 2 {
			t.Fatalf("%s: %d chunks", s.name, res.Index.NumChunks())
		}
		s.store, s.index = st, res.Index
	}
	return srcs
}

// badChunk is the chunk of s that does not decode, and its samples' keys.
func (s *damagedSource) badChunk(t *testing.T) (key string, keys []string) {
	for c := range s.index.NumChunks() {
		if ch := s.index.Chunk(c); strings.HasPrefix(ch.Key, s.bad+"#") || ch.Key == s.bad {
			lo, n := s.index.ChunkRange(c)
			for id := lo; id < lo+n; id++ {
				keys = append(keys, s.index.SampleKey(id))
			}
			return ch.Key, keys
		}
	}
	t.Fatalf("%s: no chunk of %s", s.name, s.bad)
	return "", nil
}

// lockedBuffer is a log's buffer written by the gateway's goroutines.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestUndecodableChunkHTTP is the first defect over HTTP, for
// each of its inputs (damagedSources): a batch that reads a chunk served
// in place whose bytes do not decode answered 200 without its samples,
// Brand-Batch-Samples counting them, no Brand-Missing-* header, nothing
// logged at error level, and the empty chunk cached. In fail mode (the
// default) it is a 502 whose body names the dataset, the chunk and the
// cause, logged at error level, counted in /metrics
// (brand_chunk_decode_failures_total, brand_http_errors_total's
// damaged_chunk), and a second request reads and fails again: nothing
// was cached. With --on-damaged-chunk=skip it is a 200 without the
// chunk's samples, each named in Brand-Missing-Keys in batch order,
// Brand-Missing-Samples counting them, Brand-Batch-Samples the rest, the
// same on a second request.
func TestUndecodableChunkHTTP(t *testing.T) {
	srcs := damagedSources(t)
	var specs []gateway.DatasetSpec
	for _, s := range srcs {
		specs = append(specs, gateway.DatasetSpec{Name: s.name, URL: "file:///" + s.name, Store: s.store,
			Formats: []format.Format{parquet.Format{}, mds.Format{}}})
	}
	for _, mode := range []string{gateway.OnDamagedFail, gateway.OnDamagedSkip} {
		t.Run(mode, func(t *testing.T) {
			logs := &lockedBuffer{}
			_, srv := start(t, nil, func(c *gateway.Config) {
				c.Datasets = specs
				c.OnDamagedChunk = mode
				c.Logger = zerolog.New(logs)
				c.PrefetchConcurrency = -1 // every load a request's
			})
			for _, s := range srcs {
				t.Run(s.name, func(t *testing.T) {
					chunk, badKeys := s.badChunk(t)
					total := s.index.NumSamples()
					batch := fmt.Sprintf("%s/epoch/0/batch/0?dataset=%s&batch_size=%d&seed=3", srv.URL, s.name, total)
					var failures []float64
					for attempt := range 2 {
						resp, body := get(t, batch)
						failures = append(failures, metric(t, srv.URL, "brand_chunk_decode_failures_total"))
						if mode == gateway.OnDamagedFail {
							var e api.Error
							if err := json.Unmarshal(body, &e); err != nil || resp.StatusCode != http.StatusBadGateway {
								t.Fatalf("attempt %d: %s %s; want a 502", attempt, resp.Status, body)
							}
							for _, says := range []string{"dataset " + s.name, "chunk " + chunk, "damaged at rest", s.cause} {
								if !strings.Contains(e.Error, says) {
									t.Errorf("attempt %d: %q does not say %q", attempt, e.Error, says)
								}
							}
							if resp.Header.Get(api.HeaderBatchSamples) != "" {
								t.Errorf("attempt %d: a 502 with %s %s", attempt, api.HeaderBatchSamples, resp.Header.Get(api.HeaderBatchSamples))
							}
							continue
						}
						if resp.StatusCode != http.StatusOK {
							t.Fatalf("attempt %d: %s %s", attempt, resp.Status, body)
						}
						man := manifestOf(t, fmt.Sprintf("%s/epoch/0/batch/0/manifest?dataset=%s&batch_size=%d&seed=3", srv.URL, s.name, total))
						var wantMissing []string
						for _, m := range man.Samples {
							if slices.Contains(badKeys, m.Key) {
								wantMissing = append(wantMissing, m.Key)
							}
						}
						h := resp.Header
						if got := h.Get(api.HeaderMissingKeys); got != strings.Join(wantMissing, ",") || len(wantMissing) != len(badKeys) {
							t.Errorf("attempt %d: %s = %q, want the chunk's %d samples %q", attempt, api.HeaderMissingKeys, got, len(badKeys), strings.Join(wantMissing, ","))
						}
						if got := h.Get(api.HeaderMissingSamples); got != strconv.Itoa(len(badKeys)) {
							t.Errorf("attempt %d: %s = %q, want %d", attempt, api.HeaderMissingSamples, got, len(badKeys))
						}
						served := readTar(t, body)
						if got := h.Get(api.HeaderBatchSamples); got != strconv.Itoa(len(served)) || len(served) != total-len(badKeys) {
							t.Errorf("attempt %d: %d samples served, %s says %s; want %d", attempt, len(served), api.HeaderBatchSamples, got, total-len(badKeys))
						}
						for _, sm := range served {
							if slices.Contains(badKeys, sm.key) {
								t.Errorf("attempt %d: %s of the damaged chunk served", attempt, sm.key)
							}
						}
					}
					// Never cached: the second request read the chunk again,
					// as many times as the first (a read and its re-reads).
					before := 0.0
					if len(failures) > 0 {
						before = failures[0]
					}
					if failures[0] <= 0 || failures[1]-failures[0] <= 0 {
						t.Errorf("brand_chunk_decode_failures_total went %v: the second request did not read the chunk again (%v before)", failures, before)
					}
				})
			}
			if mode == gateway.OnDamagedFail {
				if got := scrapeMetrics(t, srv.URL).Sum("brand_http_errors_total", `reason="damaged_chunk"`); got != float64(2*len(srcs)) {
					t.Errorf("brand_http_errors_total{reason=\"damaged_chunk\"} = %v, want %d", got, 2*len(srcs))
				}
			} else if got := metric(t, srv.URL, "brand_skipped_samples_total"); got == 0 {
				t.Error("brand_skipped_samples_total = 0")
			}
			// Each chunk is logged at error level, named with its dataset
			// and why, on each request that read it.
			for _, s := range srcs {
				chunk, _ := s.badChunk(t)
				n := 0
				for line := range strings.Lines(logs.String()) {
					var e struct{ Level, Dataset, Chunk, Fault string }
					if json.Unmarshal([]byte(line), &e) == nil && e.Level == "error" && e.Dataset == s.name && e.Chunk == chunk && strings.Contains(e.Fault, s.cause) {
						n++
					}
				}
				if n != 2 {
					t.Errorf("%s: %d error-level log lines naming the chunk and the fault, want one a request", s.name, n)
				}
			}
		})
	}
}
