package planner

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"

	"github.com/brandgw/brand/api"
	"github.com/brandgw/brand/cluster"
	"github.com/brandgw/brand/shuffle"
)

// A mixture small enough to follow by hand. web has chunks A (0) and B (1)
// of two samples each, 100 bytes; code has chunk C (2) of two samples, 10
// bytes. Weights 1:1 with a mixing block of one sample hand the blocks to
// the components in turn, web first (PD²'s tie goes to the lower index),
// and a batch of one sample makes every draw an access of its own. An
// epoch is 6 samples: 3 of web, 3 of code.
//
// With seed 0 and window 1, web's passes order its chunks A B, B A, A B
// (checked below), so web's stream is A A B B | B B A A | A A B B and
// code's is C C | C C | ...: the epochs read web A A B, B B B, A A A.
func TestMixTraceByHand(t *testing.T) {
	web := Dataset{ChunkSizes: []int64{100, 100}, Counts: []int{2, 2}}
	code := Dataset{ChunkSizes: []int64{10}, Counts: []int{2}}
	mix := Mix{Components: []MixComponent{{Name: "web", Weight: 1, Dataset: web}, {Name: "code", Weight: 1, Dataset: code}}, Block: 1}
	job := Job{Params: shuffle.Params{Seed: 0, Window: 1, BatchSize: 1, World: 1}, Epochs: 3}
	for pass, want := range [][]int{{0, 1}, {1, 0}, {0, 1}} {
		ep, err := shuffle.NewEpoch(web.Counts, 0, uint64(pass), 1)
		if err != nil {
			t.Fatal(err)
		}
		if got := ep.ChunkOrder(); !slices.Equal(got, want) {
			t.Fatalf("web's pass %d orders its chunks %v; this test assumes %v", pass, got, want)
		}
	}
	const A, B, C = 0, 1, 2
	var want []Access
	for e, chunks := range [][]int32{{A, C, A, C, B, C}, {B, C, B, C, B, C}, {A, C, A, C, A, C}} {
		for _, c := range chunks {
			want = append(want, Access{Chunk: c, Epoch: int32(e), Start: true})
		}
	}
	got, err := mixTrace(mix, job)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got, want) {
		t.Fatalf("trace\n%v\nwant\n%v", got, want)
	}

	// A cache of 200 bytes holds A and B, or one of them with C. Both
	// policies: epoch 0 reads A and C, hits them, reads B evicting A (LRU:
	// C was used last; optimal: A is next needed in epoch 2, C at once):
	// 210 bytes. Epoch 1 hits B and C throughout. Epoch 2 reads A evicting
	// B (LRU: used before C; optimal: never used again): 100 bytes.
	p, err := MakePlan(context.Background(), PlanInput{Mix: &mix, Job: job, CacheBytes: 200, BackendBytesPerSec: 1})
	if err != nil {
		t.Fatal(err)
	}
	type fig struct {
		hits  int
		bytes int64
	}
	wantEpochs := []fig{{3, 210}, {6, 0}, {5, 100}}
	wantWeb := []fig{{1, 200}, {3, 0}, {2, 100}}
	wantCode := []fig{{2, 10}, {3, 0}, {3, 0}}
	for _, r := range []Result{p.LRU, p.Optimal} {
		if len(r.Components) != 2 {
			t.Fatalf("%v: %d components' figures, want 2", r.Policy, len(r.Components))
		}
		for e := range 3 {
			for _, c := range []struct {
				name string
				got  EpochResult
				want fig
			}{{"all", r.Epochs[e], wantEpochs[e]}, {"web", r.Components[0].Epochs[e], wantWeb[e]}, {"code", r.Components[1].Epochs[e], wantCode[e]}} {
				if c.got.Epoch != e || c.got.Hits != c.want.hits || c.got.BackendBytes != c.want.bytes {
					t.Errorf("%v, %s, epoch %d: %+v; want %d hits, %d bytes", r.Policy, c.name, e, c.got, c.want.hits, c.want.bytes)
				}
			}
		}
	}
	if p.Mix.Components[0].FirstPass != 0 || p.Mix.Components[0].LastPass != 2 || p.Mix.Components[1].LastPass != 4 {
		t.Errorf("passes %+v", p.Mix.Components)
	}
	if p.Samples != 6 || p.Chunks != 3 || p.DatasetBytes != 210 || p.EpochBytes != 3*200/4+3*10/2 {
		t.Errorf("shape: %d samples, %d chunks, %d bytes, %d an epoch", p.Samples, p.Chunks, p.DatasetBytes, p.EpochBytes)
	}
}

