package handover

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/rs/zerolog"

	"github.com/brandgw/brand/cluster"
	"github.com/brandgw/brand/internal/cache/chunkcache"
	"github.com/brandgw/brand/internal/job/catalog"
	"github.com/brandgw/brand/internal/testsupport/catalogtest"
)

// fakePeers: which nodes are up, what each says its streams need, what
// each old owner's cache gives (nil: 404), and who was asked what.
type fakePeers struct {
	mu     sync.Mutex
	down   map[string]bool
	needs  map[string][]int
	bad    map[string]bool // gives bytes that fail their check
	gone   map[string]bool // answers 404: its cache no longer holds the chunk
	held   map[string][]int
	strict bool // a node gives only the chunks held names, else 404
	// onNeeded, if set, runs when a node is asked which chunks its
	// streams need (Warm, after it has sorted its earlier gains).
	onNeeded func()
	asked    []string
	chunks   []string // "url chunk" fetched
	// kept is, per old owner, the chunks it was last told this node
	// will ask it for (Keep).
	kept map[string][]int
}

func (p *fakePeers) Keep(_ context.Context, url string, _ *catalog.Dataset, chunks []int) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.kept == nil {
		p.kept = map[string][]int{}
	}
	p.kept[url] = slices.Clone(chunks)
	return nil
}

func (p *fakePeers) IsUp(url string) bool { return !p.down[url] }

func (p *fakePeers) Needed(_ context.Context, url string, _ *catalog.Dataset, chunks []int, _ int) ([]int, error) {
	if p.onNeeded != nil {
		p.onNeeded()
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.asked = append(p.asked, url)
	return slices.DeleteFunc(slices.Clone(p.needs[url]), func(c int) bool { return !slices.Contains(chunks, c) }), nil
}

func (p *fakePeers) Held(_ context.Context, url string, _ *catalog.Dataset, chunks []int) ([]int, error) {
	return slices.DeleteFunc(slices.Clone(p.held[url]), func(c int) bool { return !slices.Contains(chunks, c) }), nil
}

func (p *fakePeers) FetchChunk(_ context.Context, url string, _ *catalog.Dataset, c int, buf []byte) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.strict && !slices.Contains(p.held[url], c) {
		return errors.New("404: not in this node's cache")
	}
	p.chunks = append(p.chunks, fmt.Sprint(url, " ", c))
	if p.gone[url] {
		return fmt.Errorf("chunk %d: 404", c)
	}
	if p.bad[url] {
		buf[0] = 'x'
	}
	return nil
}

// fakeCache loads through the Sources as the gateway's loader does: the
// old owner first, else the store.
type fakeCache struct {
	mu       sync.Mutex
	sources  *Sources
	resident map[chunkcache.Key]bool
	store    []chunkcache.Key
	refuse   bool // every load fails (the store is unreachable)
}

func (c *fakeCache) Contains(k chunkcache.Key) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.resident[k]
}

func (c *fakeCache) Capacity() int64 { return 1 << 30 }

func (c *fakeCache) Prefetch(ctx context.Context, r chunkcache.Request, _ func(chunkcache.Key) bool) (chunkcache.PrefetchResult, error) {
	if c.refuse {
		return chunkcache.PrefetchRejected, errors.New("the store is unreachable")
	}
	buf := make([]byte, r.Size)
	verify := func(b []byte) error {
		if b[0] == 'x' {
			return errors.New("bad CRC")
		}
		return nil
	}
	if !c.sources.Read(ctx, r.Key, buf, verify) {
		c.mu.Lock()
		c.store = append(c.store, r.Key)
		c.mu.Unlock()
	}
	c.mu.Lock()
	c.resident[r.Key] = true
	c.mu.Unlock()
	return chunkcache.PrefetchLoaded, nil
}

type noStreams struct{}

// ownStreams are this node's streams needing chunks soon.
type ownStreams []int

func (o ownStreams) Soon(_ *catalog.Dataset, chunks []int, _ int) []int {
	return slices.DeleteFunc(slices.Clone(chunks), func(c int) bool { return !slices.Contains(o, c) })
}

