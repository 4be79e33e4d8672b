package resolve_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/brandgw/brand/internal/batch/layout"
	"github.com/brandgw/brand/internal/cluster/membership"
	"github.com/brandgw/brand/internal/job/catalog"
	"github.com/brandgw/brand/internal/job/chain"
	"github.com/brandgw/brand/internal/job/editproto"
	"github.com/brandgw/brand/internal/job/features"
	"github.com/brandgw/brand/internal/job/resolve"
	"github.com/brandgw/brand/internal/testsupport/catalogtest"
)

// grownJob is job run over dataset g, which grows (catalogtest.Grown)
// from 6 chunks of 10 samples (version 0) to 8 and 10: at world 2 ×
// batch_size 5, a step is 10 samples, 6 steps an epoch of version 0.
const grownJob = "dataset=g&job=run&batch_size=5&world=2&window=2&seed=7"

// chunkKeys are the keys of chunk c of g.
func chunkKeys(c int) []string {
	var ks []string
	for i := range 10 {
		ks = append(ks, fmt.Sprintf("g/%d/%d", c, i))
	}
	return ks
}

// makeEdit makes e of job name over the dataset raw names, as its
// endpoint does (EditJob, then Make).
func makeEdit(ctx context.Context, r *resolve.Resolver, name, raw string, e resolve.NewEdit) (*chain.Link, error) {
	kind := chain.Exclude
	if e.Index != "" {
		kind = chain.Append
	}
	e.Kind = kind
	ej, err := r.Edits().EditJob(ctx, name, raw, kind)
	if err != nil {
		return nil, err
	}
	made, _, _, err := r.Edits().Make(ctx, ej, e)
	return made, err
}

