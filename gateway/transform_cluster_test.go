package gateway_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/brandgw/brand/api"
	"github.com/brandgw/brand/cluster"
	"github.com/brandgw/brand/gateway"
	"github.com/brandgw/brand/internal/cluster/hedge"
	"github.com/brandgw/brand/transform"
)

// probed waits until every node of cl has its peers' state: until then a
// node asks its peers for samples as stored and transforms them itself.
func probed(t testing.TB, cl []*clusterNode) {
	t.Helper()
	waitFor(t, 20*time.Second, "every node's probe of every other", func() bool {
		for _, n := range cl {
			var c api.Cluster
			_, body := get(t, n.srv.URL+"/cluster")
			if err := json.Unmarshal(body, &c); err != nil {
				return false
			}
			for _, node := range c.Nodes {
				if len(node.Indexes) == 0 || !node.Up {
					return false
				}
			}
		}
		return true
	})
}

// imagesOf is how many images node n transformed with pipeline name.
func imagesOf(n *clusterNode, name string) uint64 {
	for _, p := range n.g.TransformStats().Pipelines {
		if p.Name == name {
			return p.Images
		}
	}
	return 0
}

// TestClusterTransformsWhereTheChunkIs: four nodes serve an epoch of
// transformed batches to eight ranks, each rank from its home: every
// sample arrives exactly once with the tensor its key gives; each chunk
// is read from the store once, by its owner, and each node transforms
// exactly the images of the chunks it read — a rank's samples of other
// nodes' chunks arrive from their owners transformed — so the work is
// spread as the chunks are; any node answers a rank's batch with its
// home's bytes.
func TestClusterTransformsWhereTheChunkIs(t *testing.T) {
	f := newImageFixture(t, 16, 8, smallPhotos(t)) // 128 samples
	const nodes, world, batch, perChunk = 4, 8, 4, 8
	batches := 128 / (world * batch)
	cl := startCluster(t, &fixture{store: f.store}, nodes, nil, func(c *gateway.Config) {
		c.Transforms = testTransforms(t)
		c.TransformWorkers = 2
		// Whatever the race detector does to the queues, the owners
		// transform (the rule that moves work is TestTransformAt's and
		// BenchmarkTransformOffload's).
		c.Cluster.TransformSlack = time.Minute
		// Nor does a late answer: a hedge asks the next node, which reads
		// the chunk again (TestS3FaceOnCluster).
		c.Cluster.Hedge = hedge.Config{Rate: -1}
		// Nor a fetch past its timeout: on a starved machine (CI at a
		// load of 12–15, the race detector on) an owner reading and
		// transforming a chunk for an asker took past the 2 s of the
		// test clusters, and the asker read the chunk itself (18 chunk
		// reads, 135 images). Timeouts' rule is transport's TestTimeoutIsThePeersFailureGivingUpIsNot.
		c.Cluster.PeerTimeout = time.Minute
	})
	probed(t, cl)
	seen := map[string]int{}
	bodies := map[string][]byte{}
	for r := range world {
		// Without locality most samples are of other nodes' chunks.
		q := fmt.Sprintf("seed=9&window=8&batch_size=%d&world=%d&rank=%d&locality=false&transform=tiny", batch, world, r)
		home := cl[cluster.Home(r, world, nodes)]
		for m, body := range readRank(t, home.srv.URL, q, 0, batches) {
			bodies[fmt.Sprintf("%d/%d", r, m)] = body
			for key, files := range tensorsOf(t, body) {
				seen[key]++
				if !bytes.Equal(files["npy"], f.wantTensor(t, "tiny", 9, 0, key)) {
					t.Errorf("rank %d batch %d: %s's tensor differs from its key's", r, m, key)
				}
			}
		}
	}
	exactlyOnce(t, seen, 128, "the transformed epoch over all ranks")
	var images uint64
	var atOwners float64
	for k, n := range cl {
		reads := n.store.Total().Under("chunks/").Sum().Reads
		got := imagesOf(n, "tiny")
		images += got
		if got != uint64(reads*perChunk) {
			t.Errorf("node %d transformed %d images; it read %d chunks of %d samples", k, got, reads, perChunk)
		}
		if self := metric(t, n.srv.URL, `brand_peer_transform_samples_total{where="self"}`); self != 0 {
			t.Errorf("node %d transformed %v samples of other nodes' chunks itself", k, self)
		}
		atOwners += metric(t, n.srv.URL, `brand_peer_transform_samples_total{where="owner"}`)
	}
	if reads := clusterReads(cl); reads != 16 || images != 128 {
		t.Errorf("the cluster read %d chunks and transformed %d images, want 16 and 128", reads, images)
	}
	if atOwners < 64 {
		t.Errorf("%v samples were asked of their owners transformed; without locality most of the 128 cross nodes", atOwners)
	}
	// Any node serves a rank's batch with its home's bytes.
	for _, r := range []int{1, 6} {
		q := fmt.Sprintf("seed=9&window=8&batch_size=%d&world=%d&rank=%d&locality=false&transform=tiny", batch, world, r)
		for k, n := range cl {
			resp, body := get(t, fmt.Sprintf("%s/epoch/0/batch/1?%s", n.srv.URL, q))
			if resp.StatusCode != http.StatusOK || !bytes.Equal(body, bodies[fmt.Sprintf("%d/1", r)]) {
				t.Errorf("rank %d batch 1 from node %d differs from its home's (%s)", r, k, resp.Status)
			}
		}
	}
}