func (noStreams) Soon(*catalog.Dataset, []int, int) []int { return nil }

// TestWarm: a node gaining chunks loads those some live member of the old
// membership says its streams need, each from its old owner's cache when
// the old owner is up and its bytes pass their check, else from the
// store, then the others its old owners' caches hold, and counts where
// they came from; a down member is not asked, nothing needed nor held is
// nothing loaded, and loading is announced only when there is something
// to load.
func TestWarm(t *testing.T) {
	ds := catalogtest.Dataset(t, "d", 64, 2)
	a, b, c := "http://a:1", "http://b:1", "http://c:1"
	from, _ := cluster.NewMembership([]string{a, b})
	to, _ := cluster.NewMembership([]string{a, b, c})
	gained, _ := cluster.Moves(ds.ClusterKey(), ds.Counts, from, to, c)
	owners := ds.Owners(from)
	var ofA, ofB []int // c's gains by old owner
	for _, g := range gained {
		if from.Members()[owners[g]] == a {
			ofA = append(ofA, g)
		} else {
			ofB = append(ofB, g)
		}
	}
	if len(ofA) < 2 || len(ofB) < 2 {
		t.Fatalf("the test needs gains from both old owners: %v %v", ofA, ofB)
	}
	tests := []struct {
		name             string
		peers            *fakePeers
		chunks           int
		peerB, storeB    int64
		loading, askedOf []string
	}{
		{name: "nothing needed", peers: &fakePeers{}, askedOf: []string{a, b}},
		{name: "from the old owners", peers: &fakePeers{needs: map[string][]int{a: {ofA[0], ofB[0]}, b: {ofB[1]}}},
			chunks: 3, peerB: 3 * 1024, askedOf: []string{a, b}},
		{name: "an old owner's bytes fail", peers: &fakePeers{needs: map[string][]int{a: {ofA[0], ofB[0]}}, bad: map[string]bool{b: true}},
			chunks: 2, peerB: 1024, storeB: 1024, askedOf: []string{a, b}},
		{name: "the old owners no longer hold them", peers: &fakePeers{needs: map[string][]int{a: {ofA[0], ofB[0]}}, gone: map[string]bool{a: true, b: true}},
			chunks: 2, storeB: 2 * 1024, askedOf: []string{a, b}},
		{name: "an old owner down", peers: &fakePeers{needs: map[string][]int{a: {ofA[0], ofB[0]}}, down: map[string]bool{b: true}},
			chunks: 2, peerB: 1024, storeB: 1024, askedOf: []string{a}},
		{name: "then the others the old owners hold", peers: &fakePeers{needs: map[string][]int{a: {ofA[0]}}, held: map[string][]int{a: ofA, b: ofB[:1]}},
			chunks: len(ofA) + 1, peerB: int64(len(ofA)+1) * 1024, askedOf: []string{a, b}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			src := NewSources(tc.peers, zerolog.Nop())
			cache := &fakeCache{sources: src, resident: map[chunkcache.Key]bool{}}
			h := New(Config{Self: c, Peers: tc.peers, UseTable: noStreams{}, Cache: cache, Sources: src, PrefetchWindows: 1,
				Datasets: func() ([]*catalog.Dataset, error) { return []*catalog.Dataset{ds}, nil }})
			announced := false
			got, err := h.Warm(context.Background(), from, to, func() { announced = true })
			if err != nil {
				t.Fatal(err)
			}
			if got.Chunks != tc.chunks || got.PeerBytes != tc.peerB || got.StoreBytes != tc.storeB {
				t.Errorf("warmed %+v; want %d chunks, %d bytes from peers, %d from the store", got, tc.chunks, tc.peerB, tc.storeB)
			}
			if announced != (tc.chunks > 0) {
				t.Errorf("loading announced: %v, with %d chunks to load", announced, tc.chunks)
			}
			slices.Sort(tc.peers.asked)
			if !slices.Equal(tc.peers.asked, tc.askedOf) {
				t.Errorf("asked %v which chunks are needed, want %v", tc.peers.asked, tc.askedOf)
			}
			if len(cache.store) != int(tc.storeB/1024) {
				t.Errorf("read %d chunks from the store", len(cache.store))
			}
		})
	}
}

