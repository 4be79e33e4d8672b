package chunkcache_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/brandgw/brand/internal/cache/chunkcache"
)

// fill writes a pattern derived from the key, so a test can tell whether a
// buffer holds the right chunk.
func fill(k chunkcache.Key, buf []byte) {
	seed := byte(len(k.Object))
	for _, c := range []byte(k.Object) {
		seed = seed*31 + c
	}
	for i := range buf {
		buf[i] = seed + byte(i)
	}
}

func want(k chunkcache.Key, n int64) []byte {
	b := make([]byte, n)
	fill(k, b)
	return b
}

// countingLoader fills buffers and records how many loads ran per key and
// the most that ever ran at once for one key.
type countingLoader struct {
	mu        sync.Mutex
	loads     map[chunkcache.Key]int
	inflight  map[chunkcache.Key]int
	maxPerKey int
	delay     time.Duration
	fail      func(k chunkcache.Key) error
}

func newCountingLoader() *countingLoader {
	return &countingLoader{loads: map[chunkcache.Key]int{}, inflight: map[chunkcache.Key]int{}}
}

func (l *countingLoader) Load(ctx context.Context, k chunkcache.Key, buf []byte) error {
	l.mu.Lock()
	l.loads[k]++
	l.inflight[k]++
	l.maxPerKey = max(l.maxPerKey, l.inflight[k])
	l.mu.Unlock()
	defer func() {
		l.mu.Lock()
		l.inflight[k]--
		l.mu.Unlock()
	}()
	if l.delay > 0 {
		select {
		case <-time.After(l.delay):
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	if l.fail != nil {
		if err := l.fail(k); err != nil {
			return err
		}
	}
	fill(k, buf)
	return nil
}

func (l *countingLoader) count(k chunkcache.Key) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.loads[k]
}

func key(i int) chunkcache.Key {
	return chunkcache.Key{Dataset: "d", Object: fmt.Sprintf("chunk-%06d.tar", i), ETag: "e"}
}

func req(i int, size int64) chunkcache.Request { return chunkcache.Request{Key: key(i), Size: size} }

func acquire(t *testing.T, c *chunkcache.Cache, reqs ...chunkcache.Request) *chunkcache.Lease {
	t.Helper()
	l, err := c.Acquire(context.Background(), reqs)
	if err != nil {
		t.Fatalf("Acquire: %v", err)
	}
	for i, r := range reqs {
		if !bytes.Equal(l.Bytes(i), want(r.Key, r.Size)) {
			t.Fatalf("chunk %s holds the wrong bytes", r.Key)
		}
	}
	return l
}

func TestHitsMissesAndEviction(t *testing.T) {
	for _, policy := range []struct {
		name string
		p    func() chunkcache.Policy
	}{{"lru", func() chunkcache.Policy { return chunkcache.NewLRU() }}} {
		t.Run(policy.name, func(t *testing.T) {
			ld := newCountingLoader()
			c := chunkcache.New(chunkcache.Config{Capacity: 300, Loader: ld, Policy: policy.p()})
			steps := []struct {
				chunk           int
				loads           int // loads of that chunk after the step
				hits, misses    int64
				resident, evict int64
			}{
				{0, 1, 0, 1, 100, 0},
				{1, 1, 0, 2, 200, 0},
				{0, 1, 1, 2, 200, 0},
				{2, 1, 1, 3, 300, 0},
				{3, 1, 1, 4, 300, 1}, // evicts 1, the least recently used
				{1, 2, 1, 5, 300, 2}, // 1 comes back; 0 is now the oldest
				{2, 1, 2, 5, 300, 2},
			}
			for i, s := range steps {
				acquire(t, c, req(s.chunk, 100)).Release()
				st := c.Stats()
				if got := ld.count(key(s.chunk)); got != s.loads {
					t.Errorf("step %d: chunk %d loaded %d times, want %d", i, s.chunk, got, s.loads)
				}
				if st.Hits != s.hits || st.Misses != s.misses || st.Bytes != s.resident || st.Evictions != s.evict {
					t.Errorf("step %d: stats %+v, want hits %d misses %d bytes %d evictions %d", i, st, s.hits, s.misses, s.resident, s.evict)
				}
			}
			if c.Contains(key(0)) {
				t.Errorf("chunk 0 should have been evicted as least recently used")
			}
		})
	}
}

func TestConcurrentRequestsShareOneLoad(t *testing.T) {
	ld := newCountingLoader()
	ld.delay = 20 * time.Millisecond
	c := chunkcache.New(chunkcache.Config{Capacity: 1 << 20, Loader: ld})
	var wg sync.WaitGroup
	for range 50 {
		wg.Go(func() {
			l, err := c.Acquire(context.Background(), []chunkcache.Request{req(7, 4096)})
			if err != nil {
				t.Error(err)
				return
			}
			if !bytes.Equal(l.Bytes(0), want(key(7), 4096)) {
				t.Error("wrong bytes")
			}
			l.Release()
		})
	}
	wg.Wait()
	if n := ld.count(key(7)); n != 1 {
		t.Fatalf("50 concurrent requests caused %d loads, want 1", n)
	}
}

func TestPinnedChunksAreNotEvicted(t *testing.T) {
	ld := newCountingLoader()
	c := chunkcache.New(chunkcache.Config{Capacity: 300, Loader: ld})
	held := acquire(t, c, req(0, 100))
	for i := 1; i <= 10; i++ {
		acquire(t, c, req(i, 100)).Release()
	}
	if !bytes.Equal(held.Bytes(0), want(key(0), 100)) {
		t.Fatal("a pinned chunk's bytes changed while it was pinned")
	}
	if !c.Contains(key(0)) {
		t.Fatal("a pinned chunk was evicted")
	}
	held.Release()
	held.Release() // idempotent
	if st := c.Stats(); st.Pinned != 0 || st.Bytes > 300 {
		t.Fatalf("after release: %+v", st)
	}
}

func TestTooLarge(t *testing.T) {
	c := chunkcache.New(chunkcache.Config{Capacity: 250, Loader: newCountingLoader()})
	_, err := c.Acquire(context.Background(), []chunkcache.Request{req(0, 100), req(1, 100), req(2, 100)})
	if !errors.Is(err, chunkcache.ErrTooLarge) {
		t.Fatalf("got %v, want ErrTooLarge", err)
	}
	// Duplicates count once.
	l, err := c.Acquire(context.Background(), []chunkcache.Request{req(0, 100), req(1, 100), req(0, 100)})
	if err != nil {
		t.Fatalf("duplicates should count once: %v", err)
	}
	if &l.Bytes(0)[0] != &l.Bytes(2)[0] {
		t.Fatal("duplicate requests should share one chunk")
	}
	l.Release()
}

func TestLoadErrorReachesAllWaitersAndIsNotCached(t *testing.T) {
	ld := newCountingLoader()
	ld.delay = 20 * time.Millisecond
	boom := errors.New("backend down")
	var failing atomic.Bool
	failing.Store(true)
	ld.fail = func(chunkcache.Key) error {
		if failing.Load() {
			return boom
		}
		return nil
	}
	c := chunkcache.New(chunkcache.Config{Capacity: 1000, Loader: ld})
	var wg sync.WaitGroup
	var errs atomic.Int32
	for range 10 {
		wg.Go(func() {
			if _, err := c.Acquire(context.Background(), []chunkcache.Request{req(1, 100)}); errors.Is(err, boom) {
				errs.Add(1)
			} else {
				t.Errorf("got %v, want %v", err, boom)
			}
		})
	}
	wg.Wait()
	if errs.Load() != 10 {
		t.Fatalf("%d of 10 waiters saw the error", errs.Load())
	}
	if c.Contains(key(1)) || c.Stats().Bytes != 0 || c.Stats().Pinned != 0 {
		t.Fatalf("a failed load left state behind: %+v", c.Stats())
	}
	failing.Store(false)
	acquire(t, c, req(1, 100)).Release()
}

// A load outlives the request that started it: another request waiting for
// the same chunk gets it, and the chunk is read once.
func TestLoadOutlivesItsRequester(t *testing.T) {
	ld := newCountingLoader()
	ld.delay = 50 * time.Millisecond
	c := chunkcache.New(chunkcache.Config{Capacity: 1000, Loader: ld})
	ctx, cancel := context.WithCancel(context.Background())
	first := make(chan error, 1)
	go func() {
		_, err := c.Acquire(ctx, []chunkcache.Request{req(3, 100)})
		first <- err
	}()
	time.Sleep(10 * time.Millisecond) // let the first request start the load
	second := make(chan error, 1)
	go func() {
		l, err := c.Acquire(context.Background(), []chunkcache.Request{req(3, 100)})
		if err == nil {
			if !bytes.Equal(l.Bytes(0), want(key(3), 100)) {
				err = errors.New("wrong bytes")
			}
			l.Release()
		}
		second <- err
	}()
	time.Sleep(10 * time.Millisecond)
	cancel()
	if err := <-first; !errors.Is(err, context.Canceled) {
		t.Fatalf("first: got %v, want context.Canceled", err)
	}
	if err := <-second; err != nil {
		t.Fatalf("second request should get the chunk the first started loading: %v", err)
	}
	if n := ld.count(key(3)); n != 1 {
		t.Fatalf("chunk loaded %d times, want 1", n)
	}
	if st := c.Stats(); st.Pinned != 0 || st.PinnedBytes != 0 {
		t.Fatalf("pins left behind: %+v", st)
	}
}

// A chunk nobody waits for any more is still loaded and stays resident.
func TestAbandonedLoadCompletes(t *testing.T) {
	ld := newCountingLoader()
	ld.delay = 30 * time.Millisecond
	c := chunkcache.New(chunkcache.Config{Capacity: 1000, Loader: ld})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Millisecond)
	defer cancel()
	if _, err := c.Acquire(ctx, []chunkcache.Request{req(4, 100)}); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("got %v, want deadline exceeded", err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for !c.Contains(key(4)) {
		if time.Now().After(deadline) {
			t.Fatal("the abandoned load never completed")
		}
		time.Sleep(time.Millisecond)
	}
	acquire(t, c, req(4, 100)).Release()
	if n := ld.count(key(4)); n != 1 {
		t.Fatalf("chunk loaded %d times, want 1", n)
	}
}

// Close cancels loads in flight; their waiters fail with ErrClosed.
func TestCloseCancelsLoads(t *testing.T) {
	ld := newCountingLoader()
	ld.delay = time.Hour
	c := chunkcache.New(chunkcache.Config{Capacity: 1000, Loader: ld})
	errc := make(chan error, 1)
	go func() {
		_, err := c.Acquire(context.Background(), []chunkcache.Request{req(5, 100)})
		errc <- err
	}()
	time.Sleep(10 * time.Millisecond)
	c.Close()
	select {
	case err := <-errc:
		if !errors.Is(err, chunkcache.ErrClosed) {
			t.Fatalf("got %v, want ErrClosed", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Close did not end the load")
	}
}

// Requests that share chunks pin their bytes once: two batches of the
// same window fit in a cache that holds the window once, and neither
// waits for the other.
func TestSharedChunksArePinnedOnce(t *testing.T) {
	c := chunkcache.New(chunkcache.Config{Capacity: 300, Loader: newCountingLoader()})
	a := acquire(t, c, req(0, 100), req(1, 100), req(2, 100))
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	b, err := c.Acquire(ctx, []chunkcache.Request{req(2, 100), req(0, 100)})
	if err != nil {
		t.Fatalf("a request for chunks already pinned should not wait: %v", err)
	}
	if st := c.Stats(); st.PinnedBytes != 300 || st.Pinned != 3 {
		t.Fatalf("pinned %d bytes in %d entries, want 300 in 3", st.PinnedBytes, st.Pinned)
	}
	a.Release()
	if st := c.Stats(); st.PinnedBytes != 200 {
		t.Fatalf("after one release: %d bytes pinned, want 200", st.PinnedBytes)
	}
	b.Release()
	if st := c.Stats(); st.PinnedBytes != 0 || st.Pinned != 0 {
		t.Fatalf("after both releases: %+v", st)
	}
}

// The chunks one request has to load are read concurrently.
func TestMissesOfOneRequestLoadConcurrently(t *testing.T) {
	var inflight, peak atomic.Int32
	ld := chunkcache.LoaderFunc(func(ctx context.Context, k chunkcache.Key, buf []byte) error {
		n := inflight.Add(1)
		defer inflight.Add(-1)
		for {
			p := peak.Load()
			if n <= p || peak.CompareAndSwap(p, n) {
				break
			}
		}
		time.Sleep(20 * time.Millisecond)
		fill(k, buf)
		return nil
	})
	c := chunkcache.New(chunkcache.Config{Capacity: 1000, Loader: ld})
	acquire(t, c, req(0, 100), req(1, 100), req(2, 100), req(3, 100)).Release()
	if p := peak.Load(); p != 4 {
		t.Fatalf("at most %d of 4 missing chunks loaded at once, want 4", p)
	}
}

// Waiting requests are admitted in arrival order: a request that needs the
// whole cache is not starved by smaller ones arriving after it.
func TestWaitersAreServedInOrder(t *testing.T) {
	c := chunkcache.New(chunkcache.Config{Capacity: 300, Loader: newCountingLoader()})
	held := acquire(t, c, req(0, 100))
	big := make(chan *chunkcache.Lease, 1)
	go func() {
		l, err := c.Acquire(context.Background(), []chunkcache.Request{req(1, 100), req(2, 100), req(3, 100)})
		if err != nil {
			t.Error(err)
		}
		big <- l
	}()
	waitFor(t, func() bool { return c.Stats().Waiting == 1 })
	small := make(chan *chunkcache.Lease, 1)
	go func() {
		l, err := c.Acquire(context.Background(), []chunkcache.Request{req(4, 100)})
		if err != nil {
			t.Error(err)
		}
		small <- l
	}()
	waitFor(t, func() bool { return c.Stats().Waiting == 2 })
	// The small request would fit now, but it arrived second.
	if res, _ := c.Prefetch(context.Background(), req(5, 100), nil); res != chunkcache.PrefetchRejected {
		t.Fatalf("prefetch while requests wait: %v, want rejected", res)
	}
	held.Release()
	l := <-big
	if l == nil {
		t.FailNow()
	}
	select {
	case <-small:
		t.Fatal("the small request was served while the big one held the whole cache")
	case <-time.After(20 * time.Millisecond):
	}
	l.Release()
	if l := <-small; l != nil {
		l.Release()
	}
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not reached in 5s")
		}
		time.Sleep(time.Millisecond)
	}
}

func TestAcquireHonoursContextWhileWaitingForSpace(t *testing.T) {
	c := chunkcache.New(chunkcache.Config{Capacity: 100, Loader: newCountingLoader()})
	held := acquire(t, c, req(0, 100))
	defer held.Release()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if _, err := c.Acquire(ctx, []chunkcache.Request{req(1, 100)}); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("got %v, want deadline exceeded", err)
	}
}

