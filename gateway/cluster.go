package gateway

import (
	"context"

	"github.com/brandgw/brand/api"
	"github.com/brandgw/brand/internal/batch/reader"
	"github.com/brandgw/brand/internal/batch/visit"
	"github.com/brandgw/brand/internal/cache/chunkcache"
	"github.com/brandgw/brand/internal/cluster/membership"
	"github.com/brandgw/brand/internal/cluster/peerreq"
	"github.com/brandgw/brand/internal/cluster/route"
	"github.com/brandgw/brand/internal/cluster/storepath"
	"github.com/brandgw/brand/internal/cluster/transport"
	"github.com/brandgw/brand/internal/job/catalog"
)

// A node of a cluster is three rooms (docs/architecture.md, "A cluster
// of gateways"), each handed, in New, to the parts that use it as the
// part's own interface:
//
//   - transport.Nodes, how to reach the other nodes and whether they are up
//     (the transport, liveness, what each last said of itself): to the
//     importance seals (feedback.Nodes), the hand-over and the peers'
//     endpoints (peerNodes);
//   - route.Router, which node a chunk's bytes come from: to the
//     schedule, the reader, the batches (internal/batch/visit) and the S3 face (router);
//   - membership.Tracker, who the members are, how a change applies, and
//     what the cluster agrees on (a membership version, each dataset's
//     index version): to the jobs (versions) and the peers' endpoints
//     (peerMembership).
//
// A single gateway has the null rooms of a cluster of one (route.Solo,
// membership.Solo, and feedback.Solo for the seals) and no peers'
// endpoints. What the gateway itself asks — its view for /cluster and
// /stats, leaving, starting the probes and polls — is node, which
// composes them and holds no logic. The rooms' goroutines run on parts of
// the gateway's stopper, which Close drains.

// node is what the gateway itself asks of its place in a cluster.
type node interface {
	// Settled is why this node, able to serve, should not report ready
	// yet: its peers and it have yet to see each other up
	// (membership.Tracker.Settled).
	Settled() error
	View(world int, datasets []string) api.Cluster
	Stats(datasets []string) *api.ClusterStats
	Leave(ctx context.Context) error
	Start()
}

// router is the router as the parts that route by it take it: the
// reader (reader.Remote) and the batches (visit.Peers); the schedule
// and the S3 face ask it whether a chunk is read here (Local), the plans
// how many members there are (Nodes).
type router interface {
	reader.Remote
	visit.Peers
}

// clusterNode composes a node of a cluster from its rooms.
type clusterNode struct {
	peers   *transport.Nodes
	members *membership.Tracker
	route   *route.Router
	store   *storepath.Watch
}

// Settled is membership.Tracker.Settled.
func (c clusterNode) Settled() error { return c.members.Settled() }

// View is the body of GET /cluster (membership.Tracker.View), this
// node's own reach of the store beside its peers' as they said it.
func (c clusterNode) View(world int, datasets []string) api.Cluster {
	v := c.members.View(world, datasets)
	if v.Self < len(v.Nodes) {
		v.Nodes[v.Self].StoreUnreachable = c.store.Down()
	}
	return v
}

// Stats is the cluster's part of /stats: the view, each peer's figures
// and where the batches' bytes came from.
func (c clusterNode) Stats(datasets []string) *api.ClusterStats {
	cs := &api.ClusterStats{Cluster: c.View(0, datasets), Peers: c.peers.Stats()}
	cs.HomeBytes, cs.PeerBytes = c.route.Locality()
	cs.Locality = 1
	if t := cs.HomeBytes + cs.PeerBytes; t > 0 {
		cs.Locality = float64(cs.HomeBytes) / float64(t)
	}
	return cs
}

// Leave takes this node out of its cluster (membership.Tracker.Leave).
func (c clusterNode) Leave(ctx context.Context) error { return c.members.Leave(ctx) }

// Start begins probing the peers and the store, and listing the members.
func (c clusterNode) Start() {
	c.peers.Start()
	c.store.Start()
	c.members.Start()
}

// soloNode is a single gateway's place: a cluster of one, unnamed.
type soloNode struct{}

// View is a cluster of this node alone, unnamed.
func (soloNode) View(world int, _ []string) api.Cluster {
	c := api.Cluster{Nodes: []api.ClusterNode{{Up: true}}}
	if world > 0 {
		c.Homes = make([]int, world)
	}
	return c
}

// Settled: a single gateway has no peers to see.
func (soloNode) Settled() error { return nil }

// Stats is nil: /stats shows no cluster.
func (soloNode) Stats([]string) *api.ClusterStats { return nil }

// Leave has no cluster to leave.
func (soloNode) Leave(context.Context) error { return nil }

// Start has nothing to run.
func (soloNode) Start() {}

// eitherOf is the loader's sources of chunks from peers, asked in turn
// before the store: the chunks handed over in a membership change
// (handover.Sources), then those the peers read for this node while it
// could not reach the store (storepath.Returned).
type eitherOf []catalog.Handover

// Read implements catalog.Handover.
func (e eitherOf) Read(ctx context.Context, k chunkcache.Key, buf []byte, verify func([]byte) error) bool {
	for _, h := range e {
		if h.Read(ctx, k, buf, verify) {
			return true
		}
	}
	return false
}

// nodeAsks is the other nodes as a part that both watches them and
// questions them sees them (the membership, the hand-over, the seals, a
// schedule's edit, the hand-back): transport's view of their liveness
// and the questions it puts to them, each its own type.
type nodeAsks struct {
	*transport.Nodes
	transport.Asks
}

// The questions by dataset: the parts that ask them name a catalog's
// dataset version, which the transport, knowing no catalog, takes as the
// wire names it (peerreq.Dataset).

func (n nodeAsks) Feedback(ctx context.Context, k int, ds *catalog.Dataset, job string, epoch uint64, seal string) ([]byte, error) {
	return n.Asks.Feedback(ctx, k, peerreq.Dataset(ds), job, epoch, seal)
}

func (n nodeAsks) Settle(ctx context.Context, k int, ds *catalog.Dataset, job string, epoch uint64, seal, version string) error {
	return n.Asks.Settle(ctx, k, peerreq.Dataset(ds), job, epoch, seal, version)
}

func (n nodeAsks) FetchChunk(ctx context.Context, url string, ds *catalog.Dataset, c int, buf []byte) error {
	return n.Asks.FetchChunk(ctx, url, peerreq.Dataset(ds), c, buf)
}

func (n nodeAsks) FetchChunkThrough(ctx context.Context, k int, ds *catalog.Dataset, c int, buf []byte) error {
	return n.Nodes.FetchChunkThrough(ctx, k, peerreq.Dataset(ds), c, buf)
}

func (n nodeAsks) Needed(ctx context.Context, url string, ds *catalog.Dataset, chunks []int, ahead int) ([]int, error) {
	return n.Asks.Needed(ctx, url, peerreq.Dataset(ds), chunks, ahead)
}

func (n nodeAsks) Held(ctx context.Context, url string, ds *catalog.Dataset, chunks []int) ([]int, error) {
	return n.Asks.Held(ctx, url, peerreq.Dataset(ds), chunks)
}

func (n nodeAsks) Keep(ctx context.Context, url string, ds *catalog.Dataset, chunks []int) error {
	return n.Asks.Keep(ctx, url, peerreq.Dataset(ds), chunks)
}

func (n nodeAsks) Give(ctx context.Context, url string, ds *catalog.Dataset, chunks []int) ([]int, error) {
	return n.Asks.Give(ctx, url, peerreq.Dataset(ds), chunks)
}
