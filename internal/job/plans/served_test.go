package plans_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"github.com/brandgw/brand/api"
	"github.com/brandgw/brand/dataset"
	"github.com/brandgw/brand/format"
	"github.com/brandgw/brand/format/formattest"
	"github.com/brandgw/brand/format/megatron"
	"github.com/brandgw/brand/format/megatron/megatrontest"
	"github.com/brandgw/brand/format/video"
	"github.com/brandgw/brand/importance"
	"github.com/brandgw/brand/internal/batch/layout"
	"github.com/brandgw/brand/internal/batch/units"
	"github.com/brandgw/brand/internal/cluster/membership"
	"github.com/brandgw/brand/internal/job/catalog"
	"github.com/brandgw/brand/internal/job/chain"
	"github.com/brandgw/brand/internal/job/features"
	"github.com/brandgw/brand/internal/job/plans"
	"github.com/brandgw/brand/internal/job/query"
	"github.com/brandgw/brand/internal/job/resolve"
	"github.com/brandgw/brand/internal/server/httperr"
	"github.com/brandgw/brand/internal/testsupport/catalogtest"
	"github.com/brandgw/brand/internal/testsupport/videotest"
	"github.com/brandgw/brand/planner"
	"github.com/brandgw/brand/s3backend"
)

// servedWorld is what a single gateway answers /epoch/N and /plan from:
// a tar dataset "test" of 12 chunks of 10 samples, a dataset "lines"
// served in place that takes appends, and a token dataset "tok", each on
// a store of its own; one resolver and one layout for both endpoints.
type servedWorld struct {
	t      *testing.T
	cat    *catalog.Catalog
	r      *resolve.Resolver
	orders *layout.Orders
	m      *plans.Maker
	lines  s3backend.Store
	snaps  *fakeSnapshots
}

