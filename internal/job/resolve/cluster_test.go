package resolve_test

import (
	"context"
	"errors"
	"fmt"
	"github.com/brandgw/brand/api"
	"reflect"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/brandgw/brand/internal/job/catalog"
	"github.com/brandgw/brand/internal/job/chain"
	"github.com/brandgw/brand/internal/job/editproto"
	"github.com/brandgw/brand/internal/job/jobsched"
	"github.com/brandgw/brand/internal/job/resolve"
	"github.com/brandgw/brand/internal/testsupport/catalogtest"
)

// stepsJob is job run over g pinned to its first version, a step a
// batch of 10 (world 1): 6 steps an epoch.
func stepsJob(vs []string) string {
	return "dataset=g&job=run&batch_size=10&world=1&window=2&seed=7&index=" + vs[0]
}

// ids are the index versions of vs.
func ids(vs []*catalog.Dataset) []string {
	out := make([]string, len(vs))
	for i, v := range vs {
		out[i] = v.ID()
	}
	return out
}

// TestEditsAskEveryMember: one rule for every kind of edit on a
// cluster. On a cluster of three, a step one node served is refused to
// an edit taken by another — an exclusion, an append and a schedule's
// edit alike — naming the first step an edit could start at (the one
// after every step any member served), and an edit from that step is
// made.
func TestEditsAskEveryMember(t *testing.T) {
	ctx := context.Background()
	// Each kind's cluster reads datasets of stores of their own; job is
	// over g, pinned to its first version.
	var vs []*catalog.Dataset
	var job string
	for _, tc := range []struct {
		name  string
		setup func(r *resolve.Resolver) error // on node 0, before node 1 serves
		// schedule: node 1 serves steps 0 to 4 of job mixed's stored
		// schedule, else of job run.
		schedule bool
		edit     func(r *resolve.Resolver, from uint64) error
		next     func(nodes []*resolve.Resolver) uint64
	}{
		{
			name: "an exclusion",
			edit: func(r *resolve.Resolver, from uint64) error {
				_, err := makeEdit(ctx, r, "run", job, resolve.NewEdit{FromStep: from, Keys: []string{"g/1/3"}})
				return err
			},
			next: func([]*resolve.Resolver) uint64 { return 5 },
		},
		{
			name: "an append",
			edit: func(r *resolve.Resolver, from uint64) error {
				_, err := makeEdit(ctx, r, "run", job, resolve.NewEdit{FromStep: from, Index: vs[1].ID()})
				return err
			},
			next: func([]*resolve.Resolver) uint64 { return 5 },
		},
		{
			name: "a schedule's edit", schedule: true,
			setup: func(r *resolve.Resolver) error {
				_, err := r.Edits().EditSchedule(ctx, "mixed", "0:a:1", api.BucketStages{}, 0, false, "")
				return err
			},
			edit: func(r *resolve.Resolver, from uint64) error {
				cur, err := r.Edits().Schedules().Current(ctx, "mixed")
				if err != nil {
					return err
				}
				_, err = r.Edits().EditSchedule(ctx, "mixed", fmt.Sprintf("%d:a:1", from), api.BucketStages{}, from, false, cur.Version)
				return err
			},
			next: func(nodes []*resolve.Resolver) uint64 {
				latest, _, _ := nodes[1].Edits().Schedules().Latest(ctx, "mixed")
				return latest + 1
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			vs = catalogtest.Grown(t, "g", localStore(t), 10, 6, 8)
			job = stepsJob(ids(vs))
			nodes := cluster(t, 3, nil, vs[1], stored(t, "a", 10, 10))
			if tc.setup != nil {
				if err := tc.setup(nodes[0]); err != nil {
					t.Fatal(err)
				}
			}
			serve := job
			if tc.schedule {
				serve = "job=mixed&schedule=latest&batch_size=10&window=2&seed=7"
			}
			for m := range 5 {
				batch(t, nodes[1], serve, 0, m)
			}
			next := tc.next(nodes)
			var se *editproto.ServedError
			if err := tc.edit(nodes[0], 2); !errors.As(err, &se) || se.Next != next {
				t.Fatalf("from step 2, served by another member: %v; want a refusal naming step %d", err, next)
			}
			if err := tc.edit(nodes[2], next); err != nil {
				t.Fatalf("from step %d: %v", next, err)
			}
		})
	}
}