func TestPrefetch(t *testing.T) {
	ld := newCountingLoader()
	c := chunkcache.New(chunkcache.Config{Capacity: 300, Loader: ld})
	ctx := context.Background()
	for i := range 3 {
		acquire(t, c, req(i, 100)).Release()
	}
	protected := map[chunkcache.Key]bool{key(0): true, key(1): true, key(2): true}
	admit := func(k chunkcache.Key) bool { return !protected[k] }
	res, err := c.Prefetch(ctx, req(9, 100), admit)
	if err != nil || res != chunkcache.PrefetchRejected {
		t.Fatalf("prefetch with only protected victims: %v, %v; want rejected", res, err)
	}
	if c.Contains(key(9)) || !c.Contains(key(0)) {
		t.Fatal("a rejected prefetch changed the cache")
	}
	delete(protected, key(1))
	if res, err := c.Prefetch(ctx, req(9, 100), admit); res != chunkcache.PrefetchLoaded || err != nil {
		t.Fatalf("prefetch: %v, %v; want loaded", res, err)
	}
	if c.Contains(key(1)) || !c.Contains(key(0)) || !c.Contains(key(2)) || !c.Contains(key(9)) {
		t.Fatal("prefetch evicted the wrong chunk")
	}
	if res, _ := c.Prefetch(ctx, req(9, 100), admit); res != chunkcache.PrefetchResident {
		t.Fatalf("prefetch of a resident chunk: %v, want resident", res)
	}
	before := c.Stats()
	acquire(t, c, req(9, 100)).Release()
	if after := c.Stats(); after.Hits != before.Hits+1 || ld.count(key(9)) != 1 {
		t.Fatalf("a prefetched chunk should be a hit: before %+v after %+v", before, after)
	}
	if st := c.Stats(); st.PrefetchLoads != 1 || st.PrefetchRejected != 1 {
		t.Fatalf("prefetch counters: %+v", st)
	}
}

