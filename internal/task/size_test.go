package task

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/brandgw/brand/s3backend"
)

// TestPlanBytes: what a plan of a million prompts holds after a
// collection is within PlanBytes, and PlanBytes within a tenth above it.
func TestPlanBytes(t *testing.T) {
	for _, spec := range []Spec{
		{Dataset: "d", Index: "i", Prompts: 1 << 20, Step: 64},
		{Dataset: "d", Index: "i", Prompts: 1 << 20, Step: 64, History: 16},
	} {
		t.Run(fmt.Sprint("history ", spec.WithDefaults().History), func(t *testing.T) {
			var before, after runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			p := NewPlan(spec)
			runtime.GC()
			runtime.ReadMemStats(&after)
			held := int64(after.HeapAlloc) - int64(before.HeapAlloc)
			runtime.KeepAlive(p)
			if est := PlanBytes(spec); est < held || est > held+held/10 {
				t.Errorf("a plan of %d prompts holds %d bytes; PlanBytes says %d", spec.Prompts, held, est)
			}
		})
	}
}

// TestBookHoldsPlansWithinItsBytes is issue 98's item 9 at the book: task
// plans are counted against a bound of memory (PlanBytes each, known
// from the spec before the log is read). A node asked for more jobs than
// its plans hold lets go of the one not asked for longest (read again
// when next asked for, whole); a job whose plan alone is larger than the
// bound is refused before its spec is stored (ErrBadSpec). Before, a
// book held 256 jobs whatever their plans: 100 jobs over a million
// prompts took a node of --memory-limit 1GiB to 1,737 MiB.
func TestBookHoldsPlansWithinItsBytes(t *testing.T) {
	ctx := context.Background()
	st, err := s3backend.NewLocal(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	const prompts = 10_000
	spec := Spec{Step: 4, Ahead: 8, Seed: 1}
	need := PlanBytes(Spec{Prompts: prompts, Step: 4, Ahead: 8})
	b := NewBookBounded(0, 3*need, nil, nil)
	for i := range 5 {
		if _, _, err := b.Make(ctx, st, "d", fmt.Sprint("job", i), "ix", prompts, spec); err != nil {
			t.Fatal(err)
		}
		if held, most := b.PlanBytes(); held > most {
			t.Fatalf("after %d jobs the book holds %d bytes of plans, over its %d", i+1, held, most)
		}
	}
	if held, _ := b.PlanBytes(); held != 3*need {
		t.Errorf("the book holds %d bytes of plans; want 3 plans' (%d)", held, 3*need)
	}
	// The first job was let go; read again, it is the job made.
	s, err := b.Open(ctx, st, "d", "job0")
	if err != nil {
		t.Fatal(err)
	}
	if s.Spec().Prompts != prompts {
		t.Errorf("job0 read again holds %d prompts", s.Spec().Prompts)
	}

	_, _, err = b.Make(ctx, st, "d", "huge", "ix", 10*prompts, spec)
	if !errors.Is(err, ErrBadSpec) {
		t.Fatalf("a job of a plan over the whole bound: %v; want ErrBadSpec", err)
	}
	if made, err := Made(ctx, st, "huge"); err != nil || made {
		t.Errorf("the refused job's spec stored: %v %v", made, err)
	}

	// Every plan being read: no room, refused at once.
	busy := NewBookBounded(0, need, func() time.Time { return time.UnixMilli(2e12) }, nil)
	k := bookKey{"d", "job1"}
	busy.jobs[k] = &entry{ready: make(chan struct{}), bytes: need}
	busy.held = need
	if _, err := busy.Open(ctx, st, "d", "job2"); !errors.Is(err, ErrTooManyJobs) {
		t.Errorf("a job while the bound is held by a plan being read: %v; want ErrTooManyJobs", err)
	}
}