// mixDatasetOf is a dataset of chunks chunks with sizes and counts drawn
// from r, a chunk with no samples among them now and then.
func mixDatasetOf(r *rand.Rand, chunks int, size int64) Dataset {
	d := Dataset{}
	for range chunks {
		d.ChunkSizes = append(d.ChunkSizes, size+r.Int64N(size))
		d.Counts = append(d.Counts, r.IntN(9))
	}
	d.Counts[r.IntN(chunks)] += 1 + r.IntN(5)
	return d
}

// randomMix is a mixture of 1 to 4 components and a job over it, drawn
// from r: sizes, weights, blocks, lengths, windows and cuts vary, the first
// epoch is not always 0, drop_last is on now and then.
func randomMix(r *rand.Rand) (Mix, Job) {
	m := Mix{}
	for i := range 1 + r.IntN(4) {
		m.Components = append(m.Components, MixComponent{Name: fmt.Sprint("d", i), Weight: 1 + r.Uint64N(5),
			Dataset: mixDatasetOf(r, 1+r.IntN(12), 100*int64(1+i)), IndexKey: r.Uint64()})
	}
	if r.IntN(2) == 0 {
		m.Block = 1 + r.IntN(20)
	}
	if r.IntN(3) == 0 {
		m.Samples = 1 + r.IntN(150)
	}
	j := Job{Params: shuffle.Params{Seed: r.Uint64(), Window: 1 + r.IntN(5), BatchSize: 1 + r.IntN(7), World: 1 + r.IntN(3),
		DropLast: r.IntN(4) == 0}, FirstEpoch: r.IntN(4), Epochs: 2 + r.IntN(2)}
	return m, j
}

// referenceMixTrace computes MixTrace the slow way: each epoch's draws
// from shuffle.Mixture, each draw's sample from its pass's order computed
// afresh (order), its chunk by a scan of its dataset's counts, and each
// global batch's distinct chunks in order of first use.
func referenceMixTrace(t *testing.T, m Mix, j Job, order func(i int, pass uint64) *shuffle.Epoch) []Access {
	t.Helper()
	mo := referenceMixture(t, m, j)
	first := []int{0}
	for _, c := range m.Components {
		first = append(first, first[len(first)-1]+len(c.Dataset.Counts))
	}
	n, g := mo.NumSamples(), j.BatchSize*j.World
	var tr []Access
	for e := j.FirstEpoch; e < j.FirstEpoch+j.Epochs; e++ {
		draws := mo.AppendRange(nil, j.Seed, uint64(e), 0, n)
		for b := range shuffle.NumBatches(n, j.BatchSize, j.World, j.DropLast) {
			seen := map[int32]bool{}
			for _, d := range draws[b*g : min((b+1)*g, n)] {
				id := order(d.Component, d.Pass).AppendRange(nil, d.Index, d.Index+1)[0]
				c, at := 0, 0
				for k := range m.Components[d.Component].Dataset.Counts {
					if id < at+m.Components[d.Component].Dataset.Counts[k] {
						c = k
						break
					}
					at += m.Components[d.Component].Dataset.Counts[k]
				}
				chunk := int32(first[d.Component] + c)
				if !seen[chunk] {
					tr = append(tr, Access{Chunk: chunk, Epoch: int32(e), Start: len(seen) == 0})
					seen[chunk] = true
				}
			}
		}
	}
	return tr
}

func referenceMixture(t *testing.T, m Mix, j Job) *shuffle.Mixture {
	t.Helper()
	var weights []uint64
	var sizes []int
	for _, c := range m.Components {
		n := 0
		for _, k := range c.Dataset.Counts {
			n += k
		}
		weights, sizes = append(weights, c.Weight), append(sizes, n)
	}
	block := m.Block
	if block == 0 {
		block = j.BatchSize * j.World
	}
	mo, err := shuffle.NewMixture(weights, sizes, block, m.Samples)
	if err != nil {
		t.Fatal(err)
	}
	return mo
}

