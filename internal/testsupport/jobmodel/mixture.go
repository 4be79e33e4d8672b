package jobmodel

import (
	"fmt"

	"github.com/brandgw/brand/shuffle"
)

// A Mixture is a job over several datasets by weight (docs/shuffle.md
// §11): each component's samples per chunk (Counts), its integer
// weight, the mixing block K and the epoch's samples L0 asked for (0:
// the components' sizes summed), the job's seed and window.
type Mixture struct {
	Counts  [][]int
	Weights []uint64
	Block   int
	Samples int
	Seed    uint64
	Window  int
}

// A Draw is a position of a mixture's epoch: its component and the
// sample ID it reads there.
type Draw struct {
	Component int
	ID        int
}

// Order is epoch's draws. Which component each position reads, and
// where in that component's stream, is shuffle.NewMixture's (§11.2–11.4,
// held to their own reference); the sample there is the component's
// order of §5 at the draw's pass, over the component's window (the job's
// split by weight, at least 1: §11.4).
func (m Mixture) Order(epoch uint64) ([]Draw, error) {
	sizes := make([]int, len(m.Counts))
	for i, c := range m.Counts {
		sizes[i] = sum(c)
	}
	mx, err := shuffle.NewMixture(m.Weights, sizes, m.Block, m.Samples)
	if err != nil {
		return nil, err
	}
	var total uint64
	for _, w := range mx.Weights() {
		total += w
	}
	passes := map[[2]uint64][]int{}
	draws := mx.AppendRange(nil, m.Seed, epoch, 0, mx.NumSamples())
	out := make([]Draw, len(draws))
	for k, d := range draws {
		key := [2]uint64{uint64(d.Component), d.Pass}
		o, ok := passes[key]
		if !ok {
			w := max(1, int((uint64(max(m.Window, 1))*mx.Weights()[d.Component]+total-1)/total))
			b, err := base(m.Counts[d.Component], m.Seed, d.Pass, w, 0)
			if err != nil {
				return nil, err
			}
			o = b.flat()
			passes[key] = o
		}
		if d.Index < 0 || d.Index >= len(o) {
			return nil, fmt.Errorf("jobmodel: draw %d reads position %d of a pass of %d", k, d.Index, len(o))
		}
		out[k] = Draw{Component: d.Component, ID: o[d.Index]}
	}
	return out, nil
}
