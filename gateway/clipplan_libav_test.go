//go:build brand_libav

package gateway_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"testing"

	"github.com/brandgw/brand/api"
	"github.com/brandgw/brand/format"
	"github.com/brandgw/brand/format/video"
	"github.com/brandgw/brand/gateway"
	"github.com/brandgw/brand/internal/testsupport/s3test"
)

// /plan of a clip job predicts what the gateway then reads from the
// store for each epoch of that job, byte for byte. With a cache that holds
// the covering GOPs (64 MiB, and 48 KiB against GOPs of 30 KB), with the
// gateway's prefetch on: the first epoch their bytes once, the next ones
// nothing. With a cache smaller than the GOPs an epoch covers (24 KiB,
// 16 KiB), where eviction decides what is read again: the plan simulates
// the gateway's next-use policy as its use table keys chunks, by window
// (planner's Schedule), and the gateway reads exactly that with prefetch
// off and its use table's clock held still — which keeps its keys those
// of the job's order alone, as when the job keeps the pace the table
// expects; a job slower than that has its next window keyed before its
// current one until a rebuild for lateness, and the reads then depend on
// this machine's load (docs/planner.md, *Clip jobs*).
func TestClipPlanIsWhatAnEpochReads(t *testing.T) {
	files := map[string]string{}
	for i, f := range []string{"h264.mp4", "h264-bframes.mp4", "h264-gop10s.mp4", "h264-vfr.mp4"} {
		files[fmt.Sprintf("class%d/v%d.mp4", i%2, i)] = f
	}
	base, _ := videoStore(t, 4<<10, files)
	for _, tc := range []struct {
		cache int64
		holds bool // the covering GOPs
	}{{64 << 20, true}, {48 << 10, true}, {24 << 10, false}, {16 << 10, false}} {
		cache := tc.cache
		cs := s3test.Wrap(base)
		_, srv := start(t, cs, func(c *gateway.Config) {
			c.CacheSize = cache
			c.Datasets[0].Formats = []format.Format{video.Format{}}
			if !tc.holds {
				c.PrefetchConcurrency = -1
				gateway.HoldUseTableClock(c)
			}
		})
		const q = "clip=8&stride=2&batch_size=3"
		resp, body := get(t, fmt.Sprintf("%s/plan?%s&epochs=3&cache_size=%d", srv.URL, q, cache))
		var plan struct{ Clips api.ClipPlan }
		if err := json.Unmarshal(body, &plan); resp.StatusCode != http.StatusOK || err != nil || len(plan.Clips.Epochs) != 3 {
			t.Fatalf("/plan: %d %s", resp.StatusCode, body)
		}
		before := cs.Total().Sum().Bytes
		for epoch, e := range plan.Clips.Epochs {
			resp, body := get(t, fmt.Sprintf("%s/epoch/%d?%s", srv.URL, epoch, q))
			var info struct{ Batches int }
			if err := json.Unmarshal(body, &info); resp.StatusCode != http.StatusOK || err != nil {
				t.Fatalf("epoch %d: %d %s", epoch, resp.StatusCode, body)
			}
			for m := range info.Batches {
				if resp, body := get(t, fmt.Sprintf("%s/epoch/%d/batch/%d?%s", srv.URL, epoch, m, q)); resp.StatusCode != http.StatusOK {
					t.Fatalf("epoch %d, batch %d: %d %s", epoch, m, resp.StatusCode, body)
				}
			}
			after := cs.Total().Sum().Bytes
			read := after - before
			before = after
			t.Logf("cache %d, epoch %d: /plan %d store bytes (covering GOPs %d); the gateway read %d", cache, epoch, e.StoreBytes, e.CoveringBytes, read)
			if !tc.holds && epoch > 0 && read == 0 {
				t.Errorf("cache %d, epoch %d: nothing read again: the cache holds the GOPs, and no eviction is tested", cache, epoch)
			}
			if e.StoreBytes != read {
				t.Errorf("cache %d, epoch %d: /plan predicts %d store bytes, the gateway read %d", cache, epoch, e.StoreBytes, read)
			}
			if tc.holds && epoch == 0 && read != e.CoveringBytes {
				t.Errorf("cache %d: the first epoch read %d, its covering GOPs are %d bytes", cache, read, e.CoveringBytes)
			}
		}
	}
}
