package premade

import (
	"context"
	"fmt"
	"testing"
)

// held is the bytes of the finished entries still in s.
func held(s *Store[[]byte]) (n int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, c := range s.entries {
		if c.counted {
			n += c.size
		}
	}
	return n
}

// store is a Store of byte slices in a budget of 1,000 bytes and 256
// entries, counting the values it gives back.
func store(released *int) *Store[[]byte] {
	return New(Config[[]byte]{Entries: 256, Budget: NewBytes(1000), Release: func([]byte) { *released++ }})
}

func finish(s *Store[[]byte], c *Claim[[]byte], size int) {
	s.Finish(c, make([]byte, size), int64(size))
}

// gaveUp is the context of a request that stopped waiting.
func gaveUp() context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	return ctx
}

// TestStoreCountsWhatItHolds: Bytes is always the bytes of the finished
// entries held. The reproduction (of route.Ahead, one of the two stores
// this one replaced): take subtracted a size still 0 while the fetch ran
// and finish added the real size anyway, so four claim → take → finish
// cycles of 300 bytes against a 1,000-byte limit counted 1,200 bytes with
// nothing held, and every later claim was dropped at once.
func TestStoreCountsWhatItHolds(t *testing.T) {
	steps := []struct {
		name string
		do   func(s *Store[[]byte])
	}{
		{"claim, take, then finish, four times", func(s *Store[[]byte]) {
			for i := range 4 {
				key := fmt.Sprint(i)
				c, _ := s.Claim(key)
				s.Take(gaveUp(), key)
				finish(s, c, 300)
			}
		}},
		{"claim, finish, take", func(s *Store[[]byte]) {
			c, _ := s.Claim("k")
			finish(s, c, 300)
			if _, ok, _ := s.Take(context.Background(), "k"); !ok {
				t.Error("a finished entry was not found")
			}
		}},
		{"entries beyond the limit drop the oldest", func(s *Store[[]byte]) {
			for i := range 5 {
				key := fmt.Sprint(i)
				c, _ := s.Claim(key)
				finish(s, c, 300)
			}
		}},
		{"an entry dropped while in flight, finished after", func(s *Store[[]byte]) {
			c, _ := s.Claim("slow")
			for i := range 300 { // past Entries: "slow" is dropped
				key := fmt.Sprint(i)
				f, _ := s.Claim(key)
				s.Abandon(f)
			}
			finish(s, c, 900)
		}},
	}
	for _, st := range steps {
		t.Run(st.name, func(t *testing.T) {
			var released int
			s := store(&released)
			st.do(s)
			if got, want := s.Stats().Bytes, held(s); got != want || got > 1000 {
				t.Fatalf("Stats().Bytes = %d, entries held hold %d (limit 1000)", got, want)
			}
			// The store still takes what it can hold.
			c, ok := s.Claim("after")
			if !ok {
				t.Fatal("a new claim was refused")
			}
			finish(s, c, 300)
			if _, ok, _ := s.Take(context.Background(), "after"); !ok {
				t.Fatal("work of 300 bytes in a store of 1,000 was dropped at once")
			}
		})
	}
}