// TestEditNamesTheFurthestServed: an edit refused on a cluster names the
// step after the furthest position any member served — this node's own
// or another's, whichever is further — not the first refusing member's,
// from which an edit would be refused again.
func TestEditNamesTheFurthestServed(t *testing.T) {
	ctx := context.Background()
	vs := catalogtest.Grown(t, "g", localStore(t), 10, 6)
	job := stepsJob(ids(vs))
	for _, tc := range []struct {
		name   string
		served [3]int // steps each node serves, from step 0
		from   uint64 // the edit's, taken by node 0
		next   uint64
	}{
		{"by the others", [3]int{0, 3, 6}, 1, 6},
		{"by this node and further by another", [3]int{2, 3, 6}, 1, 6},
		{"furthest by this node", [3]int{6, 3, 2}, 1, 6},
		{"by one member", [3]int{0, 0, 4}, 3, 4},
		{"by none from the step on", [3]int{0, 2, 3}, 3, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			nodes := cluster(t, 3, nil, vs[0])
			for k, n := range tc.served {
				for m := range n {
					batch(t, nodes[k], job, 0, m)
				}
			}
			_, err := makeEdit(ctx, nodes[0], "run", job, resolve.NewEdit{FromStep: tc.from, Keys: []string{"g/1/3"}})
			var se *editproto.ServedError
			switch {
			case tc.next == 0 && err != nil:
				t.Fatalf("an edit from step %d: %v", tc.from, err)
			case tc.next > 0 && (!errors.As(err, &se) || se.Next != tc.next):
				t.Fatalf("an edit from step %d: %v; want a refusal naming step %d", tc.from, err, tc.next)
			}
		})
	}
}

// TestEditUnasked: an edit is never made on a guess: where a member does
// not answer, an exclusion and a schedule's edit are refused
// (jobsched.ErrUnasked, 503) and nothing is stored.
func TestEditUnasked(t *testing.T) {
	ctx := context.Background()
	a := stored(t, "a", 4, 10)
	r, _ := newNode(t, func(c *resolve.Config) {
		c.Others = func(context.Context, resolve.Question) ([]resolve.Answer, error) {
			return nil, fmt.Errorf("%w: member http://n1.test did not answer", jobsched.ErrUnasked)
		}
	}, a)
	const job = "dataset=a&batch_size=10"
	if _, err := makeEdit(ctx, r, "run", job, resolve.NewEdit{FromStep: 2, Keys: []string{"a/1/3"}}); !errors.Is(err, jobsched.ErrUnasked) {
		t.Fatalf("an exclusion: %v; want ErrUnasked", err)
	}
	if head, _, _, err := r.Edits().Read(ctx, "run", job); err != nil || head != nil {
		t.Fatalf("an exclusion refused was stored: %+v, %v", head, err)
	}
	if _, err := r.Edits().EditSchedule(ctx, "mixed", "0:a:1", api.BucketStages{}, 0, false, ""); err != nil {
		t.Fatalf("a first schedule asks no member: %v", err)
	}
	cur, err := r.Edits().Schedules().Current(ctx, "mixed")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.Edits().EditSchedule(ctx, "mixed", "3:a:1", api.BucketStages{}, 3, false, cur.Version); !errors.Is(err, jobsched.ErrUnasked) {
		t.Fatalf("a schedule's edit: %v; want ErrUnasked", err)
	}
}