// TestEditChain: a named job takes an exclusion, then the samples
// appended to its dataset, then another exclusion, each the next edit of
// its one chain, from a step after what it was served; the edits tried
// between are refused as the chain's rules say (a step served, naming
// the first editable step; keys the dataset does not hold; no previous,
// or a previous not the current edit, naming it; a step before the
// previous edit's; an index that does not extend the job's), and an edit
// made again is the edit made. Resolved, the job reads its chain: the
// newest edit, the versions its append grew it to, both kinds among its
// features. Its steps served before the edits are what they were, key
// for key under their ETags; the epoch of the edits serves every sample
// not excluded once, and nothing excluded from its edit's step on; the
// next epoch every sample of the grown version not excluded once. A node
// started over the same store (restarted) lays the job out alike, and a
// client pinned to the version the job read first reads the same chain.
func TestEditChain(t *testing.T) {
	ctx := context.Background()
	vs := catalogtest.Grown(t, "g", localStore(t), 10, 6, 8)
	r, cat := newNode(t, nil, vs[0])
	job := grownJob + "&index=" + vs[0].ID() // the version it read first, pinned
	before := []read{step(t, r, job, 2, 0, 0), step(t, r, job, 2, 0, 1)}

	x1Keys := append(chunkKeys(3), "g/0/1")
	made := map[string]*chain.Link{}
	version := func(name string) string { return made[name].Version }
	for _, tc := range []struct {
		name string
		grow bool // the catalog serves version 1 from this row on (a reload)
		edit func() resolve.NewEdit
		// The answer: made (a name others refer to it by), the same as
		// an edit made, or refused: a step served naming the first
		// editable one, a conflict naming the current edit, or err.
		made, same string
		served     uint64
		conflict   string
		err        error
	}{
		{name: "from a step served", edit: func() resolve.NewEdit { return resolve.NewEdit{FromStep: 1, Keys: []string{"g/0/0"}} }, served: 2},
		{name: "keys the dataset does not hold", edit: func() resolve.NewEdit { return resolve.NewEdit{FromStep: 2, Keys: []string{"g/0/0", "g/9/9"}} }, err: chain.ErrUnknownKeys},
		{name: "an exclusion", edit: func() resolve.NewEdit { return resolve.NewEdit{FromStep: 2, Keys: x1Keys} }, made: "x1"},
		{name: "the same again", edit: func() resolve.NewEdit { return resolve.NewEdit{FromStep: 2, Keys: x1Keys} }, same: "x1"},
		{name: "naming no previous", edit: func() resolve.NewEdit { return resolve.NewEdit{FromStep: 3, Keys: []string{"g/0/2"}} }, conflict: "x1"},
		{name: "a previous not the current", edit: func() resolve.NewEdit {
			return resolve.NewEdit{FromStep: 3, Keys: []string{"g/0/2"}, Previous: "0123456789abcdef"}
		}, conflict: "x1"},
		{name: "an append of the version read", grow: true, edit: func() resolve.NewEdit {
			return resolve.NewEdit{FromStep: 4, Index: vs[0].ID(), Previous: version("x1")}
		}, err: chain.ErrNotExtending},
		{name: "before the previous edit's step", edit: func() resolve.NewEdit {
			return resolve.NewEdit{FromStep: 1, Index: vs[1].ID(), Previous: version("x1")}
		}, err: layout.ErrBeforePrevious},
		{name: "an append", edit: func() resolve.NewEdit {
			return resolve.NewEdit{FromStep: 4, Index: vs[1].ID(), Previous: version("x1")}
		}, made: "a1"},
		{name: "an exclusion of an appended sample", edit: func() resolve.NewEdit {
			return resolve.NewEdit{FromStep: 5, Keys: []string{"g/7/3"}, Previous: version("a1")}
		}, made: "x2"},
	} {
		if tc.grow {
			cat.Add(vs[1])
		}
		got, err := makeEdit(ctx, r, "run", job, tc.edit())
		var se *editproto.ServedError
		var ce *editproto.ConflictError
		switch {
		case tc.made != "" || tc.same != "":
			if err != nil {
				t.Fatalf("%s: %v", tc.name, err)
			}
			if tc.same != "" && got.Version != version(tc.same) {
				t.Fatalf("%s: version %s; want %s's, %s", tc.name, got.Version, tc.same, version(tc.same))
			}
			if tc.made != "" {
				made[tc.made] = got
			}
		case tc.served > 0:
			if !errors.As(err, &se) || se.Next != tc.served || !errors.Is(err, chain.ErrConflict) {
				t.Fatalf("%s: %v; want a refusal naming step %d", tc.name, err, tc.served)
			}
		case tc.conflict != "":
			if !errors.As(err, &ce) || ce.Current != version(tc.conflict) {
				t.Fatalf("%s: %v; want a conflict naming %s", tc.name, err, version(tc.conflict))
			}
		case !errors.Is(err, tc.err):
			t.Fatalf("%s: %v; want %v", tc.name, err, tc.err)
		}
	}

	j, err := r.Epoch(ctx, job, "0", "")
	if err != nil {
		t.Fatal(err)
	}
	x2 := version("x2")
	if src := j.Source; src.Edit == nil || src.Edit.Version != x2 || j.Query.Job.Edit != x2 || src.DS.ID() != vs[1].ID() || src.Index != vs[0].ID() ||
		len(src.Versions) != 2 || src.Versions[0].ID() != vs[0].ID() || !j.Features.Has(features.Exclusion) || !j.Features.Has(features.Append) {
		t.Fatalf("the job resolved: edit %+v, job's edit %s, over %s, features %v; want %s over %s", src.Edit, j.Query.Job.Edit, src.DS.ID(), j.Features.List(), x2, vs[1].ID())
	}
	if head, x, ds, err := r.Edits().Read(ctx, "run", "dataset=g"); err != nil || head.Version != x2 || x.Version != x2 || ds.ID() != vs[1].ID() || len(head.Chain()) != 3 {
		t.Fatalf("the chain read: %+v %+v, over %v, %v", head, x, ds, err)
	}
	for m, s := range before {
		if again := step(t, r, job, 2, 0, m); !slices.Equal(again.keys, s.keys) || !slices.Equal(again.etags, s.etags) {
			t.Fatalf("step %d, served before the edits, changed", m)
		}
	}
	rest0, seen0 := epochOf(t, r, job, 2, 0, 2)
	for m, s := range rest0 {
		for _, k := range s.keys {
			if slices.Contains(x1Keys, k) || k == "g/7/3" && m+2 >= 5 {
				t.Fatalf("step %d of epoch 0 serves %s, excluded before it", m+2, k)
			}
		}
	}
	for _, s := range before {
		for _, k := range s.keys {
			seen0[k]++
		}
	}
	next, seen1 := epochOf(t, r, job, 2, 1, 0)
	for id := range vs[1].Index.NumSamples() {
		k := vs[1].Index.SampleKey(id)
		out := slices.Contains(x1Keys, k) || k == "g/7/3"
		if seen0[k] > 1 || !out && seen0[k] != 1 {
			t.Fatalf("epoch 0 serves %s %d times", k, seen0[k])
		}
		if want := map[bool]int{false: 1, true: 0}[out]; seen1[k] != want {
			t.Fatalf("epoch 1 serves %s %d times; want %d", k, seen1[k], want)
		}
	}

	// A node started over the store, which serves version 1.
	restarted, _ := newNode(t, nil, vs[1])
	again0, _ := epochOf(t, restarted, job, 2, 0, 2)
	again1, _ := epochOf(t, restarted, job, 2, 1, 0)
	for e, pair := range [][2][]read{{rest0, again0}, {next, again1}} {
		if len(pair[0]) != len(pair[1]) {
			t.Fatalf("epoch %d: %d steps restarted, %d before", e, len(pair[1]), len(pair[0]))
		}
		for m := range pair[0] {
			if !slices.Equal(pair[0][m].keys, pair[1][m].keys) || !slices.Equal(pair[0][m].etags, pair[1][m].etags) {
				t.Fatalf("epoch %d step %d differs on the restarted node", e, m)
			}
		}
	}
	unpinned, err := restarted.Epoch(ctx, grownJob, "0", "")
	if err != nil || unpinned.Source.Edit.Version != x2 || unpinned.Source.Index != "" || unpinned.Source.DS.ID() != vs[1].ID() {
		t.Fatalf("the job pinning no version: %v, %+v", err, unpinned)
	}
}

