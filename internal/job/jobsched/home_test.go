package jobsched

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/brandgw/brand/s3backend"
)

// TestHome: a job's home depends on its name and the set of datasets,
// not their order; jobs spread over the datasets; a dataset added moves
// only the jobs it ranks first for, to itself.
func TestHome(t *testing.T) {
	names := []string{"web", "code", "books", "wiki"}
	reversed := slices.Clone(names)
	slices.Reverse(reversed)
	if Home("j", nil) != "" {
		t.Fatal("a home among no datasets")
	}
	spread := map[string]int{}
	for j := range 400 {
		job := fmt.Sprintf("job%d", j)
		h := Home(job, names)
		if h != Home(job, reversed) {
			t.Fatalf("%s: home %s in one order, %s in the other", job, h, Home(job, reversed))
		}
		spread[h]++
		if added := Home(job, append(slices.Clone(names), "news")); added != h && added != "news" {
			t.Fatalf("%s: adding a dataset moved its home from %s to %s", job, h, added)
		}
	}
	for _, n := range names {
		if spread[n] < 50 {
			t.Errorf("%d of 400 jobs at home in %s: %v", spread[n], n, spread)
		}
	}
}

// TestFirstScheduleAtHome: two nodes listing the datasets, each in its
// own store, in opposite orders make a job's first schedule at its home,
// whichever dataset the schedule names first: the second is refused,
// naming the first. A schedule made before the home was the rule, in the
// store of its first dataset, is still found, and still refuses another
// first schedule.
func TestFirstScheduleAtHome(t *testing.T) {
	ctx := context.Background()
	stores := map[string]Store{}
	for _, n := range []string{"web", "code"} {
		st, err := s3backend.NewLocal(t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		stores[n] = st
	}
	book := func(names ...string) *Book {
		return New(func() ([]string, map[string]Store) { return names, stores }, "http://"+names[0])
	}
	a, b := book("web", "code"), book("code", "web")
	for j := range 8 {
		job := fmt.Sprintf("job%d", j)
		v, err := a.Edit(ctx, job, "0:web:0.5,code:0.5", 0, "", nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := b.Edit(ctx, job, "0:code:0.5,web:0.5", 0, "", nil, nil); !errors.Is(err, ErrConflict) || !strings.Contains(err.Error(), v.Version) {
			t.Fatalf("%s: a second first schedule on another node: %v; want ErrConflict naming %s", job, err, v.Version)
		}
		if _, err := stores[Home(job, []string{"web", "code"})].Stat(ctx, prefix(job)+"root"); err != nil {
			t.Fatalf("%s: no root at its home: %v", job, err)
		}
	}
	// A schedule an earlier release made in its first dataset's store,
	// away from the job's home.
	var legacy string
	for j := 0; legacy == ""; j++ {
		if job := fmt.Sprintf("old%d", j); Home(job, []string{"web", "code"}) == "code" {
			legacy = job
		}
	}
	old := New(func() ([]string, map[string]Store) { return []string{"web"}, stores }, "http://old")
	v, err := old.Edit(ctx, legacy, "0:web:0.5,code:0.5", 0, "", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if cur, err := b.Current(ctx, legacy); err != nil || cur.Version != v.Version {
		t.Fatalf("a schedule away from its home: %v, %v; want %s", cur, err, v.Version)
	}
	if _, err := b.Edit(ctx, legacy, "0:code:1,web:1", 0, "", nil, nil); !errors.Is(err, ErrConflict) {
		t.Fatalf("a first schedule of a job that has one away from its home: %v; want ErrConflict", err)
	}
}

// TestBookForgetsIdleJobs: a Book keeps at most its bound of jobs in
// memory, forgetting those unused for longest once they have been idle a
// while, and a job forgotten is read again from the store as after a
// restart: its schedule the same, its steps served covered by its
// reservation, so an edit from a step it served is still refused.
func TestBookForgetsIdleJobs(t *testing.T) {
	ctx := context.Background()
	a, _, now := twoNodes(t)
	a.keep = 8
	a.reserve = 4
	v, err := a.Edit(ctx, "kept", "0:web:0.5,code:0.5", 0, "", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.For(ctx, "kept", "latest", 9, 9, true); err != nil {
		t.Fatal(err)
	}
	for j := range 40 {
		*now = now.Add(forgetIdle)
		if _, err := a.Current(ctx, fmt.Sprintf("nobody%d", j)); !errors.Is(err, ErrUnknown) {
			t.Fatal(err)
		}
		if n := a.Jobs(); n > a.keep {
			t.Fatalf("after %d jobs the Book keeps %d, over its bound of %d", j+2, n, a.keep)
		}
	}
	a.mu.Lock()
	_, kept := a.latest["kept"]
	a.mu.Unlock()
	if kept {
		t.Fatal("an idle job was not forgotten")
	}
	if cur, err := a.Current(ctx, "kept"); err != nil || cur.Version != v.Version {
		t.Fatalf("the forgotten job's schedule: %v, %v; want %s", cur, err, v.Version)
	}
	if l, ok, err := a.Latest(ctx, "kept"); err != nil || !ok || l < 9 {
		t.Fatalf("the forgotten job's latest step served: %d, %v, %v; want at least 9", l, ok, err)
	}
	if _, err := a.Edit(ctx, "kept", "9:web:1,code:0", 9, v.Version, nil, nil); !errors.Is(err, ErrConflict) {
		t.Fatalf("an edit from a step the forgotten job served: %v; want ErrConflict", err)
	}
}