// TestGainsLeftToTheBatches: a gained chunk that Warm leaves to the
// batches (no stream needs it soon, its old owner did not hold it then)
// is asked of its old owner when a batch first needs it, once, and not
// if the old owner is down; a later change forgets them once this node
// reads them neither before nor after it (TestGainsLeftReadUntilTheFlip
// has the change between). Each warm-up tells the old owner which of
// its chunks this node will ask it for (Peers.Keep: it keeps its copies
// until then, TestDeferredGainKeptByItsOldOwner): those left to the
// batches, less those asked for since, none once forgotten. The
// reproduction: such chunks were read from the store although their old
// owner had read them for the jobs before the flip (brand-bench resize,
// epoch 1: 0.08 × the dataset from the store).
func TestGainsLeftToTheBatches(t *testing.T) {
	ds := catalogtest.Dataset(t, "d", 64, 2)
	a, c := "http://a:1", "http://c:1"
	from, _ := cluster.NewMembership([]string{a})
	to, _ := cluster.NewMembership([]string{a, c})
	gained, _ := cluster.Moves(ds.ClusterKey(), ds.Counts, from, to, c)
	if len(gained) < 4 {
		t.Fatalf("c gains %v", gained)
	}
	peers := &fakePeers{down: map[string]bool{}}
	src := NewSources(peers, zerolog.Nop())
	cache := &fakeCache{sources: src, resident: map[chunkcache.Key]bool{}}
	h := New(Config{Self: c, Peers: peers, UseTable: noStreams{}, Cache: cache, Sources: src, PrefetchWindows: 1,
		Datasets: func() ([]*catalog.Dataset, error) { return []*catalog.Dataset{ds}, nil }})
	if got, err := h.Warm(context.Background(), from, to, func() {}); err != nil || got.Chunks != 0 {
		t.Fatalf("warmed %+v, %v; want nothing loaded", got, err)
	}
	told := func(want []int, when string) {
		t.Helper()
		got, ok := peers.kept[a]
		if !ok || !slices.Equal(slices.Sorted(slices.Values(got)), slices.Sorted(slices.Values(want))) {
			t.Errorf("%s: the old owner was told this node will ask it for %v (told: %t), want %v", when, got, ok, want)
		}
	}
	told(gained, "after the join's warm-up")
	read := func(c int) bool {
		return src.Read(context.Background(), ds.ChunkKey(c), make([]byte, 1024), func([]byte) error { return nil })
	}
	if !read(gained[0]) {
		t.Errorf("chunk %d: not asked of its old owner", gained[0])
	}
	if read(gained[0]) {
		t.Errorf("chunk %d: asked of its old owner twice", gained[0])
	}
	peers.down[a] = true
	if read(gained[1]) {
		t.Errorf("chunk %d: asked of an old owner that is down", gained[1])
	}
	peers.down[a] = false
	// Two changes later (c leaves, then d joins a), c reads them neither
	// before nor after: forgotten.
	other, _ := cluster.NewMembership([]string{a, "http://d:1"})
	for i, ch := range [][2]*cluster.Membership{{to, from}, {from, other}} {
		if _, err := h.Warm(context.Background(), ch[0], ch[1], func() {}); err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			told(gained[2:], "after c leaves (it reads them until the flip), two of them asked for")
		} else {
			told(nil, "once forgotten")
		}
	}
	if read(gained[2]) {
		t.Errorf("chunk %d: asked after two later changes", gained[2])
	}
	if want := []string{fmt.Sprint(a, " ", gained[0])}; !slices.Equal(peers.chunks, want) {
		t.Errorf("fetched %v; want %v", peers.chunks, want)
	}
}

