package chain

import (
	"bytes"
	"context"
	stdjson "encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/brandgw/brand/api"
	"github.com/brandgw/brand/chunkindex"
	"github.com/brandgw/brand/internal/batch/layout"
	"github.com/brandgw/brand/internal/job/catalog"
	"github.com/brandgw/brand/internal/job/editproto"
	"github.com/brandgw/brand/internal/testsupport/catalogtest"
	"github.com/brandgw/brand/s3backend"
	"github.com/brandgw/brand/shuffle"
)

// key is the key of sample i of chunk c of catalogtest.Dataset "d".
func key(c, i int) string { return fmt.Sprintf("d/%d/%d", c, i) }

func newStore(t *testing.T) s3backend.Store {
	t.Helper()
	st, err := s3backend.NewLocal(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// exclusion is an exclusion of keys from step from (a position of the
// same number: steps of one sample), after previous.
func exclusion(from int, previous string, keys ...string) Link {
	return Link{Kind: Exclude, Job: "run", Dataset: "d", FromPosition: from, FromStep: uint64(from), StepSamples: 1, Keys: keys, Previous: previous}
}

// appending is an append from step from, after previous.
func appending(from int, previous string) Link {
	return Link{Kind: Append, Job: "run", Dataset: "d", FromPosition: from, FromStep: uint64(from), StepSamples: 1, Previous: previous}
}

func stepOf(epoch uint64, end int) uint64 { return epoch*1000 + uint64(end) }

// TestMakeAndFind: an exclusion made on one book is found by another
// over the same store (a restarted node), whole; a first edit of a job
// that has one is refused, the same one again (even after the job read
// past its step) is the same; one from a position served is refused
// naming the step after it; unknown keys are refused whole; a node that
// found no chain asks again after Refresh.
func TestMakeAndFind(t *testing.T) {
	ctx := context.Background()
	ds := catalogtest.Dataset(t, "d", 4, 10)
	st := newStore(t)
	now := time.Unix(1000, 0)
	b := New()
	b.now = func() time.Time { return now }
	if head, err := b.Of(ctx, st, "d", "run"); head != nil || err != nil {
		t.Fatalf("Of before an edit: %v %v", head, err)
	}
	b.Served("d", "run", 0, 20)
	_, _, err := b.Make(ctx, st, ds, ds, nil, exclusion(10, "", key(1, 1)), stepOf)
	var se *ServedError
	if !errors.As(err, &se) || se.Next != 20 || !errors.Is(err, ErrConflict) || se.Subject != editproto.Exclusion {
		t.Fatalf("an edit from a position served: %v; want a ServedError naming step 20", err)
	}
	if _, _, err := b.Make(ctx, st, ds, ds, nil, exclusion(20, "", key(1, 1), "nope"), stepOf); !errors.Is(err, ErrUnknownKeys) {
		t.Fatalf("unknown keys: %v", err)
	}
	e := exclusion(20, "", key(1, 1), key(2, 0), key(2, 0))
	made, x, err := b.Make(ctx, st, ds, ds, nil, e, stepOf)
	if err != nil || x.Drop.Len() != 2 || !x.Drop.Dropped(11) || !x.Drop.Dropped(20) || x.Drop.Dropped(12) || x.Version != made.Version {
		t.Fatalf("Make: %v, %+v", err, x)
	}
	// A retry, its answer lost, after the job read past the edit's step.
	b.Served("d", "run", 0, 35)
	if again, _, err := b.Make(ctx, st, ds, ds, made, e, stepOf); err != nil || again.Version != made.Version {
		t.Fatalf("the same edit again: %v, %v", again, err)
	}
	other := exclusion(40, "", key(3, 3))
	var ce *ConflictError
	if _, _, err := b.Make(ctx, st, ds, ds, made, other, stepOf); !errors.As(err, &ce) || ce.Current != made.Version {
		t.Fatalf("a second first edit: %v", err)
	}
	fresh := New()
	head, err := fresh.Of(ctx, st, "d", "run")
	if err != nil || head.Version != made.Version {
		t.Fatalf("a restarted node's chain: %v %+v", err, head)
	}
	if fx, err := fresh.Resolve(ctx, ds, head); err != nil || fx.Version != x.Version || fx.Drop.Len() != 2 {
		t.Fatalf("a restarted node's resolution: %v %+v", err, fx)
	}
	// A node that found none finds it after Refresh.
	st2 := newStore(t)
	late := New()
	late.now = func() time.Time { return now }
	if head, _ := late.Of(ctx, st2, "d", "run"); head != nil {
		t.Fatal("an edit in an empty store")
	}
	if _, _, err := New().Make(ctx, st2, ds, ds, nil, e, stepOf); err != nil {
		t.Fatal(err)
	}
	if head, _ := late.Of(ctx, st2, "d", "run"); head != nil {
		t.Fatal("an edit found before Refresh: the store is asked once a Refresh")
	}
	now = now.Add(Refresh)
	if head, _ := late.Of(ctx, st2, "d", "run"); head == nil {
		t.Fatal("an edit not found after Refresh")
	}
}

// TestExclusions: a job's exclusions grow one chain. An edit that does
// not name the current one is refused naming it; one from before the
// previous edit's step is refused; a restarted node reads the chain
// whole, and a node that knew an older edit finds the new one after
// Refresh. Of two edits made at once on two nodes, one wins and the
// other is told its version.
func TestExclusions(t *testing.T) {
	ctx := context.Background()
	ds := catalogtest.Dataset(t, "d", 6, 10)
	st := newStore(t)
	now := time.Unix(1000, 0)
	b := New()
	b.now = func() time.Time { return now }
	v1, x1, err := b.Make(ctx, st, ds, ds, nil, exclusion(20, "", key(1, 1), key(4, 0)), stepOf)
	if err != nil {
		t.Fatal(err)
	}
	other := New()
	other.now = b.now
	if head, err := other.Of(ctx, st, "d", "run"); err != nil || head.Version != v1.Version {
		t.Fatalf("another node: %v %v", head, err)
	}
	second := exclusion(30, "", key(2, 2), key(5, 5))
	var ce *ConflictError
	if _, _, err := b.Make(ctx, st, ds, ds, v1, second, stepOf); !errors.As(err, &ce) || ce.Current != v1.Version {
		t.Fatalf("a second edit without previous: %v; want a conflict naming %s", err, v1.Version)
	}
	early := exclusion(19, v1.Version, key(2, 2))
	if _, _, err := b.Make(ctx, st, ds, ds, v1, early, stepOf); !errors.Is(err, layout.ErrBeforePrevious) {
		t.Fatalf("an edit before its previous one's step: %v", err)
	}
	second.Previous = v1.Version
	v2, x2, err := b.Make(ctx, st, ds, ds, v1, second, stepOf)
	if err != nil {
		t.Fatal(err)
	}
	if x2.Drop.Len() != 4 || x2.Prev.Version != x1.Version || !x2.Drop.Dropped(11) || !x2.Drop.Dropped(22) || v2.Previous != v1.Version {
		t.Fatalf("the second exclusion: %+v (%d samples)", v2, x2.Drop.Len())
	}
	stale := exclusion(40, v1.Version, key(3, 3))
	if _, _, err := b.Make(ctx, st, ds, ds, v2, stale, stepOf); !errors.As(err, &ce) || ce.Current != v2.Version {
		t.Fatalf("an edit following the first after the second: %v; want a conflict naming %s", err, v2.Version)
	}
	head, err := New().Of(ctx, st, "d", "run")
	if err != nil || head.Version != v2.Version || head.Prev().Version != v1.Version || !slices.Equal(head.AllKeys(), append(slices.Clone(v1.Keys), second.Keys...)) {
		t.Fatalf("a restarted node's chain: %v %+v", err, head)
	}
	if head, _ := other.Of(ctx, st, "d", "run"); head.Version != v1.Version {
		t.Fatalf("an edit found before Refresh: %s", head.Version)
	}
	now = now.Add(Refresh)
	if head, err := other.Of(ctx, st, "d", "run"); err != nil || head.Version != v2.Version {
		t.Fatalf("after Refresh: %v %v", head, err)
	}
	// Two nodes follow v2 at once, an exclusion and another: one wins.
	var wg sync.WaitGroup
	made := make([]*Link, 2)
	errs := make([]error, 2)
	for i := range 2 {
		wg.Go(func() {
			made[i], _, errs[i] = New().Make(ctx, st, ds, ds, v2, exclusion(40+i, v2.Version, key(i, 9)), stepOf)
		})
	}
	wg.Wait()
	won := 0
	if errs[0] != nil {
		won = 1
	}
	if errs[won] != nil || !errors.As(errs[1-won], &ce) || ce.Current != made[won].Version {
		t.Fatalf("two edits at once: %v, %v; want one made and the other told its version", errs[0], errs[1])
	}
}

// grownVersions are four versions of a dataset served in place, each
// extending the one before by a chunk: 2, 3, 4 and 5 chunks.
func grownVersions(t *testing.T, st s3backend.Store) []*catalog.Dataset {
	t.Helper()
	src := chunkindex.InPlace{Format: "lines", Created: 1}
	chunks := []chunkindex.Chunk{{Key: "a#0", Size: 100, Samples: 3}, {Key: "b#0", Size: 100, Samples: 2}, {Key: "c#0", Size: 100, Samples: 4},
		{Key: "d#0", Size: 100, Samples: 2}, {Key: "e#0", Size: 100, Samples: 3}}
	keys := []string{"a/0", "a/1", "a/2", "b/0", "b/1", "c/0", "c/1", "c/2", "c/3", "d/0", "d/1", "e/0", "e/1", "e/2"}
	var out []*catalog.Dataset
	var prev *chunkindex.Index
	for n, k := range []int{2, 3, 4, 5} {
		samples := 0
		for _, c := range chunks[:k] {
			samples += c.Samples
		}
		ix, err := chunkindex.NewDeferred(chunks[:k], keys[:samples], src)
		if err != nil {
			t.Fatal(err)
		}
		if n > 0 {
			if ix, err = prev.Lineage().Extend(ix); err != nil {
				t.Fatal(err)
			}
		}
		prev = ix
		out = append(out, catalog.NewDataset("d", "file:///d", st, ix))
	}
	return out
}

// TestAppendsAndExclusions: a job takes appends and exclusions in turn,
// one chain. An append names a version extending the one the job reads
// (ErrNotExtending otherwise), after the current edit; an exclusion after
// an append names keys of the grown version; the chain resolved is the
// layout's, each edit after the one before, its exclusions' samples the
// union so far. A chain of shuffle.MaxAppends appends takes no more.
func TestAppendsAndExclusions(t *testing.T) {
	ctx := context.Background()
	st := newStore(t)
	vs := grownVersions(t, st)
	b := New()
	x1, _, err := b.Make(ctx, st, vs[0], vs[0], nil, exclusion(1, "", "a/1"), stepOf)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := b.Make(ctx, st, vs[0], vs[0], x1, appending(2, x1.Version), stepOf); !errors.Is(err, ErrNotExtending) {
		t.Fatalf("an append of the version read: %v", err)
	}
	if _, _, err := b.Make(ctx, st, vs[0], vs[2], x1, appending(2, ""), stepOf); !errors.Is(err, ErrConflict) {
		t.Fatalf("an append naming no previous after an exclusion: %v", err)
	}
	a1, la1, err := b.Make(ctx, st, vs[0], vs[1], x1, appending(2, x1.Version), stepOf)
	if err != nil || a1.IndexID != vs[0].ID() || a1.Index != vs[1].ID() || a1.ParentChunks != 2 || la1.Prev == nil || la1.Prev.Version != x1.Version {
		t.Fatalf("the append: %+v, %v", a1, err)
	}
	// The exclusion after it names a sample of the chunk it took.
	x2, lx2, err := b.Make(ctx, st, vs[1], vs[1], a1, exclusion(4, a1.Version, "c/2"), stepOf)
	if err != nil {
		t.Fatal(err)
	}
	if !lx2.Drop.Dropped(1) || !lx2.Drop.Dropped(7) || lx2.Drop.Len() != 2 || lx2.Prev.Version != a1.Version || x2.IndexID != vs[1].ID() {
		t.Fatalf("the second exclusion: %+v, samples %v", x2, slices.Collect(lx2.Drop.IDs()))
	}
	a2, _, err := b.Make(ctx, st, vs[1], vs[2], x2, appending(6, x2.Version), stepOf)
	if err != nil {
		t.Fatal(err)
	}
	head, err := New().Of(ctx, st, "d", "run")
	if err != nil || head.Version != a2.Version || len(head.Chain()) != 4 || head.IndexVersion() != vs[2].ID() {
		t.Fatalf("a restarted node: %+v, %v", head, err)
	}
	kinds := []string{}
	for _, e := range head.Chain() {
		kinds = append(kinds, e.Kind)
	}
	if !slices.Equal(kinds, []string{Exclude, Append, Exclude, Append}) {
		t.Fatalf("the chain's kinds: %v", kinds)
	}
	x, err := New().Resolve(ctx, vs[2], head)
	if err != nil {
		t.Fatal(err)
	}
	if x.Appends() != 2 || x.Exclusion().Drop.Len() != 2 || x.First() != vs[0].ID() || x.Version != a2.Version {
		t.Fatalf("the chain resolved: %+v", x)
	}
	// An exclusion and an append made at once after a2: one wins.
	var wg sync.WaitGroup
	errs := make([]error, 2)
	wg.Go(func() { _, _, errs[0] = New().Make(ctx, st, vs[2], vs[2], a2, exclusion(8, a2.Version, "a/0"), stepOf) })
	wg.Go(func() { _, _, errs[1] = New().Make(ctx, st, vs[2], vs[3], a2, appending(8, a2.Version), stepOf) })
	wg.Wait()
	var ce *ConflictError
	if (errs[0] == nil) == (errs[1] == nil) || !errors.As(errors.Join(errs...), &ce) {
		t.Fatalf("an exclusion and an append at once: %v, %v; want one made and the other a conflict", errs[0], errs[1])
	}
	// A chain of MaxAppends appends (made here in memory) takes no more.
	long := a1
	for i := 1; i < shuffle.MaxAppends; i++ {
		x := *long
		x.Version, x.Previous, x.prev = fmt.Sprintf("%016x", i), long.Version, long
		long = &x
	}
	if _, _, err := b.Make(ctx, st, vs[1], vs[2], long, appending(9, long.Version), stepOf); !errors.Is(err, ErrTooMany) {
		t.Fatalf("an append past %d: %v", shuffle.MaxAppends, err)
	}
}

// TestMaxEdits: a chain of shuffle.MaxEdits edits takes no more; a
// restarted node reads every one.
func TestMaxEdits(t *testing.T) {
	ctx := context.Background()
	ds := catalogtest.Dataset(t, "d", 6, 10)
	st := newStore(t)
	b := New()
	var cur *Link
	for i := range shuffle.MaxEdits + 1 {
		prev := ""
		if cur != nil {
			prev = cur.Version
		}
		made, _, err := b.Make(ctx, st, ds, ds, cur, exclusion(i/8, prev, key(i%6, (i/6)%10)), nil)
		if i == shuffle.MaxEdits {
			if !errors.Is(err, ErrTooMany) {
				t.Fatalf("edit %d: %v; want ErrTooMany", i+1, err)
			}
			break
		}
		if err != nil {
			t.Fatalf("edit %d: %v", i+1, err)
		}
		cur = made
	}
	head, err := New().Of(ctx, st, "d", "run")
	if err != nil || head.Version != cur.Version || len(head.AllKeys()) != shuffle.MaxEdits {
		t.Fatalf("a restarted node: %v, %+v", err, head)
	}
}

// TestReadsChainsKeptByKind: a job whose edits were kept in a folder of
// their kind (an exclusion list under exclude/, as encoding/json wrote it,
// or append records under append/) reads them back, and its next edit,
// of either kind, is kept there too.
func TestReadsChainsKeptByKind(t *testing.T) {
	ctx := context.Background()
	st := newStore(t)
	vs := grownVersions(t, st)
	ds := vs[0]
	l := Link{Job: "run", Version: "00112233445566ff", Dataset: "d", IndexID: ds.ID(), FromPosition: 2, FromStep: 2, StepSamples: 1, Keys: []string{"a/1", "b/0"}}
	body, err := stdjson.Marshal(struct {
		Job          string   `json:"job"`
		Version      string   `json:"version"`
		Dataset      string   `json:"dataset"`
		IndexID      string   `json:"index_id"`
		Epoch        uint64   `json:"epoch"`
		FromPosition int      `json:"from_position"`
		FromStep     uint64   `json:"from_step"`
		StepSamples  int      `json:"step_samples"`
		Keys         []string `json:"keys"`
	}{l.Job, l.Version, l.Dataset, l.IndexID, l.Epoch, l.FromPosition, l.FromStep, l.StepSamples, l.Keys})
	if err != nil {
		t.Fatal(err)
	}
	pre := store(Exclude).Prefix("run")
	for k, b := range map[string][]byte{pre + l.Version: body, pre + "root": []byte(l.Version)} {
		if _, err := st.Put(ctx, k, bytes.NewReader(b), int64(len(b))); err != nil {
			t.Fatal(err)
		}
	}
	b := New()
	head, err := b.Of(ctx, st, "d", "run")
	if err != nil || head == nil || head.Version != l.Version || head.Kind != Exclude || !slices.Equal(head.Keys, l.Keys) {
		t.Fatalf("read back: %+v, %v", head, err)
	}
	x, err := b.Resolve(ctx, ds, head)
	if err != nil || x.Drop.Len() != 2 || !x.Drop.Dropped(1) || !x.Drop.Dropped(3) {
		t.Fatalf("resolved: %+v, %v", x, err)
	}
	a, _, err := b.Make(ctx, st, ds, vs[1], head, appending(3, head.Version), stepOf)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Stat(ctx, pre+a.Version); err != nil {
		t.Fatalf("the append after a list kept under exclude/ is not kept there: %v", err)
	}
	if head, err := New().Of(ctx, st, "d", "run"); err != nil || head.Version != a.Version || head.Prev().Version != l.Version {
		t.Fatalf("a restarted node: %+v, %v", head, err)
	}
}

// TestSteps: a job's steps are counted through the epochs its chain
// changes, each epoch with the batches of the order in force for it: an
// exclusion's epoch and every later one shorter, an append's longer; At
// and Step are inverse, and After is the first step after a position
// served.
func TestSteps(t *testing.T) {
	job := api.Job{}
	job.BatchSize, job.World = 5, 2 // steps of 10
	// 120 samples; 140 in epoch 1 (an append), 130 from epoch 2 (an
	// exclusion from epoch 1's end), 200 from 3 (an append).
	head := &layout.Edit{Epoch: 3, Chunks: 1, Prev: &layout.Edit{Epoch: 1, Prev: &layout.Edit{Epoch: 1, Chunks: 1}}}
	samples := map[uint64]int{0: 120, 1: 140, 2: 130, 3: 200, 4: 200}
	s, err := NewSteps(job, head, func(e uint64) (int, error) { return samples[e], nil })
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		step  uint64
		epoch uint64
		m     int
	}{
		{0, 0, 0}, {11, 0, 11}, {12, 1, 0}, {25, 1, 13}, {26, 2, 0}, {38, 2, 12}, {39, 3, 0}, {58, 3, 19}, {59, 4, 0}, {79, 5, 0},
	} {
		e, m, ok := s.At(tc.step)
		if !ok || e != tc.epoch || m != tc.m {
			t.Errorf("At(%d) = %d, %d, %t; want epoch %d batch %d", tc.step, e, m, ok, tc.epoch, tc.m)
		}
		if got := s.Step(tc.epoch, tc.m); got != tc.step {
			t.Errorf("Step(%d, %d) = %d; want %d", tc.epoch, tc.m, got, tc.step)
		}
	}
	for _, tc := range []struct {
		epoch uint64
		end   int
		next  uint64
	}{
		{0, 30, 3}, {0, 35, 4}, {0, 120, 12}, {1, 130, 25}, {1, 140, 26}, {3, 10, 40},
	} {
		if got := s.After(tc.epoch, tc.end); got != tc.next {
			t.Errorf("After(%d, %d) = %d; want %d", tc.epoch, tc.end, got, tc.next)
		}
	}
	none, err := NewSteps(job, nil, func(uint64) (int, error) { return 0, nil })
	if err != nil {
		t.Fatal(err)
	}
	if _, _, ok := none.At(3); ok {
		t.Error("At over an epoch of no batches")
	}
	if shuffle.MaxAppends > chunkindex.MaxAncestors {
		t.Errorf("a chain of %d appends; an index names %d versions it extends", shuffle.MaxAppends, chunkindex.MaxAncestors)
	}
}
