package jobstream

import (
	"math"
	"sort"

	"github.com/brandgw/brand/shuffle"
)

// A Pace is how fast a schedule's component is read at each position of
// its stream, for the cache's schedule to key its future uses by: a
// stream's measured rate is its pace now, and a phase ahead that gives the
// component more weight reads its next windows sooner than that rate
// says (docs/architecture.md, "Mixtures"). A component of a mixture of
// fixed weights has none (nil).
//
// A token component's Pace counts its stream's units, documents, where
// its schedule counts sequences (NewTokenPace).
//
// A Pace is immutable and safe for concurrent use.
type Pace struct {
	n int // the component's stream positions a pass
	// Per phase boundary k, in step order: the global step, the
	// component's stream position there and its samples per step from
	// there to the next boundary.
	step []float64
	at   []uint64
	per  []float64
}

// maxPacePhases bounds the phase boundaries a Pace holds: a ramp and
// the constant weights after it are two.
const maxPacePhases = 2 * shuffle.MaxSchedulePhases

// NewPace returns component i's pace under schedule s, whose passes hold
// n samples each, from the phase holding step from on.
func NewPace(s *shuffle.Schedule, i, n int, from uint64) *Pace {
	return newPace(s, i, n, n, from)
}

// NewTokenPace returns a token component's pace in its stream's
// positions, documents (docs a pass), under schedule s, which counts the
// component's packed sequences (n in pass 0): every position and rate
// the schedule gives is scaled by docs/n, the component's documents per
// sequence in pass 0. That is an estimate — passes pack to different
// numbers of sequences, and a sequence holds more short documents than
// long ones — which prefetch, a hint, can act on: it lists the windows a
// rising component reaches before a switch in about the time they take.
func NewTokenPace(s *shuffle.Schedule, i, n, docs int, from uint64) *Pace {
	return newPace(s, i, n, docs, from)
}

// newPace is component i's pace under s, whose passes hold n of the
// schedule's positions and stream positions each.
func newPace(s *shuffle.Schedule, i, n, stream int, from uint64) *Pace {
	k := float64(s.Block())
	p := &Pace{n: stream}
	r := 1.0 // stream positions per schedule position
	if n > 0 && stream != n {
		r = float64(stream) / float64(n)
	}
	add := func(step uint64, per float64) {
		if len(p.step) == maxPacePhases {
			return
		}
		blocks := uint64(s.EpochBlocks())
		m, err := s.Epoch(step / blocks)
		if err != nil {
			return
		}
		d := m.Start(i, step/blocks)
		if d.Pass == math.MaxUint64 {
			return
		}
		in := d.Index + m.Cumulative(int(step%blocks), i) // in the pass
		q := d.Pass*uint64(stream) + uint64(in)
		if r != 1 {
			q = d.Pass*uint64(stream) + uint64(float64(in)*r)
		}
		p.step, p.at, p.per = append(p.step, float64(step)), append(p.at, q), append(p.per, per*r)
	}
	phases := s.Phases()
	share := func(w []uint64) float64 {
		var sum uint64
		for _, a := range w {
			sum += a
		}
		return k * float64(w[i]) / float64(sum)
	}
	for j, ph := range phases {
		if j+1 < len(phases) && phases[j+1].Step <= from {
			continue
		}
		if ph.Ramp() {
			add(ph.Step, (share(phases[j-1].Weights)+share(ph.Weights))/2)
			if j+1 == len(phases) || ph.End < phases[j+1].Step {
				add(ph.End, share(ph.Weights))
			}
			continue
		}
		add(ph.Step, share(ph.Weights))
	}
	return p
}

// Changes reports whether the pace changes at a phase boundary ahead of
// the step it was made from: false for a nil Pace, and for a schedule's
// component past its last switch or in a schedule of one phase.
func (p *Pace) Changes() bool { return p != nil && len(p.step) > 1 }

// Ahead returns the samples, at the pace of position q, that reading the
// d samples after q takes: d when the pace does not change before q+d,
// more when a phase ahead reads the component slower, fewer when faster.
// A nil Pace, or a component read at no pace now, returns d.
func (p *Pace) Ahead(pass uint64, pos, d int) float64 {
	if p == nil || len(p.at) == 0 || d <= 0 {
		return float64(max(d, 0))
	}
	q := pass*uint64(p.n) + uint64(pos)
	cur := p.phase(q)
	if p.per[cur] <= 0 {
		return float64(d)
	}
	return (p.stepOf(q+uint64(d)) - p.stepOf(q)) * p.per[cur]
}

// phase is the boundary whose stretch holds position q: the last whose
// position is at most q, among those that read the component.
func (p *Pace) phase(q uint64) int {
	j := sort.Search(len(p.at), func(j int) bool { return p.at[j] > q }) - 1
	for j > 0 && p.per[j] <= 0 {
		j--
	}
	return max(j, 0)
}

// stepOf is the (fractional) global step at which the stream reaches
// position q.
func (p *Pace) stepOf(q uint64) float64 {
	j := p.phase(q)
	if p.per[j] <= 0 {
		return p.step[j]
	}
	return p.step[j] + float64(q-min(q, p.at[j]))/p.per[j]
}