// compWindow is component i's window for a job's window w, from the
// spec (docs/shuffle.md §11.4): ceil(w·a_i/A), at least 1.
func compWindow(m Mix, i, w int) int {
	var sum uint64
	for _, c := range m.Components {
		sum += c.Weight
	}
	return max(1, int((uint64(w)*m.Components[i].Weight+sum-1)/sum))
}

// plainOrder is the single gateway's pass order of m's components.
func plainOrder(t *testing.T, m Mix, j Job) func(i int, pass uint64) *shuffle.Epoch {
	return func(i int, pass uint64) *shuffle.Epoch {
		ep, err := shuffle.NewEpoch(m.Components[i].Dataset.Counts, j.Seed, pass, compWindow(m, i, j.Window))
		if err != nil {
			t.Fatal(err)
		}
		return ep
	}
}

func mergedSizes(m Mix) []int64 {
	var sizes []int64
	for _, c := range m.Components {
		sizes = append(sizes, c.Dataset.ChunkSizes...)
	}
	return sizes
}

func TestMixTraceMatchesReference(t *testing.T) {
	r := rand.New(rand.NewPCG(11, 12))
	for trial := range 150 {
		m, j := randomMix(r)
		got, err := mixTrace(m, j)
		if err != nil {
			t.Fatalf("trial %d: %v", trial, err)
		}
		want := referenceMixTrace(t, m, j, plainOrder(t, m, j))
		if !slices.Equal(got, want) {
			t.Fatalf("trial %d (%+v, %+v): trace\n%v\nwant\n%v", trial, m, j, got, want)
		}
	}
}

// referenceSim replays a batched trace naively, every batch fitting the
// cache: a batch's resident chunks hit and are pinned, each other is read
// and admitted after evicting unpinned chunks (LRU: the one released
// longest ago; Belady: the one whose next use after the batch comes last,
// found by scanning the trace), and the batch's chunks are released in
// order of use. It returns per component per epoch the hits and backend
// bytes. Belady's ties (chunks never used again) go to the first found, not
// the heap's order, so callers compare it only with equal chunk sizes,
// where the tie does not matter.
func referenceSim(trace []Access, sizes []int64, first []int, cache int64, p Policy) map[[2]int]EpochResult {
	compOf := func(c int32) int {
		i := 0
		for int(c) >= first[i+1] {
			i++
		}
		return i
	}
	out := map[[2]int]EpochResult{}
	resident := map[int32]bool{}
	released := map[int32]int{}
	var used int64
	clock := 0
	for i := 0; i < len(trace); {
		j := i + 1
		for j < len(trace) && !trace[j].Start {
			j++
		}
		pinned := map[int32]bool{}
		for _, a := range trace[i:j] {
			if resident[a.Chunk] {
				pinned[a.Chunk] = true
				k := [2]int{compOf(a.Chunk), int(a.Epoch)}
				e := out[k]
				e.Hits++
				e.Accesses++
				out[k] = e
			}
		}
		nextUse := func(c int32) int {
			for x := j; x < len(trace); x++ {
				if trace[x].Chunk == c {
					return x
				}
			}
			return math.MaxInt
		}
		for _, a := range trace[i:j] {
			if pinned[a.Chunk] {
				continue
			}
			k := [2]int{compOf(a.Chunk), int(a.Epoch)}
			e := out[k]
			e.Accesses++
			e.BackendBytes += sizes[a.Chunk]
			out[k] = e
			for used+sizes[a.Chunk] > cache {
				victim, best := int32(-1), 0
				for c := range resident {
					if pinned[c] {
						continue
					}
					var key int
					if p == LRU {
						key = -released[c]
					} else {
						key = nextUse(c)
					}
					if victim < 0 || key > best || key == best && c < victim {
						victim, best = c, key
					}
				}
				if victim < 0 {
					break
				}
				delete(resident, victim)
				used -= sizes[victim]
			}
			if used+sizes[a.Chunk] <= cache {
				resident[a.Chunk], pinned[a.Chunk] = true, true
				used += sizes[a.Chunk]
			}
		}
		for _, a := range trace[i:j] {
			if pinned[a.Chunk] {
				clock++
				released[a.Chunk] = clock
			}
		}
		i = j
	}
	return out
}

