package gateway_test

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/brandgw/brand/api"
	"github.com/brandgw/brand/internal/testsupport/jobmodel"
)

// bucketMixRound is a round of a bucketed mixture of mImg and mImg2, each
// source its own list of buckets from the pool, at weights of 1 to 4, on
// one gateway or a cluster of three, held to jobmodel.BucketMixture:
// every step's source and bucket and every rank's samples, /epoch/N's
// steps, over two epochs; and the rest of each epoch resumed after a
// random number of global steps, at the world the job ran at (the
// uninterrupted run's steps) and at another.
func bucketMixRound(t *testing.T, seed uint64) {
	r := roundRand(seed)
	w := newMWorld(t, r)
	names := []string{mImg, mImg2}
	sizes := [][][2]int{w.withBucketsAs(t, r, mImg), w.withBucketsAs(t, r, mImg2)}
	ns := startMNodes(t, w, []int{1, 3}[r.IntN(2)])
	seed64 := r.Uint64() >> 1
	window := 1 + r.IntN(4)
	world := 1 + r.IntN(3)
	m := &jobmodel.BucketMixture{Seed: seed64, Window: window}
	var lists, mix []string
	budget := 24 * 24 * (1 + r.IntN(3))
	for i, name := range names {
		pool := slices.Clone(mBucketPool)
		r.Shuffle(len(pool), func(i, j int) { pool[i], pool[j] = pool[j], pool[i] })
		shapes := pool[:2+r.IntN(len(pool)-1)]
		src := &jobmodel.BucketJob{Job: &jobmodel.Job{Counts: w.first(name).counts, Seed: seed64}, Shapes: shapes, Sizes: sizes[i], MaxUpscale: 2}
		var ss []string
		for _, s := range shapes {
			ss = append(ss, fmt.Sprintf("%dx%d", s[0], s[1]))
			src.Per = append(src.Per, budget/(s[0]*s[1]))
		}
		weight := uint64(1 + r.IntN(4))
		m.Sources, m.Weights = append(m.Sources, src), append(m.Weights, weight)
		lists = append(lists, name+":"+strings.Join(ss, ","))
		mix = append(mix, fmt.Sprintf("%s:%d", name, weight))
	}
	q := url.Values{}
	q.Set("mix", strings.Join(mix, ","))
	q.Set("buckets", strings.Join(lists, ";"))
	q.Set("budget", strconv.Itoa(budget))
	bucketMixStage(t, roundRand(seed^0x7374616765), q, m, lists, budget, world)
	bucketMixSchedule(t, roundRand(seed^0x7363686564), q, m, names, world)
	q.Set("seed", strconv.FormatUint(seed64, 10))
	q.Set("window", strconv.Itoa(window))
	t.Logf("job %s, world %d, on %d nodes", q.Encode(), world, len(ns.urls))
	// A source whose pass holds no step at the job's world is not a
	// round this model plays: every step of the mixture is some
	// source's step.
	for i := range m.Sources {
		steps, err := m.Source(i).Steps(0, nil, world)
		if err != nil {
			t.Fatal(err)
		}
		if len(steps) == 0 {
			t.Logf("source %s has no step at world %d: the mixture is refused", names[i], world)
			jq := cloneValues(q)
			jq.Set("world", strconv.Itoa(world))
			if resp, body := get(t, ns.urls[0]+"/epoch/0?"+jq.Encode()); resp.StatusCode < 400 {
				t.Fatalf("/epoch/0 of a bucketed mixture whose source %s has no step: %s %s", names[i], resp.Status, body)
			}
			return
		}
	}
	check := func(epoch uint64, legs [][2]int, world int) []jobmodel.MixStep {
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
		resp, body := get(t, fmt.Sprintf("%s/epoch/%d?%s", ns.urls[r.IntN(len(ns.urls))], epoch, jq.Encode()))
		noStep := slices.ContainsFunc(want, func(st jobmodel.MixStep) bool { return st.NoStep })
		var info api.EpochInfo
		switch {
		case noStep:
			// A step drawn from a pass of its source with no step: the
			// epoch is refused, and so is the step (below).
			if resp.StatusCode != http.StatusUnprocessableEntity || !strings.Contains(string(body), "has no step") {
				t.Fatalf("/epoch/%d?%s, drawing from a pass with no step: %s %s; want 422", epoch, jq.Encode(), resp.Status, body)
			}
			info.Batches = len(want)
		case resp.StatusCode != http.StatusOK || json.Unmarshal(body, &info) != nil:
			t.Fatalf("/epoch/%d?%s: %s %s", epoch, jq.Encode(), resp.Status, body)
		}
		if info.Batches != len(want) {
			t.Fatalf("/epoch/%d (legs %v, world %d): %d steps, the model %d", epoch, legs, world, info.Batches, len(want))
		}
		for step, st := range want {
			for rank := range world {
				jq.Set("rank", strconv.Itoa(rank))
				u := fmt.Sprintf("%s/epoch/%d/batch/%d?%s", ns.urls[r.IntN(len(ns.urls))], epoch, step, jq.Encode())
				what := fmt.Sprintf("epoch %d step %d rank %d (legs %v, world %d), of %s", epoch, step, rank, legs, world, names[st.Source])
				if st.NoStep {
					// Drawn from a pass of its source with no step.
					if resp, body := get(t, u); resp.StatusCode != http.StatusUnprocessableEntity || !strings.Contains(string(body), "of dataset "+names[st.Source]+" has no step") {
						t.Fatalf("%s, a pass with no step: %s %s; want 422", what, resp.Status, body)
					}
					continue
				}
				v := w.first(names[st.Source])
				servedStep(t, u, what, st.Shape, st.Ranks[rank], func(key string) (int, bool) {
					id, ok := v.ids[key]
					return id, ok && strings.HasPrefix(key, names[st.Source]+"/")
				})
			}
		}
		return want
	}
	var served [][]jobmodel.MixStep
	before := 0 // the global steps of the epochs before
	for epoch := range uint64(2) {
		served = append(served, check(epoch, nil, world))
		t.Logf("epoch %d: %d steps", epoch, len(served[epoch]))
		// The rest of the epoch after k of its steps: its resume point
		// the job's global steps from its first.
		k := r.IntN(len(served[epoch]) + 1)
		legs := [][2]int{{world, before + k}}
		check(epoch, legs, 1+r.IntN(3))
		if rest := check(epoch, legs, world); !slices.EqualFunc(rest, served[epoch][k:], func(a, b jobmodel.MixStep) bool {
			return a.Source == b.Source && a.NoStep == b.NoStep && a.Shape == b.Shape && slices.EqualFunc(a.Ranks, b.Ranks, slices.Equal)
		}) {
			t.Fatalf("epoch %d resumed after %d steps at world %d: not the uninterrupted run's steps", epoch, k, world)
		}
		before += len(served[epoch])
	}
}

