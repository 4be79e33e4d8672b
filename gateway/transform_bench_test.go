package gateway_test

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/brandgw/brand/cluster"
	"github.com/brandgw/brand/gateway"
	"github.com/brandgw/brand/internal/gen/photos"
)

// BenchmarkTransformOffload measures an epoch of transformed batches on
// two in-process nodes sharing this machine's cores, node 1 with one
// transform worker and node 0 with two, so that node 1, owning half the
// chunks, gets about a third of the CPU and is the straggler; read by
// four ranks at once (two homed on each node, locality off: half
// of each rank's samples are of the other node's chunks). "owners": every
// sample is transformed by its chunk's owner; "balanced": a node whose
// owner's transform queue is longer than its own by more than the slack
// asks it for samples as stored and transforms them itself
// (route.OffloadSlack). It reports the epoch's wall time and how many
// images each node transformed.
//
//	go test -run '^$' -bench TransformOffload -count 3 ./gateway/
func BenchmarkTransformOffload(b *testing.B) {
	f := newImageFixture(b, 16, 16, func(id int) (string, []byte) {
		p, err := photos.Sized(5, id, 400, 300, 90)
		if err != nil {
			b.Fatal(err)
		}
		return "jpg", p.JPEG
	}) // 256 samples
	const world, batch = 4, 8
	batches := 256 / (world * batch)
	for _, mode := range []struct {
		name  string
		slack time.Duration
	}{{"balanced", 0}, {"balanced-slack-50ms", 50 * time.Millisecond}, {"owners", -1}} {
		b.Run(mode.name, func(b *testing.B) {
			cl := startCluster(b, &fixture{store: f.store}, 2, nil, func(c *gateway.Config) {
				c.Transforms = testTransforms(b)
				c.TransformWorkers = 2 - c.Cluster.Self
				c.TransformAheadBytes = -1 // each request's own work, so the epoch's time is the transforms'
				c.Cluster.TransformSlack = mode.slack
			})
			probed(b, cl)
			start := time.Now()
			for i := range b.N {
				var wg sync.WaitGroup
				for r := range world {
					wg.Go(func() {
						q := fmt.Sprintf("seed=1&window=16&batch_size=%d&world=%d&rank=%d&locality=false&transform=tiny", batch, world, r)
						readRank(b, cl[cluster.Home(r, world, 2)].srv.URL, q, i, batches)
					})
				}
				wg.Wait()
			}
			b.ReportMetric(float64(time.Since(start).Milliseconds())/float64(b.N), "ms/epoch")
			for k, n := range cl {
				b.ReportMetric(float64(imagesOf(n, "tiny"))/float64(b.N), fmt.Sprintf("node%d-images/epoch", k))
			}
			b.ReportMetric(0, "ns/op")
		})
	}
}