// TestBatchHold: a member asked by a node taking an edit of a job
// (Editor.Answer) tells it the furthest position it has served and lays
// out none of the job's batches reaching past that position, or the
// edit's first if later, until the edit is made or refused (Release) —
// those before it it serves at once — and then lays them out under the
// job's chain read from the store again: the edit made, not its chain as
// it held it before.
func TestBatchHold(t *testing.T) {
	ctx := context.Background()
	vs := catalogtest.Grown(t, "g", localStore(t), 10, 6)
	job := stepsJob(ids(vs))
	r, _ := newNode(t, nil, vs[0])
	for m := range 3 {
		batch(t, r, job, 0, m) // served: positions 0 to 30
	}
	ds := vs[0].Name
	within := func(epoch, m int) error {
		ctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
		defer cancel()
		_, _, err := r.Batch(ctx, job, fmt.Sprint(epoch), fmt.Sprint(m))
		return err
	}
	for _, tc := range []struct {
		name    string
		q       resolve.Question
		release bool
		// epoch and served are the answer's furthest position; held the
		// batches (epoch, m) that wait, free those served at once.
		epoch      uint64
		served     int
		held, free [][2]int
	}{
		{name: "an edit after what was served", q: resolve.Question{Job: "run", Dataset: ds, Step: 4, Epoch: 0, Pos: 40}, served: 30,
			held: [][2]int{{0, 4}, {0, 5}, {1, 0}}, free: [][2]int{{0, 3}, {0, 1}}},
		{name: "released", q: resolve.Question{Job: "run", Dataset: ds, Release: true}, release: true,
			free: [][2]int{{0, 4}, {0, 5}, {1, 0}}},
		{name: "an edit before what was served: held from there", q: resolve.Question{Job: "run", Dataset: ds, Step: 2, Epoch: 0, Pos: 20}, epoch: 1, served: 10,
			held: [][2]int{{1, 1}, {1, 2}}, free: [][2]int{{1, 0}, {0, 2}}},
		{name: "released again", q: resolve.Question{Job: "run", Dataset: ds, Release: true}, release: true,
			free: [][2]int{{1, 1}, {1, 2}}},
	} {
		a, err := r.Edits().Answer(ctx, tc.q)
		if err != nil {
			t.Fatal(err)
		}
		if !tc.release && (!a.PosServed || a.Epoch != tc.epoch || a.End != tc.served) {
			t.Fatalf("%s: answered %+v; want position %d of epoch %d served", tc.name, a, tc.served, tc.epoch)
		}
		for _, b := range tc.free {
			if err := within(b[0], b[1]); err != nil {
				t.Fatalf("%s: epoch %d batch %d: %v; want it served at once", tc.name, b[0], b[1], err)
			}
		}
		for _, b := range tc.held {
			if err := within(b[0], b[1]); !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("%s: epoch %d batch %d: %v; want it held", tc.name, b[0], b[1], err)
			}
		}
	}
}

// TestEditReleasesTheHolds: the members a node taking an edit asks hold
// the job's later positions while the edit is made, and are told when it
// is made or refused (Question.Release): a batch past the held position
// is served as soon as the edit is done — refused, or made and then
// under it, though the member read the job's chain within chain.Refresh
// — not after the hold's bound (editproto.Hold).
func TestEditReleasesTheHolds(t *testing.T) {
	ctx := context.Background()
	vs := catalogtest.Grown(t, "g", localStore(t), 10, 6)
	job := stepsJob(ids(vs))
	nodes := cluster(t, 2, nil, vs[0])
	for m := range 5 {
		batch(t, nodes[1], job, 0, m)
	}
	// The samples of steps 7 and 8 without an edit, laid out by a node
	// of no cluster.
	aside, _ := newNode(t, nil, vs[0])
	excluded := append(keys(batch(t, aside, job, 1, 1)), keys(batch(t, aside, job, 1, 2))...)
	next := func(m int, what string) []string {
		t.Helper()
		start := time.Now()
		b := batch(t, nodes[1], job, m/6, m%6)
		if took := time.Since(start); took > editproto.Hold/2 {
			t.Fatalf("step %d just after %s: served in %s (the hold lasts at most %s)", m, what, took, editproto.Hold)
		}
		return keys(b)
	}
	var se *editproto.ServedError
	if _, err := makeEdit(ctx, nodes[0], "run", job, resolve.NewEdit{FromStep: 2, Keys: excluded}); !errors.As(err, &se) || se.Next != 5 {
		t.Fatalf("an exclusion from a step a member served: %v; want a refusal naming step 5", err)
	}
	next(5, "a refused exclusion")
	if _, err := makeEdit(ctx, nodes[0], "run", job, resolve.NewEdit{FromStep: 7, Keys: excluded}); err != nil {
		t.Fatal(err)
	}
	for m := 6; m < 9; m++ {
		if got := next(m, "an exclusion made"); m >= 7 && slices.ContainsFunc(got, func(k string) bool { return slices.Contains(excluded, k) }) {
			t.Fatalf("step %d serves %v, excluded from step 7", m, got)
		}
	}
	if head, err := resolve.Chains(nodes[1]).Of(ctx, vs[0].Store, vs[0].Name, "run"); err != nil || head == nil || head.Kind != chain.Exclude {
		t.Fatalf("the member's chain: %+v, %v", head, err)
	}
}