// TestBoundUnderConcurrency drives random multi-chunk requests from many
// goroutines through a cache smaller than the data and checks the byte
// bound, one load per key at a time, and the bytes handed out.
func TestBoundUnderConcurrency(t *testing.T) {
	ld := newCountingLoader()
	ld.delay = time.Millisecond
	const capacity = 1000
	c := chunkcache.New(chunkcache.Config{Capacity: capacity, Loader: ld})
	sizes := make([]int64, 40)
	r := rand.New(rand.NewPCG(1, 2))
	for i := range sizes {
		sizes[i] = 20 + r.Int64N(100)
	}
	stop := make(chan struct{})
	var peak atomic.Int64
	go func() {
		for {
			select {
			case <-stop:
				return
			default:
				peak.Store(max(peak.Load(), c.Stats().Bytes))
				time.Sleep(50 * time.Microsecond)
			}
		}
	}()
	var wg sync.WaitGroup
	for g := range 16 {
		wg.Go(func() {
			r := rand.New(rand.NewPCG(uint64(g), 7))
			for range 60 {
				n := 1 + r.IntN(4)
				reqs := make([]chunkcache.Request, n)
				for i := range reqs {
					j := r.IntN(len(sizes))
					reqs[i] = req(j, sizes[j])
				}
				l, err := c.Acquire(context.Background(), reqs)
				if err != nil {
					t.Error(err)
					return
				}
				for i, rq := range reqs {
					if !bytes.Equal(l.Bytes(i), want(rq.Key, rq.Size)) {
						t.Errorf("chunk %s: wrong bytes", rq.Key)
					}
				}
				if st := c.Stats(); st.Bytes > capacity {
					t.Errorf("resident bytes %d exceed capacity %d", st.Bytes, capacity)
				}
				l.Release()
			}
		})
	}
	wg.Wait()
	close(stop)
	st := c.Stats()
	if peak.Load() > capacity || st.Bytes > capacity {
		t.Fatalf("peak resident bytes %d exceed capacity %d", peak.Load(), capacity)
	}
	if ld.maxPerKey != 1 {
		t.Fatalf("a key was loaded %d times concurrently", ld.maxPerKey)
	}
	if st.Pinned != 0 {
		t.Fatalf("%d entries still pinned", st.Pinned)
	}
	if st.Evictions == 0 {
		t.Fatal("the workload should have caused evictions")
	}
}

