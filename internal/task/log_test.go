package task

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/brandgw/brand/s3backend"
)

// fullStore is a store whose writes of second copies fail while full
// (a disk with a page free: the first copy fits, the second does not).
type fullStore struct {
	*s3backend.Local
	mu   sync.Mutex
	full bool
}

func (f *fullStore) PutIfAbsent(ctx context.Context, key string, r io.Reader, size int64) (s3backend.ObjectInfo, error) {
	f.mu.Lock()
	full := f.full && strings.Contains(key, "/copy/")
	f.mu.Unlock()
	if full {
		return s3backend.ObjectInfo{}, errors.New("no space left on device")
	}
	return f.Local.PutIfAbsent(ctx, key, r, size)
}

func (f *fullStore) setFull(v bool) { f.mu.Lock(); f.full = v; f.mu.Unlock() }

// logFixture is a task job of 200 prompts in a store, and a clock.
func logFixture(t *testing.T) (context.Context, *fullStore, func() time.Time) {
	t.Helper()
	local, err := s3backend.NewLocal(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	st := &fullStore{Local: local}
	clock := time.UnixMilli(2e12)
	var mu sync.Mutex
	now := func() time.Time { mu.Lock(); defer mu.Unlock(); clock = clock.Add(time.Millisecond); return clock }
	ctx := context.Background()
	if _, _, err := NewBook(0, now).Make(ctx, st, "d", "rl", "ix", 200, Spec{Step: 4, Ahead: 8, Seed: 1}); err != nil {
		t.Fatal(err)
	}
	return ctx, st, now
}

// TestMissingFirstCopy: a segment whose first copy is lost (deleted; its
// second intact) is read from its second: a fresh node's plan is the
// whole log's, not rolled back to the segment before (13 segments read as
// 4), its next write is the next number (the lost one's was written
// again, a lease ID issued twice, one prompt leased to two generators),
// and a node behind reads on through it; a segment neither of whose
// copies is in the store, with later ones there, refuses the job naming
// it, never read as the log's end.
func TestMissingFirstCopy(t *testing.T) {
	ctx, st, now := logFixture(t)
	a, err := NewBook(0, now).Open(ctx, st, "d", "rl")
	if err != nil {
		t.Fatal(err)
	}
	behind, err := NewBook(0, now).Open(ctx, st, "d", "rl")
	if err != nil {
		t.Fatal(err)
	}
	held := map[uint32]uint64{}
	for i := range 13 {
		l, err := a.Lease(ctx, fmt.Sprint("g", i), 2)
		if err != nil {
			t.Fatal(err)
		}
		for _, q := range l.Prompts {
			held[q] = l.ID
		}
	}
	if err := st.Delete(ctx, segmentKey("rl", 4)); err != nil {
		t.Fatal(err)
	}
	fresh, err := NewBook(0, now).Open(ctx, st, "d", "rl")
	if err != nil {
		t.Fatal(err)
	}
	if segs, _, damaged, _ := fresh.Log(); segs != 13 || damaged != 1 {
		t.Fatalf("a fresh node read %d segments (%d from their second copy); want 13 (1)", segs, damaged)
	}
	l, err := fresh.Lease(ctx, "g-next", 2)
	if err != nil {
		t.Fatal(err)
	}
	if l.ID != 14 {
		t.Fatalf("the next lease is %d; want 14", l.ID)
	}
	for _, q := range l.Prompts {
		if id, ok := held[q]; ok {
			t.Fatalf("prompt %d leased again by lease %d; lease %d holds it", q, l.ID, id)
		}
	}
	if err := behind.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	var da, db uint64
	fresh.View(func(p *Plan) { da = p.Digest() })
	behind.View(func(p *Plan) { db = p.Digest() })
	if segs, _, _, _ := behind.Log(); segs != 14 || da != db {
		t.Fatalf("a node behind read %d segments of 14, digest equal %v", segs, da == db)
	}
	_, equal, _, err := fresh.Replay(ctx, nil, nil)
	if err != nil || !equal {
		t.Fatalf("the replay: equal %v, %v", equal, err)
	}

	// Both copies of segment 6 gone: the job is refused naming it.
	for _, k := range []string{segmentKey("rl", 6), copyKey("rl", 6)} {
		if err := st.Delete(ctx, k); err != nil {
			t.Fatal(err)
		}
	}
	_, err = NewBook(0, now).Open(ctx, st, "d", "rl")
	var d *DamagedSegmentError
	if !errors.As(err, &d) || d.Segment != 6 {
		t.Fatalf("a fresh node over a log missing segment 6 whole: %v", err)
	}
}

// TestSecondCopyNotWritten: with the store full for second copies, a
// lease ask's segment is stored (its first copy) and the ask refused;
// asked again with its request ID once there is room, it is the lease
// the first ask made, and the segment has its second copy before any
// later segment is written.
func TestSecondCopyNotWritten(t *testing.T) {
	ctx, st, now := logFixture(t)
	s, err := NewBook(0, now).Open(ctx, st, "d", "rl")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.LeaseOnce(ctx, "g0", 2, "first"); err != nil {
		t.Fatal(err)
	}
	st.setFull(true)
	if _, err := s.LeaseOnce(ctx, "g1", 2, "req-1"); !errors.Is(err, ErrStore) {
		t.Fatalf("a lease whose second copy is not written: %v; want the store's error", err)
	}
	if _, err := s.LeaseOnce(ctx, "g2", 2, "req-2"); !errors.Is(err, ErrStore) {
		t.Fatalf("a lease while segment 2 has no second copy: %v; want the store's error", err)
	}
	if _, err := st.Stat(ctx, segmentKey("rl", 3)); !errors.Is(err, s3backend.ErrNotFound) {
		t.Fatalf("segment 3 written while segment 2 has no second copy: %v", err)
	}
	st.setFull(false)
	l, err := s.LeaseOnce(ctx, "g1", 2, "req-1")
	if err != nil {
		t.Fatal(err)
	}
	if l.ID != 2 {
		t.Fatalf("asked again: lease %d; want 2, the one the first ask made", l.ID)
	}
	for i := uint64(1); i <= 2; i++ {
		if _, err := st.Stat(ctx, copyKey("rl", i)); err != nil {
			t.Fatalf("segment %d's second copy: %v", i, err)
		}
	}
	fresh, err := NewBook(0, now).Open(ctx, st, "d", "rl")
	if err != nil {
		t.Fatal(err)
	}
	var da, db uint64
	fresh.View(func(p *Plan) { da = p.Digest() })
	s.View(func(p *Plan) { db = p.Digest() })
	if da != db {
		t.Fatal("a fresh node decided otherwise")
	}
}

// TestSecondCopyMendedByNextWriter: a segment left without its second
// copy by its writer (the store full, or the writer gone before it wrote
// it) gets it from whichever node writes the next segment, before that
// segment: no segment but the last is ever of one copy, so losing one
// copy of an earlier segment never loses it.
func TestSecondCopyMendedByNextWriter(t *testing.T) {
	ctx, st, now := logFixture(t)
	a, err := NewBook(0, now).Open(ctx, st, "d", "rl")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.LeaseOnce(ctx, "g0", 2, "first"); err != nil {
		t.Fatal(err)
	}
	st.setFull(true)
	if _, err := a.LeaseOnce(ctx, "g1", 2, "req-1"); !errors.Is(err, ErrStore) {
		t.Fatalf("a lease whose second copy is not written: %v; want the store's error", err)
	}
	st.setFull(false)
	// Node a never writes again; node b goes on.
	b, err := NewBook(0, now).Open(ctx, st, "d", "rl")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.LeaseOnce(ctx, "g2", 2, "req-2"); err != nil {
		t.Fatal(err)
	}
	for i := uint64(1); i <= 3; i++ {
		if _, err := st.Stat(ctx, copyKey("rl", i)); err != nil {
			t.Fatalf("segment %d's second copy, once segment 3 is written: %v", i, err)
		}
	}
	// Segment 2's first copy lost: the log reads whole.
	if err := st.Delete(ctx, segmentKey("rl", 2)); err != nil {
		t.Fatal(err)
	}
	fresh, err := NewBook(0, now).Open(ctx, st, "d", "rl")
	if err != nil {
		t.Fatal(err)
	}
	if segs, _, damaged, _ := fresh.Log(); segs != 3 || damaged != 1 {
		t.Fatalf("a fresh node read %d segments (%d from their second copy); want 3 (1)", segs, damaged)
	}
}

// lateStore answers a reader's first look at key as if it were not yet
// written: the reader looked just before its writer wrote it.
type lateStore struct {
	*fullStore
	mu   sync.Mutex
	key  string
	seen bool
}

func (l *lateStore) Stat(ctx context.Context, key string) (s3backend.ObjectInfo, error) {
	l.mu.Lock()
	late := key == l.key && !l.seen
	l.seen = l.seen || late
	l.mu.Unlock()
	if late {
		return s3backend.ObjectInfo{}, s3backend.ErrNotFound
	}
	return l.fullStore.Stat(ctx, key)
}

// TestSegmentWrittenWhileRead: a node catching up that finds a segment's
// first copy not there, and then its second there (its writer wrote both
// between the node's two looks), reads the first as any other, counting
// no damage. Before, it read the second copy and counted the segment
// damaged: integration TestTaskStreamKills saw "1 damaged" in a run that
// damaged none.
func TestSegmentWrittenWhileRead(t *testing.T) {
	ctx, st, now := logFixture(t)
	a, err := NewBook(0, now).Open(ctx, st, "d", "rl")
	if err != nil {
		t.Fatal(err)
	}
	late := &lateStore{fullStore: st}
	behind, err := NewBook(0, now).Open(ctx, late, "d", "rl")
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		if _, err := a.Lease(ctx, fmt.Sprint("g", i), 2); err != nil {
			t.Fatal(err)
		}
	}
	behind.mu.Lock()
	late.key = segmentKey("rl", behind.segs+1)
	behind.mu.Unlock()
	if err := behind.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	behind.mu.Lock()
	defer behind.mu.Unlock()
	a.mu.Lock()
	defer a.mu.Unlock()
	if !late.seen || behind.segs != a.segs || behind.damaged != 0 {
		t.Fatalf("a node catching up across a segment written while it looked (looked late: %t): %d segments, %d damaged; want %d, none damaged",
			late.seen, behind.segs, behind.damaged, a.segs)
	}
}
