package editproto

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/brandgw/brand/s3backend"
)

var (
	errConflict = errors.New("conflict")
	errUnknown  = errors.New("unknown")
)

func testChain(max int) Versions {
	return Versions{Subject: Exclusion, Dir: "exclude", What: "exclusion list", Max: max, Limit: 1 << 10, Conflict: errConflict, Unknown: errUnknown}
}

// version is a version named name after previous, from position from.
func version(name, previous string, from int) Version {
	return Version{Job: "run", Dataset: "d", Version: name, Previous: previous, From: from, FromStep: uint64(from), Body: []byte(name + "|" + previous)}
}

func store(t *testing.T) Store {
	t.Helper()
	st, err := s3backend.NewLocal(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return st
}

func stepOf(epoch uint64, end int) uint64 { return epoch*100 + uint64(end) }

// TestChain: a chain grows by versions, each made once; a first version
// of a job that has one, or an extension of a version not the current
// one, is refused naming the current version; a version from a position
// served is refused naming the step after it; a retry is told it was
// made, even after the job was served past it; Read hands every version
// to decode, first first.
func TestChain(t *testing.T) {
	ctx, st := context.Background(), store(t)
	c, pos := testChain(3), NewPositions()
	if err := c.Read(ctx, st, "run", nil); !errors.Is(err, errUnknown) {
		t.Fatalf("Read of no chain: %v", err)
	}
	if _, err := c.Make(ctx, st, pos, version("b", "a", 5), stepOf); !errors.Is(err, errUnknown) {
		t.Fatalf("an extension of no chain: %v", err)
	}
	pos.Served("d", "run", 0, 4)
	pos.Served("d", "run", 0, 3) // behind: the furthest is kept
	_, err := c.Make(ctx, st, pos, version("a", "", 3), stepOf)
	if se, ok := errors.AsType[*ServedError](err); !ok || se.Next != 4 || se.Subject != Exclusion || !errors.Is(err, errConflict) {
		t.Fatalf("a version from a position served: %v", err)
	}
	if done, err := c.Make(ctx, st, pos, version("a", "", 4), stepOf); done || err != nil {
		t.Fatalf("the first version: %t %v", done, err)
	}
	pos.Served("d", "run", 0, 100)
	if done, err := c.Make(ctx, st, pos, version("a", "", 4), stepOf); !done || err != nil {
		t.Fatalf("a retry of the first version: %t %v", done, err)
	}
	for _, v := range []Version{version("x", "", 200), version("x", "zz", 200)} {
		_, err := c.Make(ctx, st, pos, v, stepOf)
		if ce, ok := errors.AsType[*ConflictError](err); !ok || ce.Current != "a" || ce.Subject != Exclusion || !errors.Is(err, errConflict) {
			t.Fatalf("%+v: %v; want a conflict naming a", v, err)
		}
	}
	if _, err := c.Make(ctx, st, pos, version("b", "a", 200), stepOf); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Make(ctx, st, pos, version("c", "b", 300), stepOf); err != nil {
		t.Fatal(err)
	}
	if vs, err := c.Versions(ctx, st, "run"); err != nil || !slices.Equal(vs, []string{"a", "b", "c"}) {
		t.Fatalf("versions %v, %v", vs, err)
	}
	if !c.Extended(ctx, st, "run", "b") || c.Extended(ctx, st, "run", "c") {
		t.Fatal("Extended")
	}
	var read []string
	err = c.Read(ctx, st, "run", func(version, previous string, body []byte) error {
		if string(body) != version+"|"+previous {
			return fmt.Errorf("body %q", body)
		}
		read = append(read, version)
		return nil
	})
	if err != nil || !slices.Equal(read, []string{"a", "b", "c"}) {
		t.Fatalf("Read: %v, %v", read, err)
	}
	bad := errors.New("bad")
	if err := c.Read(ctx, st, "run", func(string, string, []byte) error { return bad }); err == nil || !strings.Contains(err.Error(), "damaged") {
		t.Fatalf("a version decode refuses: %v", err)
	}
	// A chain of one version a job: a second is refused as such.
	one := testChain(1)
	one.Dir = "append"
	if _, err := one.Make(ctx, st, NewPositions(), version("a", "", 0), stepOf); err != nil {
		t.Fatal(err)
	}
	if _, err := one.Make(ctx, st, NewPositions(), version("b", "", 0), stepOf); !errors.Is(err, errConflict) || !strings.Contains(err.Error(), "a job has one") {
		t.Fatalf("a second version of a chain of one: %v", err)
	}
}

// Of extensions of one version made at once by many nodes, one wins; the
// others are told the winner.
func TestOneWinner(t *testing.T) {
	ctx, st := context.Background(), store(t)
	c := testChain(8)
	if _, err := c.Make(ctx, st, NewPositions(), version("a", "", 0), stepOf); err != nil {
		t.Fatal(err)
	}
	errs := make([]error, 8)
	var wg sync.WaitGroup
	for i := range errs {
		wg.Go(func() { _, errs[i] = c.Make(ctx, st, NewPositions(), version(fmt.Sprint("v", i), "a", i), stepOf) })
	}
	wg.Wait()
	vs, err := c.Versions(ctx, st, "run")
	if err != nil || len(vs) != 2 {
		t.Fatalf("versions %v, %v", vs, err)
	}
	won := 0
	for i, err := range errs {
		if err == nil {
			won++
			if vs[1] != fmt.Sprint("v", i) {
				t.Fatalf("v%d made, %s stored", i, vs[1])
			}
		} else if ce, ok := errors.AsType[*ConflictError](err); !ok || ce.Current != vs[1] {
			t.Fatalf("v%d: %v; want a conflict naming %s", i, err, vs[1])
		}
	}
	if won != 1 {
		t.Fatalf("%d winners", won)
	}
}

// Hold keeps an edit from being made until it is let go.
func TestHold(t *testing.T) {
	ctx, st := context.Background(), store(t)
	pos := NewPositions()
	release := pos.Hold()
	made := make(chan error)
	go func() {
		_, err := testChain(2).Make(ctx, st, pos, version("a", "", 0), stepOf)
		made <- err
	}()
	// The version's body is stored before the lock is asked for: wait for
	// it, then check the link is not.
	c := testChain(2)
	for deadline := time.Now().Add(10 * time.Second); !exists(ctx, st, c.Prefix("run")+"a"); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the version's body was not stored")
		}
	}
	time.Sleep(20 * time.Millisecond) // let it reach the lock
	select {
	case err := <-made:
		t.Fatalf("made while held: %v", err)
	default:
	}
	if vs, _ := c.Versions(ctx, st, "run"); len(vs) != 0 {
		t.Fatalf("linked while held: %v", vs)
	}
	release()
	if err := <-made; err != nil {
		t.Fatal(err)
	}
}

