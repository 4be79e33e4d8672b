package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/brandgw/brand/client"
	"github.com/brandgw/brand/gateway"
	"github.com/brandgw/brand/importance/snapshots"
	"github.com/brandgw/brand/internal/gen/synth"
)

// TestImportanceSealsOnMinIO: two gateways over one MinIO store, each
// holding different feedback, seal the same epochs at once. The epoch's
// pointer is created only if absent (If-None-Match: *), so every seal on
// either answers the one version it names; and as the job seals epoch
// after epoch the store keeps the snapshots of its last four only.
func TestImportanceSealsOnMinIO(t *testing.T) {
	p := packToMinIO(t, synth.Spec{Samples: 400, MeanBytes: 2048, Classes: 4, Seed: 9}, 64<<10)
	var urls []string
	for range 2 {
		_, url := startGateway(t, gateway.Config{
			Datasets:  []gateway.DatasetSpec{{Name: "synthetic", URL: p.url}},
			Backend:   p.server.Config(),
			CacheSize: 16 << 20,
			Defaults:  gateway.Defaults{BatchSize: 32, Window: 4, Seed: 5},
		})
		urls = append(urls, url)
	}
	ctx := context.Background()
	clients := make([]*client.Client, 2)
	for g := range clients {
		opts := client.Options{}
		opts.Job.Importance.Job = "minio-job"
		c, err := client.New(urls[g], opts)
		if err != nil {
			t.Fatal(err)
		}
		clients[g] = c
	}
	ids := make([]int, p.spec.Samples)
	for i := range ids {
		ids[i] = i
	}
	prev := ""
	for epoch := range 6 {
		for g, c := range clients {
			losses := make([]float32, len(ids))
			for i := range losses {
				losses[i] = float32((i+g+epoch)%7) + 1
			}
			if err := c.FeedbackIDs(ctx, epoch, ids, losses); err != nil {
				t.Fatal(err)
			}
		}
		versions := make([]string, 16)
		var wg sync.WaitGroup
		for i := range versions {
			wg.Go(func() {
				s, err := clients[i%2].Seal(ctx, epoch, prev)
				if err != nil {
					t.Errorf("seal %d of epoch %d: %v", i, epoch, err)
					return
				}
				versions[i] = s.Version
			})
		}
		wg.Wait()
		if d := slices.Compact(slices.Sorted(slices.Values(versions))); len(d) != 1 {
			t.Fatalf("epoch %d: seals on two gateways answered %v", epoch, d)
		}
		if v, err := snapshots.Sealed(ctx, p.store, "minio-job", uint64(epoch)); err != nil || v != versions[0] {
			t.Fatalf("epoch %d: the pointer names %q (%v), the seals answered %s", epoch, v, err, versions[0])
		}
		// Feedback after the seal is refused, on either gateway.
		for _, url := range urls {
			resp, err := http.Post(fmt.Sprintf("%s/importance/minio-job/feedback?epoch=%d", url, epoch), "application/json",
				strings.NewReader(`{"ids":[1],"losses":[1]}`))
			if err != nil {
				t.Fatal(err)
			}
			var e struct{ Error string }
			json.NewDecoder(resp.Body).Decode(&e)
			resp.Body.Close()
			if resp.StatusCode != http.StatusConflict || !strings.Contains(e.Error, "sealed") {
				t.Fatalf("feedback after the seal of epoch %d: %d %s; want 409", epoch, resp.StatusCode, e.Error)
			}
		}
		prev = versions[0]
	}
	objs, err := p.store.List(ctx, "_brand/importance/minio-job/")
	if err != nil {
		t.Fatal(err)
	}
	var pointers, snapshots int
	for _, o := range objs {
		if strings.Contains(o.Key, "/epochs/") {
			pointers++
		} else {
			snapshots++
		}
	}
	if pointers != 4 || snapshots != 4 {
		t.Fatalf("after 6 epochs the store holds %d pointers and %d snapshots, want the last 4 epochs': %v", pointers, snapshots, objs)
	}
}
