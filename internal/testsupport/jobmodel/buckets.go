package jobmodel

import (
	"fmt"
	"math/big"
	"sort"

	"github.com/brandgw/brand/internal/seeded"
)

// A BucketJob is a bucket job (docs/http-api.md, "Shape buckets") over a
// Job's order: its buckets ([height, width] each, in the order that
// breaks ties), each bucket's batch size a rank, every sample's displayed
// [width, height] (0, 0: no image) and the upscale limit. Written from the
// docs: the bucket rule compared in exact rationals (math/big), the steps
// as earliest deadline first by plain simulation, the ties drawn from
// docs/shuffle.md §2's seeded stream (the one primitive it shares with
// the server, as every order does).
//
// A clip bucket job's (T set) buckets are of T[k] frames each, a
// sample's video of Frames[id] frames (at the job's rate), its clip's
// frames Stride apart.
type BucketJob struct {
	Job        *Job
	Shapes     [][2]int
	Per        []int
	Sizes      [][2]int
	MaxUpscale float64
	T          []int
	Frames     []int
	Stride     int
	// Cuts are the job's exclusions, first first: each leaves its
	// samples out from step Step of epoch Epoch's pass on (counted from
	// the pass's first, its legs' steps among them), and from every
	// later epoch.
	Cuts []BucketCut
	// Stages, if set, are the job's stages (buckets=, budget= of
	// STEP@VALUE|…), the first from step 0: from global step From
	// (counted over the job's whole epochs at the world asked, from its
	// first step) its buckets are Shapes with batch sizes Per. Shapes
	// and Per are then the first stage's.
	Stages []BucketStage
}

// A BucketStage is a stage of a staged bucket job.
type BucketStage struct {
	From   int
	Shapes [][2]int
	Per    []int
}

// A BucketCut is an exclusion of a bucket job (docs/http-api.md, "Edits
// of a bucket job"): from its step on, the pass's samples not yet served
// but Drop are bucketed and stepped afresh.
type BucketCut struct {
	Epoch uint64
	Step  int
	Drop  []int
}

// BucketStep is one global step: its bucket (of its stage's Shapes) and
// each rank's samples.
type BucketStep struct {
	Bucket int
	Shape  [2]int
	Ranks  [][]int
}

// bucketDomain is the tie order's domain (docs/http-api.md).
const bucketDomain = 0x6275636b65740001

// Nearest is the bucket of an image of w×h: the least max(w·H, h·W) /
// min(w·H, h·W), the first of equals.
func (b *BucketJob) Nearest(w, h int) int {
	var best *big.Rat
	at := 0
	for i, s := range b.Shapes {
		x, y := int64(w)*int64(s[0]), int64(h)*int64(s[1])
		d := big.NewRat(max(x, y), min(x, y))
		if best == nil || d.Cmp(best) < 0 {
			best, at = d, i
		}
	}
	return at
}

// NearestClip is the bucket of a clip of a video of w×h and n frames:
// of the buckets whose T frames Stride apart it holds, the least
// max(w·H, h·W) / min(w·H, h·W); of equals the one of most frames, then
// the first; -1 for none.
func (b *BucketJob) NearestClip(w, h, n int) int {
	var best *big.Rat
	at := -1
	for i, s := range b.Shapes {
		if (b.T[i]-1)*b.Stride+1 > n {
			continue
		}
		x, y := int64(w)*int64(s[0]), int64(h)*int64(s[1])
		d := big.NewRat(max(x, y), min(x, y))
		if best == nil || d.Cmp(best) < 0 || d.Cmp(best) == 0 && b.T[i] > b.T[at] {
			best, at = d, i
		}
	}
	return at
}

// Steps are an epoch's steps at world world after the legs taken before
// (each [world, steps]): every bucket's remaining samples cut into global
// batches of Per·world (a last partial one dropped), batch j of m_b due
// by (j+1)·S/m_b and free from j·S/m_b; each step the free batch due
// first, ties by the seeded order. Legs of one world in a row are one
// leg, and a job resumed at the world of its last leg serves the rest of
// that leg's steps: the uninterrupted run's. Where a leg ends, a stage
// starts or a cut of the epoch starts (its samples left out), the
// epoch's samples not yet served are bucketed and stepped afresh, by
// the stage in force; a cut of an earlier epoch leaves its samples out
// of the whole epoch. A staged job's legs are its global steps from its
// first, across epochs: each epoch is laid out at their worlds, and the
// steps after them served.
func (b *BucketJob) Steps(epoch uint64, legs [][2]int, world int) ([]BucketStep, error) {
	var runs []bucketRun
	taken := 0
	for _, l := range legs {
		taken += l[1]
		if k := len(runs); k > 0 && runs[k-1].world == l[0] {
			runs[k-1].steps += l[1]
			continue
		}
		runs = append(runs, bucketRun{l[0], l[1]})
	}
	// The request's run continues a leg at its world.
	if k := len(runs); k > 0 && runs[k-1].world == world {
		runs[k-1].steps = -1
	} else {
		runs = append(runs, bucketRun{world, -1})
	}
	if len(b.Stages) < 2 {
		return b.pass(epoch, 0, runs, taken, true)
	}
	first := 0 // the job's global steps before the epoch
	for e := range epoch {
		steps, err := b.pass(e, first, from(runs, first), 0, false)
		if err != nil {
			return nil, err
		}
		first += len(steps)
	}
	return b.pass(epoch, first, from(runs, first), max(taken-first, 0), false)
}

