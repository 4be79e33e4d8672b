package jobmodel

import (
	"fmt"

	"github.com/brandgw/brand/shuffle"
)

// A BucketMixture is a bucketed mixture (docs/http-api.md, "Bucketed
// mixtures") of image sources, each a BucketJob over its own dataset
// whose Job gives its counts and the job's seed, at integer Weights, the
// job's Window split among them by weight (§11.4). Every global step is
// one source's step: which source is the mixture's rule over blocks of
// one step (shuffle.NewMixtureOf, held to its own reference), and a
// source's steps are those of its passes one after another, its pass p
// its bucket epoch p. An epoch is the sources' pass 0 steps at the job's
// first world, summed.
type BucketMixture struct {
	Sources []*BucketJob
	Weights []uint64
	Seed    uint64
	Window  int
	// Phases, if set, are a mix_schedule='s phases (shuffle.NewSchedule,
	// held to its own reference): the sources' weights change at their
	// steps. Weights are then the first phase's.
	Phases []shuffle.SchedulePhase
	// Stages, if set, are the job's stages by global step, the first
	// from step 0: each source's buckets (Shapes[i]) and batch sizes
	// (Per[i]) from step From on; a source's stage starts at its count
	// of the mixture's steps before From. The sources' own Shapes and
	// Per are then the first stage's.
	Stages []MixStage
}

// A MixStage is a stage of a staged bucketed mixture.
type MixStage struct {
	From   int
	Shapes [][][2]int
	Per    [][]int
}

// Source is source i as its passes are read: its window the job's split
// by weight (§11.4).
func (m *BucketMixture) Source(i int) *BucketJob {
	var total uint64
	for _, w := range m.Weights {
		total += w
	}
	c := *m.Sources[i]
	j := *c.Job
	j.Window = max(1, int((uint64(max(m.Window, 1))*m.Weights[i]+total-1)/total))
	c.Job = &j
	if len(m.Stages) > 1 {
		c.Stages = nil
		for _, st := range m.Stages {
			from, err := m.before(i, st.From)
			if err != nil {
				panic(err) // weights a round draws: the rule takes them
			}
			c.Stages = append(c.Stages, BucketStage{From: from, Shapes: st.Shapes[i], Per: st.Per[i]})
		}
	}
	return &c
}

// before is how many of the mixture's first g global steps source i
// takes, by its rule over blocks of one step (fixed weights, or the
// schedule's).
func (m *BucketMixture) before(i, g int) (int, error) {
	if g == 0 {
		return 0, nil
	}
	ones := make([]int, len(m.Weights))
	for k := range ones {
		ones[k] = 1
	}
	if len(m.Phases) == 0 {
		rule, err := shuffle.NewMixture(m.Weights, ones, 1, g)
		if err != nil {
			return 0, err
		}
		return rule.Cumulative(g, i), nil
	}
	passes := make([]shuffle.Passes, len(m.Weights))
	for k := range passes {
		passes[k] = shuffle.EqualPasses(1)
	}
	s, err := shuffle.NewSchedule(m.Phases, passes, 1, 1)
	if err != nil {
		return 0, err
	}
	view, err := s.Epoch(uint64(g)) // one step an epoch: its start is the count before it
	if err != nil {
		return 0, err
	}
	return int(view.Start(i, uint64(g)).Pass), nil
}

// A MixStep is a step of a bucketed mixture: its source and its step.
// NoStep: the mixture draws it from a pass of its source that holds no
// step (a stage whose buckets hold none of the pass's images at the
// world): the gateway refuses it (422).
type MixStep struct {
	Source int
	BucketStep
	NoStep bool
}

// Steps are epoch's steps at world world after the global steps the legs
// took (each [world, steps], from the job's first step across epochs):
// each source's passes laid out at the worlds of its own steps, cut
// where a world starts in its count of the mixture's steps.
func (m *BucketMixture) Steps(epoch uint64, legs [][2]int, world int) ([]MixStep, error) {
	k := len(m.Sources)
	srcs := make([]*BucketJob, k)
	for i := range m.Sources {
		srcs[i] = m.Source(i)
	}
	// The job's runs of global steps, and each source's: its count of
	// the mixture's steps where each run starts.
	var runs []bucketRun
	taken := 0
	for _, l := range legs {
		taken += l[1]
		if n := len(runs); n > 0 && runs[n-1].world == l[0] {
			runs[n-1].steps += l[1]
			continue
		}
		runs = append(runs, bucketRun{l[0], l[1]})
	}
	if n := len(runs); n > 0 && runs[n-1].world == world {
		runs[n-1].steps = -1
	} else {
		runs = append(runs, bucketRun{world, -1})
	}
	srcRuns := make([][]bucketRun, k)
	at := 0
	for _, r := range runs {
		for i := range k {
			n := -1
			if r.steps >= 0 {
				a, err := m.before(i, at)
				if err != nil {
					return nil, err
				}
				b, err := m.before(i, at+r.steps)
				if err != nil {
					return nil, err
				}
				n = b - a
			}
			srcRuns[i] = append(srcRuns[i], bucketRun{r.world, n})
		}
		if r.steps >= 0 {
			at += r.steps
		}
	}
	// Each source's passes in turn, laid out at its runs from its count
	// of steps at the pass's start.
	passes := make([][][]BucketStep, k)
	pass := func(i int, p uint64) ([]BucketStep, error) {
		for uint64(len(passes[i])) <= p {
			first := 0
			for _, ps := range passes[i] {
				first += len(ps)
			}
			q := uint64(len(passes[i]))
			steps, err := srcs[i].pass(q, first, from(srcRuns[i], first), 0, false)
			if err != nil {
				return nil, err
			}
			passes[i] = append(passes[i], steps)
		}
		return passes[i][p], nil
	}
	length := 0 // the sources' pass 0 at the job's first world and first stage
	for i := range k {
		one := *srcs[i]
		one.Stages = nil
		steps, err := one.pass(0, 0, []bucketRun{{runs[0].world, -1}}, 0, false)
		if err != nil {
			return nil, err
		}
		length += len(steps)
	}
	var perr error
	ps := make([]shuffle.Passes, k)
	for i := range k {
		ps[i] = shuffle.PassesFunc(func(p uint64) int {
			steps, err := pass(i, p)
			if err != nil {
				perr = err
			}
			return max(len(steps), 1)
		})
	}
	var mx *shuffle.Mixture
	var err error
	if len(m.Phases) == 0 {
		if mx, err = shuffle.NewMixtureOf(m.Weights, ps, 1, length); err != nil {
			return nil, err
		}
	} else {
		s, err := shuffle.NewSchedule(m.Phases, ps, 1, length)
		if err != nil {
			return nil, err
		}
		if mx, err = s.Epoch(epoch); err != nil {
			return nil, err
		}
	}
	draws := mx.AppendRange(nil, m.Seed, epoch, 0, mx.NumSamples())
	if perr != nil {
		return nil, perr
	}
	var out []MixStep
	for x, d := range draws {
		if int(epoch)*mx.NumSamples()+x < taken {
			continue
		}
		steps, err := pass(d.Component, d.Pass)
		if err != nil {
			return nil, err
		}
		switch {
		case len(steps) == 0 && d.Index == 0:
			out = append(out, MixStep{Source: d.Component, NoStep: true})
		case d.Index >= len(steps):
			return nil, fmt.Errorf("jobmodel: step %d of the mixture draws step %d of source %d's pass %d, of %d", x, d.Index, d.Component, d.Pass, len(steps))
		default:
			out = append(out, MixStep{Source: d.Component, BucketStep: steps[d.Index]})
		}
	}
	return out, nil
}