func TestLeaseReportsLoads(t *testing.T) {
	c := chunkcache.New(chunkcache.Config{Capacity: 1000, Loader: newCountingLoader()})
	l := acquire(t, c, req(0, 100), req(1, 50))
	if n, b := l.Loaded(); n != 2 || b != 150 {
		t.Fatalf("first acquire loaded %d chunks / %d bytes, want 2 / 150", n, b)
	}
	l.Release()
	l = acquire(t, c, req(0, 100), req(2, 10), req(2, 10))
	if n, b := l.Loaded(); n != 1 || b != 10 {
		t.Fatalf("second acquire loaded %d chunks / %d bytes, want 1 / 10", n, b)
	}
	l.Release()
}

// belowLoader is a TieredLoader whose tier below the cache holds the
// chunks below names.
type belowLoader struct {
	*countingLoader
	below map[chunkcache.Key]bool
}

func (l belowLoader) LoadTiered(ctx context.Context, k chunkcache.Key, buf []byte) (bool, error) {
	return l.below[k], l.Load(ctx, k, buf)
}

// StoreLoads names the requests whose chunks an Acquire loaded from the
// store: not those resident already, not those the tier below gave, each
// chunk once (its first request), within the requests asked about.
func TestLeaseStoreLoads(t *testing.T) {
	c := chunkcache.New(chunkcache.Config{Capacity: 1000, Loader: belowLoader{newCountingLoader(), map[chunkcache.Key]bool{key(3): true}}})
	acquire(t, c, req(0, 100)).Release()
	l := acquire(t, c, req(1, 10), req(0, 100), req(2, 20), req(3, 30), req(1, 10), req(4, 40))
	defer l.Release()
	for _, tt := range []struct {
		from, to int
		want     []int
	}{{0, 6, []int{0, 2, 5}}, {1, 6, []int{2, 5}}, {3, 5, nil}, {0, 1, []int{0}}} {
		var got []int
		for i := range l.StoreLoads(tt.from, tt.to) {
			got = append(got, i)
		}
		if fmt.Sprint(got) != fmt.Sprint(tt.want) {
			t.Errorf("StoreLoads(%d, %d): %v, want %v", tt.from, tt.to, got, tt.want)
		}
	}
	for i := range l.StoreLoads(0, 6) {
		if i == 2 {
			break // a caller may stop early
		}
	}
}