// A bucketRun is a run of steps at one world (steps -1: to the end).
type bucketRun struct{ world, steps int }

// from is runs from their step k on.
func from(runs []bucketRun, k int) []bucketRun {
	for len(runs) > 1 && runs[0].steps <= k {
		k -= runs[0].steps
		runs = runs[1:]
	}
	out := append([]bucketRun(nil), runs...)
	if out[0].steps > 0 {
		out[0].steps -= k
	}
	return out
}

// pass is epoch's pass laid out at runs from its first step, the job's
// global step first: its steps from step skip on. strict: a run longer
// than the pass is an error (an epoch's legs that take more steps than
// it has).
func (b *BucketJob) pass(epoch uint64, first int, runs []bucketRun, skip int, strict bool) ([]BucketStep, error) {
	order, err := b.Job.Order(epoch)
	if err != nil {
		return nil, err
	}
	taken := map[int]bool{} // served, or left out
	var cuts []BucketCut    // of this epoch
	for _, c := range b.Cuts {
		if c.Epoch < epoch {
			for _, id := range c.Drop {
				taken[id] = true
			}
		} else if c.Epoch == epoch {
			cuts = append(cuts, c)
		}
	}
	stages := b.Stages
	if stages == nil {
		stages = []BucketStage{{From: 0, Shapes: b.Shapes, Per: b.Per}}
	}
	var out []BucketStep
	at := 0 // the pass's step
	for ri, r := range runs {
		left := r.steps
		for left != 0 {
			for _, c := range cuts {
				if c.Step == at { // a cut here: its samples out before the segment
					for _, id := range c.Drop {
						taken[id] = true
					}
				}
			}
			st := stages[0]
			n := left // to the run's end, the next cut or the next stage
			for _, x := range stages {
				if x.From <= first+at {
					st = x
				} else if n < 0 || x.From-first-at < n {
					n = x.From - first - at
					break
				}
			}
			for _, c := range cuts {
				if c.Step > at && (n < 0 || c.Step-at < n) {
					n = c.Step - at
					break
				}
			}
			lists := b.bucketed(order, taken, st.Shapes)
			steps := b.interleave(lists, st.Per, r.world, epoch)
			if n >= 0 && len(steps) > n {
				steps = steps[:n]
			}
			for _, k := range steps {
				step := BucketStep{Bucket: k, Shape: st.Shapes[k]}
				for rank := range r.world {
					step.Ranks = append(step.Ranks, lists[k][rank*st.Per[k]:(rank+1)*st.Per[k]])
				}
				for _, id := range lists[k][:st.Per[k]*r.world] {
					taken[id] = true
				}
				lists[k] = lists[k][st.Per[k]*r.world:]
				if at >= skip {
					out = append(out, step)
				}
				at++
			}
			if left > 0 {
				left -= len(steps)
			}
			if n < 0 || len(steps) < n {
				if left > 0 && strict {
					return nil, fmt.Errorf("leg %d: %d steps, the pass ended %d short", ri, r.steps, left)
				}
				return out, nil
			}
		}
	}
	return out, nil
}

// bucketed is each of shapes' buckets' samples of order not taken, in
// order: each sample in the bucket of nearest aspect ratio if it has an
// image and covers the bucket within the upscale limit (a clip bucket
// job's, its nearest clip bucket).
func (b *BucketJob) bucketed(order []int, taken map[int]bool, shapes [][2]int) [][]int {
	c := *b
	c.Shapes = shapes
	out := make([][]int, len(shapes))
	for _, id := range order {
		w, h := b.Sizes[id][0], b.Sizes[id][1]
		if taken[id] || w <= 0 || h <= 0 {
			continue
		}
		k := 0
		if b.T == nil {
			k = c.Nearest(w, h)
		} else if k = c.NearestClip(w, h, b.Frames[id]); k < 0 {
			continue
		}
		s := shapes[k]
		if float64(s[0])/float64(h) > b.MaxUpscale || float64(s[1])/float64(w) > b.MaxUpscale {
			continue
		}
		out[k] = append(out[k], id)
	}
	return out
}

// interleave is the buckets of the steps of samples (each bucket's) at
// world world, per[k] a rank of bucket k.
func (b *BucketJob) interleave(samples [][]int, per []int, world int, epoch uint64) []int {
	m := make([]int, len(samples))
	total := 0
	for k := range samples {
		m[k] = len(samples[k]) / (per[k] * world)
		total += m[k]
	}
	prio := make([]uint64, len(samples))
	order := make([]int, len(samples))
	for k := range prio {
		prio[k], _ = seeded.Seeds(b.Job.Seed, epoch, bucketDomain, uint64(k))
		order[k] = k
	}
	sort.Slice(order, func(i, j int) bool { return prio[order[i]] < prio[order[j]] })
	done := make([]int, len(samples))
	var out []int
	for t := range total {
		best := -1
		var due *big.Rat
		for _, k := range order { // the tie order: the first of equals
			j := done[k]
			if j == m[k] || big.NewRat(int64(j*total), int64(m[k])).Cmp(big.NewRat(int64(t), 1)) > 0 {
				continue
			}
			d := big.NewRat(int64((j+1)*total), int64(m[k]))
			if best < 0 || d.Cmp(due) < 0 {
				best, due = k, d
			}
		}
		out = append(out, best)
		done[best]++
	}
	return out
}