// holders are a single gateway's index versions, with other nodes
// holding every version it does not.
type holders struct {
	membership.Solo
	nodes []string
}

func (h holders) Holders(string, string, bool) []string { return h.nodes }

// TestEditsOfAnotherVersion: a job whose chain has appends reads the
// version it read first, one its appends grew it to or one extending
// the last (files appended since, a client that pins none), as the
// chain's: over another version — the dataset re-packed — it is refused,
// never served without its edits, saying what to do, and a client pinned
// to a version no longer held is told which nodes hold it, if any. An
// unnamed job reads whatever is served.
func TestEditsOfAnotherVersion(t *testing.T) {
	ctx := context.Background()
	st := localStore(t)
	vs := catalogtest.Grown(t, "g", st, 10, 6, 8, 10)
	repacked := catalogtest.Grown(t, "g", st, 7, 9)[0]
	r, cat := newNode(t, nil, vs[0])
	cat.Add(vs[1])
	if _, err := makeEdit(ctx, r, "run", grownJob+"&index="+vs[0].ID(), resolve.NewEdit{FromStep: 2, Index: vs[1].ID()}); err != nil {
		t.Fatal(err)
	}
	elsewhere, cat2 := newNode(t, func(c *resolve.Config) {
		c.Versions = holders{membership.Solo{Held: c.Catalog.HeldIDs}, []string{"http://n1.test"}}
	}, vs[1])
	for _, tc := range []struct {
		name  string
		serve *catalog.Dataset // the version served from this row on
		r     *resolve.Resolver
		raw   string
		over  string // the version the job is laid out over
		err   error
		says  string
	}{
		{name: "the version the append grew it to", r: r, raw: grownJob, over: vs[1].ID()},
		{name: "pinned to the version it read first", r: r, raw: grownJob + "&index=" + vs[0].ID(), over: vs[1].ID()},
		{name: "a version extending the last append's", serve: vs[2], r: r, raw: grownJob, over: vs[1].ID()},
		{name: "the dataset re-packed", serve: repacked, r: r, raw: grownJob, err: chain.ErrNotOfVersion, says: "pin index=" + vs[0].ID()},
		{name: "pinned, no node holds it", r: r, raw: grownJob + "&index=" + vs[0].ID(), err: catalog.ErrVersion, says: "no node known to this one holds it"},
		{name: "pinned, another node holds it", serve: repacked, r: elsewhere, raw: grownJob + "&index=" + vs[0].ID(), err: catalog.ErrVersion, says: "http://n1.test"},
		{name: "unnamed, the re-packed version", r: r, raw: strings.Replace(grownJob, "job=run&", "", 1), over: repacked.ID()},
	} {
		if tc.serve != nil {
			cat.Add(tc.serve)
			cat2.Add(tc.serve)
		}
		j, err := tc.r.Epoch(ctx, tc.raw, "0", "")
		if tc.err != nil {
			if !errors.Is(err, tc.err) || !strings.Contains(err.Error(), tc.says) {
				t.Fatalf("%s: %v; want %v saying %q", tc.name, err, tc.err, tc.says)
			}
			continue
		}
		if err != nil || j.Source.DS.ID() != tc.over {
			t.Fatalf("%s: %v; laid out over %v, want %s", tc.name, err, j, tc.over)
		}
	}
}