// TestGainsLeftReadUntilTheFlip: the gains a join left to the batches
// that a later change within the epoch moves away from this node (it
// leaves, or the load bound moves them to another member) are still
// asked of their old owner when a batch needs one before the cluster
// flips: until then this node reads them for the jobs. The reproduction
// (integration.TestClusterJoinAtEpochEnd under load, 3 -> 5 -> 4 nodes):
// the leave's warm-up dropped them, and a batch of the next epoch, still
// under the five, read such a chunk from the store on the joiner (and on
// the node leaving) while its old owner held it.
func TestGainsLeftReadUntilTheFlip(t *testing.T) {
	// A dataset whose chunks' placement (hashed from its index) has the
	// premise of both cases: some of c's gains move when b leaves.
	ds := catalogtest.Dataset(t, "e", 64, 2)
	a, b, c, d, e := "http://a:1", "http://b:1", "http://c:1", "http://d:1", "http://e:1"
	from, _ := cluster.NewMembership([]string{a, b, e})
	to, _ := cluster.NewMembership([]string{a, b, c, d, e})
	tests := []struct {
		name  string
		after *cluster.Membership
	}{
		{"b leaves, the load bound moves some of c's gains", mustMembers(t, a, c, d, e)},
		{"c leaves", mustMembers(t, a, b, d, e)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			gained, _ := cluster.Moves(ds.ClusterKey(), ds.Counts, from, to, c)
			var moved []int // c's gains that are not c's after
			for _, g := range gained {
				if tc.after.Members()[ds.Owners(tc.after)[g]] != c {
					moved = append(moved, g)
				}
			}
			if len(moved) == 0 {
				t.Fatalf("c gains %v, all of them still c's after", gained)
			}
			peers := &fakePeers{}
			src := NewSources(peers, zerolog.Nop())
			cache := &fakeCache{sources: src, resident: map[chunkcache.Key]bool{}}
			h := New(Config{Self: c, Peers: peers, UseTable: noStreams{}, Cache: cache, Sources: src, PrefetchWindows: 1,
				Datasets: func() ([]*catalog.Dataset, error) { return []*catalog.Dataset{ds}, nil }})
			for _, ch := range [][2]*cluster.Membership{{from, to}, {to, tc.after}} {
				if _, err := h.Warm(context.Background(), ch[0], ch[1], func() {}); err != nil {
					t.Fatal(err)
				}
			}
			for _, g := range moved {
				if !src.Read(context.Background(), ds.ChunkKey(g), make([]byte, 1024), func([]byte) error { return nil }) {
					t.Errorf("chunk %d, left to the batches by the join, c's until the cluster flips: not asked of its old owner, read from the store", g)
				}
				if want := fmt.Sprint(from.Members()[ds.Owners(from)[g]], " ", g); !slices.Contains(peers.chunks, want) {
					t.Errorf("chunk %d: fetched %v, want %q among them", g, peers.chunks, want)
				}
			}
		})
	}
}

func mustMembers(t *testing.T, urls ...string) *cluster.Membership {
	t.Helper()
	ms, err := cluster.NewMembership(urls)
	if err != nil {
		t.Fatal(err)
	}
	return ms
}

// TestGainsLeftThroughALaterChange: a later change keeps the gains an
// earlier one left to the batches while they stay this node's. The
// reproduction: a join (3 nodes to 5) left a joiner gains its old owners
// had not read yet in a cold epoch, and a planned leave in the next
// epoch, before the jobs reached them, dropped them: the joiner read
// them from the store although their old owner held them (brand-bench
// resize, the node's "later" list emptied at the leave's warm-up).
func TestGainsLeftThroughALaterChange(t *testing.T) {
	ds := catalogtest.Dataset(t, "d", 64, 2)
	a, b, c, d := "http://a:1", "http://b:1", "http://c:1", "http://d:1"
	from, _ := cluster.NewMembership([]string{a, b})
	to, _ := cluster.NewMembership([]string{a, b, c, d})
	after, _ := cluster.NewMembership([]string{a, c, d}) // b leaves
	gained, _ := cluster.Moves(ds.ClusterKey(), ds.Counts, from, to, c)
	owners := ds.Owners(to)
	var kept []int // c's gains from a, still c's once b has left
	for _, g := range gained {
		if from.Members()[ds.Owners(from)[g]] == a && after.Members()[ds.Owners(after)[g]] == c && to.Members()[owners[g]] == c {
			kept = append(kept, g)
		}
	}
	if len(kept) == 0 {
		t.Fatalf("c gains %v, none of them from a and still c's without b", gained)
	}
	peers := &fakePeers{}
	src := NewSources(peers, zerolog.Nop())
	cache := &fakeCache{sources: src, resident: map[chunkcache.Key]bool{}}
	h := New(Config{Self: c, Peers: peers, UseTable: noStreams{}, Cache: cache, Sources: src, PrefetchWindows: 1,
		Datasets: func() ([]*catalog.Dataset, error) { return []*catalog.Dataset{ds}, nil }})
	if _, err := h.Warm(context.Background(), from, to, func() {}); err != nil {
		t.Fatal(err)
	}
	if _, err := h.Warm(context.Background(), to, after, func() {}); err != nil {
		t.Fatal(err)
	}
	for _, g := range kept {
		if !src.Read(context.Background(), ds.ChunkKey(g), make([]byte, 1024), func([]byte) error { return nil }) {
			t.Errorf("chunk %d, gained from a and still c's after b left: not asked of a, read from the store", g)
		}
	}
}

