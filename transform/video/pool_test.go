//go:build cgo && brand_libav

package video

import (
	"context"
	"errors"
	"fmt"
	"github.com/brandgw/brand/format/video/framesize"
	"sync"
	"testing"
)

// testBudget counts reservations as memory.Account does.
type testBudget struct {
	mu   sync.Mutex
	size int64
	held int64
	most int64
}

func (b *testBudget) Size() int64 { return b.size }

func (b *testBudget) TryReserve(n int64) (func(), bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.held+n > b.size {
		return nil, false
	}
	b.held += n
	b.most = max(b.most, b.held)
	var once sync.Once
	return func() { once.Do(func() { b.mu.Lock(); b.held -= n; b.mu.Unlock() }) }, true
}

func (b *testBudget) Reserve(ctx context.Context, n int64) (func(), error) {
	if r, ok := b.TryReserve(n); ok {
		return r, nil
	}
	return nil, fmt.Errorf("budget: %d bytes not free", n)
}

func (b *testBudget) Held() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.held
}

func wholeGroup(d *dump, g int) (Run, []int64) {
	infos := d.infos()
	var keys []int
	for i, p := range infos {
		if p.Key {
			keys = append(keys, i)
		}
	}
	end := len(infos)
	if g+1 < len(keys) {
		end = keys[g+1]
	}
	sp := Span{Start: keys[g], End: end, First: keys[g] == 0}
	r := d.run(sp)
	var want []int64
	_, exact, _ := runFrames(r)
	for i, p := range r.Packets {
		if exact[i] {
			want = append(want, p.PTS)
		}
	}
	return r, want
}

// TestPool: runs of streams alike reuse one decoder context; concurrent
// runs of several streams each take their own; every context holds its
// footprint from the budget, idle or not; Close closes them all and gives
// every byte back; and the C heap after hundreds of runs is where it was
// (no leak).
func TestPool(t *testing.T) {
	names := []string{"h264-b-1s", "hevc-1s", "vp9-1s", "av1-1s"}
	var ds []*dump
	for _, n := range names {
		ds = append(ds, fixtureNamed(t, n))
	}
	b := &testBudget{size: 1 << 30}
	dec := NewDecoder(Options{Budget: b, MaxIdle: 8})
	ctx := context.Background()
	noop := func(Frame) error { return nil }

	r, want := wholeGroup(ds[0], 1)
	for range 5 {
		if err := dec.Decode(ctx, r, want, noop); err != nil {
			t.Fatal(err)
		}
	}
	if s := dec.Stats(); s.Opened != 1 || s.Reused != 4 || s.Live != 1 || s.Idle != 1 {
		t.Fatalf("five runs of one stream: %+v", s)
	}
	fp, _ := dec.Footprint(r.Stream)
	if b.Held() != fp {
		t.Fatalf("an idle context holds %d bytes of the budget, its footprint is %d", b.Held(), fp)
	}

	// Warm every stream's context up, then measure the heap around many
	// concurrent runs and a Close.
	var wg sync.WaitGroup
	run := func(rounds int) {
		for i, d := range ds {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for k := range rounds {
					r, want := wholeGroup(d, (i+k)%2)
					if err := dec.Decode(ctx, r, want, noop); err != nil {
						t.Error(err)
						return
					}
				}
			}()
		}
		wg.Wait()
	}
	run(2)
	dec.Close()
	if s := dec.Stats(); s.Live != 0 || s.Idle != 0 || b.Held() != 0 {
		t.Fatalf("after Close: %+v, %d bytes held", s, b.Held())
	}
	base := cHeap()
	dec = NewDecoder(Options{Budget: b, MaxIdle: 8})
	run(40)
	s := dec.Stats()
	if s.Live != int64(len(ds)) || s.Opened != int64(len(ds)) {
		t.Fatalf("after 160 concurrent runs of %d streams: %+v", len(ds), s)
	}
	if b.most > int64(len(ds))*(1<<28) {
		t.Fatalf("the budget held %d bytes at most", b.most)
	}
	dec.Close()
	if err := dec.Decode(ctx, r, want, noop); !errors.Is(err, ErrNoDecoder) {
		t.Fatalf("Decode after Close: %v", err)
	}
	if s := dec.Stats(); s.Live != 0 || b.Held() != 0 {
		t.Fatalf("after Close: %+v, %d bytes held", s, b.Held())
	}
	if grew := cHeap() - base; grew > 512<<10 {
		t.Fatalf("the C heap grew by %d bytes over 160 runs and a Close: a leak", grew)
	}
	t.Logf("%d runs, %d contexts opened; the C heap after Close within %d bytes of before", s.Runs, s.Opened, cHeap()-base)
}