func newServedWorld(t *testing.T) *servedWorld {
	t.Helper()
	ctx := context.Background()
	tarStore, err := s3backend.NewLocal(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	tar := catalog.NewDataset("test", "file:///test", tarStore, catalogtest.Dataset(t, "test", 12, 10).Index)
	lineStore, _ := inPlaceStore(t)
	lines, err := catalog.Load(ctx, catalog.Spec{Name: "lines", URL: "file:///lines", Store: lineStore,
		Formats: []format.Format{formattest.Lines{}}}, s3backend.Config{}, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	tokStore, err := s3backend.NewLocal(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	bin, idx := megatrontest.Files("uint16", megatrontest.Corpus(240, 300, 50000, 10))
	for name, b := range map[string][]byte{"data/p_text_document.bin": bin, "data/p_text_document.idx": idx} {
		if _, err := tokStore.Put(ctx, name, bytes.NewReader(b), int64(len(b))); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := dataset.IndexInPlace(ctx, tokStore, tokStore, dataset.InPlaceOptions{
		Formats: []format.Format{megatron.Format{}}, Options: format.Options{ChunkBytes: 8 << 10}}); err != nil {
		t.Fatal(err)
	}
	tok, err := catalog.Load(ctx, catalog.Spec{Name: "tok", URL: "file:///tok", Store: tokStore,
		Formats: []format.Format{megatron.Format{}}}, s3backend.Config{}, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	names := []string{"test", "lines", "tok"}
	cat := catalog.New(names, "test", catalog.NewMetrics(prometheus.NewRegistry()), zerolog.Nop())
	for _, d := range []*catalog.Dataset{tar, lines, tok} {
		cat.Add(d)
	}
	cat.MarkReady()
	var limits query.Limits
	limits.Fill()
	defaults := query.Query{Job: api.Job{Dataset: "test", Params: testParams}}
	snaps := &fakeSnapshots{m: map[string]*importance.Snapshot{}}
	orders := units.Orders(nil)
	r := resolve.New(resolve.Config{Catalog: cat, Versions: membership.Solo{Held: cat.HeldIDs}, Orders: orders, Snapshots: snaps,
		Pipelines: noPipelines{}, Defaults: defaults, Limits: limits})
	m := plans.New(plans.Config{Planner: planner.ForGateway{}, Jobs: r, Snapshots: snaps, Epochs: orders, Defaults: defaults, Limits: limits,
		Options: api.PlanOptions{CacheBytes: 64 << 20, BackendBytesPerSec: 1 << 30, PrefetchWindows: 1}})
	return &servedWorld{t: t, cat: cat, r: r, orders: orders, m: m, lines: lineStore, snaps: snaps}
}

// fakeSnapshots holds importance snapshots by version.
type fakeSnapshots struct {
	m map[string]*importance.Snapshot
}

func (f *fakeSnapshots) Snapshot(_ context.Context, _ *catalog.Dataset, _, version string) (*importance.Snapshot, error) {
	s, ok := f.m[version]
	if !ok {
		return nil, fmt.Errorf("%w: snapshot %s", layout.ErrNoSnapshot, version)
	}
	return s, nil
}

// epoch is what /epoch/e answers for the job of query raw (its
// parameters, no plan's): resolved and laid out as the gateway does.
func (w *servedWorld) epoch(raw string, e uint64) api.EpochInfo {
	w.t.Helper()
	j, err := w.r.Epoch(context.Background(), raw, fmt.Sprint(e), "")
	if err != nil {
		w.t.Fatalf("/epoch/%d?%s: %v", e, raw, err)
	}
	info, err := w.orders.Info(j.Source, j.Query.Job, e)
	if err != nil {
		w.t.Fatalf("/epoch/%d?%s: %v", e, raw, err)
	}
	return info
}

// edit makes an edit of kind of job name (whose query is raw) from step
// step after its current edit, as POST /jobs/NAME/exclude or /append
// does: an exclusion of keys, or an append of version index.
func (w *servedWorld) edit(name, raw, kind string, step uint64, keys []string, index string) {
	w.t.Helper()
	ctx := context.Background()
	ej, err := w.r.Edits().EditJob(ctx, name, raw, kind)
	if err != nil {
		w.t.Fatal(err)
	}
	prev := ""
	if ej.Head != nil {
		prev = ej.Head.Version
	}
	if _, _, _, err := w.r.Edits().Make(ctx, ej, resolve.NewEdit{Kind: kind, FromStep: step, Previous: prev, Keys: keys, Index: index}); err != nil {
		w.t.Fatalf("%s of job %s from step %d: %v", kind, name, step, err)
	}
}

// grow appends a file of 20 lines to "lines" and reloads it: the version
// it grew to.
func (w *servedWorld) grow() string {
	w.t.Helper()
	ctx := context.Background()
	var lines []string
	for l := range 20 {
		lines = append(lines, fmt.Sprintf("added line %d", l))
	}
	for k, b := range formattest.Write(map[string][]string{"data/f9.lines": lines}) {
		if _, err := w.lines.Put(ctx, k, bytes.NewReader(b), int64(len(b))); err != nil {
			w.t.Fatal(err)
		}
	}
	if _, err := dataset.AppendInPlace(ctx, w.lines, w.lines, dataset.AppendOptions{
		Formats: []format.Format{formattest.Lines{}}, Options: format.Options{ChunkBytes: 300}}); err != nil {
		w.t.Fatal(err)
	}
	// "test" has no index in its store (catalogtest's is in memory):
	// its check fails, and the others go on.
	if got, err := w.cat.Reload(ctx); !slices.Contains(got, "lines") {
		w.t.Fatalf("reloading lines after the append: %v, %v", got, err)
	}
	ds, err := w.cat.Get("lines")
	if err != nil {
		w.t.Fatal(err)
	}
	return ds.ID()
}

// servedPlan is what every plan says of the epochs it plans, whatever
// the job's kind: each epoch's samples and global batches, as /epoch/N
// answers them, and its first epoch's batches.
type servedPlan struct {
	BatchesPerEpoch *int `json:"batches_per_epoch"`
	Epochs          []struct {
		Epoch   int  `json:"epoch"`
		Samples *int `json:"samples"`
		Batches *int `json:"batches"`
	} `json:"epochs"`
}

// plan is /plan?raw&extra's answer, as JSON.
func (w *servedWorld) plan(raw, extra string) ([]byte, error) {
	w.t.Helper()
	p, err := w.m.Plan(context.Background(), raw+"&"+extra)
	if err != nil {
		return nil, err
	}
	return json.Marshal(p)
}

// holds holds the plan of the job of query raw, with the plan's own
// parameters extra, to what /epoch/N answers for each epoch it plans
// (first first, epochs of them): the same samples and batches, and
// batches_per_epoch the first epoch's.
func (w *servedWorld) holds(raw, extra string, first, epochs int) {
	w.t.Helper()
	b, err := w.plan(raw, extra)
	if err != nil {
		w.t.Fatalf("/plan?%s&%s: %v", raw, extra, err)
	}
	var p servedPlan
	if err := json.Unmarshal(b, &p); err != nil {
		w.t.Fatal(err)
	}
	var served, planned []string
	for e := range epochs {
		info := w.epoch(raw, uint64(first+e))
		served = append(served, fmt.Sprintf("epoch %d: %d samples, %d batches", first+e, info.Samples, info.Batches))
	}
	for _, pe := range p.Epochs {
		s, n := -1, -1
		if pe.Samples != nil {
			s = *pe.Samples
		}
		if pe.Batches != nil {
			n = *pe.Batches
		}
		planned = append(planned, fmt.Sprintf("epoch %d: %d samples, %d batches", pe.Epoch, s, n))
	}
	if strings.Join(planned, "; ") != strings.Join(served, "; ") {
		w.t.Errorf("/plan?%s&%s plans\n\t%s\n/epoch serves\n\t%s", raw, extra, strings.Join(planned, "\n\t"), strings.Join(served, "\n\t"))
	}
	if first := w.epoch(raw, uint64(first)); p.BatchesPerEpoch == nil || *p.BatchesPerEpoch != first.Batches {
		w.t.Errorf("/plan?%s&%s: batches_per_epoch %v; the first epoch planned serves %d", raw, extra, p.BatchesPerEpoch, first.Batches)
	}
}

// bytesHold checks that /plan?raw&extra's epoch_bytes is what the
// first planned epoch, first, serves (/epoch/N): the dataset's bytes in
// proportion to the samples its batches carry.
func (w *servedWorld) bytesHold(raw, extra string, first int) {
	w.t.Helper()
	b, err := w.plan(raw, extra)
	if err != nil {
		w.t.Fatalf("/plan?%s&%s: %v", raw, extra, err)
	}
	var p struct {
		Samples      int   `json:"samples"`
		DatasetBytes int64 `json:"dataset_bytes"`
		EpochBytes   int64 `json:"epoch_bytes"`
	}
	if err := json.Unmarshal(b, &p); err != nil || p.Samples == 0 {
		w.t.Fatalf("/plan?%s&%s: %v %s", raw, extra, err, b)
	}
	info := w.epoch(raw, uint64(first))
	served := info.Samples
	if info.DropLast {
		served = info.Batches * info.BatchSize * info.World
	}
	if want := int64(math.Round(float64(p.DatasetBytes) * float64(served) / float64(p.Samples))); p.EpochBytes != want {
		w.t.Errorf("/plan?%s&%s: epoch_bytes %d; epoch %d serves %d of the %d samples' %d bytes: %d", raw, extra, p.EpochBytes, first, served, p.Samples, p.DatasetBytes, want)
	}
}

// exKeys are every sample of chunks 3 and 7 of "test", and three others.
func exKeys() []string {
	var keys []string
	for _, c := range []int{3, 7} {
		for i := range 10 {
			keys = append(keys, fmt.Sprintf("test/%d/%d", c, i))
		}
	}
	return append(keys, "test/0/1", "test/5/5", "test/9/9")
}

// A named job's plan is of the epochs its batches serve (issue 80, case
// 6): under an exclusion — from a step of the first epoch planned or of a
// later one, on one gateway or planned for a cluster, with drop_last,
// locality off, balance=bytes, a view of fields, or after an append —
// each planned epoch's samples and global batches are those /epoch/N
// answers, batches_per_epoch is the first planned epoch's, and so is
// epoch_bytes. Before, the plan counted the version's samples unedited:
// 12 batches where 10 are served, and the bytes of every sample.
func TestPlanIsOfTheEditedEpochs(t *testing.T) {
	w := newServedWorld(t)
	const shape = "batch_size=5&world=2&window=2&seed=7"
	for _, tc := range []struct {
		name, job string
		from      uint64 // the exclusion's step
		plan      string
		first     int
	}{
		{"from a step of epoch 0", "dataset=test&job=a&" + shape, 3, "epochs=3", 0},
		{"from a step of epoch 1", "dataset=test&job=b&" + shape, 12 + 5, "epochs=3", 0},
		{"from a step of epoch 1, planned from it", "dataset=test&job=c&" + shape, 12 + 5, "first_epoch=1&epochs=2", 1},
		{"on a cluster", "dataset=test&job=d&" + shape, 3, "epochs=3&nodes=2", 0},
		{"on a cluster, from epoch 1", "dataset=test&job=e&" + shape, 12 + 7, "epochs=3&nodes=3", 0},
		{"drop_last", "dataset=test&job=f&drop_last=true&batch_size=7&world=2&window=2&seed=7", 2, "epochs=3", 0},
		{"locality off", "dataset=test&job=g&locality=false&" + shape, 4, "epochs=2&nodes=2", 0},
		{"balance=bytes", "dataset=test&job=h&balance=bytes&" + shape, 4, "epochs=2", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w.t = t
			w.edit(strings.Split(strings.Split(tc.job, "job=")[1], "&")[0], tc.job, chain.Exclude, tc.from, exKeys(), "")
			w.holds(tc.job, tc.plan, tc.first, epochsOf(tc.plan))
			w.bytesHold(tc.job, tc.plan, tc.first)
		})
	}
	// A dataset served in place: an exclusion read through a view of its
	// fields; an append and then an exclusion, each from a step of epoch
	// 0, planned over the version the append grew the job to.
	t.Run("a view of fields", func(t *testing.T) {
		w.t = t
		v := mustGet(t, w.cat, "lines").ID()
		job := "dataset=lines&job=v&columns=txt&index=" + v + "&" + shape
		w.edit("v", job, chain.Exclude, 2, []string{"data/f0/1", "data/f0/2", "data/f1/7", "data/f2/30"}, "")
		w.holds(job, "epochs=3", 0, 3)
	})
	t.Run("an append and an exclusion", func(t *testing.T) {
		w.t = t
		v := mustGet(t, w.cat, "lines").ID()
		job := "dataset=lines&job=ax&index=" + v + "&" + shape
		x := w.grow()
		w.edit("ax", job, chain.Append, 3, nil, x)
		var keys []string
		for l := range 40 {
			keys = append(keys, fmt.Sprintf("data/f1/%d", l))
		}
		w.edit("ax", job, chain.Exclude, 5, append(keys, "data/f9/3"), "")
		w.holds(job, "epochs=3", 0, 3)
		w.holds(job, "epochs=2&nodes=2", 0, 2)
		w.bytesHold(job, "epochs=3", 0)
		w.bytesHold(job, "epochs=2&nodes=2", 0)
	})
}

// epochsOf is the epochs= of a plan's parameters.
func epochsOf(plan string) int {
	for _, kv := range strings.Split(plan, "&") {
		var n int
		if _, err := fmt.Sscanf(kv, "epochs=%d", &n); err == nil {
			return n
		}
	}
	return plans.DefaultEpochs
}

func mustGet(t *testing.T, cat *catalog.Catalog, name string) *catalog.Dataset {
	t.Helper()
	ds, err := cat.Get(name)
	if err != nil {
		t.Fatal(err)
	}
	return ds
}

// An epoch of no batches — drop_last and fewer samples (or sequences)
// than one global batch — is planned as /epoch/N answers it (issue 80,
// case 6): 200, its samples and 0 batches, for a job of samples (on one
// gateway and planned for a cluster), a mixture and a token job alike.
// POST /plan plans such a job beside another, reading nothing. Before,
// the plan of samples and of tokens was 400, the token job's counting
// documents and a batch size it was never given.
func TestPlanOfAnEmptyEpoch(t *testing.T) {
	w := newServedWorld(t)
	for _, tc := range []struct{ job, plan string }{
		{"dataset=test&batch_size=64&world=2&drop_last=true", "epochs=2"},
		{"dataset=test&batch_size=64&world=2&drop_last=true", "epochs=2&nodes=2"},
		{"dataset=test&job=ex&batch_size=64&world=2&drop_last=true", "epochs=2"},
		{"mix=test:1,lines:1&mix_block=10&mix_samples=100&batch_size=64&world=2&drop_last=true", "epochs=2"},
		{"mix=test:1,lines:1&mix_block=10&mix_samples=100&batch_size=64&world=2&drop_last=true", "epochs=2&nodes=2"},
		{"dataset=tok&seq=128&batch_size=4096&drop_last=true", "epochs=2"},
	} {
		t.Run(tc.job+"&"+tc.plan, func(t *testing.T) {
			w.t = t
			if info := w.epoch(tc.job, 0); info.Batches != 0 {
				t.Fatalf("the fixture: epoch 0 serves %d batches", info.Batches)
			}
			w.holds(tc.job, tc.plan, 0, 2)
		})
	}
	// POST /plan: a job of no batches beside another reads nothing.
	w.t = t
	p, err := shared(w.m, `{"jobs": [{"name": "empty", "batch_size": 64, "world": 2, "drop_last": true}, {"name": "other"}]}`)
	if err != nil {
		t.Fatalf("POST /plan of a job of no batches: %v", err)
	}
	sp := decode[planner.SharedPlan](t, p)
	if len(sp.Optimal.Jobs) != 2 || sp.Optimal.Jobs[0].Accesses != 0 || sp.Optimal.Jobs[1].Accesses == 0 {
		t.Errorf("POST /plan of a job of no batches beside another: %+v", sp.Optimal.Jobs)
	}
}

// The importance cells of the table hold for /plan (issue 80, case 6):
// sampling=importance planned for a cluster of several nodes is 501, the
// table's reason, with a snapshot or before the first; with a snapshot
// planned for one node (nodes=1) it is planned, with its importance
// figures — one node is one gateway — where it was 400.
func TestPlanOfImportanceIsTheTables(t *testing.T) {
	w := newServedWorld(t)
	ds := mustGet(t, w.cat, "test")
	scores := make([]float32, ds.Index.NumSamples())
	for i := range scores {
		scores[i] = float32(1 + i%7)
	}
	snap, err := importance.NewSnapshot(ds.Index, "imp", 0, scores)
	if err != nil {
		t.Fatal(err)
	}
	w.snaps.m[snap.Version()] = snap
	why := features.Lookup(features.Importance, features.Cluster).Plan
	for _, q := range []string{
		"sampling=importance&job=imp&nodes=2",
		"sampling=importance&job=imp&importance=" + snap.Version() + "&nodes=2",
	} {
		_, err := w.m.Plan(context.Background(), q)
		if !errors.Is(err, features.ErrNotPlanned) || httperr.Status(err) != http.StatusNotImplemented || !strings.Contains(err.Error(), why) {
			t.Errorf("/plan?%s: %v (%d); want 501 with the table's %q", q, err, httperr.Status(err), why)
		}
	}
	for _, q := range []string{
		"sampling=importance&job=imp&importance=" + snap.Version() + "&nodes=1",
		"sampling=importance&job=imp&importance=" + snap.Version(),
	} {
		b, err := w.plan(q, "epochs=2")
		if err != nil {
			t.Errorf("/plan?%s: %v; want it planned", q, err)
			continue
		}
		var p struct {
			Importance *struct {
				Version string `json:"version"`
			} `json:"importance"`
		}
		if err := json.Unmarshal(b, &p); err != nil || p.Importance == nil || p.Importance.Version != snap.Version() {
			t.Errorf("/plan?%s: %s; want its importance figures", q, b)
		}
	}
}

// A clip job's epoch of no batch — drop_last and fewer clips than one
// global batch — is planned as /epoch/N answers it, as every kind's is
// (issue 80, case 6): its clips and 0 batches, beside an epoch of
// batches. The videos are ffmpeg's (skipped without it).
func TestPlanOfAClipJobsEpochs(t *testing.T) {
	ctx := context.Background()
	made := videotest.Make(t, t.TempDir(), "h264.mp4", "h264-bframes.mp4")
	st, err := s3backend.NewLocal(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	for key, f := range map[string]string{"a/x.mp4": "h264.mp4", "b/y.mp4": "h264-bframes.mp4"} {
		b, err := os.ReadFile(made[f])
		if err != nil {
			t.Skipf("ffmpeg made no %s: %v", f, err)
		}
		if _, err := st.Put(ctx, key, bytes.NewReader(b), int64(len(b))); err != nil {
			t.Fatal(err)
		}
	}
	formats := []format.Format{video.Format{}}
	if _, err := dataset.IndexInPlace(ctx, st, st, dataset.InPlaceOptions{Formats: formats, Options: format.Options{ChunkBytes: 1 << 20}}); err != nil {
		t.Fatal(err)
	}
	ds, err := catalog.Load(ctx, catalog.Spec{Name: "videos", URL: "file:///videos", Store: st, Formats: formats}, s3backend.Config{}, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	cat := catalog.New([]string{"videos"}, "videos", catalog.NewMetrics(prometheus.NewRegistry()), zerolog.Nop())
	cat.Add(ds)
	cat.MarkReady()
	var limits query.Limits
	limits.Fill()
	defaults := query.Query{Job: api.Job{Dataset: "videos", Params: testParams}}
	orders := units.Orders(nil)
	r := resolve.New(resolve.Config{Catalog: cat, Versions: membership.Solo{Held: cat.HeldIDs}, Orders: orders, Pipelines: noPipelines{}, Defaults: defaults, Limits: limits})
	w := &servedWorld{t: t, cat: cat, r: r, orders: orders, m: plans.New(plans.Config{Planner: planner.ForGateway{}, Jobs: r, Epochs: orders,
		Defaults: defaults, Limits: limits, Options: api.PlanOptions{CacheBytes: 64 << 20, BackendBytesPerSec: 1 << 30, PrefetchWindows: 1}})}
	// 10 clips of 8 frames, a stride of 2, an epoch (TestClipRefused's).
	for _, job := range []string{"clip=8&stride=2&batch_size=16&drop_last=true", "clip=8&stride=2&batch_size=3&drop_last=true", "clip=8&stride=2&batch_size=2&world=2"} {
		t.Run(job, func(t *testing.T) {
			w.t = t
			w.holds(job, "epochs=2", 0, 2)
		})
	}
	if info := w.epoch("clip=8&stride=2&batch_size=16&drop_last=true", 0); info.Samples == 0 || info.Batches != 0 {
		t.Errorf("the fixture: an epoch of %d clips in %d batches; want some in none", info.Samples, info.Batches)
	}
}
