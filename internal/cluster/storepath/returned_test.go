package storepath

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/brandgw/brand/chunkindex"
	"github.com/brandgw/brand/internal/cache/chunkcache"
	"github.com/brandgw/brand/internal/job/catalog"
)

// fakePeers hold chunks by URL; fetched counts the chunks asked of each.
type fakePeers struct {
	holds   map[string][]int
	down    map[string]bool
	fetched map[string]int
}

func (f *fakePeers) Held(_ context.Context, url string, _ *catalog.Dataset, chunks []int) ([]int, error) {
	var out []int
	for _, c := range chunks {
		if slices.Contains(f.holds[url], c) {
			out = append(out, c)
		}
	}
	return out, nil
}

func (f *fakePeers) FetchChunk(_ context.Context, url string, _ *catalog.Dataset, c int, buf []byte) error {
	f.fetched[url]++
	if !slices.Contains(f.holds[url], c) {
		return errors.New("not held")
	}
	copy(buf, fmt.Sprint(c))
	return nil
}

func (f *fakePeers) IsUp(url string) bool { return !f.down[url] }

// chunksDataset is a remote dataset of n chunks of one sample each.
func chunksDataset(t *testing.T, n int) *catalog.Dataset {
	t.Helper()
	var cs []chunkindex.Chunk
	var ss []chunkindex.Sample
	for c := range n {
		cs = append(cs, chunkindex.Chunk{Key: fmt.Sprintf("c%d.tar", c), Size: 1024, ETag: "e", Samples: 1})
		ss = append(ss, chunkindex.Sample{Key: fmt.Sprintf("s%d", c), Chunk: c, Offset: 0, Length: 512})
	}
	ix, err := chunkindex.New(cs, ss)
	if err != nil {
		t.Fatal(err)
	}
	return catalog.NewDataset("d", "s3://b/d", nil, ix)
}

// TestReturned: once the store answers again, each of this node's chunks
// a peer held is asked of that peer, once, before the store; a chunk no
// peer held, a peer down since, or bytes that fail their check are read
// from the store.
func TestReturned(t *testing.T) {
	ds := chunksDataset(t, 6)
	peers := &fakePeers{holds: map[string][]int{"a": {0, 1}, "b": {1, 2, 5}}, down: map[string]bool{}, fetched: map[string]int{}}
	r := NewReturned(peers, zerolog.Nop())
	r.Learn(context.Background(), ds, []int{0, 1, 2, 3, 4}, []string{"a", "b"})
	ok := func([]byte) error { return nil }
	buf := make([]byte, 1)
	for _, tc := range []struct {
		c      int
		verify func([]byte) error
		want   bool
	}{
		{0, ok, true},  // a held it
		{0, ok, false}, // asked once
		{1, ok, true},  // a, the first peer asked, held it
		{3, ok, false}, // no peer held it
		{5, ok, false}, // not this node's to take back
		{2, func([]byte) error { return errors.New("bad bytes") }, false},
	} {
		if got := r.Read(context.Background(), ds.ChunkKey(tc.c), buf, tc.verify); got != tc.want {
			t.Errorf("chunk %d: given by a peer %t, want %t", tc.c, got, tc.want)
		}
	}
	if peers.fetched["a"] != 2 || peers.fetched["b"] != 1 {
		t.Errorf("chunks asked of the peers: %v, want a 2 and b 1", peers.fetched)
	}
	// A peer down since it was asked is not asked again.
	r.Learn(context.Background(), ds, []int{2}, []string{"a", "b"})
	peers.down["b"] = true
	if r.Read(context.Background(), ds.ChunkKey(2), buf, ok) {
		t.Error("a chunk given by a peer that is down")
	}
}

