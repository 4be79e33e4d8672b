package gateway_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"image"
	_ "image/jpeg"
	"math/rand/v2"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/brandgw/brand/api"
	"github.com/brandgw/brand/dataset"
	"github.com/brandgw/brand/internal/gen/photos"
	"github.com/brandgw/brand/internal/testsupport/jobmodel"
	"github.com/brandgw/brand/s3backend"
)

// mImg is a bucket round's dataset: JPEGs of random sizes in tar chunks,
// packed with their image sizes (withBuckets); mImg2 a bucketed
// mixture's second source, alike.
const (
	mImg  = "img"
	mImg2 = "img2"
)

// mBucketPool are the buckets a round draws its list from, [H, W].
var mBucketPool = [][2]int{{24, 24}, {16, 32}, {32, 16}, {20, 28}, {28, 20}, {12, 48}, {48, 12}}

// withBuckets adds mImg to w: 5 to 8 chunks of 6 to 14 JPEGs, 6 to 70
// pixels a side (some too small for any bucket), and their sizes
// (dataset.WriteSizes); it returns every sample's [width, height], read
// with image.DecodeConfig.
func (w *mWorld) withBuckets(t *testing.T, r *rand.Rand) [][2]int {
	t.Helper()
	return w.withBucketsAs(t, r, mImg)
}

