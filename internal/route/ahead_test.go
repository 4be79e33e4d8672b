package route

import (
	"fmt"
	"testing"
)

// held is the bytes of the finished entries still in a.
func held(a *Ahead) (n int64) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, e := range a.entries {
		if e.counted {
			n += e.size
		}
	}
	return n
}

func fetched(size int) [][][]byte { return [][][]byte{{make([]byte, size)}} }

// TestAheadCountsWhatItHolds: Bytes is always the bytes of the finished
// entries held. The reproduction: take subtracted a size still 0 while
// the fetch ran and finish added the real size anyway, so four claim →
// take → finish cycles of 300 bytes against a 1,000-byte limit counted
// 1,200 bytes with nothing held, and every later claim was dropped at once.
func TestAheadCountsWhatItHolds(t *testing.T) {
	steps := []struct {
		name string
		do   func(a *Ahead)
	}{
		{"claim, take, then finish, four times", func(a *Ahead) {
			for i := range 4 {
				key := fmt.Sprint(i)
				e, _ := a.Claim(key)
				a.Take(key)
				a.Finish(key, e, fetched(300))
			}
		}},
		{"claim, finish, take", func(a *Ahead) {
			e, _ := a.Claim("k")
			a.Finish("k", e, fetched(300))
			if a.Take("k") != e {
				t.Error("a finished entry was not found")
			}
		}},
		{"entries beyond the limit drop the oldest", func(a *Ahead) {
			for i := range 5 {
				key := fmt.Sprint(i)
				e, _ := a.Claim(key)
				a.Finish(key, e, fetched(300))
			}
		}},
		{"an entry dropped while in flight, finished after", func(a *Ahead) {
			e, _ := a.Claim("slow")
			for i := range 300 { // past maxAheadEntries: "slow" is dropped
				key := fmt.Sprint(i)
				f, _ := a.Claim(key)
				a.Finish(key, f, nil)
			}
			a.Finish("slow", e, fetched(900))
		}},
	}
	for _, st := range steps {
		t.Run(st.name, func(t *testing.T) {
			a := NewAhead(1000, nil)
			st.do(a)
			if got, want := a.Bytes(), held(a); got != want || got > 1000 {
				t.Fatalf("Bytes() = %d, entries held hold %d (limit 1000)", got, want)
			}
			// The store still takes what it can hold.
			e, ok := a.Claim("after")
			if !ok {
				t.Fatal("a new claim was refused")
			}
			a.Finish("after", e, fetched(300))
			if a.Take("after") != e {
				t.Fatal("a fetch of 300 bytes into a store of 1,000 was dropped at once")
			}
		})
	}
}

// budget is a Budget of size bytes.
type budget struct{ size, held int64 }

func (b *budget) TryReserve(n int64) (func(), bool) {
	if b.held+n > b.size {
		return nil, false
	}
	b.held += n
	return func() { b.held -= n }, true
}

// TestAheadTakesFromBudget: samples fetched ahead are kept only while
// their bytes are free in the node's budget, and give them back when
// taken or dropped.
func TestAheadTakesFromBudget(t *testing.T) {
	b := &budget{size: 1000}
	a := NewAhead(10000, b)
	e1, _ := a.Claim("1")
	a.Finish("1", e1, fetched(600))
	e2, _ := a.Claim("2")
	a.Finish("2", e2, fetched(600)) // no room beside the first
	if b.held != 600 || a.Bytes() != 600 || a.Take("2") != nil {
		t.Fatalf("budget holds %d, the store %d; the second entry kept over the budget", b.held, a.Bytes())
	}
	if a.Take("1") == nil || b.held != 0 {
		t.Fatalf("taken: the budget still holds %d", b.held)
	}
	// Dropped by the store's own bound: given back.
	small := NewAhead(500, b)
	e3, _ := small.Claim("3")
	small.Finish("3", e3, fetched(400))
	e4, _ := small.Claim("4")
	small.Finish("4", e4, fetched(400))
	if b.held != 400 || small.Bytes() != 400 {
		t.Errorf("after the store dropped its oldest: budget %d, store %d", b.held, small.Bytes())
	}
}
