package jobmodel

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"

	"github.com/brandgw/brand/shuffle"
)

// Draws of a random-job model's bucket rounds: stages and schedules of
// bucket jobs and bucketed mixtures, made of the model's and of the
// query's values alike.

// shapesOf draws 1 to all of pool's shapes in a random order, and each
// one's batch size under budget: the list as buckets= names it.
func shapesOf(r *rand.Rand, pool [][2]int, budget int) (shapes [][2]int, per []int, list string) {
	pool = slices.Clone(pool)
	r.Shuffle(len(pool), func(i, j int) { pool[i], pool[j] = pool[j], pool[i] })
	shapes = pool[:1+r.IntN(len(pool))]
	names := make([]string, len(shapes))
	for i, s := range shapes {
		names[i] = fmt.Sprintf("%dx%d", s[0], s[1])
		per = append(per, budget/(s[0]*s[1]))
	}
	return shapes, per, strings.Join(names, ",")
}

// DrawStage stages m: from a global step drawn within its first two
// epochs at world (or past them), a list of pool's buckets and another
// budget of a multiple of unit pixels drawn from r. It answers buckets=
// and budget= of the staged job, whose first stage is buckets, budget.
func (m *BucketJob) DrawStage(r *rand.Rand, pool [][2]int, unit int, buckets string, budget, world int) (string, string, error) {
	steps0, err := m.Steps(0, nil, world)
	if err != nil {
		return "", "", err
	}
	b2 := unit * (1 + r.IntN(3))
	at := 1 + r.IntN(2*len(steps0)+2)
	shapes, per, list := shapesOf(r, pool, b2)
	m.Stages = []BucketStage{{From: 0, Shapes: m.Shapes, Per: m.Per}, {From: at, Shapes: shapes, Per: per}}
	return fmt.Sprintf("0@%s|%d@%s", buckets, at, list), fmt.Sprintf("0@%d|%d@%d", budget, at, b2), nil
}

// length is the mixture's epoch at world: its sources' pass 0 at their
// first stage.
func (m *BucketMixture) length(world int) (int, error) {
	n := 0
	for i := range m.Sources {
		one := *m.Source(i)
		one.Stages = nil
		steps, err := one.Steps(0, nil, world)
		if err != nil {
			return 0, err
		}
		n += len(steps)
	}
	return n, nil
}

// DrawStage stages m as BucketJob.DrawStage does, each source its own
// list (lists: NAME:LIST each, the first stage's). It answers buckets=
// and budget= of the staged mixture.
func (m *BucketMixture) DrawStage(r *rand.Rand, pool [][2]int, unit int, lists []string, budget, world int) (string, string, error) {
	n, err := m.length(world)
	if err != nil {
		return "", "", err
	}
	at := 1 + r.IntN(2*n+2)
	b2 := unit * (1 + r.IntN(3))
	first, second := MixStage{From: 0}, MixStage{From: at}
	var lists2 []string
	for i, src := range m.Sources {
		first.Shapes, first.Per = append(first.Shapes, src.Shapes), append(first.Per, src.Per)
		shapes, per, list := shapesOf(r, pool, b2)
		second.Shapes, second.Per = append(second.Shapes, shapes), append(second.Per, per)
		name, _, _ := strings.Cut(lists[i], ":")
		lists2 = append(lists2, name+":"+list)
	}
	m.Stages = []MixStage{first, second}
	return fmt.Sprintf("0@%s|%d@%s", strings.Join(lists, ";"), at, strings.Join(lists2, ";")), fmt.Sprintf("0@%d|%d@%d", budget, at, b2), nil
}

// DrawSchedule gives m a schedule of weights: a second phase of weights 1
// to 4 from a global step drawn within its first two epochs at world (or
// past them). It answers mix_schedule= of the sources names.
func (m *BucketMixture) DrawSchedule(r *rand.Rand, names []string, world int) (string, error) {
	n, err := m.length(world)
	if err != nil {
		return "", err
	}
	at := uint64(1 + r.IntN(2*n+2))
	second := make([]uint64, len(names))
	var p0, p1 []string
	for i, name := range names {
		second[i] = uint64(1 + r.IntN(4))
		p0 = append(p0, fmt.Sprintf("%s:%d", name, m.Weights[i]))
		p1 = append(p1, fmt.Sprintf("%s:%d", name, second[i]))
	}
	m.Phases = []shuffle.SchedulePhase{{Step: 0, Weights: m.Weights}, {Step: at, Weights: second}}
	return fmt.Sprintf("0:%s;%d:%s", strings.Join(p0, ","), at, strings.Join(p1, ",")), nil
}
