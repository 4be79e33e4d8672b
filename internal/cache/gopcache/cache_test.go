package gopcache

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
)

// budget counts what the cache reserves, refusing past size.
type budget struct {
	mu         sync.Mutex
	size, held int64
}

func (b *budget) Reserve(n int64) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.held+n > b.size {
		return false
	}
	b.held += n
	return true
}

func (b *budget) Release(n int64) {
	b.mu.Lock()
	b.held -= n
	b.mu.Unlock()
}

// pixels are the frame of pts a decoder would give: 8 bytes of it.
func pixels(pts int64) []byte { return bytes.Repeat([]byte{byte(pts), byte(pts >> 8)}, 4) }

// TestCacheConcurrent: ranks serving a horizon's batches at once, a GOP
// is decoded once (one fill, the others wait for it) and each batch finds
// every frame it wants as decoded; when a fill fails, the batches that
// waited for it decode their own (its GOP counted only for its fill); once
// every sample is served the cache holds nothing and has given its budget
// back.
func TestCacheConcurrent(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 7))
	const samples = 400
	gops := make([]int, samples)
	for i := range gops {
		gops[i] = i / 20 // twenty samples a GOP, as a GOP-ordered window's
		if r.IntN(3) == 0 {
			gops[i] = r.IntN(samples / 20)
		}
	}
	p := newPlan("h", 0, gops, 7)
	bud := &budget{size: 1 << 20}
	c := New(Config{Limit: 1 << 20, Budget: bud})
	var fills sync.Map // Key → *atomic.Int64
	failOnce := Key{"h", 0, 3}
	var failed atomic.Bool
	var wg sync.WaitGroup
	work := make(chan []int)
	for range 8 {
		wg.Go(func() {
			for batch := range work {
				uses := map[Key][]Use{}
				var keys []Key
				for _, pos := range batch {
					for _, k := range p.want[pos] {
						if _, ok := uses[k]; !ok {
							keys = append(keys, k)
						}
						uses[k] = append(uses[k], p.own[pos][k.GOP])
					}
				}
				wants := make([]Want, len(keys))
				for i, k := range keys {
					wants[i] = Want{Horizon: &p.h, Key: k, Own: uses[k], FrameBytes: 8}
				}
				leases := c.Decide(wants, map[*Horizon][]int{&p.h: batch})
				// As the clip stage's task: its fills claimed and done
				// first, then the GOPs earlier batches fill.
				fill := func(k Key, l *Lease) {
					n, _ := fills.LoadOrStore(k, new(atomic.Int64))
					n.(*atomic.Int64).Add(1)
					if k == failOnce && failed.CompareAndSwap(false, true) {
						l.Done(errors.New("a damaged packet"))
						return
					}
					for _, pts := range l.Decode {
						if err := l.Put(pts, pixels(pts)); err != nil {
							t.Error(err)
						}
					}
					l.Done(nil)
				}
				var mine []int
				for i, l := range leases {
					if l.Claim() {
						mine = append(mine, i)
					}
				}
				for _, i := range mine {
					fill(keys[i], leases[i])
				}
				for i, l := range leases {
					k := keys[i]
					if slices.Contains(mine, i) {
						continue
					}
					held, err := l.Wait(context.Background(), nil)
					if err != nil {
						t.Error(err)
						return
					}
					if l.Keeps() { // an unclaimed fill, claimed here
						fill(k, l)
						continue
					}
					if !held {
						if k != failOnce {
							n, _ := fills.LoadOrStore(k, new(atomic.Int64))
							n.(*atomic.Int64).Add(1)
						}
						l.Done(nil)
						continue
					}
					for _, u := range uses[k] {
						for _, pts := range u.Frames {
							if got := l.Frame(pts); !bytes.Equal(got, pixels(pts)) {
								t.Errorf("%v: frame %d is %v", k, pts, got)
							}
						}
					}
					l.Release()
				}
			}
		})
	}
	order := r.Perm(samples / 4)
	for _, b := range order {
		work <- []int{4 * b, 4*b + 1, 4*b + 2, 4*b + 3}
	}
	close(work)
	wg.Wait()
	fills.Range(func(k, n any) bool {
		if got := n.(*atomic.Int64).Load(); got != 1 && !(k == failOnce && got == 2) {
			t.Errorf("%v decoded %d times", k, got)
		}
		return true
	})
	st := c.Stats()
	if st.Held != 0 || st.Entries != 0 || bud.held != 0 {
		t.Fatalf("after every sample: %+v, the budget holds %d", st, bud.held)
	}
	t.Logf("%+v", st)
}

