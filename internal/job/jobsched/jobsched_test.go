package jobsched

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/brandgw/brand/api"
	"github.com/brandgw/brand/internal/testsupport/s3test"
	"github.com/brandgw/brand/s3backend"
)

// twoNodes returns two books over one dataset store, as two nodes of a
// cluster see it, with a clock the test moves.
func twoNodes(t *testing.T) (*Book, *Book, *time.Time) {
	t.Helper()
	st, err := s3backend.NewLocal(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	stores := func() ([]string, map[string]Store) {
		return []string{"web", "code"}, map[string]Store{"web": st, "code": st}
	}
	now := time.Unix(1000, 0)
	a, b := New(stores, "http://a"), New(stores, "http://b")
	a.now = func() time.Time { return now }
	b.now = a.now
	return a, b, &now
}

func TestEditChain(t *testing.T) {
	ctx := context.Background()
	a, b, now := twoNodes(t)
	if _, err := a.Current(ctx, "run"); !errors.Is(err, ErrUnknown) {
		t.Fatalf("no schedule yet: %v", err)
	}
	v1, err := a.Edit(ctx, "run", "0:web:0.7,code:0.3", 0, "", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.Edit(ctx, "run", "0:web:1,code:1", 0, "", nil, nil); !errors.Is(err, ErrConflict) || !strings.Contains(err.Error(), v1.Version) {
		t.Fatalf("a second first schedule: %v", err)
	}
	if _, err := a.For(ctx, "run", "latest", 99, 99, true); err != nil {
		t.Fatal(err)
	}
	// An edit at or before a step read is refused, naming it.
	if _, err := a.Edit(ctx, "run", "99:web:1,code:1", 99, v1.Version, nil, nil); !errors.Is(err, ErrConflict) || !strings.Contains(err.Error(), "step 99") {
		t.Fatalf("an edit from a step read: %v", err)
	}
	v2, err := a.Edit(ctx, "run", "100:web:0.3,code:0.7;200~300:web:0,code:1", 100, v1.Version, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if v2.Previous != v1.Version || v2.Schedule != "0:web:0.7,code:0.3;100:web:0.3,code:0.7;200~300:web:0,code:1" {
		t.Fatalf("edited: %+v", v2)
	}
	// Node b reads the chain again for a step it has not laid out.
	if cur, err := b.For(ctx, "run", "latest", 100, 100, false); err != nil || cur.Version != v2.Version {
		t.Fatalf("node b's current: %v %v", cur, err)
	}
	// A racing edit on b, based on v1: refused, naming v2.
	if _, err := b.Edit(ctx, "run", "150:web:1,code:1", 150, v1.Version, nil, nil); !errors.Is(err, ErrConflict) || !strings.Contains(err.Error(), v2.Version) {
		t.Fatalf("a racing edit: %v", err)
	}
	// Inside a ramp: refused, the schedule unchanged.
	if _, err := a.Edit(ctx, "run", "250:web:1,code:1", 250, v2.Version, nil, nil); !errors.Is(err, api.ErrMix) {
		t.Fatalf("an edit inside a ramp: %v", err)
	}
	// Requests under v1: served before step 100, refused from it.
	if v, err := b.For(ctx, "run", v1.Version, 90, 99, false); err != nil || v.Version != v1.Version {
		t.Fatalf("v1 before the edit: %v %v", v, err)
	}
	if _, err := b.For(ctx, "run", v1.Version, 96, 103, false); !errors.Is(err, ErrConflict) || !strings.Contains(err.Error(), v2.Version) {
		t.Fatalf("v1 across the edit: %v", err)
	}
	// Node b edits v2 after a second: node a sees it once its second is up.
	*now = now.Add(2 * time.Second)
	v3, err := b.Edit(ctx, "run", "400:web:1,code:1", 400, v2.Version, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if cur, err := a.Current(ctx, "run"); err != nil || cur.Version != v3.Version {
		t.Fatalf("node a after b's edit: %v %v", cur, err)
	}
	// Within the second, a step node a has laid out before is not read
	// again; a later one is.
	*now = now.Add(2 * time.Second)
	v4, err := b.Edit(ctx, "run", "500:web:1,code:2", 500, v3.Version, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.For(ctx, "run", v3.Version, 500, 500, false); !errors.Is(err, ErrConflict) || !strings.Contains(err.Error(), v4.Version) {
		t.Fatalf("node a, step 500 under v3 after b's edit: %v", err)
	}
	if _, err := a.For(ctx, "run", v1.Version, 0, 99, false); err != nil {
		t.Fatalf("v1 before both edits: %v", err)
	}
	if _, err := a.For(ctx, "run", v2.Version, 350, 420, false); !errors.Is(err, ErrConflict) {
		t.Fatalf("v2 across v3's edit: %v", err)
	}
	if _, err := a.For(ctx, "run", "0123456789abcdef", 0, 1, false); !errors.Is(err, ErrUnknown) {
		t.Fatalf("a version that never was: %v", err)
	}
	// A third book, as a node started later, finds everything in the store.
	c := New(a.stores, "http://c")
	if v, err := c.For(ctx, "run", v2.Version, 350, 399, false); err != nil || v.Version != v2.Version {
		t.Fatalf("a new node, v2 before v3's edit: %v %v", v, err)
	}
}

// others is what the other members say: latest step served, or err.
func others(latest uint64, served bool, err error) Others {
	return func(context.Context, string, uint64) (uint64, bool, []string, error) {
		return latest, served, []string{"http://b"}, err
	}
}

// TestEditAsksOthers: an edit is refused from a step another member has
// served (409 naming it), not made when a member does not answer, and
// made from the step after the latest any member has served.
func TestEditAsksOthers(t *testing.T) {
	ctx := context.Background()
	a, _, _ := twoNodes(t)
	v1, err := a.Edit(ctx, "run", "0:web:0.7,code:0.3", 0, "", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.For(ctx, "run", "latest", 3, 3, true); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Edit(ctx, "run", "10:web:1,code:1", 10, v1.Version, others(10, true, nil), nil); !errors.Is(err, ErrConflict) || !strings.Contains(err.Error(), "step 10") {
		t.Fatalf("an edit from a step another member served: %v", err)
	}
	down := fmt.Errorf("%w: member http://b did not answer", ErrUnasked)
	if _, err := a.Edit(ctx, "run", "11:web:1,code:1", 11, v1.Version, others(0, false, down), nil); !errors.Is(err, ErrUnasked) {
		t.Fatalf("an edit with a member down: %v", err)
	}
	if cur, err := a.Current(ctx, "run"); err != nil || cur.Version != v1.Version {
		t.Fatalf("after the refused edits: %v %v", cur, err)
	}
	// None served elsewhere: this node's own step 3 bounds it.
	if _, err := a.Edit(ctx, "run", "3:web:1,code:1", 3, v1.Version, others(0, false, nil), nil); !errors.Is(err, ErrConflict) || !strings.Contains(err.Error(), "step 3") {
		t.Fatalf("an edit from a step this node served: %v", err)
	}
	v2, err := a.Edit(ctx, "run", "11:web:1,code:1", 11, v1.Version, others(10, true, nil), nil)
	if err != nil {
		t.Fatalf("an edit from the step after every member's: %v", err)
	}
	// A node no longer a member, not asked, served step 20: its
	// reservation (every step below 64) bounds the edit.
	gone := New(a.stores, "http://gone")
	if _, err := gone.For(ctx, "run", "latest", 20, 20, true); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Edit(ctx, "run", "30:web:1,code:2", 30, v2.Version, others(10, true, nil), nil); !errors.Is(err, ErrConflict) || !strings.Contains(err.Error(), "step 63") {
		t.Fatalf("an edit from a step a former member may have served: %v", err)
	}
	if _, err := a.Edit(ctx, "run", "64:web:1,code:2", 64, v2.Version, others(10, true, nil), nil); err != nil {
		t.Fatalf("an edit from the former member's reservation's end: %v", err)
	}
}

// TestEditNext: an edit from "next" takes the step after every step
// served — this node's, the other members', and the reservations of
// nodes not asked — names it in the version, and counts +N steps from
// it; an edit from a step read is refused naming the first it could
// start at, and one of an old version naming the current one. The
// reproduction: a trainer that asked GET /jobs/J/schedule for the
// latest step (25) and edited from the next (26) was refused, its
// loaders having read step 31 in between, with the step in prose only.
func TestEditNext(t *testing.T) {
	ctx := context.Background()
	a, _, _ := twoNodes(t)
	if _, err := a.EditNext(ctx, "run", "next:web:1,code:1", "", nil, nil); !errors.Is(err, api.ErrMix) {
		t.Fatalf("a first schedule from the next step: %v", err)
	}
	v1, err := a.Edit(ctx, "run", "0:web:0.7,code:0.3", 0, "", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	for s := range uint64(32) {
		if _, err := a.For(ctx, "run", "latest", s, s, true); err != nil {
			t.Fatal(err)
		}
	}
	_, err = a.Edit(ctx, "run", "26:web:1,code:1", 26, v1.Version, nil, nil)
	if se, ok := errors.AsType[*ServedError](err); !ok || se.Next != 32 || !errors.Is(err, ErrConflict) {
		t.Fatalf("an edit from step 26 after step 31 was read: %v; want a ServedError naming step 32", err)
	}
	var asked uint64
	v2, err := a.EditNext(ctx, "run", "next~+50:web:0.2,code:0.8;+100:web:0,code:1", v1.Version, func(_ context.Context, _ string, from uint64) (uint64, bool, []string, error) {
		asked = from
		return 40, true, []string{"http://b"}, nil
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if asked != 32 || v2.FromStep != 41 || v2.Schedule != "0:web:0.7,code:0.3;41~91:web:0.2,code:0.8;141:web:0,code:1" {
		t.Fatalf("an edit from the next step: asked the members from %d (want 32), made %+v; want from 41", asked, v2)
	}
	// The same edit again, as a client whose answer was lost retries it:
	// the version it made, though steps were served since.
	if _, err := a.For(ctx, "run", "latest", 45, 45, true); err != nil {
		t.Fatal(err)
	}
	if again, err := a.EditNext(ctx, "run", "next~+50:web:0.2,code:0.8;+100:web:0,code:1", v1.Version, others(40, true, nil), nil); err != nil || again.Version != v2.Version {
		t.Fatalf("an edit from the next step retried: %+v %v; want %s", again, err, v2.Version)
	}
	_, err = a.EditNext(ctx, "run", "next:web:1,code:1", v1.Version, nil, nil)
	if c, ok := errors.AsType[*Conflict](err); !ok || c.Current != v2.Version {
		t.Fatalf("an edit of the version before: %v; want a Conflict naming %s", err, v2.Version)
	}
	// A node not asked served step 200: its reservation (below 256)
	// bounds the step taken.
	gone := New(a.stores, "http://gone")
	if _, err := gone.For(ctx, "run", "latest", 200, 200, true); err != nil {
		t.Fatal(err)
	}
	v3, err := a.EditNext(ctx, "run", "next:web:1,code:1", v2.Version, others(40, true, nil), nil)
	if err != nil || v3.FromStep != 256 {
		t.Fatalf("an edit from the next step after a reservation to 255: %+v %v", v3, err)
	}
	for _, text := range []string{"300:web:1,code:1", "next:web:1,code:1;next:web:0,code:1", "next:web:1,code:1;+0:web:0,code:1"} {
		if _, err := a.EditNext(ctx, "run", text, v3.Version, nil, nil); !errors.Is(err, api.ErrMix) {
			t.Errorf("EditNext %q: %v; want api.ErrMix", text, err)
		}
	}
}

// TestEditNextRacesRequests: requests laying steps out while an edit from
// "next" is made see it exactly where it took effect: every step before
// its first under the version it replaced, every step from it under the
// new one, none from it under the old.
func TestEditNextRacesRequests(t *testing.T) {
	ctx := context.Background()
	a, _, _ := twoNodes(t)
	v1, err := a.Edit(ctx, "run", "0:web:0.7,code:0.3", 0, "", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	// The requests go on until 50 steps after the edit was made.
	var laid []string // step -> the version it was laid out under
	var edited atomic.Bool
	done := make(chan error, 1)
	go func() {
		more := 50
		for s := uint64(0); more > 0; s++ {
			if edited.Load() {
				more--
			}
			v, err := a.For(ctx, "run", "latest", s, s, true)
			if err != nil {
				done <- err
				return
			}
			laid = append(laid, v.Version)
		}
		done <- nil
	}()
	for {
		if l, ok, _ := a.Latest(ctx, "run"); ok && l >= 20 {
			break
		}
		time.Sleep(time.Millisecond)
	}
	v2, err := a.EditNext(ctx, "run", "next:web:0,code:1", v1.Version, nil, nil)
	edited.Store(true)
	if err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if v2.FromStep < 21 || v2.FromStep >= uint64(len(laid)) {
		t.Fatalf("the edit took effect from step %d of the %d laid out", v2.FromStep, len(laid))
	}
	for s, v := range laid {
		if want := map[bool]string{true: v1.Version, false: v2.Version}[uint64(s) < v2.FromStep]; v != want {
			t.Fatalf("step %d laid out under %s; the edit from step %d wants %s", s, v, v2.FromStep, want)
		}
	}
}

// TestServedSurvivesRestart: a node's steps served are reserved in the
// store a window at a time (a write per ReserveSteps steps, not per
// request), and a node restarted — a new book of the same node — refuses
// an edit from a step it served before, up to the reservation's end.
func TestServedSurvivesRestart(t *testing.T) {
	ctx := context.Background()
	local, err := s3backend.NewLocal(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	st := s3test.Wrap(local)
	stores := func() ([]string, map[string]Store) { return []string{"web"}, map[string]Store{"web": st} }
	a := New(stores, "http://a")
	v1, err := a.Edit(ctx, "run", "0:web:1", 0, "", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	const served = 2*ReserveSteps + 10 // steps 0..138, four ranks each
	for s := range uint64(served) + 1 {
		for range 4 {
			if _, err := a.For(ctx, "run", "latest", s, s, true); err != nil {
				t.Fatal(err)
			}
		}
	}
	var n int // the writes of reservations
	for k, c := range st.Total() {
		if strings.Contains(k, "/served/") {
			n += c.Puts
		}
	}
	if n != 3 {
		t.Fatalf("%d reservations written for %d steps; want 3 (one per %d steps)", n, served+1, ReserveSteps)
	}
	// Restarted: nothing in memory, the reservation in the store.
	a = New(stores, "http://a")
	if l, ok, err := a.Latest(ctx, "run"); err != nil || !ok || l != 3*ReserveSteps-1 {
		t.Fatalf("latest after a restart: %d %v %v; want %d", l, ok, err, 3*ReserveSteps-1)
	}
	for _, from := range []uint64{served, 3*ReserveSteps - 1} {
		if _, err := a.Edit(ctx, "run", fmt.Sprintf("%d:web:1", from), from, v1.Version, nil, nil); !errors.Is(err, ErrConflict) || !strings.Contains(err.Error(), fmt.Sprintf("step %d", 3*ReserveSteps-1)) {
			t.Fatalf("an edit from step %d after a restart: %v", from, err)
		}
	}
	// Another node's reservation is its own: b has served nothing.
	if _, ok, err := New(stores, "http://b").Latest(ctx, "run"); err != nil || ok {
		t.Fatalf("node b: %v %v", ok, err)
	}
	// Serving again after the restart never lowers the reservation.
	if _, err := a.For(ctx, "run", "latest", 0, 0, true); err != nil {
		t.Fatal(err)
	}
	a = New(stores, "http://a")
	if l, _, _ := a.Latest(ctx, "run"); l != 3*ReserveSteps-1 {
		t.Fatalf("latest after a second restart: %d", l)
	}
	if _, err := a.Edit(ctx, "run", fmt.Sprintf("%d:web:1", 3*ReserveSteps), 3*ReserveSteps, v1.Version, nil, nil); err != nil {
		t.Fatalf("an edit from the reservation's end: %v", err)
	}
}

// TestAnswerHoldsLaterSteps: a node that told an edit's node the latest
// step it served lays out no later step until the hold ends, and then
// under the chain read again: an edit made meanwhile from the next step
// is the version that step is laid out under, never the one it replaced.
func TestAnswerHoldsLaterSteps(t *testing.T) {
	ctx := context.Background()
	a, b, now := twoNodes(t)
	v1, err := a.Edit(ctx, "run", "0:web:0.7,code:0.3", 0, "", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	for s := range uint64(4) {
		if _, err := b.For(ctx, "run", "latest", s, s, true); err != nil {
			t.Fatal(err)
		}
	}
	// Node a asks node b, then makes the edit from step 4 while b's
	// request for step 4 waits out the hold.
	var v2 *Version
	var waited time.Duration
	b.sleep = func(_ context.Context, d time.Duration, _ <-chan struct{}) error {
		waited = d
		var err error
		v2, err = a.Edit(ctx, "run", "4:web:0,code:1", 4, v1.Version, func(ctx context.Context, job string, from uint64) (uint64, bool, []string, error) {
			l, ok, err := b.Answer(ctx, job, from, "")
			return l, ok, []string{"http://b"}, err
		}, nil)
		if err != nil {
			t.Errorf("the edit from step 4: %v", err)
		}
		*now = now.Add(d)
		return nil
	}
	// An edit from step 9 holds steps from 9 alone.
	if _, _, err := b.Answer(ctx, "run", 9, ""); err != nil {
		t.Fatal(err)
	}
	if v, err := b.For(ctx, "run", "latest", 8, 8, false); err != nil || v.Version != v1.Version || waited != 0 {
		t.Fatalf("step 8 held by an edit from step 9: %v %v (waited %s)", v, err, waited)
	}
	if l, ok, err := b.Answer(ctx, "run", 0, ""); err != nil || !ok || l != 3 {
		t.Fatalf("b's answer: %d %v %v", l, ok, err)
	}
	// Steps answered for are not held.
	if v, err := b.For(ctx, "run", "latest", 3, 3, true); err != nil || v.Version != v1.Version || waited != 0 {
		t.Fatalf("step 3 after the answer: %v %v (waited %s)", v, err, waited)
	}
	v, err := b.For(ctx, "run", "latest", 4, 4, true)
	if err != nil || v2 == nil || v.Version != v2.Version || waited != Hold {
		t.Fatalf("step 4 after the answer: %v %v; want the edit's version (waited %s)", v, err, waited)
	}
	// An edit that takes longer than half the hold after asking is not
	// made.
	slow := func(context.Context, string, uint64) (uint64, bool, []string, error) {
		*now = now.Add(Hold)
		return 4, true, []string{"http://b"}, nil
	}
	if _, err := a.Edit(ctx, "run", "10:web:1,code:1", 10, v2.Version, slow, nil); !errors.Is(err, ErrUnasked) {
		t.Fatalf("an edit made after the hold: %v", err)
	}
}

// TestEmptyScheduleRefused: a first schedule of no phase — the body {},
// null or {"schedule": ""} — was stored, and every later request of the
// job then had no mixture to lay out (a panic), its name unusable. It is
// refused as a bad mixture (400), and the name stays free.
func TestEmptyScheduleRefused(t *testing.T) {
	ctx := context.Background()
	a, _, _ := twoNodes(t)
	for _, text := range []string{"", " ", "\n"} {
		if _, err := a.Edit(ctx, "run", text, 0, "", nil, nil); !errors.Is(err, api.ErrMix) || !strings.Contains(err.Error(), "empty") {
			t.Fatalf("schedule %q: %v", text, err)
		}
	}
	if _, err := a.Current(ctx, "run"); !errors.Is(err, ErrUnknown) {
		t.Fatalf("an empty schedule was stored: %v", err)
	}
	if _, err := a.Edit(ctx, "run", "0:web:0.7,code:0.3", 0, "", nil, nil); err != nil {
		t.Fatalf("a valid first schedule after the refusals: %v", err)
	}
	v, err := a.Current(ctx, "run")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.Edit(ctx, "run", "", 100, v.Version, nil, nil); !errors.Is(err, api.ErrMix) {
		t.Fatalf("an empty edit: %v", err)
	}
}
