package memory

import (
	"context"
	"errors"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/brandgw/brand/internal/batch/premade"
	"github.com/brandgw/brand/internal/cache/chunkcache"
)

const mib = 1 << 20

func TestFit(t *testing.T) {
	want := Budget{Cache: 1024 * mib, Base: 256 * mib, Copies: 512 * mib, Decodes: 1800 * mib}
	tests := []struct {
		name  string
		limit int64
		want  Budget
		err   string
	}{
		{"auto: the parts as wanted", 0, want, ""},
		{"room for every part", want.Total(), want, ""},
		{"more than the parts: decodes take the rest", want.Total() + 100*mib,
			Budget{Cache: 1024 * mib, Base: 256 * mib, Copies: 512 * mib, Decodes: 1900 * mib}, ""},
		{"tight: decodes first up to half, copies what they want of the rest", 1024*mib + 256*mib + 1200*mib,
			Budget{Cache: 1024 * mib, Base: 256 * mib, Copies: 512 * mib, Decodes: 688 * mib}, ""},
		{"tighter: copies and decodes halve what is left", 1024*mib + 256*mib + 600*mib,
			Budget{Cache: 1024 * mib, Base: 256 * mib, Copies: 300 * mib, Decodes: 300 * mib}, ""},
		{"nothing left beside the cache", 1024*mib + 256*mib + 16*mib, Budget{}, "leaves 16 MiB beside the cache (1.0 GiB)"},
		{"less than the cache", 512 * mib, Budget{}, "leaves 0 B beside"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Fit(tt.limit, want)
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("Fit: %v, want an error saying %q", err, tt.err)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("Fit: %+v, %v; want %+v", got, err, tt.want)
			}
			if tt.limit != 0 && got.Total() != tt.limit {
				t.Errorf("parts total %d, the limit is %d", got.Total(), tt.limit)
			}
		})
	}
	// Decodes that want little leave copies the rest they want.
	got, err := Fit(1024*mib+256*mib+600*mib, Budget{Cache: 1024 * mib, Base: 256 * mib, Copies: 512 * mib, Decodes: 32 * mib})
	if err != nil || got.Copies != 512*mib || got.Decodes != 88*mib {
		t.Errorf("small decodes: %+v, %v", got, err)
	}
}

var errBusy = errors.New("busy")