func TestAllocMakesBuffersReusable(t *testing.T) {
	c := chunkcache.New(chunkcache.Config{Capacity: 200, Loader: newCountingLoader()})
	small := chunkcache.Request{Key: key(0), Size: 30, Alloc: 100}
	l := acquire(t, c, small)
	if got := len(l.Bytes(0)); got != 30 {
		t.Fatalf("chunk has %d bytes, want its size 30", got)
	}
	first := &l.Bytes(0)[0]
	l.Release()
	acquire(t, c, chunkcache.Request{Key: key(1), Size: 100, Alloc: 100}).Release()
	if st := c.Stats(); st.Bytes != 130 {
		t.Fatalf("resident bytes %d, want 130: the cache accounts sizes", st.Bytes)
	}
	// A third chunk evicts the oldest (the small one) and reuses its buffer,
	// though it is larger than the small chunk.
	l = acquire(t, c, chunkcache.Request{Key: key(2), Size: 90, Alloc: 100})
	if &l.Bytes(0)[0] != first {
		t.Fatal("the evicted buffer was not reused")
	}
	if n, b := l.Loaded(); n != 1 || b != 90 {
		t.Fatalf("loaded %d chunks / %d bytes, want 1 / 90 (backend bytes are the size)", n, b)
	}
	l.Release()
}

