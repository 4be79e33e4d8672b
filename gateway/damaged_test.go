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
	"testing"

	"github.com/brandgw/brand/api"
	"github.com/brandgw/brand/dataset"
	"github.com/brandgw/brand/format"
	"github.com/brandgw/brand/format/hostiletest"
	"github.com/brandgw/brand/format/parquet"
	"github.com/brandgw/brand/gateway"
	"github.com/brandgw/brand/gateway/gatewaytest"
	"github.com/brandgw/brand/s3backend"
)

// TestUndecodableChunkHTTP: the HTTP contract of a batch that reads a
// chunk served in place whose bytes do not decode (a Hub-style Parquet
// file with ZSTD pages, 1,000 bytes in its middle overwritten). In fail
// mode it is a 502 whose body names the dataset, the chunk and the cause,
// with no Brand-Batch-Samples, counted in brand_http_errors_total's
// damaged_chunk; with --on-damaged-chunk=skip a 200 whose
// Brand-Missing-Keys name the chunk's samples in the manifest's order,
// Brand-Missing-Samples counting them and Brand-Batch-Samples the rest.
// What each kind of undecodable chunk leaves out, that nothing is cached
// and what is logged, is internal/batch/visit's TestUndecodableChunk.
func TestUndecodableChunkHTTP(t *testing.T) {
	ctx := context.Background()
	st, err := s3backend.NewLocal(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	const bad = "data/train-00001-of-00002.parquet"
	for k, b := range map[string][]byte{
		"data/train-00000-of-00002.parquet": hostiletest.Hub(hostiletest.ZSTD, 60),
		bad:                                 hostiletest.Overwrite(hostiletest.Hub(hostiletest.ZSTD, 60), 1000),
	} {
		if _, err := st.Put(ctx, k, bytes.NewReader(b), int64(len(b))); err != nil {
			t.Fatal(err)
		}
	}
	res, err := dataset.IndexInPlace(ctx, st, st, dataset.InPlaceOptions{Formats: []format.Format{parquet.Format{}}})
	if err != nil {
		t.Fatal(err)
	}
	ix := res.Index
	var chunk string
	var badKeys []string
	for c := range ix.NumChunks() {
		if k := ix.Chunk(c).Key; strings.HasPrefix(k, bad+"#") || k == bad {
			chunk = k
			lo, n := ix.ChunkRange(c)
			for id := lo; id < lo+n; id++ {
				badKeys = append(badKeys, ix.SampleKey(id))
			}
		}
	}
	if chunk == "" {
		t.Fatalf("no chunk of %s", bad)
	}
	total := ix.NumSamples()
	for _, mode := range []string{gateway.OnDamagedFail, gateway.OnDamagedSkip} {
		t.Run(mode, func(t *testing.T) {
			_, srv := start(t, st, func(c *gateway.Config) {
				c.Datasets[0].Formats = []format.Format{parquet.Format{}}
				c.OnDamagedChunk = mode
			})
			q := fmt.Sprintf("batch_size=%d&seed=3", total)
			resp, body := get(t, srv.URL+"/epoch/0/batch/0?"+q)
			if mode == gateway.OnDamagedFail {
				var e api.Error
				if err := json.Unmarshal(body, &e); err != nil || resp.StatusCode != http.StatusBadGateway {
					t.Fatalf("%s %s; want a 502", resp.Status, body)
				}
				for _, says := range []string{"dataset test", "chunk " + chunk, "damaged at rest", "zstd"} {
					if !strings.Contains(e.Error, says) {
						t.Errorf("%q does not say %q", e.Error, says)
					}
				}
				if resp.Header.Get(api.HeaderBatchSamples) != "" {
					t.Errorf("a 502 with %s %s", api.HeaderBatchSamples, resp.Header.Get(api.HeaderBatchSamples))
				}
				if got := gatewaytest.ScrapeMetrics(t, srv.URL).Sum("brand_http_errors_total", `reason="damaged_chunk"`); got != 1 {
					t.Errorf("brand_http_errors_total{reason=\"damaged_chunk\"} = %v, want 1", got)
				}
				return
			}
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("%s %s", resp.Status, body)
			}
			var wantMissing []string
			for _, m := range manifestOf(t, srv.URL+"/epoch/0/batch/0/manifest?"+q).Samples {
				if slices.Contains(badKeys, m.Key) {
					wantMissing = append(wantMissing, m.Key)
				}
			}
			h := resp.Header
			if got := h.Get(api.HeaderMissingKeys); got != strings.Join(wantMissing, ",") || len(wantMissing) != len(badKeys) {
				t.Errorf("%s = %q, want the chunk's %d samples %q", api.HeaderMissingKeys, got, len(badKeys), strings.Join(wantMissing, ","))
			}
			if got := h.Get(api.HeaderMissingSamples); got != strconv.Itoa(len(badKeys)) {
				t.Errorf("%s = %q, want %d", api.HeaderMissingSamples, got, len(badKeys))
			}
			if served := readTar(t, body); h.Get(api.HeaderBatchSamples) != strconv.Itoa(len(served)) || len(served) != total-len(badKeys) {
				t.Errorf("%d samples served, %s says %s; want %d", len(served), api.HeaderBatchSamples, h.Get(api.HeaderBatchSamples), total-len(badKeys))
			}
		})
	}
}
