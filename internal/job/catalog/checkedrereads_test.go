package catalog

import (
	"bytes"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/rs/zerolog"

	"github.com/brandgw/brand/format"
	"github.com/brandgw/brand/format/formattest"
	"github.com/brandgw/brand/format/parquet"
	"github.com/brandgw/brand/s3backend"
)

// A chunk whose bytes fail their checksums on one read and pass on the
// next is counted and logged alike, whichever checks them: a tar chunk's
// own CRC32Cs (the loader's loop), or the index's checksums of a chunk
// served in place (readChecked, read whole or streamed first). Each is
// one re-read in brand_chunk_rereads_total, one failed read in
// brand_chunk_checksum_failures_total, and a warning naming the chunk and
// its two reads.
func TestLoaderCountsEveryRereadThatPasses(t *testing.T) {
	var lines []string
	for i := range 200 {
		lines = append(lines, fmt.Sprintf("line %03d %s", i, strings.Repeat("z", 40)))
	}
	pq := binaryParquet(t)
	var opened atomic.Int64
	inPlace := func(f format.Format, files map[string][]byte, object string, stream bool) func(t *testing.T) (*Dataset, *Catalog) {
		return func(t *testing.T) (*Dataset, *Catalog) {
			d, c, local := checkedDataset(t, f, files, true, func(s s3backend.Store) s3backend.Store { return s })
			flip := &flipAt{Store: local, key: object, at: int64(len(files[object]) / 2), flips: 1}
			d.InPlace.Data = flip
			if stream {
				d.InPlace.Data = streamingStore{flip, &opened}
			}
			return d, c
		}
	}
	cases := []struct {
		name string
		open func(t *testing.T) (*Dataset, *Catalog)
	}{
		{"tar", func(t *testing.T) (*Dataset, *Catalog) {
			local := packedStore(t, 2, 3)
			fs := &flipStore{Store: local, key: "chunks/000000.tar", at: 600, flips: 1}
			return loadCatalog(t, fs)
		}},
		{"lines, read whole", inPlace(formattest.Lines{}, formattest.Write(map[string][]string{"a.lines": lines}), "a.lines", false)},
		{"parquet, read whole", inPlace(parquet.Format{}, map[string][]byte{"a.parquet": pq}, "a.parquet", false)},
		{"parquet, streamed", inPlace(parquet.Format{}, map[string][]byte{"a.parquet": pq}, "a.parquet", true)},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d, c := tc.open(t)
			var log bytes.Buffer // the loads below are one after another
			c.log = zerolog.New(&log)
			if err := loadAllChunks(d, NewLoader(c, time.Minute, 2)); err != nil {
				t.Fatalf("a chunk damaged on one read, with 2 re-reads: %v", err)
			}
			if got := testutil.ToFloat64(c.metrics.rereads); got != 1 {
				t.Errorf("brand_chunk_rereads_total = %v, want 1", got)
			}
			if got := testutil.ToFloat64(c.metrics.corruptChunks); got != 1 {
				t.Errorf("brand_chunk_checksum_failures_total = %v, want 1", got)
			}
			out := log.String()
			if strings.Count(out, "passed on a re-read") != 1 || !strings.Contains(out, `"level":"warn"`) || !strings.Contains(out, `"reads":2`) {
				t.Errorf("log %q: want one warning of a chunk that passed on its second read", out)
			}
		})
	}
	if opened.Load() == 0 {
		t.Fatal("no range was streamed")
	}
}