// A mixture's plan simulates its trace: LRU's and the optimum's figures are
// Simulate's over the reference trace, and per component they are a naive
// replay's (LRU with the components' unequal sizes, Belady with equal
// ones), summing to the totals.
func TestMixPlanMatchesReferenceSimulation(t *testing.T) {
	r := rand.New(rand.NewPCG(21, 22))
	for trial := range 60 {
		m, j := randomMix(r)
		if shuffle.NumBatches(referenceMixture(t, m, j).NumSamples(), j.BatchSize, j.World, j.DropLast) == 0 {
			continue // drop_last and no batch
		}
		if trial%2 == 1 {
			for i := range m.Components {
				d := m.Components[i].Dataset
				d.ChunkSizes = equalSizes(len(d.ChunkSizes), 100)
				m.Components[i].Dataset = d
			}
		}
		trace := referenceMixTrace(t, m, j, plainOrder(t, m, j))
		sizes := mergedSizes(m)
		var largest int64 // the largest batch's bytes
		for i := 0; i < len(trace); {
			var b int64
			k := i
			for ; k < len(trace) && (k == i || !trace[k].Start); k++ {
				b += sizes[trace[k].Chunk]
			}
			largest, i = max(largest, b), k
		}
		first := []int{0}
		for _, c := range m.Components {
			first = append(first, first[len(first)-1]+len(c.Dataset.Counts))
		}
		for _, cache := range []int64{largest, largest + 150, 3 * largest, 1 << 40} {
			p, err := MakePlan(context.Background(), PlanInput{Mix: &m, Job: j, CacheBytes: cache, BackendBytesPerSec: 1})
			if err != nil {
				t.Fatalf("trial %d: %v", trial, err)
			}
			for _, pol := range []Policy{LRU, Belady} {
				got := p.LRU
				if pol == Belady {
					got = p.Optimal
				}
				want := Simulate(trace, sizes, cache, pol)
				sim := got
				sim.Components = nil
				if !reflect.DeepEqual(sim, want) {
					t.Fatalf("trial %d, cache %d, %v: %+v\nSimulate of the reference trace: %+v", trial, cache, pol, sim, want)
				}
				ref := referenceSim(trace, sizes, first, cache, pol)
				checkRef := pol == LRU || trial%2 == 1
				for e, total := range got.Epochs {
					var sum EpochResult
					for i, cr := range got.Components {
						ce := cr.Epochs[e]
						if checkRef {
							w := ref[[2]int{i, ce.Epoch}]
							if ce.Hits != w.Hits || ce.Accesses != w.Accesses || ce.BackendBytes != w.BackendBytes {
								t.Fatalf("trial %d, cache %d, %v: component %d epoch %d: %+v; naive replay %+v", trial, cache, pol, i, ce.Epoch, ce, w)
							}
						}
						sum.Hits += ce.Hits
						sum.Accesses += ce.Accesses
						sum.BackendBytes += ce.BackendBytes
					}
					if sum.Hits != total.Hits || sum.Accesses != total.Accesses || sum.BackendBytes != total.BackendBytes {
						t.Fatalf("trial %d, %v, epoch %d: components sum to %+v, total %+v", trial, pol, total.Epoch, sum, total)
					}
				}
			}
		}
	}
}

