package gateway_test

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/brandgw/brand/api"
	"github.com/brandgw/brand/cluster"
	"github.com/brandgw/brand/gateway"
	"github.com/brandgw/brand/internal/peer"
)

// handoverJob is the job the hand-over tests read: 24 chunks of 10
// samples in windows of 8, two ranks.
const handoverJob = "seed=11&batch_size=10&window=8&world=2"

// startNode runs one elastic node over f's store, listening on ln as url
// and listing its members from list; wrap, if set, stands in front of
// the gateway (a peer whose endpoints misbehave); mutate adjusts its
// configuration.
func startNode(t *testing.T, f *fixture, ln net.Listener, url string, list *memberList, wrap func(http.Handler) http.Handler, mutate func(*gateway.Config)) *clusterNode {
	t.Helper()
	node := &clusterNode{store: newCountingStore(f.store)}
	node.g, _ = start(t, node.store, func(c *gateway.Config) {
		c.Cluster = gateway.ClusterConfig{Members: list, Advertise: url, MembersPoll: 10 * time.Millisecond,
			ProbeInterval: 20 * time.Millisecond, PeerTimeout: 2 * time.Second}
		c.PrefetchConcurrency = -1 // store reads counted on demand, and for the hand-over, only
		if mutate != nil {
			mutate(c)
		}
	})
	var h http.Handler = node.g
	if wrap != nil {
		h = wrap(node.g)
	}
	node.srv = &httptest.Server{Listener: ln, Config: &http.Server{Handler: h}}
	node.srv.Start()
	t.Cleanup(node.srv.Close)
	return node
}

// readSteps reads global steps [from, to) of an epoch of handoverJob,
// each rank from its home under the membership the nodes agree on.
func readSteps(t *testing.T, cl []*clusterNode, epoch, from, to int) {
	t.Helper()
	for m := from; m < to; m++ {
		for r := range 2 {
			base := cl[cluster.Home(r, 2, len(cl))].srv.URL
			resp, body := get(t, fmt.Sprintf("%s/epoch/%d/batch/%d?%s&rank=%d", base, epoch, m, handoverJob, r))
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("epoch %d step %d rank %d: %s: %s", epoch, m, r, resp.Status, body)
			}
		}
	}
}

// chunkReads is the chunk reads from the store of each node since the
// last call.
func chunkReads(cl []*clusterNode) []int {
	out := make([]int, len(cl))
	for k, n := range cl {
		_, reads := n.store.take()
		for _, c := range reads {
			out[k] += c
		}
	}
	return out
}

// twoThenJoin starts two nodes listing the first two of three URLs, reads
// epoch 0 of handoverJob through them (every chunk read once, and held by
// its owner), and returns them, the listeners and URLs of all three, and
// the lists.
func twoThenJoin(t *testing.T, f *fixture) ([]*clusterNode, []net.Listener, []string, []*memberList) {
	t.Helper()
	lns, urls := loopbacks(t, 3)
	lists := []*memberList{{}, {}, {}}
	for k := range 2 {
		lists[k].set(urls[:2]...)
	}
	lists[2].set(urls...)
	two, _ := cluster.NewMembership(urls[:2])
	cl := []*clusterNode{
		startNode(t, f, lns[0], urls[0], lists[0], nil, nil),
		startNode(t, f, lns[1], urls[1], lists[1], nil, nil),
	}
	waitMembers(t, cl, two.Version())
	readSteps(t, cl, 0, 0, 12) // 240 samples: the whole epoch
	if reads := chunkReads(cl); reads[0]+reads[1] != 24 {
		t.Fatalf("two nodes read %v chunks for an epoch of 24", reads)
	}
	return cl, lns, urls, lists
}