// TestOneEditOfTwoAtOnce: of two edits of a job made at once on two
// nodes over one store, one is made and the other refused naming it;
// either node, and one started since, resolves the job under the edit
// made.
func TestOneEditOfTwoAtOnce(t *testing.T) {
	ctx := context.Background()
	ds := stored(t, "a", 6, 10)
	nodes := []*resolve.Resolver{}
	for range 2 {
		r, _ := newNode(t, nil, ds)
		nodes = append(nodes, r)
	}
	const job = "dataset=a&batch_size=5&world=2"
	made := make([]*chain.Link, 2)
	errs := make([]error, 2)
	var wg sync.WaitGroup
	for k, r := range nodes {
		wg.Go(func() {
			made[k], errs[k] = makeEdit(ctx, r, "run", job, resolve.NewEdit{FromStep: 2, Keys: []string{fmt.Sprintf("a/%d/0", k)}})
		})
	}
	wg.Wait()
	won := slices.IndexFunc(errs, func(err error) bool { return err == nil })
	var ce *editproto.ConflictError
	if won < 0 || !errors.As(errs[1-won], &ce) || ce.Current != made[won].Version {
		t.Fatalf("two edits at once: %v; want one made and the other refused naming it", errs)
	}
	late, _ := newNode(t, nil, ds)
	for k, r := range append(nodes, late) {
		if k == 1-won {
			// The refused node asks the store again once its chain is
			// older than chain.Refresh; Current reads it now.
			if _, _, _, err := r.Edits().Read(ctx, "run", job); err != nil {
				t.Fatal(err)
			}
			if _, err := resolve.Chains(r).Current(ctx, ds.Store, ds.Name, "run"); err != nil {
				t.Fatal(err)
			}
		}
		j, err := r.Epoch(ctx, job+"&job=run", "1", "")
		if err != nil || j.Query.Job.Edit != made[won].Version {
			t.Fatalf("node %d resolves the job under %v (%v); want %s", k, j, err, made[won].Version)
		}
	}
}

// TestPinnedVersionAfterAppend: a job pinned to an index version
// (index=) is served that version's order by a node that holds only a
// version extending it (files appended since, the node started after):
// every batch of two epochs the same samples under the same ETags as a
// node holding the version itself serves. Unpinned, the job reads the
// extension.
func TestPinnedVersionAfterAppend(t *testing.T) {
	vs := catalogtest.Grown(t, "g", localStore(t), 10, 6, 8)
	before, _ := newNode(t, nil, vs[0])
	after, _ := newNode(t, nil, vs[1])
	const job = "dataset=g&batch_size=4&world=2&window=4&seed=7"
	pinned := job + "&index=" + vs[0].ID()
	for e := range 2 {
		want, _ := epochOf(t, before, pinned, 2, e, 0)
		got, _ := epochOf(t, after, pinned, 2, e, 0)
		if len(got) != len(want) {
			t.Fatalf("epoch %d: %d steps after the append, %d before", e, len(got), len(want))
		}
		for m := range want {
			if !slices.Equal(got[m].keys, want[m].keys) || !slices.Equal(got[m].etags, want[m].etags) {
				t.Fatalf("epoch %d step %d pinned to %s: %v %v after the append; %v %v before", e, m, vs[0].ID(), got[m].keys, got[m].etags, want[m].keys, want[m].etags)
			}
		}
	}
	if j, err := after.Epoch(context.Background(), job, "0", ""); err != nil || j.Source.DS.ID() != vs[1].ID() {
		t.Fatalf("unpinned: %v, %+v; want version %s", err, j, vs[1].ID())
	}
}
