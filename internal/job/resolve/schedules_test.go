package resolve_test

import (
	"context"
	"errors"
	"fmt"
	"github.com/brandgw/brand/api"
	"testing"

	"github.com/rs/zerolog"

	"github.com/brandgw/brand/dataset"
	"github.com/brandgw/brand/format"
	"github.com/brandgw/brand/format/megatron"
	"github.com/brandgw/brand/format/megatron/megatrontest"
	"github.com/brandgw/brand/internal/job/catalog"
	"github.com/brandgw/brand/internal/job/editproto"
	"github.com/brandgw/brand/internal/job/features"
	"github.com/brandgw/brand/internal/job/jobsched"
	"github.com/brandgw/brand/s3backend"
)

// TestStoredSchedule: a schedule stored under a job's name, edited in
// turn while the job reads it (Editor.EditSchedule), each edit tried
// answered as the book's rules say — a first schedule of a job that has
// one, or a base not the current version, refused naming the current; a
// step served refused naming the first editable one; a dataset not
// served refused as a request of it would be — and an edit from the
// next step (EditNext) from the step after every step served. A request
// reading the schedule (schedule=latest) is resolved as the mixture of
// its version for the steps it reads, and records them served; pinned
// to an older version, it is served where the versions agree and
// refused, naming the current, after. A node restarted over the same
// stores refuses an edit from a step the job read.
func TestStoredSchedule(t *testing.T) {
	ctx := context.Background()
	ds := []*catalog.Dataset{stored(t, "a", 10, 10), stored(t, "b", 10, 10)}
	r, _ := newNode(t, nil, ds...)
	const job = "job=mixed&schedule=latest&batch_size=4&window=2&seed=7"
	made := map[string]*jobsched.Version{}
	var latest uint64 // the latest step served, once steps are
	edit := func(text string, from uint64, base string) func() (*jobsched.Version, error) {
		return func() (*jobsched.Version, error) {
			if v, ok := made[base]; ok {
				base = v.Version
			}
			return r.Edits().EditSchedule(ctx, "mixed", text, api.BucketStages{}, from, false, base)
		}
	}
	for _, tc := range []struct {
		name  string
		serve int // batches of epoch 0 read before the edit
		edit  func() (*jobsched.Version, error)
		// made names the version made; conflict the version a refusal
		// names; served, that it names the step after the latest served.
		made, conflict string
		served         bool
		err            error
	}{
		{name: "a dataset not served", edit: edit("0:a:1,nope:1", 0, ""), err: catalog.ErrUnknown},
		{name: "a first schedule", edit: edit("0:a:0.5,b:0.5", 0, ""), made: "v1"},
		{name: "a first again", edit: edit("0:a:1", 0, ""), conflict: "v1"},
		{name: "from a step served", serve: 3, edit: edit("1:a:0,b:1", 1, "v1"), served: true},
		{name: "a base not the current", edit: func() (*jobsched.Version, error) {
			return edit(fmt.Sprintf("%d:a:0,b:1", latest+1), latest+1, "0123456789abcdef")()
		}, conflict: "v1"},
		{name: "from the step after", edit: func() (*jobsched.Version, error) {
			return edit(fmt.Sprintf("%d:a:0,b:1", latest+1), latest+1, "v1")()
		}, made: "v2"},
		{name: "from the next step", serve: 6, edit: func() (*jobsched.Version, error) {
			return r.Edits().EditSchedule(ctx, "mixed", "next:a:1,b:0", api.BucketStages{}, 0, true, made["v2"].Version)
		}, made: "v3"},
	} {
		for m := range tc.serve {
			batch(t, r, job, 0, m)
		}
		if l, ok, err := r.Edits().Schedules().Latest(ctx, "mixed"); err == nil && ok {
			latest = l
		}
		v, err := tc.edit()
		var se *editproto.ServedError
		var ce *editproto.ConflictError
		switch {
		case tc.made != "":
			if err != nil {
				t.Fatalf("%s: %v", tc.name, err)
			}
			made[tc.made] = v
		case tc.conflict != "":
			if !errors.As(err, &ce) || ce.Current != made[tc.conflict].Version {
				t.Fatalf("%s: %v; want a conflict naming %s", tc.name, err, made[tc.conflict].Version)
			}
		case tc.served:
			if !errors.As(err, &se) || se.Next != latest+1 {
				t.Fatalf("%s: %v; want a refusal naming step %d", tc.name, err, latest+1)
			}
		case !errors.Is(err, tc.err):
			t.Fatalf("%s: %v; want %v", tc.name, err, tc.err)
		}
	}
	if v3 := made["v3"]; v3.FromStep != latest+1 || v3.Previous != made["v2"].Version {
		t.Fatalf("the edit from the next step: %+v; want from step %d after %s", v3, latest+1, made["v2"].Version)
	}

	j, err := r.Resolve(ctx, parse(t, r, job), 1, -1, 0)
	if err != nil || j.Query.Job.ScheduleVersion != made["v3"].Version || j.Query.Job.Dataset != "" || len(j.Query.Job.Mix) == 0 || !j.Features.Has(features.Schedule) {
		t.Fatalf("schedule=latest resolved: %v; %+v", err, j)
	}
	pinned := "job=mixed&schedule=" + made["v1"].Version + "&batch_size=4&window=2&seed=7"
	if j, err := r.Epoch(ctx, pinned, "0", "0"); err != nil || j.Query.Job.ScheduleVersion != made["v1"].Version {
		t.Fatalf("pinned to the first version, a step before every edit: %v", err)
	}
	var ce *editproto.ConflictError
	if _, err := r.Epoch(ctx, pinned, "1", "0"); !errors.As(err, &ce) || ce.Current != made["v3"].Version {
		t.Fatalf("pinned to the first version, a step after an edit: %v; want a conflict naming %s", err, made["v3"].Version)
	}

	restarted, _ := newNode(t, nil, ds...)
	var se *editproto.ServedError
	if _, err := restarted.Edits().EditSchedule(ctx, "mixed", fmt.Sprintf("%d:a:0,b:1", latest), api.BucketStages{}, latest, false, made["v3"].Version); !errors.As(err, &se) || se.Next <= latest {
		t.Fatalf("a restarted node, an edit from step %d the job read: %v", latest, err)
	}
}