// referenceMixWorkingSet is the working set by its definition, batch by
// batch: per component, the windows (numbered across its passes) from the
// first its draws in the batch touch through prefetch past the last, or
// the window of its latest draw; the bytes of the distinct chunks with
// samples in all of them.
func referenceMixWorkingSet(t *testing.T, m Mix, j Job, prefetch int) int64 {
	mo := referenceMixture(t, m, j)
	order := plainOrder(t, m, j)
	k := len(m.Components)
	pass0 := make([]uint64, k)
	nw := make([]int, k)
	for i := range k {
		pass0[i] = mo.Start(i, uint64(j.FirstEpoch)).Pass // its count in the global blocks before the epoch
		nw[i] = (len(m.Components[i].Dataset.Counts) + compWindow(m, i, j.Window) - 1) / compWindow(m, i, j.Window)
	}
	last := make([]int, k)
	for i := range last {
		last[i] = -1
	}
	n, g := mo.NumSamples(), j.BatchSize*j.World
	var most int64
	for e := j.FirstEpoch; e < j.FirstEpoch+j.Epochs; e++ {
		draws := mo.AppendRange(nil, j.Seed, uint64(e), 0, n)
		for b := range shuffle.NumBatches(n, j.BatchSize, j.World, j.DropLast) {
			lo, hi := make([]int, k), make([]int, k)
			for i := range k {
				lo[i], hi[i] = math.MaxInt, -1
			}
			for _, d := range draws[b*g : min((b+1)*g, n)] {
				w := int(d.Pass-pass0[d.Component])*nw[d.Component] + order(d.Component, d.Pass).WindowOf(d.Index)
				lo[d.Component], hi[d.Component] = min(lo[d.Component], w), max(hi[d.Component], w)
			}
			chunks := map[[2]int]int64{}
			for i := range k {
				if hi[i] < 0 {
					lo[i], hi[i] = last[i], last[i]
				}
				if hi[i] < 0 {
					continue
				}
				last[i] = hi[i]
				for w := lo[i]; w <= hi[i]+min(prefetch, nw[i]); w++ {
					ep := order(i, pass0[i]+uint64(w/nw[i]))
					for _, c := range ep.WindowChunks(w % nw[i]) {
						if d := m.Components[i].Dataset; d.Counts[c] > 0 {
							chunks[[2]int{i, c}] = d.ChunkSizes[c]
						}
					}
				}
			}
			var bytes int64
			for _, size := range chunks {
				bytes += size
			}
			most = max(most, bytes)
		}
	}
	return most
}

func TestMixWorkingSet(t *testing.T) {
	r := rand.New(rand.NewPCG(31, 32))
	for trial := range 100 {
		m, j := randomMix(r)
		prefetch := 1 + r.IntN(3)
		if shuffle.NumBatches(referenceMixture(t, m, j).NumSamples(), j.BatchSize, j.World, j.DropLast) == 0 {
			continue // drop_last and no batch
		}
		p, err := MakePlan(context.Background(), PlanInput{Mix: &m, Job: j, CacheBytes: 1000, BackendBytesPerSec: 1, PrefetchWindows: prefetch})
		if err != nil {
			t.Fatalf("trial %d: %v", trial, err)
		}
		if want := referenceMixWorkingSet(t, m, j, prefetch); p.WorkingSetBytes != want {
			t.Fatalf("trial %d (%+v, %+v, prefetch %d): working set %d, want %d", trial, m, j, prefetch, p.WorkingSetBytes, want)
		}
	}
}

// A mixture of one dataset whose passes are the epochs (its samples a
// multiple of the block) is the dataset's plan: every figure agrees, the
// disk's included, with a mixture's report beside them.
func TestMixOfOneIsMakePlan(t *testing.T) {
	for _, tt := range []struct {
		name  string
		in    PlanInput
		block int
	}{
		{"golden input", goldenInput(), 16},
		{"uneven, drop_last", PlanInput{Dataset: unevenDataset(),
			Job:        Job{Params: shuffle.Params{Seed: 3, Window: 3, BatchSize: 7, World: 3, DropLast: true}, FirstEpoch: 2, Epochs: 3},
			CacheBytes: 9000, DiskCacheBytes: 12000, BackendBytesPerSec: 1, ConsumeBytesPerSec: 2, PrefetchWindows: 2}, 1},
		{"cache below one chunk", PlanInput{Dataset: equalDataset(20, 10, 100),
			Job:        Job{Params: shuffle.Params{Seed: 5, Window: 2, BatchSize: 4, World: 4}, Epochs: 2},
			CacheBytes: 50, BackendBytesPerSec: 1}, 8},
	} {
		t.Run(tt.name, func(t *testing.T) {
			want := mustPlan(t, tt.in)
			in := tt.in
			in.Mix = &Mix{Components: []MixComponent{{Name: "only", Weight: 3, Dataset: in.Dataset}}, Block: tt.block}
			in.Dataset = Dataset{}
			got := mustPlan(t, in)
			if got.Mix == nil || len(got.LRU.Components) != 1 || got.Optimal.Components[0].BackendBytes != got.Optimal.BackendBytes {
				t.Fatalf("mixture figures: %+v, %+v", got.Mix, got.Optimal.Components)
			}
			got.Mix, got.LRU.Components, got.Optimal.Components = nil, nil, nil
			if !reflect.DeepEqual(got, want) {
				t.Errorf("the mixture of one\n%+v\nthe dataset's plan\n%+v", got, want)
			}

			cl := ClusterInput{Dataset: tt.in.Dataset, Job: tt.in.Job, IndexKey: 42, Nodes: 3, NodeCacheBytes: tt.in.CacheBytes}
			wantCl := mustClusterPlan(t, cl)
			cl.Mix = &Mix{Components: []MixComponent{{Name: "only", Weight: 1, Dataset: cl.Dataset, IndexKey: 42}}, Block: tt.block}
			cl.Dataset, cl.IndexKey = Dataset{}, 0
			gotCl := mustClusterPlan(t, cl)
			gotCl.Mix = nil
			if !reflect.DeepEqual(gotCl, wantCl) {
				t.Errorf("the mixture of one on 3 nodes\n%+v\nthe dataset's\n%+v", gotCl, wantCl)
			}
		})
	}
}