// TestGainsLeftFromANodeThatLeaves: the gains a join left to the batches
// (their old owner b did not hold them yet) whose old owner then leaves
// (a planned leave before the jobs reach them) are copied from b in the
// leave's warm-up, while b still serves, rather than left to the
// batches, which would find b gone and read the store.
func TestGainsLeftFromANodeThatLeaves(t *testing.T) {
	ds, b, c, from, to, after, ofB := joinThenLeave(t)
	peers := &fakePeers{}
	src := NewSources(peers, zerolog.Nop())
	cache := &fakeCache{sources: src, resident: map[chunkcache.Key]bool{}}
	h := New(Config{Self: c, Peers: peers, UseTable: noStreams{}, Cache: cache, Sources: src, PrefetchWindows: 1, Workers: 1,
		Datasets: func() ([]*catalog.Dataset, error) { return []*catalog.Dataset{ds}, nil }})
	if _, err := h.Warm(context.Background(), from, to, func() {}); err != nil {
		t.Fatal(err)
	}
	if len(peers.chunks) != 0 || len(cache.store) != 0 {
		t.Fatalf("the join's warm-up loaded %v from peers and %v from the store; the old owners held nothing", peers.chunks, cache.store)
	}
	peers.held = map[string][]int{b: ofB} // b has read them for the jobs since
	change, err := h.Warm(context.Background(), to, after, func() {})
	if err != nil {
		t.Fatal(err)
	}
	for _, g := range ofB {
		if !slices.Contains(peers.chunks, fmt.Sprint(b, " ", g)) {
			t.Errorf("chunk %d, left to the batches by the join, its old owner b leaving: not copied from b in the leave's warm-up", g)
		}
	}
	if len(cache.store) != 0 || change.StoreBytes != 0 {
		t.Errorf("the leave's warm-up read %v from the store", cache.store)
	}
	// Nothing of b is left to the batches: b is gone once they come.
	for _, g := range ofB {
		if src.Read(context.Background(), ds.ChunkKey(g), make([]byte, 1024), func([]byte) error { return nil }) {
			t.Errorf("chunk %d still left to the batches, to be asked of b", g)
		}
	}
}