// lastChange is a node's figures of its last membership change, waiting
// for them.
func lastChange(t *testing.T, n *clusterNode, to string) api.MembershipChange {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		if c := clusterView(t, n.srv.URL).LastChange; c != nil && c.To == to {
			return *c
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s has no figures of a change to %s: %+v", n.srv.URL, to, clusterView(t, n.srv.URL))
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestJoinLoadsSoonNeededChunksFromTheOldOwner: a node joining two that
// have read an epoch loads, before the cluster moves to three members,
// the chunks it gains that the job needs in its next window, from their
// old owners' caches — the store is not read for them — and the job's
// next window then reads nothing from the store. The reproduction: a
// joining node owned its share cold, and the first batches under the new
// membership read its chunks from the store again.
func TestJoinLoadsSoonNeededChunksFromTheOldOwner(t *testing.T) {
	f := newFixture(t, 24, 10)
	cl, lns, urls, lists := twoThenJoin(t, f)
	three, _ := cluster.NewMembership(urls)
	cl = append(cl, startNode(t, f, lns[2], urls[2], lists[2], nil, nil))
	joined := lastChange(t, cl[2], three.Version())
	lists[0].set(urls...)
	lists[1].set(urls...)
	waitMembers(t, cl, three.Version())

	if joined.Chunks == 0 || joined.PeerBytes == 0 || joined.StoreBytes != 0 {
		t.Errorf("the joining node's change: %+v; want chunks from the old owners' caches and none from the store", joined)
	}
	if reads := chunkReads(cl); reads[0]+reads[1]+reads[2] != 0 {
		t.Errorf("the join read %v chunks from the store; the old owners held every chunk", reads)
	}
	if got := metricSum(t, cl[2].srv.URL, `brand_membership_moved_bytes_total{source="peer"}`); got != float64(joined.PeerBytes) {
		t.Errorf("brand_membership_moved_bytes_total{source=\"peer\"} = %v, /cluster says %d", got, joined.PeerBytes)
	}
	// The next epoch under the new membership: every chunk is held by
	// its owner, those the joining node gained copied from the old
	// owners' caches.
	readSteps(t, cl, 1, 0, 12)
	if reads := chunkReads(cl); reads[0]+reads[1]+reads[2] != 0 {
		t.Errorf("the epoch after the join read %v chunks from the store, want none", reads)
	}
}

// blockChunks holds every chunk request until release is closed.
type blockChunks struct {
	once    sync.Once
	asked   chan struct{} // closed at the first request
	release chan struct{}
}

func newBlockChunks() *blockChunks {
	return &blockChunks{asked: make(chan struct{}), release: make(chan struct{})}
}

func (b *blockChunks) wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == peer.ChunkPath {
			b.once.Do(func() { close(b.asked) })
			select {
			case <-b.release:
			case <-r.Context().Done():
				return
			}
		}
		next.ServeHTTP(w, r)
	})
}

// TestFlipWaitsForAWarmingGainer: while the joining node loads the chunks
// it gains (its old owners are slow to hand them over), the other nodes
// list the new membership but do not report it; once it is warm they do,
// and the cluster agrees on it. With a short flip timeout they report it
// anyway, and say so.
func TestFlipWaitsForAWarmingGainer(t *testing.T) {
	for _, tc := range []struct {
		name    string
		timeout time.Duration
	}{{"until warm", time.Minute}, {"until the timeout", 300 * time.Millisecond}} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, 24, 10)
			block := newBlockChunks()
			lns, urls := loopbacks(t, 3)
			lists := []*memberList{{}, {}, {}}
			two, _ := cluster.NewMembership(urls[:2])
			three, _ := cluster.NewMembership(urls)
			slow := func(timeout time.Duration) func(c *gateway.Config) {
				return func(c *gateway.Config) {
					c.Cluster.FlipTimeout = timeout
					c.Cluster.PeerTimeout = time.Minute // the hand-over waits for the old owner
				}
			}
			var cl []*clusterNode
			for k := range 2 {
				lists[k].set(urls[:2]...)
				cl = append(cl, startNode(t, f, lns[k], urls[k], lists[k], block.wrap, slow(tc.timeout)))
			}
			lists[2].set(urls...)
			waitMembers(t, cl, two.Version())
			readSteps(t, cl, 0, 0, 12)
			// The joining node's own bound is long: it warms up for as
			// long as the old owners take.
			cl = append(cl, startNode(t, f, lns[2], urls[2], lists[2], nil, slow(time.Minute)))
			t.Cleanup(func() { // first: the servers' Close waits for the requests held
				select {
				case <-block.release:
				default:
					close(block.release)
				}
			})
			<-block.asked // the joining node is loading from an old owner
			if v := clusterView(t, cl[2].srv.URL); v.Warming != three.Version() {
				t.Fatalf("the joining node, loading, says it warms up for %q, want %s", v.Warming, three.Version())
			}
			lists[0].set(urls...)
			lists[1].set(urls...)
			for _, n := range cl[:2] {
				for clusterView(t, n.srv.URL).Local != three.Version() {
					time.Sleep(5 * time.Millisecond)
				}
			}
			if tc.timeout < time.Minute {
				waitMembers(t, cl[:2], three.Version())
				c := lastChange(t, cl[0], three.Version())
				if !c.FlipTimedOut || metric(t, cl[0].srv.URL, "brand_membership_flip_timeouts_total") != 1 {
					t.Errorf("node 0 reported the new membership past the flip timeout: %+v, and counts %v timeouts", c, metric(t, cl[0].srv.URL, "brand_membership_flip_timeouts_total"))
				}
				return
			}
			time.Sleep(200 * time.Millisecond) // ten probes of the joining node
			for k, n := range cl[:2] {
				if v := clusterView(t, n.srv.URL); v.Reported != two.Version() || v.Members != two.Version() {
					t.Fatalf("node %d reports %s and agrees on %s while a gainer warms up; want %s", k, v.Reported, v.Members, two.Version())
				}
			}
			close(block.release)
			waitMembers(t, cl, three.Version())
			if c := lastChange(t, cl[0], three.Version()); c.FlipTimedOut || c.FlipSeconds < c.WarmSeconds {
				t.Errorf("node 0's change: %+v; want it reported once the gainer was warm", c)
			}
		})
	}
}