// A cluster's prediction for a mixture: with one node it is the single
// gateway's optimum; with more, each component's passes are stratified by
// its own index's owners, so the nodes' accesses together are the
// reference trace over those orders, and with locality the bytes that
// cross nodes are the balancing bytes.
func TestMixClusterPlan(t *testing.T) {
	r := rand.New(rand.NewPCG(41, 42))
	for trial := range 40 {
		m, j := randomMix(r)
		j.DropLast = false
		single, err := MakePlan(context.Background(), PlanInput{Mix: &m, Job: j, CacheBytes: 700, BackendBytesPerSec: 1})
		if err != nil {
			t.Fatalf("trial %d: %v", trial, err)
		}
		one := mustClusterPlan(t, ClusterInput{Mix: &m, Job: j, Nodes: 1, NodeCacheBytes: 700})
		for i, e := range one.Epochs {
			w := single.Optimal.Epochs[i]
			if e.StoreBytes != w.BackendBytes || e.Accesses != w.Accesses || e.Hits != w.Hits {
				t.Fatalf("trial %d epoch %d: one node %+v; the plan's optimum %+v", trial, e.Epoch, e, w)
			}
		}
		if one.Locality != single.Quality || !reflect.DeepEqual(one.Mix, single.Mix) || one.EpochBytes != single.EpochBytes {
			t.Fatalf("trial %d: one node's quality %+v, mix %+v; the plan's %+v, %+v", trial, one.Locality, one.Mix, single.Quality, single.Mix)
		}

		nodes := 2 + r.IntN(3)
		j.World = nodes * (1 + r.IntN(2))
		p := mustClusterPlan(t, ClusterInput{Mix: &m, Job: j, Nodes: nodes, NodeCacheBytes: 400})
		owners := make([][]int, len(m.Components))
		for i, c := range m.Components {
			owners[i] = cluster.BoundedOwners(c.IndexKey, c.Dataset.Counts, cluster.Positions(nodes))
		}
		trace := referenceMixTrace(t, m, j, func(i int, pass uint64) *shuffle.Epoch {
			ep, err := shuffle.NewEpoch(m.Components[i].Dataset.Counts, j.Seed, pass, compWindow(m, i, j.Window))
			if err != nil {
				t.Fatal(err)
			}
			return ep
		})
		accesses := 0
		for _, e := range p.Epochs {
			accesses += e.Accesses
			if e.CrossNodeBytes != e.BalancingBytes {
				t.Errorf("trial %d epoch %d: cross-node %d, balancing %d", trial, e.Epoch, e.CrossNodeBytes, e.BalancingBytes)
			}
		}
		if accesses != len(trace) {
			t.Fatalf("trial %d: the nodes access chunks %d times; the stratified reference trace has %d accesses", trial, accesses, len(trace))
		}
	}
}