// TestGainsFromAnotherHolder: a gained chunk its old owner's cache does
// not hold is copied from another live member's that does, whether the
// jobs need it soon or not, rather than read from the store (or left to
// the batches, which would ask the old owner and then read the store).
// The reproduction (integration.TestClusterJoinAtEpochEnd under load): a
// join moved a chunk from a to b, which left it to the batches; before
// the jobs reached it on b, b left, and the chunk moved on to a joiner
// c, whose warm-up asked b alone, got 404 and read the store while a
// still held it.
func TestGainsFromAnotherHolder(t *testing.T) {
	ds := catalogtest.Dataset(t, "d", 64, 2)
	a, b, c := "http://a:1", "http://b:1", "http://c:1"
	from, _ := cluster.NewMembership([]string{a, b, c})
	to, _ := cluster.NewMembership([]string{a, c}) // b leaves
	gained, _ := cluster.Moves(ds.ClusterKey(), ds.Counts, from, to, c)
	var ofB []int // c's gains from b
	for _, g := range gained {
		if from.Members()[ds.Owners(from)[g]] == b {
			ofB = append(ofB, g)
		}
	}
	if len(ofB) < 2 {
		t.Fatalf("c gains %v, fewer than two of them from b", gained)
	}
	needed, other := ofB[0], ofB[1]
	peers := &fakePeers{strict: true, needs: map[string][]int{a: {needed}}, held: map[string][]int{a: {needed, other}}}
	src := NewSources(peers, zerolog.Nop())
	cache := &fakeCache{sources: src, resident: map[chunkcache.Key]bool{}}
	h := New(Config{Self: c, Peers: peers, UseTable: noStreams{}, Cache: cache, Sources: src, PrefetchWindows: 1,
		Datasets: func() ([]*catalog.Dataset, error) { return []*catalog.Dataset{ds}, nil }})
	change, err := h.Warm(context.Background(), from, to, func() {})
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(peers.chunks)
	want := []string{fmt.Sprint(a, " ", needed), fmt.Sprint(a, " ", other)}
	slices.Sort(want)
	if !slices.Equal(peers.chunks, want) {
		t.Errorf("copied %v from peers; want %v (a holds them, b does not)", peers.chunks, want)
	}
	if len(cache.store) != 0 || change.StoreBytes != 0 {
		t.Errorf("read %v from the store", cache.store)
	}
	if change.Chunks != 2 || change.PeerBytes != 2*1024 {
		t.Errorf("warmed %+v; want 2 chunks, 2048 bytes from peers", change)
	}
}

// TestGainsFromANodeThatLeavesReadMeanwhile: a batch that needs one of
// the gains a join left to the batches, while the warm-up of the leave of
// their old owner b has not copied it yet, asks b (which still serves)
// rather than read the store. The reproduction
// (integration.TestClusterJoinAtEpochEnd under load, one run before and
// one after the previous fixes: a joiner read a chunk from the store that
// no peer was asked for, while its leave warm-up loaded one chunk fewer
// than it planned): the leave's warm-up took such gains off the batches'
// list when it began, before planning its own gains and asking the
// peers, and a batch of the epoch, which the joiner served for it all
// the while, found the chunk on neither list.
func TestGainsFromANodeThatLeavesReadMeanwhile(t *testing.T) {
	ds, b, c, from, to, after, ofB := joinThenLeave(t)
	peers := &fakePeers{}
	src := NewSources(peers, zerolog.Nop())
	cache := &fakeCache{sources: src, resident: map[chunkcache.Key]bool{}}
	h := New(Config{Self: c, Peers: peers, UseTable: noStreams{}, Cache: cache, Sources: src, PrefetchWindows: 1,
		Datasets: func() ([]*catalog.Dataset, error) { return []*catalog.Dataset{ds}, nil }})
	if _, err := h.Warm(context.Background(), from, to, func() {}); err != nil {
		t.Fatal(err)
	}
	peers.held = map[string][]int{b: ofB} // b has read them for the jobs since
	g := ofB[0]
	var meanwhile []bool
	peers.onNeeded = func() {
		// A batch needs g while the leave's warm-up is under way.
		if len(meanwhile) == 0 {
			meanwhile = append(meanwhile, src.Read(context.Background(), ds.ChunkKey(g), make([]byte, 1024), func([]byte) error { return nil }))
		}
	}
	if _, err := h.Warm(context.Background(), to, after, func() {}); err != nil {
		t.Fatal(err)
	}
	if len(meanwhile) != 1 || !meanwhile[0] {
		t.Errorf("chunk %d, needed by a batch during b's leave warm-up: not asked of b (read meanwhile: %v), read from the store", g, meanwhile)
	}
	if !slices.Contains(peers.chunks, fmt.Sprint(b, " ", g)) {
		t.Errorf("fetched %v, want %q among them", peers.chunks, fmt.Sprint(b, " ", g))
	}
}

