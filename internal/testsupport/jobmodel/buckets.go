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
}

// BucketStep is one global step: its bucket and each rank's samples.
type BucketStep struct {
	Bucket int
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

// byBucket is each bucket's samples of an epoch in its order, and the
// samples no bucket takes (too small, or no image).
func (b *BucketJob) byBucket(epoch uint64) ([][]int, int, error) {
	order, err := b.Job.Order(epoch)
	if err != nil {
		return nil, 0, err
	}
	out := make([][]int, len(b.Shapes))
	skipped := 0
	for _, id := range order {
		w, h := b.Sizes[id][0], b.Sizes[id][1]
		if w <= 0 || h <= 0 {
			skipped++
			continue
		}
		k := 0
		if b.T == nil {
			k = b.Nearest(w, h)
		} else if k = b.NearestClip(w, h, b.Frames[id]); k < 0 {
			skipped++
			continue
		}
		s := b.Shapes[k]
		if float64(s[0])/float64(h) > b.MaxUpscale || float64(s[1])/float64(w) > b.MaxUpscale {
			skipped++
			continue
		}
		out[k] = append(out[k], id)
	}
	return out, skipped, nil
}

// Steps are an epoch's steps at world world after the legs taken before
// (each [world, steps]): every bucket's remaining samples cut into global
// batches of Per·world (a last partial one dropped), batch j of m_b due
// by (j+1)·S/m_b and free from j·S/m_b; each step the free batch due
// first, ties by the seeded order. Legs of one world in a row are one
// leg, and a job resumed at the world of its last leg serves the rest of
// that leg's steps: the uninterrupted run's.
func (b *BucketJob) Steps(epoch uint64, legs [][2]int, world int) ([]BucketStep, error) {
	samples, _, err := b.byBucket(epoch)
	if err != nil {
		return nil, err
	}
	var merged [][2]int
	for _, l := range legs {
		if k := len(merged); k > 0 && merged[k-1][0] == l[0] {
			merged[k-1][1] += l[1]
			continue
		}
		merged = append(merged, l)
	}
	skip := 0
	if k := len(merged); k > 0 && merged[k-1][0] == world {
		skip = merged[k-1][1]
		merged = merged[:k-1]
	}
	taken := make([]int, len(b.Shapes))
	for i, l := range merged {
		steps := b.interleave(samples, taken, l[0], epoch)
		if l[1] > len(steps) {
			return nil, fmt.Errorf("leg %d: %d steps of %d", i, l[1], len(steps))
		}
		for _, s := range steps[:l[1]] {
			taken[s] += b.Per[s] * l[0]
		}
	}
	var out []BucketStep
	next := append([]int(nil), taken...)
	steps := b.interleave(samples, taken, world, epoch)
	if skip > len(steps) {
		return nil, fmt.Errorf("the last leg: %d steps of %d", skip, len(steps))
	}
	for i, k := range steps {
		st := BucketStep{Bucket: k}
		for r := range world {
			from := next[k] + r*b.Per[k]
			st.Ranks = append(st.Ranks, samples[k][from:from+b.Per[k]])
		}
		next[k] += b.Per[k] * world
		if i >= skip {
			out = append(out, st)
		}
	}
	return out, nil
}

// interleave is the buckets of the steps from taken on at world world.
func (b *BucketJob) interleave(samples [][]int, taken []int, world int, epoch uint64) []int {
	m := make([]int, len(samples))
	total := 0
	for k := range samples {
		m[k] = (len(samples[k]) - taken[k]) / (b.Per[k] * world)
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