func TestPreallocatedBuffersAreUsed(t *testing.T) {
	c := chunkcache.New(chunkcache.Config{Capacity: 400, Loader: newCountingLoader()})
	if err := c.Preallocate(context.Background(), 100, 3); err != nil {
		t.Fatal(err)
	}
	if st := c.Stats(); st.BufferBytes != 300 || st.Bytes != 0 {
		t.Fatalf("after Preallocate: %+v, want 300 buffer bytes and nothing resident", st)
	}
	for i := range 4 {
		acquire(t, c, chunkcache.Request{Key: key(i), Size: 90 + int64(i), Alloc: 100}).Release()
	}
	// Three loads took the preallocated buffers, the fourth allocated.
	if st := c.Stats(); st.BufferBytes != 400 {
		t.Fatalf("buffer bytes %d, want 400", st.BufferBytes)
	}
	// Evictions reuse buffers: no new memory.
	for i := 4; i < 20; i++ {
		acquire(t, c, chunkcache.Request{Key: key(i), Size: 95, Alloc: 100}).Release()
	}
	if st := c.Stats(); st.BufferBytes != 400 || st.Evictions == 0 {
		t.Fatalf("after evictions: %+v, want 400 buffer bytes", st)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := c.Preallocate(ctx, 100, 1); !errors.Is(err, context.Canceled) {
		t.Fatalf("Preallocate with a cancelled context: %v", err)
	}
}

// A buffer larger than a request's Alloc is not reused for it: a dataset of
// small chunks must not hold another dataset's large buffers, whose size
// the cache does not account.
func TestLargeBuffersAreNotReusedForSmallChunks(t *testing.T) {
	c := chunkcache.New(chunkcache.Config{Capacity: 1000, Loader: newCountingLoader()})
	if err := c.Preallocate(context.Background(), 1000, 1); err != nil {
		t.Fatal(err)
	}
	l := acquire(t, c, chunkcache.Request{Key: key(0), Size: 10, Alloc: 10})
	if got := cap(l.Bytes(0)); got != 10 {
		t.Fatalf("a 10-byte chunk got a buffer of capacity %d", got)
	}
	l.Release()
	l = acquire(t, c, chunkcache.Request{Key: key(1), Size: 900, Alloc: 1000})
	if got := cap(l.Bytes(0)); got != 1000 {
		t.Fatalf("a chunk of the large dataset got a buffer of capacity %d, want the preallocated 1000", got)
	}
	l.Release()
}

// A request whose Reuse allows it takes a larger buffer already held —
// free, or an evicted chunk's — when none of its own class is there
// (a dataset served in place read with some of its fields, its buffers
// preallocated for all of them), so its loads fault no new memory in and
// the cache holds no more buffers than it did; a buffer of its own class
// is taken first, and the larger victim's dropped.
func TestReuseTakesHeldBuffers(t *testing.T) {
	r := &recycler{}
	c := chunkcache.New(chunkcache.Config{Capacity: 1000, Loader: newCountingLoader(), Recycler: r})
	if err := c.Preallocate(context.Background(), 1000, 2); err != nil {
		t.Fatal(err)
	}
	view := func(i int) chunkcache.Request {
		return chunkcache.Request{Key: key(i), Size: 400, Alloc: 500, Reuse: 1000}
	}
	for i := range 10 { // from the third on, each evicts one and takes its buffer
		l := acquire(t, c, view(i))
		if got := cap(l.Bytes(0)); got != 1000 {
			t.Fatalf("load %d: a buffer of capacity %d, want a held one of 1000", i, got)
		}
		l.Release()
	}
	if st := c.Stats(); st.BufferBytes != 2000 || st.Evictions != 8 || len(r.caps) != 0 {
		t.Fatalf("%+v, %d buffers given up: want the 2000 bytes preallocated, 8 evictions, none given up", st, len(r.caps))
	}
	// A free buffer of the request's class goes before an evicted
	// chunk's larger one, which is given up.
	if err := c.Preallocate(context.Background(), 500, 1); err != nil {
		t.Fatal(err)
	}
	l := acquire(t, c, view(10))
	if got := cap(l.Bytes(0)); got != 500 {
		t.Fatalf("with a free buffer of its class: capacity %d, want 500", got)
	}
	l.Release()
	if st := c.Stats(); st.BufferBytes != 1500 || len(r.caps) != 1 || r.caps[0] != 1000 {
		t.Fatalf("%+v, given up %v: want 1500 buffer bytes, the victim's 1000 given up", st, r.caps)
	}
}

// recycler records the buffers a cache gives up.
type recycler struct{ caps []int }

func (r *recycler) Put(b []byte) { r.caps = append(r.caps, cap(b)) }

// The buffers of evicted chunks that fit no load go to the Recycler (the
// node's memory manager's pools) rather than to the collector; one that
// fits is reused, and given to nobody.
func TestRecycledBuffers(t *testing.T) {
	r := &recycler{}
	c := chunkcache.New(chunkcache.Config{Capacity: 100, Loader: newCountingLoader(), Recycler: r})
	acquire(t, c, req(0, 30)).Release()
	acquire(t, c, req(1, 30)).Release()
	acquire(t, c, req(2, 30)).Release()
	// 90 bytes of 30-byte chunks; a 60-byte chunk evicts two of them and
	// fits neither buffer.
	acquire(t, c, req(3, 60)).Release()
	if len(r.caps) != 2 || r.caps[0] != 30 || r.caps[1] != 30 {
		t.Fatalf("recycled %v, want the two 30-byte buffers", r.caps)
	}
	if st := c.Stats(); st.BufferBytes != 90 {
		t.Errorf("buffer bytes %d, want 90: the recycled buffers are not the cache's", st.BufferBytes)
	}
	// A chunk that fits its victim's buffer (the oldest 30-byte chunk's)
	// reuses it.
	acquire(t, c, req(4, 30)).Release()
	if len(r.caps) != 2 {
		t.Errorf("recycled %v after loads that reused their victims' buffers", r.caps)
	}
}

// A failed load returns its buffer for the next load.
func TestFailedLoadKeepsItsBuffer(t *testing.T) {
	ld := newCountingLoader()
	ld.fail = func(k chunkcache.Key) error {
		if k == key(0) {
			return errors.New("boom")
		}
		return nil
	}
	c := chunkcache.New(chunkcache.Config{Capacity: 1000, Loader: ld})
	if _, err := c.Acquire(context.Background(), []chunkcache.Request{{Key: key(0), Size: 100, Alloc: 100}}); err == nil {
		t.Fatal("want the load error")
	}
	acquire(t, c, chunkcache.Request{Key: key(1), Size: 100, Alloc: 100}).Release()
	if st := c.Stats(); st.BufferBytes != 100 {
		t.Fatalf("buffer bytes %d, want 100: the failed load's buffer should be reused", st.BufferBytes)
	}
}

// TestWaitingIsBounded: a client holding the cache must not let requests
// pile up behind it without bound, nor keep them waiting forever. A full
// queue refuses at once, a request that waits too long gives up, both with
// ErrBusy, and Stalled reports the cache making no progress.
func TestWaitingIsBounded(t *testing.T) {
	c := chunkcache.New(chunkcache.Config{Capacity: 100, Loader: newCountingLoader(), MaxWaiting: 2, MaxWait: 300 * time.Millisecond})
	held := acquire(t, c, req(0, 100))
	if c.Stalled(0) {
		t.Fatal("stalled with nobody waiting")
	}
	errs := make(chan error, 2)
	for i := range 2 {
		go func() {
			_, err := c.Acquire(context.Background(), []chunkcache.Request{req(i+1, 100)})
			errs <- err
		}()
	}
	waitFor(t, func() bool { return c.Stats().Waiting == 2 })
	start := time.Now()
	if _, err := c.Acquire(context.Background(), []chunkcache.Request{req(9, 100)}); !errors.Is(err, chunkcache.ErrBusy) {
		t.Fatalf("a third waiter with MaxWaiting 2: %v, want ErrBusy", err)
	}
	if d := time.Since(start); d > 100*time.Millisecond {
		t.Errorf("a full queue took %s to refuse", d)
	}
	if !c.Stalled(50 * time.Millisecond) {
		time.Sleep(60 * time.Millisecond)
		if !c.Stalled(50 * time.Millisecond) {
			t.Error("requests wait and none was let through, but Stalled is false")
		}
	}
	for range 2 {
		if err := <-errs; !errors.Is(err, chunkcache.ErrBusy) {
			t.Errorf("a waiter past MaxWait: %v, want ErrBusy", err)
		}
	}
	if c.Stats().Waiting != 0 {
		t.Errorf("%d still waiting after giving up", c.Stats().Waiting)
	}
	held.Release()
	acquire(t, c, req(1, 100)).Release()
	if c.Stalled(0) {
		t.Error("stalled after the queue emptied")
	}
}

// TestResident: Resident gives a ready chunk's bytes without loading
// anything, and pins it until released: a chunk being handed to another
// node is not evicted under the copy. A chunk not held is not loaded.
func TestResident(t *testing.T) {
	l := newCountingLoader()
	c := chunkcache.New(chunkcache.Config{Capacity: 200, Loader: l})
	if _, _, ok := c.Resident(key(1)); ok {
		t.Fatal("Resident found a chunk never loaded")
	}
	if l.count(key(1)) != 0 {
		t.Fatal("Resident loaded a chunk")
	}
	acquire(t, c, req(1, 100)).Release()
	data, release, ok := c.Resident(key(1))
	if !ok || string(data) != string(want(key(1), 100)) {
		t.Fatalf("Resident of a loaded chunk: ok %v, %d bytes", ok, len(data))
	}
	// Two more chunks need its room: while pinned it stays.
	acquire(t, c, req(2, 100)).Release()
	if _, err := c.Prefetch(context.Background(), req(3, 100), nil); err != nil {
		t.Fatal(err)
	}
	if !c.Contains(key(1)) {
		t.Fatal("a chunk pinned by Resident was evicted")
	}
	release()
	release() // a second release is harmless
	acquire(t, c, req(4, 100), req(5, 100)).Release()
	if c.Contains(key(1)) {
		t.Error("a chunk released by Resident stays pinned")
	}
	if l.count(key(1)) != 1 {
		t.Errorf("chunk 1 loaded %d times", l.count(key(1)))
	}
}

// growLoader needs grow[k] bytes for key k: a shorter buffer is a
// GrowError; it counts its loads.
type growLoader struct {
	mu    sync.Mutex
	need  map[string]int64
	loads map[string]int
}

func (g *growLoader) Load(_ context.Context, k chunkcache.Key, buf []byte) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.loads[k.Object]++
	if n := g.need[k.Object]; int64(len(buf)) < n {
		return &chunkcache.GrowError{Need: n, Err: fmt.Errorf("%s needs %d", k.Object, n)}
	}
	for i := range buf {
		buf[i] = byte(len(k.Object))
	}
	return nil
}

