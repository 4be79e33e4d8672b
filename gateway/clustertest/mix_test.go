package clustertest_test

import (
	"fmt"
	"net/url"
	"slices"
	"testing"

	"github.com/brandgw/brand/cluster"
	"github.com/brandgw/brand/gateway"
	"github.com/brandgw/brand/gateway/gatewaytest"
	"github.com/brandgw/brand/internal/testsupport/s3test"
)

// TestClusterSchedule: a schedule whose weights change at step 4, on a
// cluster of three nodes: every rank reads its home, peers are asked with
// the schedule, each chunk of each component is read from the store by
// one node once, and any node answers any rank's request with the same
// bytes. (A mixture's on two `brand serve` processes is integration's
// TestMixtureClusterOnMinIO; how a mixture's or a schedule's samples are
// assigned to ranks by locality, internal/batch/layout's TestMixtureLocality.)
func TestClusterSchedule(t *testing.T) {
	m := gatewaytest.NewMix(t)
	const nodes, world, batch = 3, 6, 8
	stores := make([]map[string]*s3test.Store, nodes) // each node's, by dataset
	cl := gatewaytest.StartCluster(t, m.Sets["web"].Store, nodes, nil, func(c *gateway.Config) {
		k := c.Cluster.Self
		stores[k] = map[string]*s3test.Store{}
		c.Datasets = slices.Clone(m.Specs)
		for i, spec := range c.Datasets {
			stores[k][spec.Name] = s3test.Wrap(spec.Store)
			c.Datasets[i].Store = stores[k][spec.Name]
		}
		c.Defaults = gateway.Defaults{BatchSize: batch, Window: 2, Seed: 5}
	})
	srvs := make([]string, nodes)
	for k, n := range cl {
		srvs[k] = n.Srv.URL
	}
	q := func(r int) string {
		return fmt.Sprintf("mix_schedule=%s&window=6&world=%d&rank=%d",
			url.QueryEscape("0:"+gatewaytest.MixWeights+";4:web:0.2,code:0.2,books:0.6"), world, r)
	}
	const batches = 10 // K = 48: 440 samples rounded up to 480, ten global batches
	bodies := map[string][32]byte{}
	for r := range world {
		for b := range batches {
			_, sum := m.Read(t, fmt.Sprintf("%s/epoch/0/batch/%d?%s", srvs[cluster.Home(r, world, nodes)], b, q(r)))
			bodies[fmt.Sprintf("%d/%d", r, b)] = sum
		}
	}
	for _, name := range m.Names {
		reads := map[string]int{}
		for k := range nodes {
			for obj, c := range stores[k][name].Take().Under("chunks/") {
				if c.Reads > 0 {
					reads[obj] += c.Reads
				}
			}
		}
		for obj, n := range reads {
			if n != 1 {
				t.Errorf("%s: chunk %s read %d times by the cluster", name, obj, n)
			}
		}
	}
	for _, r := range []int{0, 5} {
		for k, u := range srvs {
			if _, sum := m.Read(t, fmt.Sprintf("%s/epoch/0/batch/2?%s", u, q(r))); sum != bodies[fmt.Sprintf("%d/2", r)] {
				t.Fatalf("rank %d batch 2 from node %d differs from its home's", r, k)
			}
		}
	}
}