// TestCacheBudgetShort: when the budget has not the room the book counted
// (the decodes' share held by others), a GOP is decoded for its batch
// alone and nothing is held.
func TestCacheBudgetShort(t *testing.T) {
	p := newPlan("h", 0, []int{1, 1, 1}, 3)
	bud := &budget{size: 4}
	c := New(Config{Limit: 1 << 10, Budget: bud})
	l := c.Decide([]Want{{Horizon: &p.h, Key: Key{"h", 0, 1}, Own: []Use{p.own[0][1]}, FrameBytes: 8}}, nil)[0]
	if l.Hit || l.Keeps() || fmt.Sprint(l.Decode) != fmt.Sprint(p.own[0][1].Frames) {
		t.Fatalf("%+v: want the batch's own frames decoded alone", l)
	}
	l.Done(nil)
	if st := c.Stats(); st.Held != 0 || st.Entries != 0 || st.Alone != 1 {
		t.Fatalf("%+v", st)
	}
}

// TestCacheCancel: a batch waiting for another's fill gives up with its
// context, and lets the frames go.
func TestCacheCancel(t *testing.T) {
	p := newPlan("h", 0, []int{1, 1, 1}, 1)
	c := New(Config{Limit: 1 << 10})
	k := Key{"h", 0, 1}
	fill := c.Decide([]Want{{Horizon: &p.h, Key: k, Own: []Use{p.own[0][1]}, FrameBytes: 8}}, map[*Horizon][]int{&p.h: {0}})[0]
	if !fill.Keeps() {
		t.Fatalf("%+v", fill)
	}
	fill.Claim()
	hit := c.Decide([]Want{{Horizon: &p.h, Key: k, Own: []Use{p.own[1][1]}, FrameBytes: 8}}, map[*Horizon][]int{&p.h: {1}})[0]
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := hit.Wait(ctx, nil); !errors.Is(err, context.Canceled) {
		t.Fatalf("waiting with a canceled context: %v", err)
	}
	hit.Close()
	_ = fill.Put(fill.Decode[0], pixels(fill.Decode[0]))
	fill.Done(nil)
	last := c.Decide([]Want{{Horizon: &p.h, Key: k, Own: []Use{p.own[2][1]}, FrameBytes: 8}}, map[*Horizon][]int{&p.h: {2}})[0]
	if held, err := last.Wait(context.Background(), nil); !held || err != nil {
		t.Fatalf("the last sample's GOP: held %v, %v", held, err)
	}
	last.Release()
	if st := c.Stats(); st.Entries != 0 || st.Held != 0 {
		t.Fatalf("%+v after every sample", st)
	}
}

// TestCacheUnclaimedFillNotWaitedFor: a batch whose GOP an earlier batch
// keeps, but whose task has not started (the fill not claimed), does not
// wait: it claims the fill and decodes it itself when it can decode every
// frame of it, and the earlier batch, claiming too late, waits for it;
// when it cannot, it decodes its own frames alone. A worker never waits
// on a fill queued behind it.
func TestCacheUnclaimedFillNotWaitedFor(t *testing.T) {
	p := newPlan("h", 0, []int{1, 1, 1, 1}, 1)
	c := New(Config{Limit: 1 << 10})
	k := Key{"h", 0, 1}
	want := func(pos int) Want { return Want{Horizon: &p.h, Key: k, Own: []Use{p.own[pos][1]}, FrameBytes: 8} }
	first := c.Decide([]Want{want(0)}, map[*Horizon][]int{&p.h: {0}})[0]
	second := c.Decide([]Want{want(1)}, map[*Horizon][]int{&p.h: {1}})[0]
	if !first.Keeps() || !second.Hit {
		t.Fatalf("%+v, %+v: want the first batch to keep its fill, the second a hit on it", first, second)
	}
	if held, err := second.Wait(context.Background(), nil); held || err != nil || !second.Keeps() {
		t.Fatalf("an unclaimed fill: held %v, %v, keeps %v; want it claimed by the second batch", held, err, second.Keeps())
	}
	if first.Claim() || !first.Hit {
		t.Fatal("the first batch claimed a fill the second had claimed")
	}
	for _, pts := range second.Decode {
		_ = second.Put(pts, pixels(pts))
	}
	second.Done(nil)
	if held, err := first.Wait(context.Background(), nil); !held || err != nil {
		t.Fatalf("the first batch after the second's fill: held %v, %v", held, err)
	}
	for _, u := range first.own {
		if !bytes.Equal(first.Frame(u), pixels(u)) {
			t.Fatalf("frame %d: %v", u, first.Frame(u))
		}
	}
	first.Release()

	// A batch that cannot decode every frame of a fill it finds unclaimed
	// decodes its own.
	q := newPlan("q", 0, []int{1, 1, 1}, 1)
	k = Key{"q", 0, 1}
	fill := c.Decide([]Want{{Horizon: &q.h, Key: k, Own: []Use{q.own[0][1]}, FrameBytes: 8}}, map[*Horizon][]int{&q.h: {0}})[0]
	hit := c.Decide([]Want{{Horizon: &q.h, Key: k, Own: []Use{q.own[1][1]}, FrameBytes: 8}}, map[*Horizon][]int{&q.h: {1}})[0]
	if held, err := hit.Wait(context.Background(), func(int64) bool { return false }); held || err != nil || hit.Keeps() ||
		fmt.Sprint(hit.Decode) != fmt.Sprint(q.own[1][1].Frames) {
		t.Fatalf("held %v, %v, keeps %v, decode %v; want its own frames decoded alone", held, err, hit.Keeps(), hit.Decode)
	}
	hit.Done(nil)
	fill.Claim()
	for _, pts := range fill.Decode {
		_ = fill.Put(pts, pixels(pts))
	}
	fill.Done(nil)
	c.Decide(nil, map[*Horizon][]int{&p.h: {2, 3}, &q.h: {2}})
	if st := c.Stats(); st.Entries != 0 || st.Held != 0 || st.Alone != 1 {
		t.Fatalf("%+v", st)
	}
}

