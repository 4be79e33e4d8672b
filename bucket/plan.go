package bucket

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/brandgw/brand/internal/seeded"
)

// domain is the seeded streams' domain of the buckets' tie order.
const domain = 0x6275636b65740001

// Step is one global step of an epoch: its bucket, and the position in
// that bucket's samples (from the epoch's start point) of its first
// sample. Rank r of world w takes the Size samples from First + r·Size,
// Size being the bucket's batch size.
type Step struct {
	Bucket int
	First  int
}

// Steps interleaves the buckets' batches over one epoch, from a start
// point: avail[b] samples of bucket b remain, each global batch of b
// takes per[b]·world of them, and a bucket's last partial batch is
// dropped (served by no step of this epoch). The rule keeps every
// bucket's count of steps within one of its share at every step t:
// |count_b(t) − t·m_b/S| < 1, where m_b are the buckets' full batches
// and S their sum. It is earliest deadline first over the batches' windows: batch j of
// b may run from step j·S/m_b and is due by (j+1)·S/m_b; of the buckets
// whose next batch may run, the one due first takes the step, and of
// two due together the one first in an order drawn from seed and epoch.
func Steps(avail, per []int, world int, seed, epoch uint64) []Step {
	nb := len(avail)
	m := make([]int64, nb)
	var total int64
	for b := range avail {
		m[b] = int64(avail[b] / (per[b] * world))
		total += m[b]
	}
	prio := make([]uint64, nb)
	for b := range prio {
		prio[b], _ = seeded.Seeds(seed, epoch, domain, uint64(b))
	}
	count := make([]int64, nb)
	steps := make([]Step, 0, total)
	for t := int64(0); t < total; t++ {
		best := -1
		for b := range nb {
			c := count[b]
			if c == m[b] || c*total > t*m[b] { // done, or not yet released
				continue
			}
			if best < 0 {
				best = b
				continue
			}
			// Due (c+1)/m[b] against best's (count[best]+1)/m[best].
			l, r := (c+1)*m[best], (count[best]+1)*m[b]
			if l < r || l == r && prio[b] < prio[best] {
				best = b
			}
		}
		steps = append(steps, Step{Bucket: best, First: int(count[best]) * per[best] * world})
		count[best]++
	}
	return steps
}

// A Leg is a run of an epoch's steps at one world size.
type Leg struct{ World, Steps int }

// ParseResume reads a resume point: the legs of an epoch taken so far,
// "W:K" each (K steps at world W), comma-separated, in order.
func ParseResume(s string) ([]Leg, error) {
	if s == "" {
		return nil, nil
	}
	var legs []Leg
	for _, p := range strings.Split(s, ",") {
		w, k, ok := strings.Cut(p, ":")
		wi, err1 := strconv.Atoi(w)
		ki, err2 := strconv.Atoi(k)
		if !ok || err1 != nil || err2 != nil || wi < 1 || ki < 0 {
			return nil, fmt.Errorf("%w: resume point %q: each leg is WORLD:STEPS (world ≥ 1, steps ≥ 0), e.g. 4:120,3:40", ErrSpec, p)
		}
		legs = append(legs, Leg{wi, ki})
	}
	if len(legs) > 64 {
		return nil, fmt.Errorf("%w: resume point of %d legs, more than 64", ErrSpec, len(legs))
	}
	return legs, nil
}

// FormatResume writes legs as ParseResume reads them.
func FormatResume(legs []Leg) string {
	b := make([]string, len(legs))
	for i, l := range legs {
		b[i] = strconv.Itoa(l.World) + ":" + strconv.Itoa(l.Steps)
	}
	return strings.Join(b, ",")
}

// Taken returns how many samples of each bucket (of n[b] in the epoch)
// the legs took: each leg's steps are the first of Steps from where the
// legs before it left off, at its world size, a leg at the world of the
// one before it continuing that one's steps (Resume). A leg of more
// steps than remain is refused.
func Taken(n, per []int, legs []Leg, seed, epoch uint64) ([]int, error) {
	legs = merged(legs)
	taken := make([]int, len(n))
	avail := make([]int, len(n))
	for i, l := range legs {
		for b := range n {
			avail[b] = n[b] - taken[b]
		}
		steps := Steps(avail, per, l.World, seed, epoch)
		if l.Steps > len(steps) {
			return nil, fmt.Errorf("%w: leg %d of the resume point takes %d steps at world %d, where %d remain", ErrSpec, i+1, l.Steps, l.World, len(steps))
		}
		for _, s := range steps[:l.Steps] {
			taken[s.Bucket] += per[s.Bucket] * l.World
		}
	}
	return taken, nil
}

// Resume returns an epoch's steps from a resume point at world: for each
// bucket the position its samples are counted from (from, which a step's
// First is relative to), the steps, and how many of its samples the
// legs took (taken). The steps are those an uninterrupted run would
// take from there: where the last leg was at world, the rest of its
// steps (a job stopped and resumed at one world size serves exactly the
// steps it would have served); where the world changed, Steps of the
// samples the legs left at the new world. A leg of more steps than
// remain is refused.
func Resume(n, per []int, legs []Leg, world int, seed, epoch uint64) (from []int, steps []Step, taken []int, err error) {
	legs = merged(legs)
	if taken, err = Taken(n, per, legs, seed, epoch); err != nil {
		return nil, nil, nil, err
	}
	from, skip := taken, 0
	if k := len(legs); k > 0 && legs[k-1].World == world {
		if from, err = Taken(n, per, legs[:k-1], seed, epoch); err != nil {
			return nil, nil, nil, err
		}
		skip = legs[k-1].Steps
	}
	avail := make([]int, len(n))
	for b := range n {
		avail[b] = n[b] - from[b]
	}
	return from, Steps(avail, per, world, seed, epoch)[skip:], taken, nil
}

// merged is legs with each run of legs at one world one leg: a job
// resumed at the world it stopped at continued the stopped leg's steps.
func merged(legs []Leg) []Leg {
	var out []Leg
	for _, l := range legs {
		if k := len(out); k > 0 && out[k-1].World == l.World {
			out[k-1].Steps += l.Steps
			continue
		}
		out = append(out, l)
	}
	return out
}
