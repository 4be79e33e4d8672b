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
			a := NewAhead(1000)
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