// TestEditSeenByEveryMember: a member that read a job's chain just
// before another node made an edit of it — within chain.Refresh, so that
// it would not ask the store again — tells of the edit as soon as the
// edit's node has it: the edit as the job's current one, its version and
// keys (Editor.Read: what GET /jobs/{job}/exclude and /edits answer),
// and the edited epoch's samples and batches (/epoch/N), with the edit's
// node never asked again (lost the moment after its answer). It told of
// the chain it read for up to chain.Refresh (issue 80, case 5: every
// node answered with no exclusion and the unedited epoch until a second
// had passed since its read).
func TestEditSeenByEveryMember(t *testing.T) {
	ctx := context.Background()
	vs := catalogtest.Grown(t, "g", localStore(t), 10, 6)
	job := stepsJob(ids(vs))
	nodes := cluster(t, 3, nil, vs[0])
	extent := func(r *resolve.Resolver) (batches, samples int) {
		t.Helper()
		j, err := r.Epoch(ctx, job, "1", "")
		if err != nil {
			t.Fatal(err)
		}
		batches, samples, err = r.Orders().Extent(j.Source, j.Query.Job, j.Epoch)
		if err != nil {
			t.Fatal(err)
		}
		return batches, samples
	}
	for _, r := range nodes[1:] {
		if head, _, _, err := r.Edits().Read(ctx, "run", job); err != nil || head != nil {
			t.Fatalf("before the edit: %+v, %v", head, err)
		}
		if b, n := extent(r); b != 6 || n != 60 {
			t.Fatalf("epoch 1 before the edit: %d samples in %d batches; want 60 in 6", n, b)
		}
	}
	made, err := makeEdit(ctx, nodes[0], "run", job, resolve.NewEdit{FromStep: 2, Keys: chunkKeys(1)})
	if err != nil {
		t.Fatal(err)
	}
	for k, r := range nodes[1:] {
		if head, _, _, err := r.Edits().Read(ctx, "run", job); err != nil || head == nil || head.Version != made.Version || !slices.Equal(head.Keys, chunkKeys(1)) {
			t.Errorf("member %d after the edit %s: %+v, %v", k+1, made.Version, head, err)
		}
		if b, n := extent(r); b != 5 || n != 50 {
			t.Errorf("member %d's epoch 1 after the edit: %d samples in %d batches, want 50 in 5", k+1, n, b)
		}
	}
}

