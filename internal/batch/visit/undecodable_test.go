package visit_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/rs/zerolog"

	"github.com/brandgw/brand/chunkindex"
	"github.com/brandgw/brand/dataset"
	"github.com/brandgw/brand/format"
	"github.com/brandgw/brand/format/hostiletest"
	"github.com/brandgw/brand/format/mds"
	"github.com/brandgw/brand/format/parquet"
	"github.com/brandgw/brand/internal/testsupport/stagetest"
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

// lockedBuffer is a log's buffer written by the stages' goroutines.
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

// TestUndecodableChunk: a batch that reads a chunk served in place whose
// bytes do not decode (damagedSources) was served without its samples,
// nothing naming them, nothing logged at error level, and the empty
// chunk cached. In fail mode (the default) it fails with an error the
// gateway answers 502, naming the dataset, the chunk, "damaged at rest"
// and the cause, logged at error level and counted
// (brand_chunk_decode_failures_total), and a second read reads and fails
// again: nothing was cached. With --on-damaged-chunk=skip it is served
// without the chunk's samples, each named in batch order (the
// Brand-Missing-* headers' keys), the rest its samples, the same on a
// second read. The gateway's TestUndecodableChunkHTTP holds the statuses
// and headers.
func TestUndecodableChunk(t *testing.T) {
	srcs := damagedSources(t)
	var specs []stagetest.Spec
	for _, s := range srcs {
		specs = append(specs, stagetest.Spec{Name: s.name, URL: "file:///" + s.name, Store: s.store,
			Formats: []format.Format{parquet.Format{}, mds.Format{}}})
	}
	ctx := context.Background()
	for _, skip := range []bool{false, true} {
		t.Run(fmt.Sprint("skip=", skip), func(t *testing.T) {
			logs := &lockedBuffer{}
			st := stagetest.New(t, stagetest.Config{Datasets: specs, SkipDamaged: skip, Log: zerolog.New(logs)})
			for _, s := range srcs {
				t.Run(s.name, func(t *testing.T) {
					chunk, badKeys := s.badChunk(t)
					total := s.index.NumSamples()
					q := fmt.Sprintf("dataset=%s&batch_size=%d&seed=3", s.name, total)
					var failures []float64
					for attempt := range 2 {
						b, body, err := st.Batch(ctx, q, 0, 0)
						failures = append(failures, st.Metric(t, "brand_chunk_decode_failures_total"))
						if !skip {
							if err == nil || stagetest.Status(err) != http.StatusBadGateway {
								t.Fatalf("attempt %d: %v; want a 502", attempt, err)
							}
							for _, says := range []string{"dataset " + s.name, "chunk " + chunk, "damaged at rest", s.cause} {
								if msg := stagetest.Message(err); !strings.Contains(msg, says) {
									t.Errorf("attempt %d: %q does not say %q", attempt, msg, says)
								}
							}
							continue
						}
						if err != nil {
							t.Fatalf("attempt %d: %v", attempt, err)
						}
						laid, err := st.Layout(ctx, q, 0, 0)
						if err != nil {
							t.Fatal(err)
						}
						var wantMissing []string
						for i := range laid.Reads() {
							if _, _, in := laid.Sample(i); slices.Contains(badKeys, in.Key) {
								wantMissing = append(wantMissing, in.Key)
							}
						}
						if got := strings.Join(b.MissingKeys, ","); got != strings.Join(wantMissing, ",") || len(wantMissing) != len(badKeys) {
							t.Errorf("attempt %d: missing keys %q, want the chunk's %d samples %q", attempt, got, len(badKeys), strings.Join(wantMissing, ","))
						}
						if len(b.Missing) != len(badKeys) {
							t.Errorf("attempt %d: %d missing, want %d", attempt, len(b.Missing), len(badKeys))
						}
						served := stagetest.Samples(t, body)
						if len(served) != b.Len() || len(served) != total-len(badKeys) {
							t.Errorf("attempt %d: %d samples served, the batch says %d; want %d", attempt, len(served), b.Len(), total-len(badKeys))
						}
						for _, sm := range served {
							if slices.Contains(badKeys, sm.Key) {
								t.Errorf("attempt %d: %s of the damaged chunk served", attempt, sm.Key)
							}
						}
					}
					// Never cached: the second read read the chunk again,
					// as many times as the first (a read and its re-reads).
					if failures[0] <= 0 || failures[1]-failures[0] <= 0 {
						t.Errorf("brand_chunk_decode_failures_total went %v: the second read did not read the chunk again", failures)
					}
				})
			}
			if skip {
				if got := st.Metric(t, "brand_skipped_samples_total"); got == 0 {
					t.Error("brand_skipped_samples_total = 0")
				}
			}
			// Each chunk is logged at error level, named with its dataset
			// and why, on each read of it.
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
					t.Errorf("%s: %d error-level log lines naming the chunk and the fault, want one a read", s.name, n)
				}
			}
		})
	}
}