// TestPlannedLeaveHandsChunksOver: a node told to leave (Leave, as
// SIGTERM does) stops being ready, the others list the members without
// it, load the chunks they gain from its cache, and agree on a
// membership without it; then Leave returns. The survivors' next window
// reads nothing from the store. Its member list still names it, as a
// Kubernetes Service names a terminating pod.
func TestPlannedLeaveHandsChunksOver(t *testing.T) {
	for _, n := range []int{3, 2} {
		t.Run(fmt.Sprintf("%d nodes", n), func(t *testing.T) { plannedLeave(t, n) })
	}
}

// plannedLeave is TestPlannedLeaveHandsChunksOver on n nodes, the last
// leaving.
func plannedLeave(t *testing.T, n int) {
	f := newFixture(t, 24, 10)
	lns, urls := loopbacks(t, n)
	all, _ := cluster.NewMembership(urls)
	rest, _ := cluster.NewMembership(urls[:n-1])
	var cl []*clusterNode
	for k := range n {
		l := &memberList{}
		l.set(urls...)
		cl = append(cl, startNode(t, f, lns[k], urls[k], l, nil, nil))
	}
	waitMembers(t, cl, all.Version())
	readSteps(t, cl, 0, 0, 12)
	chunkReads(cl)

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	leaver := cl[n-1]
	if err := leaver.g.Leave(ctx); err != nil {
		t.Fatalf("Leave: %v", err)
	}
	if resp, body := get(t, leaver.srv.URL+"/readyz"); resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(string(body), "leaving") {
		t.Errorf("/readyz of a leaving node: %s: %s", resp.Status, body)
	}
	survivors := cl[:n-1]
	waitMembers(t, survivors, rest.Version())
	var peerBytes int64
	for k, n := range survivors {
		c := lastChange(t, n, rest.Version())
		if c.StoreBytes != 0 {
			t.Errorf("node %d read %d bytes from the store for the leave, want none: %+v", k, c.StoreBytes, c)
		}
		peerBytes += c.PeerBytes
	}
	if peerBytes == 0 {
		t.Error("no chunk was handed over by the leaving node")
	}
	reads := chunkReads(cl)
	for k, r := range reads {
		if r != 0 {
			t.Errorf("the leave read %v chunks from the store (node %d)", reads, k)
			break
		}
	}
	leaver.srv.Close()                // it exits
	readSteps(t, survivors, 1, 0, 12) // the next epoch
	if reads := chunkReads(survivors); slices.Max(reads) != 0 {
		t.Errorf("the epoch after the leave read %v chunks from the store, want none", reads)
	}
}

