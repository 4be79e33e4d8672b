package appends

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/brandgw/brand/api"
	"github.com/brandgw/brand/chunkindex"
	"github.com/brandgw/brand/internal/job/catalog"
	"github.com/brandgw/brand/internal/job/edits"
	"github.com/brandgw/brand/s3backend"
	"github.com/brandgw/brand/shuffle"
)

// TestSteps: a job's steps are counted through the epochs its records
// grow, each epoch with the batches of the order in force for it; At and
// Step are inverse, and After is the first step after a position served.
func TestSteps(t *testing.T) {
	job := api.Job{}
	job.BatchSize, job.World = 5, 2 // steps of 10
	// 120 samples; 140 from epoch 1; 160 from epoch 1 too; 200 from 3.
	s := NewSteps(job, 120, []Grown{{Epoch: 1, Samples: 140}, {Epoch: 1, Samples: 160}, {Epoch: 3, Samples: 200}})
	for _, tc := range []struct {
		step  uint64
		epoch uint64
		m     int
	}{
		{0, 0, 0}, {11, 0, 11}, {12, 1, 0}, {27, 1, 15}, {28, 2, 0}, {43, 2, 15}, {44, 3, 0}, {63, 3, 19}, {64, 4, 0},
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
		{0, 30, 3}, {0, 35, 4}, {0, 120, 12}, {1, 150, 27}, {1, 160, 28}, {3, 10, 45},
	} {
		if got := s.After(tc.epoch, tc.end); got != tc.next {
			t.Errorf("After(%d, %d) = %d; want %d", tc.epoch, tc.end, got, tc.next)
		}
	}
	if _, _, ok := NewSteps(job, 0, nil).At(3); ok {
		t.Error("At over an epoch of no batches")
	}
	if shuffle.MaxAppends > chunkindex.MaxAncestors {
		t.Errorf("a chain of %d records; an index names %d versions it extends", shuffle.MaxAppends, chunkindex.MaxAncestors)
	}
}

// grownVersions are three versions of a dataset served in place, each
// extending the one before by a chunk: 2, 3 and 4 chunks.
func grownVersions(t *testing.T, st s3backend.Store) []*catalog.Dataset {
	t.Helper()
	src := chunkindex.InPlace{Format: "lines", Created: 1}
	chunks := []chunkindex.Chunk{{Key: "a#0", Size: 100, Samples: 3}, {Key: "b#0", Size: 100, Samples: 2}, {Key: "c#0", Size: 100, Samples: 4}, {Key: "d#0", Size: 100, Samples: 2}}
	keys := []string{"a/0", "a/1", "a/2", "b/0", "b/1", "c/0", "c/1", "c/2", "c/3", "d/0", "d/1"}
	var out []*catalog.Dataset
	var prev *chunkindex.Index
	for n, k := range []int{2, 3, 4} {
		samples := 0
		for _, c := range chunks[:k] {
			samples += c.Samples
		}
		ix, err := chunkindex.NewDeferred(chunks[:k], keys[:samples], src)
		if err != nil {
			t.Fatal(err)
		}
		if n > 0 {
			if ix, err = chunkindex.Extend(ix, prev); err != nil {
				t.Fatal(err)
			}
		}
		prev = ix
		out = append(out, catalog.NewDataset("d", "file:///d", st, ix))
	}
	return out
}