func TestMixPlanInvalid(t *testing.T) {
	d := equalDataset(4, 5, 100)
	good := func() PlanInput {
		return PlanInput{Mix: &Mix{Components: []MixComponent{{Name: "a", Weight: 1, Dataset: d}, {Name: "b", Weight: 2, Dataset: d}}},
			Job: Job{Params: shuffle.Params{Window: 2, BatchSize: 4, World: 1}, Epochs: 2}, CacheBytes: 100, BackendBytesPerSec: 1}
	}
	mustPlan(t, good())
	for _, tt := range []struct {
		name   string
		mutate func(*PlanInput)
	}{
		{"no components", func(in *PlanInput) { in.Mix.Components = nil }},
		{"a dataset besides", func(in *PlanInput) { in.Dataset = d }},
		{"importance", func(in *PlanInput) { in.Importance = &Importance{} }},
		{"zero weight", func(in *PlanInput) { in.Mix.Components[1].Weight = 0 }},
		{"no name", func(in *PlanInput) { in.Mix.Components[0].Name = "" }},
		{"empty dataset", func(in *PlanInput) { in.Mix.Components[1].Dataset = Dataset{} }},
		{"negative block", func(in *PlanInput) { in.Mix.Block = -1 }},
		{"block too large", func(in *PlanInput) { in.Mix.Block = shuffle.MaxMixBlock + 1 }},
		{"negative length", func(in *PlanInput) { in.Mix.Samples = -1 }},
		{"one epoch", func(in *PlanInput) { in.Job.Epochs = 1 }},
		{"passes past 2^31", func(in *PlanInput) { in.Job.FirstEpoch = math.MaxInt32 - 2 }},
	} {
		t.Run(tt.name, func(t *testing.T) {
			in := good()
			m := *in.Mix
			m.Components = slices.Clone(m.Components)
			in.Mix = &m
			tt.mutate(&in)
			if _, err := MakePlan(context.Background(), in); !errors.Is(err, ErrInvalid) {
				t.Errorf("MakePlan: %v, want ErrInvalid", err)
			}
		})
	}
	if _, err := MakeClusterPlan(context.Background(), ClusterInput{Mix: good().Mix, Dataset: d, Job: good().Job, Nodes: 2}); !errors.Is(err, ErrInvalid) {
		t.Errorf("MakeClusterPlan with a dataset besides: %v, want ErrInvalid", err)
	}
}

func TestMixPlanContextCanceled(t *testing.T) {
	in := mixGoldenInput()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := MakePlan(ctx, in); !errors.Is(err, context.Canceled) {
		t.Errorf("MakePlanContext: %v, want context.Canceled", err)
	}
	if _, err := MakeClusterPlan(ctx, ClusterInput{Mix: in.Mix, Job: in.Job, Nodes: 2, NodeCacheBytes: 1 << 30}); !errors.Is(err, context.Canceled) {
		t.Errorf("MakeClusterPlanContext: %v, want context.Canceled", err)
	}
}

// mixGoldenInput is the golden plan's job over a mixture: 70 % of a
// dataset like the golden one, 30 % of one of smaller chunks.
func mixGoldenInput() PlanInput {
	in := goldenInput()
	web := Dataset{ChunkSizes: in.Dataset.ChunkSizes[:30], Counts: in.Dataset.Counts[:30]}
	code := Dataset{}
	for c := range 12 {
		code.ChunkSizes = append(code.ChunkSizes, 16<<20+int64(c*104729%1000)*1024)
		code.Counts = append(code.Counts, 40)
	}
	in.Dataset = Dataset{}
	in.Mix = &Mix{Components: []MixComponent{{Name: "web", Weight: 7, Dataset: web, IndexKey: cluster.IndexKey("web")},
		{Name: "code", Weight: 3, Dataset: code, IndexKey: cluster.IndexKey("code")}}}
	return in
}