// TestPoolMakesRoom: when the budget has no room for a new stream's
// decoder, idle contexts of other streams are closed to make it; a
// stream whose footprint is over the whole budget is refused without
// opening anything.
func TestPoolMakesRoom(t *testing.T) {
	h, v := fixtureNamed(t, "h264-b-1s"), fixtureNamed(t, "vp9-1s")
	fh, _ := Footprint(h.stream(), framesize.Bound{})
	fv, _ := Footprint(v.stream(), framesize.Bound{})
	b := &testBudget{size: max(fh, fv) + min(fh, fv)/2}
	dec := NewDecoder(Options{Budget: b})
	defer dec.Close()
	ctx := context.Background()
	noop := func(Frame) error { return nil }
	for _, d := range []*dump{h, v, h} {
		r, want := wholeGroup(d, 0)
		if err := dec.Decode(ctx, r, want, noop); err != nil {
			t.Fatal(err)
		}
		if s := dec.Stats(); s.Live != 1 {
			t.Fatalf("%d contexts live in a budget for one", s.Live)
		}
	}
	if s := dec.Stats(); s.Opened != 3 {
		t.Fatalf("%+v", s)
	}
	small := NewDecoder(Options{Budget: &testBudget{size: fh - 1}})
	r, want := wholeGroup(h, 0)
	if err := small.Decode(ctx, r, want, noop); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("a decode over the whole budget: %v", err)
	}
	if s := small.Stats(); s.Opened != 0 {
		t.Fatalf("%+v", s)
	}
}

// TestFootprintBound: a decode's C heap growth (libavcodec's frames and
// tables, libswscale's) and the RGB frame, sampled at every frame of a
// decode of the whole stream on a fresh decoder, stay under Footprint,
// for every test video.
func TestFootprintBound(t *testing.T) {
	for _, f := range fixtures {
		d := load(t, f)
		dec := NewDecoder(Options{})
		base := cHeap()
		var peak int64
		r := d.run(Span{Start: 0, End: len(d.Packets), First: true})
		var want []int64
		for _, p := range r.Packets {
			want = append(want, p.PTS)
		}
		err := dec.Decode(context.Background(), r, want, func(Frame) error {
			peak = max(peak, cHeap()-base)
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		dec.Close()
		fp, err := Footprint(d.stream(), framesize.Bound{})
		if err != nil {
			t.Fatal(err)
		}
		used := peak + int64(d.Width*d.Height*3)
		if used > fp {
			t.Errorf("%s: a decode took %d bytes, its footprint is %d", f.name, used, fp)
		}
		t.Logf("%s (%s): peak %d bytes, footprint %d (%.1f×)", f.name, layoutOf(t, d.stream()), used, fp, float64(fp)/float64(used))
	}
}

// TestCancelAndCallbackError: a cancelled context stops a run between
// packets and returns its error; an error from the callback stops the
// run and comes back unchanged; neither leaves a context open after
// Close, and the decoder decodes the next run exactly.
func TestCancelAndCallbackError(t *testing.T) {
	d := fixtureNamed(t, "h264-b-1s")
	dec := NewDecoder(Options{})
	r, want := wholeGroup(d, 0)
	ctx, cancel := context.WithCancel(context.Background())
	n := 0
	err := dec.Decode(ctx, r, want, func(Frame) error {
		if n++; n == 3 {
			cancel()
		}
		return nil
	})
	if !errors.Is(err, context.Canceled) || n >= len(want) {
		t.Fatalf("cancelled after 3 frames: %v, %d frames", err, n)
	}
	stop := errors.New("enough")
	if err := dec.Decode(context.Background(), r, want, func(Frame) error { return stop }); err != stop {
		t.Fatalf("the callback's error came back as %v", err)
	}
	if s := dec.Stats(); s.Live != 0 {
		t.Fatalf("failed runs left %d contexts open", s.Live)
	}
	got := 0
	if err := dec.Decode(context.Background(), r, want, func(f Frame) error {
		if ref, _ := d.frame(f.PTS); string(ref) != string(f.RGB) {
			return fmt.Errorf("pts %d differs", f.PTS)
		}
		got++
		return nil
	}); err != nil || got != len(want) {
		t.Fatalf("the next run: %v, %d of %d frames", err, got, len(want))
	}
	dec.Close()
	if s := dec.Stats(); s.Live != 0 {
		t.Fatalf("%+v", s)
	}
}

func layoutOf(t *testing.T, s Stream) layout {
	c, err := parseCodec(s.Codec)
	if err != nil {
		t.Fatal(err)
	}
	return streamLayout(s, c)
}