func exists(ctx context.Context, st Store, key string) bool {
	_, err := st.Stat(ctx, key)
	return err == nil
}

// Known keeps what it was told and when.
func TestKnown(t *testing.T) {
	var k Known[*int]
	if _, _, ok := k.Get("d", "run"); ok {
		t.Fatal("known before Set")
	}
	at := time.Unix(5, 0)
	k.Set("d", "run", nil, at)
	if e, read, ok := k.Get("d", "run"); !ok || e != nil || !read.Equal(at) {
		t.Fatal(e, read, ok)
	}
	if _, _, ok := k.Get("e", "run"); ok {
		t.Fatal("another dataset's job")
	}
}

// TestPositionsAnswer: a node's answer to another taking an edit names
// the furthest position it served, and holds the job's later positions
// — from the edit's, or past what it served if that is further — until
// the edit's node releases the hold or Hold passes: a batch ending past
// the held position waits, one ending before does not; a release wakes
// the waiting batches and ends the hold at once.
func TestPositionsAnswer(t *testing.T) {
	p := NewPositions()
	now := time.Unix(100, 0)
	p.now = func() time.Time { return now }
	held := func(job string, epoch uint64, end int) time.Duration {
		d, _ := p.Held("d", job, epoch, end)
		return d
	}
	if _, _, ok := p.Answer("d", "run", 1, 40, ""); ok {
		t.Fatal("an answer naming a position never served")
	}
	if held("run", 1, 40) != 0 || held("run", 1, 41) != Hold || held("run", 2, 1) != Hold || held("other", 2, 1) != 0 {
		t.Fatal("the hold from position 40 of epoch 1")
	}
	_, released := p.Held("d", "run", 1, 41)
	p.Release("d", "run", "")
	select {
	case <-released:
	default:
		t.Fatal("a batch waiting on the hold is not woken by its release")
	}
	if held("run", 1, 41) != 0 {
		t.Fatal("a hold after its release")
	}
	p.Served("d", "run", 1, 60)
	if e, end, ok := p.Answer("d", "run", 1, 40, ""); !ok || e != 1 || end != 60 {
		t.Fatalf("answer %d %d %t; want position 60 of epoch 1", e, end, ok)
	}
	if held("run", 1, 55) != 0 || held("run", 1, 61) == 0 {
		t.Fatal("the hold after what was served: from 60")
	}
	now = now.Add(Hold)
	if held("run", 1, 61) != 0 {
		t.Fatal("a hold past its end")
	}
}