// TestStoreGivesBackOnce: every value made and not taken is given back
// exactly once — dropped for room, dropped while under way, left by a
// request that gave up before or after it finished, or held at Close —
// and one taken never is.
func TestStoreGivesBackOnce(t *testing.T) {
	tests := []struct {
		name         string
		do           func(s *Store[[]byte])
		released     int
		taken, claim int64
	}{
		{"taken", func(s *Store[[]byte]) {
			c, _ := s.Claim("a")
			finish(s, c, 100)
			s.Take(context.Background(), "a")
		}, 0, 1, 1},
		{"dropped for room", func(s *Store[[]byte]) {
			a, _ := s.Claim("a")
			finish(s, a, 600)
			b, _ := s.Claim("b")
			finish(s, b, 600) // a is older: dropped
		}, 1, 0, 2},
		{"too large for the budget", func(s *Store[[]byte]) {
			a, _ := s.Claim("a")
			finish(s, a, 1001)
		}, 1, 0, 1},
		{"given up before it finished", func(s *Store[[]byte]) {
			a, _ := s.Claim("a")
			s.Take(gaveUp(), "a")
			finish(s, a, 100)
		}, 1, 0, 1},
		{"held at Close", func(s *Store[[]byte]) {
			a, _ := s.Claim("a")
			finish(s, a, 100)
			b, _ := s.Claim("b")
			s.Close()
			finish(s, b, 100) // under way at Close
		}, 2, 0, 2},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var released int
			s := store(&released)
			tc.do(s)
			st := s.Stats()
			if released != tc.released || st.Taken != tc.taken || st.Claimed != tc.claim {
				t.Fatalf("released %d, taken %d, claimed %d; want %d, %d, %d", released, st.Taken, st.Claimed, tc.released, tc.taken, tc.claim)
			}
		})
	}
}

// TestStoreRules: a key whose request came first is not claimed (with
// Remember), nor one claimed already; an abandoned claim is found made of
// nothing; a Store without a budget holds nothing.
func TestStoreRules(t *testing.T) {
	s := New(Config[[]byte]{Entries: 4, Budget: NewBytes(100), Remember: 2})
	s.Take(context.Background(), "asked")
	if _, ok := s.Claim("asked"); ok {
		t.Error("a key whose request came first was claimed")
	}
	if _, ok := s.Claim("k"); !ok {
		t.Fatal("a new key was refused")
	}
	if _, ok := s.Claim("k"); ok {
		t.Error("a key claimed already was claimed again")
	}
	s.Take(context.Background(), "x")
	s.Take(context.Background(), "y") // past Remember: "asked" forgotten
	if _, ok := s.Claim("asked"); !ok {
		t.Error("a key asked for before the last Remember was refused")
	}
	a, _ := s.Claim("abandoned")
	s.Abandon(a)
	if _, ok := s.Claim("abandoned"); ok {
		t.Error("an abandoned key was claimed again before its request came")
	}
	if _, ok, err := s.Take(context.Background(), "abandoned"); ok || err != nil {
		t.Errorf("Take of abandoned work: ok %t, err %v", ok, err)
	}
	none := New(Config[[]byte]{Entries: 4})
	if _, ok := none.Claim("k"); ok {
		t.Error("a Store without a budget claimed work")
	}
}

// TestStoreForgetsWhatIsGone: the claim order keeps no more than twice
// the entries held of the keys taken or dropped, however many pass
// through, and an entry held across them stays the oldest, dropped first
// when new claims need its room.
func TestStoreForgetsWhatIsGone(t *testing.T) {
	var released int
	s := New(Config[[]byte]{Entries: 4, Budget: NewBytes(1 << 20), Release: func([]byte) { released++ }})
	keep, _ := s.Claim("keep")
	finish(s, keep, 10)
	for i := range 1000 {
		key := fmt.Sprint(i)
		c, ok := s.Claim(key)
		if !ok {
			t.Fatalf("claim %d refused", i)
		}
		finish(s, c, 10)
		if _, ok, _ := s.Take(context.Background(), key); !ok {
			t.Fatalf("entry %d not found", i)
		}
	}
	s.mu.Lock()
	n := len(s.fifo)
	s.mu.Unlock()
	if n > 2*4 {
		t.Fatalf("the claim order keeps %d keys after 1,000 taken, with 1 held and 4 entries at most", n)
	}
	for i := range 4 { // the fourth new claim drops the oldest: "keep"
		c, _ := s.Claim(fmt.Sprint("new", i))
		finish(s, c, 10)
	}
	if _, ok, _ := s.Take(context.Background(), "keep"); ok || released != 1 {
		t.Fatalf("the oldest entry held: found %v, %d values given back; want it dropped and given back", ok, released)
	}
	if _, ok, _ := s.Take(context.Background(), "new0"); !ok {
		t.Fatal("a newer entry was dropped before the oldest")
	}
}