// tokenSource is a Megatron token dataset of 120 documents, indexed in
// place and loaded as a gateway loads it.
func tokenSource(t *testing.T, name string, seed uint64) *catalog.Dataset {
	t.Helper()
	formats := []format.Format{megatron.Format{}}
	st, err := megatrontest.Store(t.TempDir(), "int32", [][][]int64{megatrontest.Corpus(120, 200, 1000, seed)},
		dataset.InPlaceOptions{Formats: formats, Options: format.Options{ChunkBytes: 8 << 10}})
	if err != nil {
		t.Fatal(err)
	}
	ds, err := catalog.Load(context.Background(), catalog.Spec{Name: name, URL: "file:///" + name, Store: st, Formats: formats}, s3backend.Config{}, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	return ds
}

// TestStoredTokenSchedule: a schedule of token datasets stored under a
// job's name counts its steps in sequences — a step is a global batch
// of mix_block sequences, its epoch the sources' packed sequences — so
// the latest step the job has read is the batch it read, the next
// epoch's past the whole of the one before; an edit from a step read is
// refused naming the next, and one from there made.
func TestStoredTokenSchedule(t *testing.T) {
	ctx := context.Background()
	r, _ := newNode(t, nil, tokenSource(t, "web", 60), tokenSource(t, "code", 61), tokenSource(t, "books", 62))
	const job = "job=run&schedule=latest&seq=64&batch_size=4&world=2&mix_block=8&window=2"
	first, err := r.Edits().EditSchedule(ctx, "run", "0:web:0.5,code:0.25,books:0.25", api.BucketStages{}, 0, false, "")
	if err != nil {
		t.Fatal(err)
	}
	j, err := r.Epoch(ctx, job, "0", "")
	if err != nil {
		t.Fatal(err)
	}
	steps, sequences, err := r.Orders().Extent(j.Source, j.Query.Job, 0)
	if err != nil || steps < 12 || sequences != 8*steps {
		t.Fatalf("epoch 0: %d steps of %d sequences, %v; want 8 a step", steps, sequences, err)
	}
	latest := func(want uint64) {
		t.Helper()
		if l, ok, err := r.Edits().Schedules().Latest(ctx, "run"); err != nil || !ok || l != want {
			t.Fatalf("the latest step read: %d (%t, %v); want %d", l, ok, err, want)
		}
	}
	step(t, r, job, 2, 0, 5)
	latest(5)
	var se *editproto.ServedError
	if _, err := r.Edits().EditSchedule(ctx, "run", "5:web:0,code:0,books:1", api.BucketStages{}, 5, false, first.Version); !errors.As(err, &se) || se.Next != 6 {
		t.Fatalf("an edit from step 5, read: %v; want a refusal naming step 6", err)
	}
	if _, err := r.Edits().EditSchedule(ctx, "run", "6:web:0.125,code:0.125,books:0.75", api.BucketStages{}, 6, false, first.Version); err != nil {
		t.Fatal(err)
	}
	step(t, r, job, 2, 1, 0)
	latest(uint64(steps))
}
