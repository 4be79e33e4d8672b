package appends

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/brandgw/brand/chunkindex"
	"github.com/brandgw/brand/internal/job/catalog"
	"github.com/brandgw/brand/s3backend"
)

// versions are a dataset served in place of 2 chunks and the version
// extending it by a third, over st.
func versions(t *testing.T, st s3backend.Store) (parent, ext *catalog.Dataset) {
	t.Helper()
	src := chunkindex.InPlace{Format: "lines", Created: 1}
	chunks := []chunkindex.Chunk{{Key: "a#0", Size: 100, Samples: 3}, {Key: "b#0", Size: 100, Samples: 2}, {Key: "c#0", Size: 100, Samples: 4}}
	keys := []string{"a/0", "a/1", "a/2", "b/0", "b/1", "c/0", "c/1", "c/2", "c/3"}
	p, err := chunkindex.NewDeferred(chunks[:2], keys[:5], src)
	if err != nil {
		t.Fatal(err)
	}
	x, err := chunkindex.NewDeferred(chunks, keys, src)
	if err != nil {
		t.Fatal(err)
	}
	if x, err = chunkindex.Extend(x, p); err != nil {
		t.Fatal(err)
	}
	return catalog.NewDataset("d", "file:///d", st, p), catalog.NewDataset("d", "file:///d", st, x)
}

// A record made on one book is found by another over the same store (a
// restarted node, another node); the same record again is the same; a
// second one is refused naming the first; a record from a position
// served is refused naming the step after it; a version that does not
// extend the job's is refused; a node that found no record asks again
// after Refresh.
func TestMakeAndFind(t *testing.T) {
	ctx := context.Background()
	st, err := s3backend.NewLocal(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	parent, ext := versions(t, st)
	now := time.Unix(1000, 0)
	b := New()
	b.now = func() time.Time { return now }
	if r, err := b.Of(ctx, st, "d", "run"); r != nil || err != nil {
		t.Fatalf("Of before a record: %v %v", r, err)
	}
	stepOf := func(epoch uint64, end int) uint64 { return epoch*5 + uint64(end) }
	b.Served("d", "run", 0, 3)
	rec := Record{Job: "run", Dataset: "d", Epoch: 0, FromPosition: 2, FromStep: 2, StepSamples: 1}
	var se *ServedError
	if _, err := b.Make(ctx, st, parent, ext, nil, rec, stepOf); !errors.As(err, &se) || se.Next != 3 || !errors.Is(err, ErrConflict) {
		t.Fatalf("a record from a position served: %v", err)
	}
	rec.FromPosition, rec.FromStep = 4, 4
	if _, err := b.Make(ctx, st, ext, parent, nil, rec, stepOf); !errors.Is(err, ErrNotExtending) {
		t.Fatalf("not extending: %v", err)
	}
	if _, err := b.Make(ctx, st, parent, parent, nil, rec, stepOf); !errors.Is(err, ErrNotExtending) {
		t.Fatalf("the job's own version: %v", err)
	}
	made, err := b.Make(ctx, st, parent, ext, nil, rec, stepOf)
	if err != nil || made.ParentChunks != 2 || made.IndexID != parent.ID() || made.Index != ext.ID() {
		t.Fatalf("Make: %v, %+v", err, made)
	}
	if a := made.Layout(); a.Parent != parent.ID() || a.Chunks != 2 || a.From != 4 || a.Version != made.Version {
		t.Fatalf("layout %+v", a)
	}
	b.Served("d", "run", 0, 5)
	if again, err := b.Make(ctx, st, parent, ext, nil, rec, stepOf); err != nil || again.Version != made.Version {
		t.Fatalf("the same record again: %v, %v", again, err)
	}
	other := rec
	other.FromPosition = 6
	if _, err := b.Make(ctx, st, parent, ext, nil, other, stepOf); !errors.Is(err, ErrConflict) {
		t.Fatalf("a second record: %v", err)
	}
	if r, err := New().Of(ctx, st, "d", "run"); err != nil || r == nil || *r != *made {
		t.Fatalf("another node: %+v, %v", r, err)
	}
	// A node that found none before asks again after Refresh.
	if r, err := b.Of(ctx, st, "d", "late"); r != nil || err != nil {
		t.Fatal(r, err)
	}
	late := rec
	late.Job = "late"
	if _, err := New().Make(ctx, st, parent, ext, nil, late, stepOf); err != nil {
		t.Fatal(err)
	}
	if r, _ := b.Of(ctx, st, "d", "late"); r != nil {
		t.Fatal("found before Refresh")
	}
	now = now.Add(Refresh)
	if r, _ := b.Of(ctx, st, "d", "late"); r == nil {
		t.Fatal("not found after Refresh")
	}
}

// Of two records made at once on two nodes, one wins; the other is
// refused naming it.
func TestOneWinner(t *testing.T) {
	ctx := context.Background()
	st, err := s3backend.NewLocal(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	parent, ext := versions(t, st)
	stepOf := func(uint64, int) uint64 { return 0 }
	var wg sync.WaitGroup
	made := make([]*Record, 8)
	errs := make([]error, 8)
	for i := range made {
		wg.Go(func() {
			r := Record{Job: "run", Dataset: "d", FromPosition: i, FromStep: uint64(i), StepSamples: 1}
			made[i], errs[i] = New().Make(ctx, st, parent, ext, nil, r, stepOf)
		})
	}
	wg.Wait()
	won := ""
	for i, err := range errs {
		switch {
		case err == nil && won != "":
			t.Fatalf("two records made: %s and %s", won, made[i].Version)
		case err == nil:
			won = made[i].Version
		case !errors.Is(err, ErrConflict):
			t.Fatalf("record %d: %v", i, err)
		}
	}
	stored, err := read(ctx, st, "run")
	if won == "" || err != nil || stored.Version != won {
		t.Fatalf("won %q, stored %+v, %v", won, stored, err)
	}
}