// TestHoldsOfEditsAtOnce: two nodes taking edits of one job at once are
// one hold, from the earlier point, until both release it; a release
// with no hold does nothing.
func TestHoldsOfEditsAtOnce(t *testing.T) {
	h := NewHolds[string](func(a, b uint64) bool { return a < b })
	now := time.Unix(100, 0)
	h.Release("run", now, "")
	h.Add("run", 30, now, "")
	h.Add("run", 20, now.Add(time.Second), "")
	if d, _ := h.Wait("run", 21, now.Add(time.Second)); d != Hold {
		t.Fatalf("step 20 under two edits' holds from 30 and 20 waits %s, want %s (the later ask's)", d, Hold)
	}
	if d, _ := h.Wait("run", 20, now); d != 0 {
		t.Fatal("a step before the earlier hold's waits")
	}
	h.Release("run", now, "")
	if d, _ := h.Wait("run", 21, now.Add(time.Second)); d == 0 {
		t.Fatal("the hold ended when the first of two edits released it")
	}
	h.Release("run", now, "")
	if d, _ := h.Wait("run", 21, now.Add(time.Second)); d != 0 || h.Holding("run", now) {
		t.Fatal("the hold outlived both releases")
	}
}

// TestPositionsSettled: what a node read of a job's edits stands until a
// node taking an edit of the job is answered; from then a read begun
// before the hold ended does not — the edit's node releases it once the
// edit is made, before its client hears so — and one begun after it
// does. A hold never released ends by Hold; two edits asking at once
// end when both have released. Another job's reads stand throughout.
func TestPositionsSettled(t *testing.T) {
	p := NewPositions()
	now := time.Unix(100, 0)
	p.now = func() time.Time { return now }
	settled := func(job string, read time.Time) bool { return p.Settled("d", job, read) }
	before := now.Add(-time.Millisecond)
	if !settled("run", before) {
		t.Fatal("a read of a job no edit asked about")
	}
	p.Answer("d", "run", 0, 10, "")
	if settled("run", before) || settled("run", now) || !settled("other", before) {
		t.Fatal("reads while an edit of run is being made")
	}
	now = now.Add(10 * time.Millisecond)
	during := now
	now = now.Add(10 * time.Millisecond)
	p.Release("d", "run", "")
	if settled("run", during) || !settled("run", now) {
		t.Fatal("a read during the edit, or one after its release")
	}
	now = now.Add(time.Second)
	p.Answer("d", "run", 0, 20, "")
	asked := now
	now = now.Add(Hold - time.Millisecond)
	if settled("run", now) {
		t.Fatal("a read before the hold of an edit never released passed")
	}
	now = now.Add(time.Millisecond)
	if !settled("run", now) || settled("run", asked) {
		t.Fatal("reads after and before the end of a hold never released")
	}
	p.Answer("d", "run", 0, 30, "")
	p.Answer("d", "run", 0, 30, "")
	p.Release("d", "run", "")
	now = now.Add(time.Millisecond)
	if settled("run", now) {
		t.Fatal("settled while the second of two edits asking at once holds")
	}
	p.Release("d", "run", "")
	if settled("run", now.Add(-time.Nanosecond)) || !settled("run", now) {
		t.Fatal("after both edits released")
	}
}

// TestReleaseHeardBeforeItsQuestion: a member paused while an edit asked
// hears, on resuming, the question and the edit's release in either
// order: a release heard first holds nothing when its question comes (for
// Hold after it), where the question alone held the job for Hold (the
// member's first step after resuming took 5 s). Other edits' questions
// still hold, and an unnamed release does not cancel a named question.
func TestReleaseHeardBeforeItsQuestion(t *testing.T) {
	h := NewHolds[string](func(a, b uint64) bool { return a < b })
	now := time.Unix(100, 0)
	h.Release("run", now, "e1")
	h.Add("run", 10, now.Add(time.Millisecond), "e1")
	if h.Holding("run", now.Add(time.Millisecond)) {
		t.Fatal("a question heard after its release holds the job")
	}
	h.Add("run", 10, now.Add(time.Millisecond), "e2")
	if d, _ := h.Wait("run", 11, now.Add(time.Millisecond)); d != Hold {
		t.Fatalf("another edit's question: the job waits %s, want %s", d, Hold)
	}
	h.Release("run", now.Add(2*time.Millisecond), "")
	if !h.Holding("run", now.Add(2*time.Millisecond)) {
		t.Fatal("an unnamed release ended a named edit's hold")
	}
	h.Release("run", now.Add(2*time.Millisecond), "e2")
	if h.Holding("run", now.Add(2*time.Millisecond)) {
		t.Fatal("the edit's release did not end its hold")
	}
	late := now.Add(Hold)
	h.Release("run", late, "e3") // forgets e1's release, Hold after it
	h.Add("run", 10, late, "e1")
	if !h.Holding("run", late) {
		t.Fatal("a question Hold after its release: it holds, the release forgotten")
	}
}