// bucketMixStage, once in three rounds, stages the bucketed mixture
// (jobmodel.BucketMixture.DrawStage), drawing from r, its own source.
func bucketMixStage(t *testing.T, r *rand.Rand, q url.Values, m *jobmodel.BucketMixture, lists []string, budget, world int) {
	t.Helper()
	if r.IntN(3) > 0 {
		return
	}
	b, p, err := m.DrawStage(r, mBucketPool, 24*24, lists, budget, world)
	if err != nil {
		t.Fatal(err)
	}
	q.Set("buckets", b)
	q.Set("budget", p)
	t.Logf("staged: buckets=%s budget=%s", b, p)
}

// bucketMixSchedule, once in three rounds, gives the bucketed mixture a
// schedule of weights in place of mix= (jobmodel.BucketMixture.
// DrawSchedule), drawing from r, its own source.
func bucketMixSchedule(t *testing.T, r *rand.Rand, q url.Values, m *jobmodel.BucketMixture, names []string, world int) {
	t.Helper()
	if r.IntN(3) > 0 {
		return
	}
	sched, err := m.DrawSchedule(r, names, world)
	if err != nil {
		t.Fatal(err)
	}
	q.Del("mix")
	q.Set("mix_schedule", sched)
	t.Logf("scheduled: mix_schedule=%s", sched)
}