// TestReturnedGiven: a chunk a peer said it holds as it took this node
// back up (Given) is asked of that peer before the store even while this
// node holds the peer down (a node cut off from its peers sees them back
// no sooner than they see it), once; a later Learn forgets only what the
// peers it asks named, not what another gave.
func TestReturnedGiven(t *testing.T) {
	ds := chunksDataset(t, 4)
	peers := &fakePeers{holds: map[string][]int{"a": {0, 1, 2}, "b": {3}}, down: map[string]bool{"a": true}, fetched: map[string]int{}}
	r := NewReturned(peers, zerolog.Nop())
	r.Given("a", ds, []int{0, 1, 2})
	r.Learn(context.Background(), ds, []int{3}, []string{"b"})
	ok := func([]byte) error { return nil }
	buf := make([]byte, 1)
	for _, tc := range []struct {
		c    int
		want bool
	}{
		{0, true},  // given by a, which this node holds down
		{0, false}, // asked once
		{1, true},  // not forgotten by the Learn that asked b
		{3, true},  // b held it
	} {
		if got := r.Read(context.Background(), ds.ChunkKey(tc.c), buf, ok); got != tc.want {
			t.Errorf("chunk %d: given by a peer %t, want %t", tc.c, got, tc.want)
		}
	}
	// A Learn that asks a forgets what a gave.
	r.Learn(context.Background(), ds, []int{2}, []string{"a"})
	if r.Read(context.Background(), ds.ChunkKey(2), buf, ok) {
		t.Error("a chunk a gave, read after a Learn that asked a while it is down")
	}
}

// TestReturnedAsk: a peer this node takes back up is asked which of this
// node's chunks it holds, and those are asked of it before the store even
// while this node does not see it up yet (it is being taken back up);
// those it does not hold are read from the store.
func TestReturnedAsk(t *testing.T) {
	ds := chunksDataset(t, 3)
	peers := &fakePeers{holds: map[string][]int{"a": {0, 2}}, down: map[string]bool{"a": true}, fetched: map[string]int{}}
	r := NewReturned(peers, zerolog.Nop())
	r.Ask(context.Background(), ds, []int{0, 1}, "a")
	ok := func([]byte) error { return nil }
	buf := make([]byte, 1)
	for c, want := range []bool{true, false, false} { // 2: held, but not asked about
		if got := r.Read(context.Background(), ds.ChunkKey(c), buf, ok); got != want {
			t.Errorf("chunk %d: given by the peer %t, want %t", c, got, want)
		}
	}
}

// TestReturnedSearchAfterAFault: for a while after a fault (AfterFault),
// an own chunk no peer was named for is searched for at every live peer
// and read from the first that holds it; never before a fault, after the
// window, for another node's chunk, or at a peer that is down. The
// reproduction: a node cut off from its peers and the store refused a
// peer's request an instant before the store answered again; the peer
// read the chunk itself after the node had asked what the peers hold, and
// the node read it from the store again in the next epoch.
func TestReturnedSearchAfterAFault(t *testing.T) {
	ds := chunksDataset(t, 4)
	peers := &fakePeers{holds: map[string][]int{"a": {0}, "b": {1, 3}, "c": {2}}, down: map[string]bool{"c": true}, fetched: map[string]int{}}
	r := NewReturned(peers, zerolog.Nop()).WithSearch(
		func(_ *catalog.Dataset, c int) bool { return c != 3 }, // chunk 3 is another node's
		func(k chunkcache.Key) (*catalog.Dataset, int, error) {
			c, ok := ds.ChunkOf(k)
			if !ok {
				return nil, 0, errors.New("not a chunk")
			}
			return ds, c, nil
		},
		func() []string { return []string{"a", "b", "c"} })
	ok := func([]byte) error { return nil }
	buf := make([]byte, 1)
	read := func(c int) bool { return r.Read(context.Background(), ds.ChunkKey(c), buf, ok) }
	if read(0) {
		t.Error("chunk 0 searched for before any fault")
	}
	r.AfterFault(time.Hour)
	for c, want := range []bool{true, true, false, false} { // 2: at a peer that is down; 3: another node's
		if got := read(c); got != want {
			t.Errorf("after a fault, chunk %d found at a peer %t, want %t", c, got, want)
		}
	}
	if peers.fetched["a"] != 1 || peers.fetched["b"] != 1 || peers.fetched["c"] != 0 {
		t.Errorf("chunks asked of the peers: %v, want a 1, b 1", peers.fetched)
	}
	r.AfterFault(-time.Hour) // never shortens the window
	if !read(1) {
		t.Error("a later, shorter AfterFault ended the search")
	}
	r = NewReturned(peers, zerolog.Nop()).WithSearch(func(*catalog.Dataset, int) bool { return true },
		func(chunkcache.Key) (*catalog.Dataset, int, error) { return ds, 0, nil }, func() []string { return []string{"a"} })
	r.AfterFault(time.Millisecond)
	time.Sleep(5 * time.Millisecond)
	if read(0) {
		t.Error("chunk 0 searched for after the window")
	}
}