// TestChunkEndpoint: the endpoint that hands a chunk over takes a peer's
// credential and nothing else, answers a chunk the node's cache holds with
// its bytes and one it does not hold with 404 — it never reads the store
// for another node.
func TestChunkEndpoint(t *testing.T) {
	f := newFixture(t, 8, 10)
	secret := []byte("a shared secret of the test cluster")
	cl := startCluster(t, f, 2, nil, func(c *gateway.Config) { c.Cluster.Secret = secret })
	base := cl[0].srv.URL
	url := func(c int) string {
		return fmt.Sprintf("%s%s?dataset=test&index=%s&chunk=%d", base, peer.ChunkPath, f.index.ID(), c)
	}
	// Node 1's credential for chunk c, as its gateway computes it.
	cred := func(c int) []string { return signedBy(t, secret, cl[1].srv.URL, base, http.MethodGet, url(c), nil) }
	chunk := func(c int, hdr ...string) (*http.Response, []byte) { return get(t, url(c), hdr...) }
	if resp, body := chunk(0); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("without a credential: %s: %s", resp.Status, body)
	}
	if resp, body := chunk(0, "Authorization", "Bearer a-client-token"); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("with a client's token: %s: %s", resp.Status, body)
	}
	if resp, body := chunk(0, cred(0)...); resp.StatusCode != http.StatusNotFound || resp.Header.Get(peer.HeaderHeld) != "false" {
		t.Errorf("a chunk not held: %s (%s: %q): %s", resp.Status, peer.HeaderHeld, resp.Header.Get(peer.HeaderHeld), body)
	}
	if reads := clusterReads(cl); reads != 0 {
		t.Fatalf("asking for a chunk not held read %d chunks from the store", reads)
	}
	// Node 0 reads an epoch through its own cache: it holds its chunks.
	readRank(t, base, "seed=1&batch_size=10", 0, 8)
	held := 0
	for c := range f.index.NumChunks() {
		resp, body := chunk(c, cred(c)...)
		switch resp.StatusCode {
		case http.StatusOK:
			ch := f.index.Chunk(c)
			want := make([]byte, ch.Size)
			if err := f.store.ReadRange(context.Background(), ch.Key, ch.ETag, 0, want); err != nil {
				t.Fatal(err)
			}
			if string(body) != string(want) {
				t.Errorf("chunk %d: %d bytes, not the stored chunk's %d", c, len(body), len(want))
			}
			held++
		case http.StatusNotFound:
		default:
			t.Errorf("chunk %d: %s: %s", c, resp.Status, body)
		}
	}
	if held == 0 {
		t.Errorf("node 0 handed over none of its chunks after an epoch")
	}
	if resp, _ := chunk(f.index.NumChunks(), cred(f.index.NumChunks())...); resp.StatusCode != http.StatusBadRequest {
		t.Errorf("a chunk past the index: %s, want 400", resp.Status)
	}
}

// TestRemovedNodeHandsChunksOver: a node an operator removes from the
// member list (a file edited) while it still runs is the old owner of the
// chunks the others gain: they load the ones the job needs next from it
// before they agree on the smaller membership, and the next window reads
// nothing from the store.
func TestRemovedNodeHandsChunksOver(t *testing.T) {
	f := newFixture(t, 24, 10)
	lns, urls := loopbacks(t, 3)
	three, _ := cluster.NewMembership(urls)
	two, _ := cluster.NewMembership(urls[:2])
	var cl []*clusterNode
	var lists []*memberList
	for k := range 3 {
		l := &memberList{}
		l.set(urls...)
		lists = append(lists, l)
		cl = append(cl, startNode(t, f, lns[k], urls[k], l, nil, nil))
	}
	waitMembers(t, cl, three.Version())
	readSteps(t, cl, 0, 0, 12)
	for _, l := range lists {
		l.set(urls[:2]...)
	}
	waitMembers(t, cl[:2], two.Version())
	cl[2].srv.Close()
	chunkReads(cl)
	readSteps(t, cl[:2], 1, 0, 12)
	if reads := chunkReads(cl); reads[0]+reads[1] != 0 {
		t.Errorf("the epoch after the removal read %v chunks from the store, want none", reads)
	}
}

// TestLeaveWithNoOneToHandOverTo: a cluster stopped one node at a time,
// each leaving as SIGTERM makes it: the last ones have no member staying
// to hand their chunks to, and Leave returns without waiting for its
// bound; so does a node whose only peer is gone. The reproduction: the
// last node of four stopped in turn went back to the list of every
// member, waited out --leave-timeout, and its platform killed it.
func TestLeaveWithNoOneToHandOverTo(t *testing.T) {
	f := newFixture(t, 8, 10)
	for _, tc := range []struct {
		name  string
		nodes int
		gone  int // nodes gone, at the end, before the others leave in turn
	}{{"in turn", 4, 0}, {"the others gone", 2, 1}} {
		t.Run(tc.name, func(t *testing.T) {
			lns, urls := loopbacks(t, tc.nodes)
			all, _ := cluster.NewMembership(urls)
			var cl []*clusterNode
			for k := range tc.nodes {
				l := &memberList{}
				l.set(urls...)
				cl = append(cl, startNode(t, f, lns[k], urls[k], l, nil, nil))
			}
			waitMembers(t, cl, all.Version())
			for k := tc.nodes - 1; k >= tc.nodes-tc.gone; k-- {
				cl[k].srv.Close()
			}
			for k := tc.nodes - tc.gone - 1; k >= 0; k-- {
				ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
				err := cl[k].g.Leave(ctx)
				cancel()
				if err != nil {
					t.Fatalf("node %d of %d leaving: %v", k, tc.nodes, err)
				}
				cl[k].srv.Close()
			}
		})
	}
}