// TestCacheStartedFillWaitedFor: a batch that cannot decode every frame
// of a fill it finds unclaimed, but whose task was taken by a worker
// (Start: the workers take tasks in the order their batches were
// decided), waits for that fill rather than decode the GOP a second time;
// and when that task forgoes its fill (no memory for it now), the batch
// that wanted it decodes its own, and so does the task.
func TestCacheStartedFillWaitedFor(t *testing.T) {
	p := newPlan("h", 0, []int{1, 1, 1, 1}, 1)
	c := New(Config{Limit: 1 << 10})
	k := Key{"h", 0, 1}
	want := func(pos int) Want { return Want{Horizon: &p.h, Key: k, Own: []Use{p.own[pos][1]}, FrameBytes: 8} }
	cannot := func(int64) bool { return false }
	first := c.Decide([]Want{want(0)}, map[*Horizon][]int{&p.h: {0}})[0]
	second := c.Decide([]Want{want(1)}, map[*Horizon][]int{&p.h: {1}})[0]
	first.Start()
	// It waits: a context already ended says so.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if held, err := second.Wait(ctx, cannot); !errors.Is(err, context.Canceled) {
		t.Fatalf("a started fill: held %v, %v; want it waited for", held, err)
	}
	second.Close()
	third := c.Decide([]Want{want(2)}, map[*Horizon][]int{&p.h: {2}})[0]
	if !first.Claim() {
		t.Fatal("the first batch's task could not claim its own started fill")
	}
	for _, pts := range first.Decode {
		_ = first.Put(pts, pixels(pts))
	}
	first.Done(nil)
	if held, err := third.Wait(context.Background(), cannot); !held || err != nil {
		t.Fatalf("after the started fill: held %v, %v", held, err)
	}
	for _, u := range p.own[2][1].Frames {
		if !bytes.Equal(third.Frame(u), pixels(u)) {
			t.Fatalf("frame %d: %v", u, third.Frame(u))
		}
	}
	third.Release()
	if st := c.Stats(); st.Kept != 1 || st.Alone != 0 || st.Hits != 2 {
		t.Fatalf("%+v: want one fill and two hits", st)
	}

	// Forgone: the batch that wanted it and the task decode their own.
	q := newPlan("q", 0, []int{1, 1, 1}, 1)
	k = Key{"q", 0, 1}
	fill := c.Decide([]Want{{Horizon: &q.h, Key: k, Own: []Use{q.own[0][1]}, FrameBytes: 8}}, map[*Horizon][]int{&q.h: {0}})[0]
	hit := c.Decide([]Want{{Horizon: &q.h, Key: k, Own: []Use{q.own[1][1]}, FrameBytes: 8}}, map[*Horizon][]int{&q.h: {1}})[0]
	fill.Start()
	fill.Forgo()
	if held, err := hit.Wait(context.Background(), cannot); held || err != nil || fmt.Sprint(hit.Decode) != fmt.Sprint(q.own[1][1].Frames) {
		t.Fatalf("a forgone fill: held %v, %v, decode %v; want the batch's own frames", held, err, hit.Decode)
	}
	if fill.Keeps() || fill.Claim() || fmt.Sprint(fill.Decode) != fmt.Sprint(q.own[0][1].Frames) {
		t.Fatalf("the task that forwent its fill: keeps %v, decode %v; want its own frames alone", fill.Keeps(), fill.Decode)
	}
	hit.Done(nil)
	fill.Done(nil)
	c.Decide(nil, map[*Horizon][]int{&p.h: {3}, &q.h: {2}})
	if st := c.Stats(); st.Entries != 0 || st.Held != 0 || st.Kept != 1 || st.Alone != 2 {
		t.Fatalf("%+v: want the first horizon's fill kept, the second's two decodes alone", st)
	}
}