// withBucketsAs is withBuckets of a dataset named name.
func (w *mWorld) withBucketsAs(t *testing.T, r *rand.Rand, name string) [][2]int {
	t.Helper()
	st, err := s3backend.NewLocal(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	chunks, per := 5+r.IntN(4), 6+r.IntN(9)
	jpegs := map[string][]byte{}
	ix := packSamples(t, st, chunks, per, func(id, _ int) (string, []sampleFile) {
		p, err := photos.Sized(9, id, 6+r.IntN(65), 6+r.IntN(65), 80)
		if err != nil {
			t.Fatal(err)
		}
		key := fmt.Sprintf("%s/s%04d", name, id)
		jpegs[key] = p.JPEG
		return key, []sampleFile{{"jpg", p.JPEG}}
	})
	if _, err := dataset.WriteSizes(context.Background(), st, ix, 0, 2); err != nil {
		t.Fatal(err)
	}
	w.stores[name] = st
	v := readMVersion(t, st)
	w.versions[name] = []*mVersion{v}
	sizes := make([][2]int, len(v.keys))
	for id, key := range v.keys {
		c, _, err := image.DecodeConfig(bytes.NewReader(jpegs[key]))
		if err != nil {
			t.Fatal(err)
		}
		sizes[id] = [2]int{c.Width, c.Height}
	}
	return sizes
}

// bucketRound is a round of a bucket job over mImg on one gateway or a
// cluster of three, held to jobmodel.BucketJob: every step's bucket
// (Brand-Transform) and every rank's samples, /epoch/N's steps and
// buckets and /plan's, over two epochs, and the rest of an epoch resumed
// at another world size after a random number of steps.
func bucketRound(t *testing.T, seed uint64) {
	r := roundRand(seed)
	w := newMWorld(t, r)
	sizes := w.withBuckets(t, r)
	ns := startMNodes(t, w, []int{1, 3}[r.IntN(2)])
	pool := slices.Clone(mBucketPool)
	r.Shuffle(len(pool), func(i, j int) { pool[i], pool[j] = pool[j], pool[i] })
	shapes := pool[:2+r.IntN(len(pool)-1)]
	budget := 24 * 24 * (1 + r.IntN(3))
	m := &jobmodel.BucketJob{Shapes: shapes, Sizes: sizes, MaxUpscale: 2}
	names := make([]string, len(shapes))
	for i, s := range shapes {
		names[i] = fmt.Sprintf("%dx%d", s[0], s[1])
		m.Per = append(m.Per, budget/(s[0]*s[1]))
	}
	q := url.Values{}
	q.Set("dataset", mImg)
	seed64 := r.Uint64() >> 1
	window := 1 + r.IntN(4)
	q.Set("seed", strconv.FormatUint(seed64, 10))
	q.Set("window", strconv.Itoa(window))
	q.Set("buckets", strings.Join(names, ","))
	q.Set("budget", strconv.Itoa(budget))
	if r.IntN(2) == 0 {
		q.Set("max_upscale", "3")
		m.MaxUpscale = 3
	}
	if r.IntN(2) == 0 {
		q.Set("flip", "0.5")
	}
	m.Job = &jobmodel.Job{Counts: w.first(mImg).counts, Seed: seed64, Window: window}
	world := 1 + r.IntN(4)
	bucketStage(t, roundRand(seed^0x7374616765), q, m, world)
	t.Logf("job %s, world %d, on %d nodes", q.Encode(), world, len(ns.urls))
	v := w.first(mImg)
	bucketEdit(t, roundRand(seed^0x65646974), q, m, v, ns.urls, world)
	check := func(epoch uint64, legs [][2]int, world int) []jobmodel.BucketStep {
		t.Helper()
		want, err := m.Steps(epoch, legs, world)
		if err != nil {
			t.Fatal(err)
		}
		jq := cloneValues(q)
		jq.Set("world", strconv.Itoa(world))
		var resume []string
		for _, l := range legs {
			resume = append(resume, fmt.Sprintf("%d:%d", l[0], l[1]))
		}
		if len(resume) > 0 {
			jq.Set("resume", strings.Join(resume, ","))
		}
		jq.Set("rank", "0")
		node := ns.urls[r.IntN(len(ns.urls))]
		resp, body := get(t, fmt.Sprintf("%s/epoch/%d?%s", node, epoch, jq.Encode()))
		if len(want) == 0 && len(legs) == 0 {
			// No bucket holds a step's images: the epoch is refused.
			if resp.StatusCode != http.StatusUnprocessableEntity || !strings.Contains(string(body), "has no step") {
				t.Fatalf("/epoch/%d?%s, of no step by the model: %s %s; want 422", epoch, jq.Encode(), resp.Status, body)
			}
			return want
		}
		var info api.EpochInfo
		if resp.StatusCode != http.StatusOK || json.Unmarshal(body, &info) != nil {
			t.Fatalf("/epoch/%d?%s: %s %s", epoch, jq.Encode(), resp.Status, body)
		}
		if info.Batches != len(want) || info.Buckets == nil {
			t.Fatalf("/epoch/%d (legs %v, world %d): %d steps, the model %d", epoch, legs, world, info.Batches, len(want))
		}
		for step, st := range want {
			for rank := range world {
				jq.Set("rank", strconv.Itoa(rank))
				servedStep(t, fmt.Sprintf("%s/epoch/%d/batch/%d?%s", ns.urls[r.IntN(len(ns.urls))], epoch, step, jq.Encode()),
					fmt.Sprintf("epoch %d step %d rank %d (legs %v, world %d)", epoch, step, rank, legs, world), st.Shape, st.Ranks[rank],
					func(key string) (int, bool) { id, ok := v.ids[key]; return id, ok })
			}
		}
		return want
	}
	served := make([][]jobmodel.BucketStep, 2)
	for epoch := range uint64(2) {
		served[epoch] = check(epoch, nil, world)
		// The rest of the epoch after k steps, at another world size;
		// at the same one, the uninterrupted run's steps from k.
		// A staged job's resume point names its global steps from its
		// first, across epochs.
		k := r.IntN(len(served[epoch]) + 1)
		legs := [][2]int{{world, k}}
		if m.Stages != nil {
			for _, steps := range served[:epoch] {
				legs[0][1] += len(steps)
			}
		}
		check(epoch, legs, 1+r.IntN(4))
		if rest := check(epoch, legs, world); !slices.EqualFunc(rest, served[epoch][k:], func(a, b jobmodel.BucketStep) bool {
			return a.Shape == b.Shape && slices.EqualFunc(a.Ranks, b.Ranks, slices.Equal)
		}) {
			t.Fatalf("epoch %d resumed after %d steps at world %d: not the uninterrupted run's steps", epoch, k, world)
		}
	}
	// /plan plans what was served.
	jq := cloneValues(q)
	jq.Set("world", strconv.Itoa(world))
	jq.Set("epochs", "2")
	resp, body := get(t, ns.urls[0]+"/plan?"+jq.Encode())
	if len(served[0]) == 0 {
		if resp.StatusCode != http.StatusUnprocessableEntity {
			t.Fatalf("/plan?%s of an epoch of no step: %s %s; want 422", jq.Encode(), resp.Status, body)
		}
		return
	}
	var plan struct {
		Buckets []api.BucketPlanEpoch `json:"buckets"`
		Epochs  []api.PlanEpoch       `json:"epochs"`
	}
	if resp.StatusCode != http.StatusOK || json.Unmarshal(body, &plan) != nil || len(plan.Epochs) != 2 || len(plan.Buckets) != 2 {
		t.Fatalf("/plan?%s: %s %s", jq.Encode(), resp.Status, body)
	}
	for epoch, steps := range served {
		if plan.Epochs[epoch].Batches != len(steps) || plan.Buckets[epoch].Steps != len(steps) {
			t.Fatalf("/plan of epoch %d: %+v; %d steps served", epoch, plan.Epochs[epoch], len(steps))
		}
		// Each shape's steps (a staged job's over its stages' buckets).
		served, planned := map[string]int{}, map[string]int{}
		for _, st := range steps {
			served[fmt.Sprintf("%dx%d", st.Shape[0], st.Shape[1])]++
		}
		for k, b := range plan.Buckets[epoch].Buckets {
			planned[b.Shape] += b.Batches
			if m.Stages == nil && b.BatchSize != m.Per[k] {
				t.Fatalf("/plan of epoch %d, bucket %s: steps of %d, the model's %d", epoch, b.Shape, b.BatchSize, m.Per[k])
			}
		}
		for sh, n := range served {
			if planned[sh] != n {
				t.Fatalf("/plan of epoch %d, bucket %s: %d steps, served %d", epoch, sh, planned[sh], n)
			}
		}
	}
}

// bucketStage, once in three rounds, stages the bucket job
// (jobmodel.BucketJob.DrawStage), drawing from r, its own source.
func bucketStage(t *testing.T, r *rand.Rand, q url.Values, m *jobmodel.BucketJob, world int) {
	t.Helper()
	if r.IntN(3) > 0 {
		return
	}
	budget, _ := strconv.Atoi(q.Get("budget"))
	b, p, err := m.DrawStage(r, mBucketPool, 24*24, q.Get("buckets"), budget, world)
	if err != nil {
		t.Fatal(err)
	}
	q.Set("buckets", b)
	q.Set("budget", p)
	t.Logf("staged: buckets=%s budget=%s", b, p)
}

// bucketEdit, once in two rounds, names the bucket job and excludes 1 to
// 6 of its samples from a step of epoch 0 or 1 drawn from r (its own
// source, so that the round's other draws are those of a round without
// it), posted to one of the nodes before any step is read: the model
// cuts the epoch's pass there (jobmodel.BucketCut).
func bucketEdit(t *testing.T, r *rand.Rand, q url.Values, m *jobmodel.BucketJob, v *mVersion, nodes []string, world int) {
	t.Helper()
	if r.IntN(2) == 0 {
		return
	}
	epoch := uint64(r.IntN(2))
	steps0, err := m.Steps(0, nil, world)
	if err != nil {
		t.Fatal(err)
	}
	steps, err := m.Steps(epoch, nil, world)
	if err != nil {
		t.Fatal(err)
	}
	if len(steps) == 0 {
		return // no step to count from: the round's epochs are refused (422)
	}
	cut := r.IntN(len(steps))
	from := cut
	if epoch == 1 {
		from += len(steps0)
	}
	var ids []int
	var keys []string
	for range 1 + r.IntN(6) {
		if id := r.IntN(len(v.keys)); !slices.Contains(ids, id) {
			ids, keys = append(ids, id), append(keys, v.keys[id])
		}
	}
	q.Set("job", fmt.Sprintf("gen%d", r.Uint32()))
	jq := cloneValues(q)
	jq.Set("world", strconv.Itoa(world))
	body, _ := json.Marshal(map[string]any{"from_step": from, "keys": keys})
	node := nodes[r.IntN(len(nodes))]
	resp, answer := do(t, http.MethodPost, node+"/jobs/"+q.Get("job")+"/exclude?"+jq.Encode(), body, "Content-Type", "application/json")
	var x api.StoredExclusion
	if resp.StatusCode != http.StatusCreated || json.Unmarshal(answer, &x) != nil || x.Epoch != epoch || x.PassStep == nil || *x.PassStep != cut {
		t.Fatalf("an exclusion of %v from step %d (step %d of epoch %d): %s %s", ids, from, cut, epoch, resp.Status, answer)
	}
	t.Logf("excluded %v from step %d: step %d of epoch %d", ids, from, cut, epoch)
	m.Cuts = append(m.Cuts, jobmodel.BucketCut{Epoch: epoch, Step: cut, Drop: ids})
}

// servedStep GETs a rank's batch of a bucket job's step (u) and holds it
// to the model's: its bucket's shape (Brand-Transform) and its samples,
// each key's ID by id.
func servedStep(t *testing.T, u, what string, shape [2]int, want []int, id func(key string) (int, bool)) {
	t.Helper()
	resp, body := get(t, u)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("%s: %s %s", what, resp.Status, body)
	}
	name := fmt.Sprintf("bucket:%dx%d", shape[0], shape[1])
	if got := resp.Header.Get(api.HeaderTransform); got != name && !strings.HasPrefix(got, name+":") {
		t.Fatalf("%s: %s, the model's %s", what, got, name)
	}
	var ids []int
	for _, s := range readTar(t, body) {
		i, ok := id(s.key)
		if !ok {
			t.Fatalf("%s: sample %s is not the model's dataset's", what, s.key)
		}
		ids = append(ids, i)
	}
	if !slices.Equal(ids, want) {
		t.Fatalf("%s: samples %v, the model's %v", what, ids, want)
	}
}

func cloneValues(v url.Values) url.Values {
	out := url.Values{}
	for k, x := range v {
		out[k] = slices.Clone(x)
	}
	return out
}