// TestChain: a second record names the first (previous) and a version
// extending the first's; without previous, or with a stale one, it is
// refused naming the current record (409); a version not extending the
// previous record's (422), a step before the previous record's (422)
// and a position served (409) are refused. Another node reads the
// chain, and a node that knew the first record finds the second after
// Refresh. A chain of MaxAppends records takes no more.
func TestChain(t *testing.T) {
	ctx := context.Background()
	st, err := s3backend.NewLocal(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	vs := grownVersions(t, st)
	now := time.Unix(1000, 0)
	b, other := New(), New()
	b.now = func() time.Time { return now }
	other.now = b.now
	stepOf := func(epoch uint64, end int) uint64 { return epoch*20 + uint64(end) }
	r1, err := b.Make(ctx, st, vs[0], vs[1], nil, Record{Job: "run", Dataset: "d", FromPosition: 2, FromStep: 2, StepSamples: 1}, stepOf)
	if err != nil {
		t.Fatal(err)
	}
	if r, err := other.Of(ctx, st, "d", "run"); err != nil || r == nil || r.Version != r1.Version {
		t.Fatalf("another node: %+v, %v", r, err)
	}
	b.Served("d", "run", 0, 4)
	next := Record{Job: "run", Dataset: "d", FromPosition: 6, FromStep: 6, StepSamples: 1, Previous: r1.Version}
	var ce *edits.ConflictError
	for _, tc := range []struct {
		name     string
		prev     string
		parent   *catalog.Dataset
		ext      *catalog.Dataset
		from     uint64
		sentinel error
	}{
		{"without previous", "", vs[1], vs[2], 6, ErrConflict},
		{"a stale previous", "0123456789abcdef", vs[1], vs[2], 6, ErrConflict},
		{"the previous record's version", r1.Version, vs[1], vs[1], 6, ErrNotExtending},
		{"before the previous record's step", r1.Version, vs[1], vs[2], 1, ErrBefore},
		{"a position served", r1.Version, vs[1], vs[2], 3, ErrConflict},
	} {
		r := next
		r.Previous, r.FromStep, r.FromPosition = tc.prev, tc.from, int(tc.from)
		_, err := b.Make(ctx, st, tc.parent, tc.ext, r1, r, stepOf)
		if !errors.Is(err, tc.sentinel) {
			t.Fatalf("%s: %v; want %v", tc.name, err, tc.sentinel)
		}
		if tc.sentinel == ErrConflict && tc.name != "a position served" && (!errors.As(err, &ce) || ce.Current != r1.Version) {
			t.Fatalf("%s: %v does not name the current record %s", tc.name, err, r1.Version)
		}
	}
	r2, err := b.Make(ctx, st, vs[1], vs[2], r1, next, stepOf)
	if err != nil || r2.Previous != r1.Version || r2.IndexID != vs[1].ID() || r2.ParentChunks != 3 || len(r2.Chain()) != 2 {
		t.Fatalf("the second record: %+v, %v", r2, err)
	}
	if a := r2.Layout(); a.Previous == nil || a.Previous.Version != r1.Version || a.Chunks != 3 || a.Previous.Chunks != 2 {
		t.Fatalf("its layout: %+v", a)
	}
	if again, err := b.Make(ctx, st, vs[1], vs[2], r2, next, stepOf); err != nil || again.Version != r2.Version {
		t.Fatalf("the second record again: %+v, %v", again, err)
	}
	if r, err := other.Of(ctx, st, "d", "run"); err != nil || r.Version != r1.Version {
		t.Fatalf("a node within Refresh: %+v, %v", r, err)
	}
	now = now.Add(Refresh)
	if r, err := other.Of(ctx, st, "d", "run"); err != nil || r.Version != r2.Version || len(r.Chain()) != 2 || r.Chain()[0].Version != r1.Version {
		t.Fatalf("a node after Refresh: %+v, %v", r, err)
	}
	if r, err := New().Of(ctx, st, "d", "run"); err != nil || r.Version != r2.Version || r.Chain()[0].Version != r1.Version {
		t.Fatalf("a restarted node: %+v, %v", r, err)
	}

	// A chain of MaxAppends records (made here in memory) takes no more.
	long := r1
	for i := 1; i < shuffle.MaxAppends; i++ {
		x := *long
		x.Version, x.Previous, x.prev = "v"+string(rune('a'+i)), long.Version, long
		long = &x
	}
	r := next
	r.Previous = long.Version
	if _, err := b.Make(ctx, st, vs[1], vs[2], long, r, stepOf); !errors.Is(err, ErrConflict) {
		t.Fatalf("a record past %d: %v", shuffle.MaxAppends, err)
	}
}

// TestCurrent: a node that knew a job's first record is told the second,
// made on another node, by Current at once (Of within Refresh tells the
// first still), so an edit made there extends the current record.
func TestCurrent(t *testing.T) {
	ctx := context.Background()
	st, err := s3backend.NewLocal(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	vs := grownVersions(t, st)
	b, other := New(), New()
	stepOf := func(epoch uint64, end int) uint64 { return epoch*20 + uint64(end) }
	if r, err := b.Current(ctx, st, "d", "run"); r != nil || err != nil {
		t.Fatalf("Current before a record: %+v, %v", r, err)
	}
	r1, err := b.Make(ctx, st, vs[0], vs[1], nil, Record{Job: "run", Dataset: "d", FromPosition: 2, FromStep: 2, StepSamples: 1}, stepOf)
	if err != nil {
		t.Fatal(err)
	}
	if r, err := other.Of(ctx, st, "d", "run"); err != nil || r.Version != r1.Version {
		t.Fatalf("Of: %+v, %v", r, err)
	}
	r2, err := b.Make(ctx, st, vs[1], vs[2], r1, Record{Job: "run", Dataset: "d", FromPosition: 4, FromStep: 4, StepSamples: 1, Previous: r1.Version}, stepOf)
	if err != nil {
		t.Fatal(err)
	}
	if r, err := other.Current(ctx, st, "d", "run"); err != nil || r.Version != r2.Version || len(r.Chain()) != 2 {
		t.Fatalf("Current: %+v, %v", r, err)
	}
	if r, err := other.Of(ctx, st, "d", "run"); err != nil || r.Version != r2.Version {
		t.Fatalf("Of after Current: %+v, %v", r, err)
	}
}