// TestClusterPipelineDefinedOtherwise: a node whose pipeline of a name
// has another fingerprint (another definition, decoder or pixel bound) is
// asked for samples as stored, and the asker transforms them with its
// own: a batch is its server's pipeline throughout, under an ETag that
// names it.
func TestClusterPipelineDefinedOtherwise(t *testing.T) {
	f := newImageFixture(t, 8, 8, smallPhotos(t)) // 64 samples
	cl := startCluster(t, &fixture{store: f.store}, 2, nil, func(c *gateway.Config) {
		c.Transforms = testTransforms(t)
		if c.Cluster.Self == 1 {
			c.Transforms.Pipelines["tiny"] = transform.Spec{Ops: []transform.Op{{Op: transform.OpCenterCrop, Size: transform.Size{H: 5, W: 5, Square: true}}}}
		}
	})
	probed(t, cl)
	n := 0
	etags := map[string]bool{}
	for r := range 2 {
		q := fmt.Sprintf("seed=4&window=8&batch_size=8&world=2&rank=%d&locality=false&transform=tiny", r)
		for m, body := range readRank(t, cl[0].srv.URL, q, 0, 4) {
			for key, files := range tensorsOf(t, body) {
				n++
				if !bytes.Equal(files["npy"], f.wantTensor(t, "tiny", 4, 0, key)) {
					t.Errorf("rank %d batch %d: %s is not node 0's pipeline's tensor", r, m, key)
				}
			}
		}
		resp0, _ := get(t, fmt.Sprintf("%s/epoch/0/batch/0?%s", cl[0].srv.URL, q))
		resp1, _ := get(t, fmt.Sprintf("%s/epoch/0/batch/0?%s", cl[1].srv.URL, q))
		etags[resp0.Header.Get("ETag")], etags[resp1.Header.Get("ETag")] = true, true
	}
	if n != 64 {
		t.Errorf("%d samples", n)
	}
	if self := metric(t, cl[0].srv.URL, `brand_peer_transform_samples_total{where="self"}`); self == 0 {
		t.Error("node 0 asked node 1 for tensors of another pipeline")
	}
	if len(etags) != 4 {
		t.Errorf("%d ETags for two ranks' batch 0 from two differently configured nodes, want 4", len(etags))
	}
}