// TestEditReleasesThoseThatAnswered: an edit a member did not answer for
// is refused (jobsched.ErrUnasked) as soon as the question is, having
// released the members that answered: asking the silent one again before
// the refusal kept it waiting a second bound (4 s, not the 2 s the docs
// give, with a member paused). Every member, the silent one too, is told
// after the refusal, in the background (TestPausedMemberHoldsNothingAfterARefusal).
// An exclusion and a schedule's edit alike.
func TestEditReleasesThoseThatAnswered(t *testing.T) {
	ctx := context.Background()
	a := stored(t, "a", 4, 10)
	var mu sync.Mutex
	var answered [][]string    // releases to those that answered, before the refusal
	every := map[string]bool{} // edits released to every member after it
	r, _ := newNode(t, func(c *resolve.Config) {
		c.Others = func(_ context.Context, q resolve.Question) ([]resolve.Answer, error) {
			mu.Lock()
			defer mu.Unlock()
			switch {
			case q.Release && q.To != nil:
				answered = append(answered, q.To)
				return nil, nil
			case q.Release:
				every[q.Edit] = true
				return nil, nil
			}
			return []resolve.Answer{{Node: "http://n1.test"}}, fmt.Errorf("%w: member http://n2.test did not answer", jobsched.ErrUnasked)
		}
	}, a)
	before := func() int {
		mu.Lock()
		defer mu.Unlock()
		return len(answered)
	}
	const job = "dataset=a&batch_size=10"
	if _, err := makeEdit(ctx, r, "run", job, resolve.NewEdit{FromStep: 2, Keys: []string{"a/1/3"}}); !errors.Is(err, jobsched.ErrUnasked) {
		t.Fatalf("an exclusion: %v; want ErrUnasked", err)
	}
	if before() != 1 {
		t.Fatal("the exclusion was refused before the member that answered was released")
	}
	if _, err := r.Edits().EditSchedule(ctx, "mixed", "0:a:1", api.BucketStages{}, 0, false, ""); err != nil {
		t.Fatal(err)
	}
	cur, err := r.Edits().Schedules().Current(ctx, "mixed")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.Edits().EditSchedule(ctx, "mixed", "3:a:1", api.BucketStages{}, 3, false, cur.Version); !errors.Is(err, jobsched.ErrUnasked) {
		t.Fatalf("a schedule's edit: %v; want ErrUnasked", err)
	}
	for deadline := time.Now().Add(2 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		mu.Lock()
		n := len(every)
		mu.Unlock()
		if n == 2 {
			break
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if want := [][]string{{"http://n1.test"}, {"http://n1.test"}}; !reflect.DeepEqual(answered, want) {
		t.Fatalf("released before the refusals %q; want the member that answered, once an edit", answered)
	}
	if len(every) != 2 {
		t.Fatalf("edits released to every member after their refusal: %d; want both", len(every))
	}
}

// TestScheduleEditSeenByEveryMember: TestEditSeenByEveryMember for a
// stored schedule: a member that read the job's current version just
// before another node edited it tells of the edit at once
// (jobsched.Book.Current), not after the second it trusts what it read.
func TestScheduleEditSeenByEveryMember(t *testing.T) {
	ctx := context.Background()
	nodes := cluster(t, 3, nil, stored(t, "a", 4, 10), stored(t, "b", 4, 10))
	first, err := nodes[0].Edits().EditSchedule(ctx, "mixed", "0:a:0.5,b:0.5", api.BucketStages{}, 0, false, "")
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range nodes[1:] {
		if cur, err := r.Edits().Schedules().Current(ctx, "mixed"); err != nil || cur.Version != first.Version {
			t.Fatalf("before the edit: %+v, %v", cur, err)
		}
	}
	made, err := nodes[0].Edits().EditSchedule(ctx, "mixed", "5:a:0.2,b:0.8", api.BucketStages{}, 5, false, first.Version)
	if err != nil {
		t.Fatal(err)
	}
	for k, r := range nodes[1:] {
		if cur, err := r.Edits().Schedules().Current(ctx, "mixed"); err != nil || cur.Version != made.Version {
			t.Errorf("member %d after the edit %s: %+v, %v", k+1, made.Version, cur, err)
		}
	}
}

// TestPausedMemberHoldsNothingAfterARefusal: a member paused while a node
// took an edit (its question unanswered, so the edit is refused) hears,
// on resuming, the question and the edit's release — in either order,
// each read from its socket as it comes — and lays the job's next step
// out at once. Before, the edit's node told only the members that
// answered, and the paused member, taking the question late, held the
// job for editproto.Hold: its first step after resuming took 4.98-5.0 s.
func TestPausedMemberHoldsNothingAfterARefusal(t *testing.T) {
	ctx := context.Background()
	vs := catalogtest.Grown(t, "g", localStore(t), 10, 6)
	job := stepsJob(ids(vs))
	var mu sync.Mutex
	paused := true
	var heard []resolve.Question // what the paused member's socket holds
	var nodes []*resolve.Resolver
	nodes = cluster(t, 2, func(c *resolve.Config) {
		if c.Node != "node 0" {
			return
		}
		c.Others = func(ctx context.Context, q resolve.Question) ([]resolve.Answer, error) {
			mu.Lock()
			if paused {
				heard = append(heard, q)
				mu.Unlock()
				return nil, fmt.Errorf("%w: member node 1 did not answer", jobsched.ErrUnasked)
			}
			mu.Unlock()
			a, err := nodes[1].Edits().Answer(ctx, q)
			if err != nil {
				return nil, err
			}
			return []resolve.Answer{a}, nil
		}
	}, vs[0])
	for m := range 3 {
		batch(t, nodes[1], job, 0, m)
	}
	if _, err := makeEdit(ctx, nodes[0], "run", job, resolve.NewEdit{FromStep: 4, Keys: chunkKeys(1)}); !errors.Is(err, jobsched.ErrUnasked) {
		t.Fatalf("an exclusion with a member paused: %v; want ErrUnasked", err)
	}
	// The release goes out after the refusal, to every member.
	var question, release *resolve.Question
	for deadline := time.Now().Add(2 * time.Second); release == nil && time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		mu.Lock()
		for i := range heard {
			switch q := &heard[i]; {
			case !q.Release && question == nil:
				question = q
			case q.Release && release == nil:
				release = q
			}
		}
		mu.Unlock()
	}
	if question == nil || release == nil || question.Edit == "" || release.Edit != question.Edit {
		t.Fatalf("the paused member's socket holds %+v; want the edit's question and its release, one edit ID", heard)
	}
	// Resumed: the release read first, then the question.
	for _, q := range []resolve.Question{*release, *question} {
		if _, err := nodes[1].Edits().Answer(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	mu.Lock()
	paused = false
	mu.Unlock()
	start := time.Now()
	batch(t, nodes[1], job, 0, 4)
	if took := time.Since(start); took > editproto.Hold/2 {
		t.Fatalf("the paused member's first step after resuming: %s (the hold lasts %s)", took, editproto.Hold)
	}
}
