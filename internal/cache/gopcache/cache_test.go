package gopcache

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
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
// every frame it wants as decoded; a fill that fails leaves the GOP to
// the next batch; once every sample is served the cache holds nothing and
// has given its budget back.
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
				for _, k := range keys {
					l, err := c.Acquire(context.Background(), &p.h, k, uses[k], nil, 8)
					if err != nil {
						t.Error(err)
						return
					}
					if !l.Hit {
						n, _ := fills.LoadOrStore(k, new(atomic.Int64))
						if l.Keeps() && k == failOnce && failed.CompareAndSwap(false, true) {
							l.Done(errors.New("a damaged packet"))
							// This batch decodes it again, alone.
							l, err = c.Acquire(context.Background(), &p.h, k, uses[k], nil, 8)
							if err != nil || l.Hit {
								t.Errorf("after a failed fill: %+v %v", l, err)
								return
							}
						}
						n.(*atomic.Int64).Add(1)
						for _, pts := range l.Decode {
							if l.Keeps() {
								if err := l.Put(pts, pixels(pts)); err != nil {
									t.Error(err)
								}
							}
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
				c.Served(&p.h, batch)
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
	l, err := c.Acquire(context.Background(), &p.h, Key{"h", 0, 1}, []Use{p.own[0][1]}, nil, 8)
	if err != nil || l.Hit || l.Keeps() || fmt.Sprint(l.Decode) != fmt.Sprint(p.own[0][1].Frames) {
		t.Fatalf("%+v %v: want the batch's own frames decoded alone", l, err)
	}
	l.Done(nil)
	if st := c.Stats(); st.Held != 0 || st.Entries != 0 || st.Alone != 1 {
		t.Fatalf("%+v", st)
	}
}

// TestCacheCancel: a batch waiting for another's fill gives up with its
// context, pinning nothing.
func TestCacheCancel(t *testing.T) {
	p := newPlan("h", 0, []int{1, 1, 1}, 1)
	c := New(Config{Limit: 1 << 10})
	k := Key{"h", 0, 1}
	fill, err := c.Acquire(context.Background(), &p.h, k, []Use{p.own[0][1]}, nil, 8)
	if err != nil || !fill.Keeps() {
		t.Fatalf("%+v %v", fill, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := c.Acquire(ctx, &p.h, k, []Use{p.own[1][1]}, nil, 8); !errors.Is(err, context.Canceled) {
		t.Fatalf("waiting with a canceled context: %v", err)
	}
	_ = fill.Put(fill.Decode[0], pixels(fill.Decode[0]))
	fill.Done(nil)
	c.Served(&p.h, []int{0, 1, 2})
	if st := c.Stats(); st.Entries != 0 || st.Held != 0 {
		t.Fatalf("%+v after every sample", st)
	}
}