// TestAccount: reservations are bounded by the part, waits by the
// manager's wait (then the busy sentinel, counted), and buffers come
// from the pools with their reservation.
func TestAccount(t *testing.T) {
	m := New(Config{Budget: Budget{Copies: 10 * mib, Decodes: 4 * mib}, MaxWait: 20 * time.Millisecond, Busy: errBusy})
	a := m.Copies()
	buf, give, err := a.Buffer(context.Background(), 6*mib)
	if err != nil || cap(buf) < 6*mib || len(buf) != 0 {
		t.Fatalf("Buffer: cap %d len %d, %v", cap(buf), len(buf), err)
	}
	if a.Held() != 6*mib {
		t.Errorf("held %d after a buffer of 6 MiB", a.Held())
	}
	if _, _, ok := a.TryBuffer(5 * mib); ok {
		t.Fatal("5 MiB beside 6 of 10")
	}
	if _, err := a.Reserve(context.Background(), 5*mib); !errors.Is(err, errBusy) || !strings.Contains(err.Error(), "copies") {
		t.Fatalf("a wait past the bound: %v, want the busy sentinel naming the part", err)
	}
	if a.Refused() != 1 {
		t.Errorf("refused %d, want 1", a.Refused())
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := a.Reserve(ctx, 5*mib); !errors.Is(err, context.Canceled) || a.Refused() != 1 {
		t.Errorf("a cancelled wait: %v, refused %d (a caller that went away is not refused)", err, a.Refused())
	}
	give()
	if a.Held() != 0 {
		t.Errorf("held %d after giving back", a.Held())
	}
	// The pools hand the buffer back out (sync.Pool may drop it, never
	// give a smaller one).
	if b := m.Get(6 * mib); cap(b) < 6*mib {
		t.Errorf("Get: cap %d", cap(b))
	}
	// The decodes part is another account.
	d := m.Decodes()
	rel, ok := d.TryReserve(4 * mib)
	if !ok || d.Size() != 4*mib {
		t.Fatalf("decodes: %v, size %d", ok, d.Size())
	}
	if _, ok := a.TryReserve(10 * mib); !ok {
		t.Error("copies wait for decodes")
	}
	rel()
	st := m.Stats()
	if st.Limit != 14*mib || st.Shares[2].Share != "copies" || st.Shares[2].Held != 10*mib || st.Shares[2].Refused != 1 {
		t.Errorf("stats %+v", st)
	}
}

func TestPoolClasses(t *testing.T) {
	var p pool
	for _, n := range []int64{1, 64 << 10, 64<<10 + 1, 3 * mib, 128 * mib} {
		b := p.get(n)
		if int64(cap(b)) < n || len(b) != 0 {
			t.Fatalf("get(%d): cap %d len %d", n, cap(b), len(b))
		}
		p.put(b)
	}
	// A buffer between two classes serves the lower one.
	p.put(make([]byte, 3*mib))
	if b := p.get(4 * mib); cap(b) < 4*mib {
		t.Fatalf("a 3 MiB buffer served a 4 MiB get")
	}
	if class(64<<10) != 0 || class(64<<10+1) != 1 || class(1<<40) != 20 {
		t.Error("classes", class(64<<10), class(64<<10+1), class(1<<40))
	}
}

// A get whose class is empty takes a buffer of one of the two classes
// above, held by the pool already, before allocating (a view's smaller
// chunks read into the buffers prefilled for the dataset's largest).
// sync.Pool may drop a buffer put (the race detector drops a quarter of
// them): 64 are put, so that one surviving is certain in practice.
func TestPoolTakesTheClassAbove(t *testing.T) {
	for _, tc := range []struct {
		pooled, want int
	}{
		{128 << 10, 128 << 10}, // the class above
		{256 << 10, 256 << 10}, // two above: four times the room
		{512 << 10, 64 << 10},  // never three above: a new buffer
	} {
		var p pool
		for range 64 {
			p.put(make([]byte, tc.pooled))
		}
		if b := p.get(64 << 10); cap(b) != tc.want {
			t.Fatalf("get(64 KiB) with its class empty and buffers of %d pooled: cap %d, want %d", tc.pooled, cap(b), tc.want)
		}
	}
}

// Prefilled buffers stay: collections, which empty a sync.Pool, and gets
// from whichever goroutine take them (a prefilled buffer's pages were
// written; a fresh one's are zero).
func TestPrefilledKept(t *testing.T) {
	m := New(Config{Budget: Budget{Copies: mib, Decodes: 64 * mib}, MaxWait: time.Millisecond, Busy: errBusy})
	if got := m.Prefill(3*mib, 4); got != 16*mib {
		t.Fatalf("Prefill: %d bytes", got)
	}
	for round := range 3 {
		runtime.GC()
		runtime.GC()
		got := make(chan []byte, 4)
		for range 4 {
			go func() { got <- m.Get(3 * mib) }()
		}
		var bufs [][]byte
		for range 4 {
			b := <-got
			if cap(b) != 4*mib || b[:1][0] != 1 {
				t.Fatalf("round %d: a get of cap %d, first byte %d: not a prefilled buffer", round, cap(b), b[:1][0])
			}
			bufs = append(bufs, b)
		}
		for _, b := range bufs {
			m.Put(b)
		}
	}
	// A fifth is not kept beyond what was prefilled: it may be taken back.
	m.Put(make([]byte, 4*mib))
	if n := len(m.pool.kept[class(4*mib)].bufs); n != 4 {
		t.Fatalf("the class keeps %d buffers, want the 4 prefilled", n)
	}
}

// Prefill fills the pools with touched buffers of a size's class, no more
// than the decodes part holds, and says how many bytes.
func TestPrefill(t *testing.T) {
	m := New(Config{Budget: Budget{Copies: mib, Decodes: 10 * mib}, MaxWait: time.Millisecond, Busy: errBusy})
	if got := m.Prefill(3*mib, 8); got != 8*mib {
		t.Fatalf("Prefill(3 MiB, 8) with 10 MiB for decodes: %d bytes, want two buffers of the 4 MiB class", got)
	}
	if got := m.Prefill(100<<10, 64); got != 64*128<<10 {
		t.Fatalf("Prefill(100 KiB, 64): %d bytes", got)
	}
	if b := m.Get(100 << 10); cap(b) != 128<<10 {
		t.Fatalf("Get after Prefill: cap %d", cap(b))
	}
	if m.Prefill(0, 4) != 0 || m.Prefill(mib, 0) != 0 {
		t.Error("Prefill of nothing filled something")
	}
}

// cacheState is a chunk cache's state, set by the test.
type cacheState struct{ st chunkcache.Stats }

func (c *cacheState) Stats() chunkcache.Stats { return c.st }
func (c *cacheState) Capacity() int64         { return 100 }

func TestUnderPressure(t *testing.T) {
	m := New(Config{Budget: Budget{Copies: mib, Decodes: mib}, MaxWait: time.Millisecond, Busy: errBusy})
	if m.UnderPressure(true) {
		t.Fatal("pressure without a cache")
	}
	c := &cacheState{}
	m.Watch(c)
	tests := []struct {
		waiting, pinned int64
		after, want     bool
	}{
		{0, 0, true, false},
		{1, 0, false, true},    // requests wait for room
		{0, 51, false, false},  // over half pinned, but the response is young
		{0, 51, true, true},    // … and once it has taken a while
		{0, 50, true, false},   // half is not over half
		{0, 100, false, false}, // full, nobody waiting, young
	}
	for _, tt := range tests {
		c.st = chunkcache.Stats{Waiting: tt.waiting, PinnedBytes: tt.pinned, BufferBytes: 123}
		if got := m.UnderPressure(tt.after); got != tt.want {
			t.Errorf("waiting %d pinned %d after %v: %v, want %v", tt.waiting, tt.pinned, tt.after, got, tt.want)
		}
	}
	if held := m.Stats().Shares[0].Held; held != 123 {
		t.Errorf("the cache part holds %d, its buffers are 123 bytes", held)
	}
}

// TestWithin: a share of a part (what a store of work made before its
// request holds, premade.Budget) takes bytes only if they fit its own
// bound and are free in the part now, and gives them back to both: a
// premade.Store on it keeps an entry only while the part has room.
func TestWithin(t *testing.T) {
	m := New(Config{Budget: Budget{Copies: 1000}, MaxWait: time.Millisecond, Busy: errBusy})
	a := m.Copies()
	w := a.Within(800)
	if !w.Reserve(600) || a.Held() != 600 {
		t.Fatalf("600 of 800: held %d", a.Held())
	}
	if w.Reserve(300) {
		t.Fatal("900 bytes in a share of 800")
	}
	hold, err := a.Reserve(context.Background(), 300)
	if err != nil {
		t.Fatal(err)
	}
	if w.Reserve(150) {
		t.Fatal("150 bytes beside 900 of the part's 1000 held")
	}
	hold()
	if !w.Reserve(150) || a.Held() != 750 {
		t.Fatalf("150 with room: held %d", a.Held())
	}
	w.Release(600)
	w.Release(150)
	if a.Held() != 0 {
		t.Fatalf("held %d after release", a.Held())
	}
	if _, ok := a.TryReserve(1000); !ok {
		t.Fatal("the whole part not free after the share gave its bytes back")
	}

	// A premade store on a share of a part that is full keeps nothing,
	// and one with room keeps what fits.
	m = New(Config{Budget: Budget{Copies: 1000}, MaxWait: time.Millisecond, Busy: errBusy})
	full, _ := m.Copies().TryReserve(900)
	s := premade.New(premade.Config[int]{Entries: 4, Budget: m.Copies().Within(800)})
	c, _ := s.Claim("a")
	s.Finish(c, 1, 200)
	if _, ok, _ := s.Take(context.Background(), "a"); ok {
		t.Error("a premade entry kept beyond the part's free bytes")
	}
	full()
	c, _ = s.Claim("b")
	s.Finish(c, 2, 200)
	if st := s.Stats(); st.Bytes != 200 || m.Copies().Held() != 200 {
		t.Errorf("store holds %d, the part %d; want 200 both", st.Bytes, m.Copies().Held())
	}
	if v, ok, _ := s.Take(context.Background(), "b"); !ok || v != 2 || m.Copies().Held() != 0 {
		t.Errorf("taken: %v %v, part holds %d", v, ok, m.Copies().Held())
	}
}

// TestBufferTakesItsCapacity is issue 98's item 8 in the manager: a
// buffer of a share takes its capacity from it, not the bytes asked for
// — a pooled buffer is of its size class, and the runtime zeroes a
// buffer it reuses whole, so all of it is resident. One whose class
// would be over a quarter of the share is made to its size, and not
// pooled. Before, a copy of a 17 MiB sample reserved 17 MiB and held a
// buffer of 32, and a chunk of 272 MiB read through reserved 272 and
// held 512.
func TestBufferTakesItsCapacity(t *testing.T) {
	const share = 8 * mib
	tests := []struct {
		name string
		n    int64
		cap  int64 // the buffer's, and what the share holds
	}{
		{"pooled: its class", mib + mib/10, 2 * mib},
		{"a class of a quarter of the share", 2 * mib, 2 * mib},
		{"over a quarter: its size", 3 * mib, 3 * mib},
		{"the least class", 1000, 64 << 10},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := New(Config{Budget: Budget{Copies: share}, MaxWait: time.Second, Busy: errBusy})
			a := m.Copies()
			for _, try := range []bool{false, true} {
				var buf []byte
				var release func()
				if try {
					var ok bool
					if buf, release, ok = a.TryBuffer(tt.n); !ok {
						t.Fatal("TryBuffer: no room in an empty share")
					}
				} else {
					var err error
					if buf, release, err = a.Buffer(t.Context(), tt.n); err != nil {
						t.Fatal(err)
					}
				}
				if int64(cap(buf)) != tt.cap || a.Held() != tt.cap {
					t.Errorf("a buffer of %d bytes (TryBuffer %v): capacity %d, the share holds %d; want %d both", tt.n, try, cap(buf), a.Held(), tt.cap)
				}
				release()
				if a.Held() != 0 {
					t.Errorf("the share holds %d after release", a.Held())
				}
			}
		})
	}
}