// joinThenLeave is a join of c and d to a and b, then b's planned leave:
// the memberships, and c's gains from b that stay c's once b has left.
func joinThenLeave(t *testing.T) (ds *catalog.Dataset, b, c string, from, to, after *cluster.Membership, ofB []int) {
	t.Helper()
	ds = catalogtest.Dataset(t, "d", 64, 2)
	a, b, c, d := "http://a:1", "http://b:1", "http://c:1", "http://d:1"
	from, _ = cluster.NewMembership([]string{a, b})
	to, _ = cluster.NewMembership([]string{a, b, c, d})
	after, _ = cluster.NewMembership([]string{a, c, d}) // b leaves
	gained, _ := cluster.Moves(ds.ClusterKey(), ds.Counts, from, to, c)
	for _, g := range gained {
		if from.Members()[ds.Owners(from)[g]] == b && after.Members()[ds.Owners(after)[g]] == c {
			ofB = append(ofB, g)
		}
	}
	if len(ofB) == 0 {
		t.Fatalf("c gains %v, none of them from b and still c's without b", gained)
	}
	return ds, b, c, from, to, after, ofB
}

// TestWarmForALeave: when a node leaves (a planned leave, or an operator
// removes it from the list while it runs), the member that gains its
// chunks copies them from the leaver's cache — those some member's
// streams need soon, then the others the leaver holds — and reads none
// from the store (what this node's own streams need soon among them); a
// leaver already gone is not asked, and what the jobs need soon is read
// from the store; loads that fail move nothing and fail nothing. A leave
// that comes while this node still loads its datasets waits for them.
func TestWarmForALeave(t *testing.T) {
	ds := catalogtest.Dataset(t, "d", 64, 2)
	a, b, c := "http://a:1", "http://b:1", "http://c:1"
	from, _ := cluster.NewMembership([]string{a, b, c})
	to, _ := cluster.NewMembership([]string{a, b})
	gained, _ := cluster.Moves(ds.ClusterKey(), ds.Counts, from, to, a)
	if len(gained) < 3 {
		t.Fatalf("a gains %v of the leaver's chunks; the test needs three", gained)
	}
	for _, tc := range []struct {
		name          string
		peers         *fakePeers
		own           []int // what this node's streams need soon
		refuse        bool  // every load fails
		chunks        int
		peerB, storeB int64
	}{
		{"from the leaver's cache", &fakePeers{needs: map[string][]int{b: gained[:1], c: gained[1:2]}, held: map[string][]int{c: gained}},
			nil, false, len(gained), int64(len(gained)) * 1024, 0},
		{"the leaver gone", &fakePeers{needs: map[string][]int{b: gained[:1]}, held: map[string][]int{c: gained}, down: map[string]bool{c: true}},
			gained[1:2], false, 2, 0, 2 * 1024},
		{"every load fails: nothing moved, no error", &fakePeers{needs: map[string][]int{b: gained[:1]}, held: map[string][]int{c: gained}},
			gained[1:2], true, 0, 0, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src := NewSources(tc.peers, zerolog.Nop())
			cache := &fakeCache{sources: src, resident: map[chunkcache.Key]bool{}, refuse: tc.refuse}
			loaded := false // the datasets are still loading at the first ask: Warm waits
			h := New(Config{Self: a, Peers: tc.peers, UseTable: ownStreams(tc.own), Cache: cache, Sources: src, PrefetchWindows: 1,
				Datasets: func() ([]*catalog.Dataset, error) {
					if !loaded {
						loaded = true
						return nil, catalog.ErrNotReady
					}
					return []*catalog.Dataset{ds}, nil
				}})
			got, err := h.Warm(context.Background(), from, to, func() {})
			if err != nil {
				t.Fatal(err)
			}
			if got.Chunks != tc.chunks || got.PeerBytes != tc.peerB || got.StoreBytes != tc.storeB {
				t.Errorf("warmed %+v; want %d chunks, %d bytes from the leaver, %d from the store", got, tc.chunks, tc.peerB, tc.storeB)
			}
			for _, f := range tc.peers.chunks {
				if !strings.HasPrefix(f, c+" ") {
					t.Errorf("fetched %q: not from the leaver", f)
				}
			}
		})
	}
}