func TestMixWriteTextGolden(t *testing.T) {
	p := mustPlan(t, mixGoldenInput())
	var b bytes.Buffer
	if err := p.WriteText(&b); err != nil {
		t.Fatal(err)
	}
	checkGolden(t, "plan-mix.txt", b.Bytes())

	js, err := json.MarshalIndent(p, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	checkGolden(t, "plan-mix.json", append(js, '\n'))
	var back Plan
	if err := json.Unmarshal(js, &back); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(&back, p) {
		t.Errorf("JSON round trip changed the plan")
	}

	in := mixGoldenInput()
	in.Job.World = 4
	cp := mustClusterPlan(t, ClusterInput{Mix: in.Mix, Job: in.Job, Nodes: 2, NodeCacheBytes: in.CacheBytes / 2})
	b.Reset()
	if err := cp.WriteText(&b); err != nil {
		t.Fatal(err)
	}
	checkGolden(t, "cluster-mix.txt", b.Bytes())
}

// ForGateway.MixPlan plans what GET /plan?mix= names: the weights as
// api.Mix reads them, the block from the job, each component's ownership
// from its own index.
func TestForGatewayMixPlan(t *testing.T) {
	web, code := gatewayIndex(t, 24, 10), gatewayIndex(t, 9, 6)
	mix, err := api.ParseMix("web:0.7,code:0.3")
	if err != nil {
		t.Fatal(err)
	}
	job := api.Job{Params: shuffle.Params{Seed: 3, Window: 4, BatchSize: 8, World: 2}, Mix: mix, MixSamples: 200}
	o := api.PlanOptions{CacheBytes: 40 << 10, Epochs: 2, BackendBytesPerSec: 1 << 20}
	want := &Mix{Block: 16, Samples: 200, Components: []MixComponent{
		{Name: "web", Weight: 7, Dataset: DatasetOf(web), IndexKey: cluster.IndexKey(web.ID())},
		{Name: "code", Weight: 3, Dataset: DatasetOf(code), IndexKey: cluster.IndexKey(code.ID())}}}
	got, err := ForGateway{}.MixPlan(context.Background(), []api.PlanDataset{planDataOf(web), planDataOf(code)}, job, o)
	if err != nil {
		t.Fatal(err)
	}
	wantPlan := mustPlan(t, PlanInput{Mix: want, Job: Job{Params: job.Params, Epochs: 2}, CacheBytes: 40 << 10, BackendBytesPerSec: 1 << 20})
	if !reflect.DeepEqual(got, wantPlan) {
		t.Errorf("single gateway: %+v, want %+v", got, wantPlan)
	}
	o.Nodes = 2
	got, err = ForGateway{}.MixPlan(context.Background(), []api.PlanDataset{planDataOf(web), planDataOf(code)}, job, o)
	if err != nil {
		t.Fatal(err)
	}
	wantCl := mustClusterPlan(t, ClusterInput{Mix: want, Job: Job{Params: job.Params, Epochs: 2}, Nodes: 2, NodeCacheBytes: 40 << 10})
	if !reflect.DeepEqual(got, wantCl) {
		t.Errorf("two nodes: %+v, want %+v", got, wantCl)
	}
	if _, err := (ForGateway{}).MixPlan(context.Background(), []api.PlanDataset{planDataOf(web)}, job, o); !errors.Is(err, ErrInvalid) {
		t.Errorf("one index for two components: %v, want ErrInvalid", err)
	}
	job.MixSamples = MaxGatewayMixSamples + 1
	if _, err := (ForGateway{}).MixPlan(context.Background(), []api.PlanDataset{planDataOf(web), planDataOf(code)}, job, o); !errors.Is(err, ErrInvalid) {
		t.Errorf("mix_samples past the bound: %v, want ErrInvalid", err)
	}
}

// BenchmarkMakeMixPlan is BenchmarkMakePlan's dataset cut in two, mixed
// 7:3: the same samples, chunks and epochs, so the two compare.
func BenchmarkMakeMixPlan(b *testing.B) {
	d := benchDataset()
	web := Dataset{ChunkSizes: d.ChunkSizes[:7000], Counts: d.Counts[:7000]}
	code := Dataset{ChunkSizes: d.ChunkSizes[7000:], Counts: d.Counts[7000:]}
	for _, window := range []int{32, 1000} {
		b.Run(fmt.Sprintf("window=%d", window), func(b *testing.B) {
			in := PlanInput{Mix: &Mix{Components: []MixComponent{{Name: "web", Weight: 7, Dataset: web}, {Name: "code", Weight: 3, Dataset: code}}},
				Job: benchJob(window), CacheBytes: 8 << 30, BackendBytesPerSec: 1 << 30, ConsumeBytesPerSec: 2 << 30}
			b.ReportAllocs()
			for b.Loop() {
				if _, err := MakePlan(context.Background(), in); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
