package layout

import (
	"testing"

	"github.com/brandgw/brand/internal/testsupport/catalogtest"
)

// TestWindowsOfManyJobsMemoised: a gateway serving many jobs at once
// keeps each job's current window's order, where it kept 32 windows
// whatever their size and 1,024 jobs of their own shuffled every batch's
// window again (an eighth of the gateway's CPU in `brand-bench
// concurrency`); and windows past the bytes bound are let go, the 32
// most recent kept whatever their size.
func TestWindowsOfManyJobsMemoised(t *testing.T) {
	ds := catalogtest.Dataset(t, "d", 16, 64)
	o := New(nil, nil)
	const jobs = 200
	for seed := range uint64(jobs) {
		s := Stream{DS: ds, Seed: seed + 1, Window: 2}
		e, err := o.Epoch(s, 0)
		if err != nil {
			t.Fatal(err)
		}
		o.base.window(s, 0, e, 0)
	}
	for seed := range uint64(jobs) {
		s := Stream{DS: ds, Seed: seed + 1, Window: 2}
		if _, ok := o.base.windows.get(windowKey{epochKey{s.Order(), 0}, 0}); !ok {
			t.Fatalf("job %d of %d: its window's order was let go (%d windows held)", seed, jobs, o.base.windows.lru.Len())
		}
	}

	m := newWindowMemo()
	big := make([]int, maxMemoWindowBytes/8/4) // a quarter of the bound each
	for w := range 3 * maxMemoWindows {
		m.add(windowKey{w: w}, big)
		if n := m.lru.Len(); n > maxMemoWindows && m.bytes.Load() > maxMemoWindowBytes {
			t.Fatalf("after %d windows of %d bytes: %d held, %d bytes", w+1, idBytes(big), n, m.bytes.Load())
		}
	}
	if n := m.lru.Len(); n != maxMemoWindows {
		t.Errorf("%d large windows held, want the %d most recent", n, maxMemoWindows)
	}
	for w := 2 * maxMemoWindows; w < 3*maxMemoWindows; w++ {
		if _, ok := m.get(windowKey{w: w}); !ok {
			t.Errorf("window %d, one of the %d most recent, was let go", w, maxMemoWindows)
		}
	}
}