// A chunk that needs more room than requested grows within its load when
// unpinned chunks can make the room, its pinned bytes within capacity;
// otherwise the requester gets the GrowError and asks again.
func TestGrowWithinLoad(t *testing.T) {
	ctx := context.Background()
	g := &growLoader{need: map[string]int64{"big": 600}, loads: map[string]int{}}
	c := chunkcache.New(chunkcache.Config{Capacity: 1000, Loader: g})
	defer c.Close()
	req := func(o string, n int64) chunkcache.Request {
		return chunkcache.Request{Key: chunkcache.Key{Dataset: "d", Object: o}, Size: n}
	}
	l, err := c.Acquire(ctx, []chunkcache.Request{req("a", 300), req("b", 300)})
	if err != nil {
		t.Fatal(err)
	}
	l.Release()
	l, err = c.Acquire(ctx, []chunkcache.Request{req("big", 200)})
	if err != nil {
		t.Fatalf("grow by evicting: %v", err)
	}
	if len(l.Bytes(0)) != 600 || g.loads["big"] != 2 {
		t.Fatalf("%d bytes after %d loads", len(l.Bytes(0)), g.loads["big"])
	}
	st := c.Stats()
	if st.Bytes > 1000 || st.PinnedBytes != 600 || st.Grown != 1 {
		t.Fatalf("%+v", st)
	}
	// With the rest pinned there is no room to grow: the error reaches
	// the requester.
	l2, err := c.Acquire(ctx, []chunkcache.Request{req("c", 300)})
	if err != nil {
		t.Fatal(err)
	}
	g.need["d2"] = 500
	_, err = c.Acquire(ctx, []chunkcache.Request{req("d2", 100)})
	var ge *chunkcache.GrowError
	if !errors.As(err, &ge) || ge.Need != 500 {
		t.Fatalf("no room to grow: %v", err)
	}
	l.Release()
	l2.Release()
	if st := c.Stats(); st.PinnedBytes != 0 || st.Bytes > 1000 {
		t.Fatalf("after release: %+v", st)
	}
}
