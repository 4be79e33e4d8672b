// Package jobmodel is a reference model of a job's epochs, written from
// docs/shuffle.md alone: which sample every position of every epoch
// holds under a named job's chain of edits (§14 exclusions, §15 appends,
// §16 a chain of either kind), how an epoch is cut into global batches
// and ranks' slices (§6), how a balanced global batch is given to its
// ranks (§13.3), how a job's steps are counted through the epochs its
// chain changes (docs/http-api.md, Steps), and which job features go
// together (docs/http-api.md, Features and how they combine).
//
// # Why it exists
//
// The gateway lays a job out by composing orders (layout.Edit over
// shuffle.EditedEpoch, one assigner, one table of features), and the
// tests of each part hold it to its own reference. What no such test
// sees is the whole: a random job of every feature the table allows,
// edited from random steps, resumed at another world size, served by one
// gateway or a cluster and a restarted one. The model is what that whole
// is held to (gateway's TestModel): a second, plain implementation, slow
// and obvious, that materialises every window and every order.
//
// # What it may call
//
// shuffle.NewEpoch for the order of §5 (held to an independent Python
// reference by package shuffle), shuffle.NewMixture's draws for a
// mixture's interleaving (§11, held to its own reference), and
// math/rand/v2's PCG for an append's merge as §15 specifies it. Nothing
// of the edits' or the cut's implementations: not shuffle.EditedEpoch,
// shuffle.NewAppended(Over), shuffle.AppendedEpoch, shuffle.Params' cut,
// package balance or anything in internal/batch or internal/job. The
// feature rules are the model's own list; its test holds the table
// (internal/job/features) to them, and the gateway's test takes only the
// table's messages from it.
//
// It is test support: nothing in the server links it.
package jobmodel

import (
	"fmt"
	"math/rand/v2"

	"github.com/brandgw/brand/shuffle"
)

// The kinds of edit.
const (
	Exclude = "exclude"
	Append  = "append"
)

// An Edit is one edit of a job's chain: from position Pos of epoch
// Epoch's order under the edits before it, an exclusion of IDs (the
// sample IDs it adds to the earlier exclusions'), or an append that
// grows the version of OldChunks chunks to one whose chunks hold Counts
// samples each (the first OldChunks the old ones).
type Edit struct {
	Kind  string
	Epoch uint64
	Pos   int

	IDs []int // an exclusion's own samples

	OldChunks int   // an append's: the chunks of the version it extends
	Counts    []int // an append's: every chunk's samples in the version it grows to
}

// A Job is a named job over one dataset: the version it read first
// (Counts, samples per chunk), its seed and window, and its chain of
// edits, first first, their epochs never decreasing.
type Job struct {
	Counts []int
	Seed   uint64
	Window int
	Chain  []Edit
}

// order is an epoch's order as §14–§16 take it: whole windows, some
// empty (an exclusion shortens windows, it never removes one), each a
// list of sample IDs in order.
type order [][]int

func (o order) flat() []int {
	var out []int
	for _, w := range o {
		out = append(out, w...)
	}
	return out
}

func (o order) len() int {
	n := 0
	for _, w := range o {
		n += len(w)
	}
	return n
}

// base is §5's order over counts, chunk and sample IDs from 0, every ID
// then shifted by idBase.
func base(counts []int, seed, epoch uint64, window, idBase int) (order, error) {
	e, err := shuffle.NewEpoch(counts, seed, epoch, window)
	if err != nil {
		return nil, err
	}
	o := make(order, e.NumWindows())
	for w := range o {
		o[w] = e.Window(w)
		for i := range o[w] {
			o[w][i] += idBase
		}
	}
	return o, nil
}

// without is o without the samples of drop at positions from on (§14):
// every window kept, each without those samples.
func without(o order, drop map[int]bool, from int) order {
	out := make(order, len(o))
	pos := 0
	for w, ids := range o {
		out[w] = []int{}
		for _, id := range ids {
			if pos < from || !drop[id] {
				out[w] = append(out[w], id)
			}
			pos++
		}
	}
	return out
}

// merged is §15's merge of o, the order before an append, with the new
// chunks' own order: o's windows up to and including the one holding
// position from kept (all of them if from is past o's samples), then
// o's remaining windows and the new order's interleaved, the next window
// from the old side when IntN(old left + new left) < old left, drawn
// from PCG seeded (seed ⊕ place·0x9e3779b97f4a7c15, epoch ⊕
// 0x617070656e64), place the append's among the chain's appends.
func merged(o, added order, from int, seed, epoch uint64, place int) order {
	keep := len(o)
	end := 0
	for w, ids := range o {
		end += len(ids)
		if end > from {
			keep = w + 1
			break
		}
	}
	out := append(order{}, o[:keep]...)
	r := rand.New(rand.NewPCG(seed^uint64(place)*0x9e3779b97f4a7c15, epoch^0x617070656e64))
	old, fresh := o[keep:], added
	for len(old)+len(fresh) > 0 {
		if r.IntN(len(old)+len(fresh)) < len(old) {
			out, old = append(out, old[0]), old[1:]
		} else {
			out, fresh = append(out, fresh[0]), fresh[1:]
		}
	}
	return out
}

// sum is the samples of counts.
func sum(counts []int) int {
	n := 0
	for _, k := range counts {
		n += k
	}
	return n
}

// Order is epoch's order of sample IDs (§16): §5's order over the
// version the newest append of an earlier epoch grew the job to (the
// version it read first if none), without the samples of every
// exclusion of an earlier epoch, then each edit of epoch itself applied
// in turn over the order the edits before it made.
func (j *Job) Order(epoch uint64) ([]int, error) {
	o, err := j.order(epoch)
	return o.flat(), err
}

// Len is epoch's samples.
func (j *Job) Len(epoch uint64) (int, error) {
	o, err := j.order(epoch)
	return o.len(), err
}

// Version is the counts of the version the job reads at the end of
// epoch's edits: the version the newest append of epoch or before grew
// it to.
func (j *Job) Version(epoch uint64) []int {
	counts := j.Counts
	for _, e := range j.Chain {
		if e.Kind == Append && e.Epoch <= epoch {
			counts = e.Counts
		}
	}
	return counts
}

func (j *Job) order(epoch uint64) (order, error) {
	counts := j.Counts
	drop := map[int]bool{}
	for _, e := range j.Chain {
		if e.Epoch >= epoch {
			continue
		}
		if e.Kind == Append {
			counts = e.Counts
		}
		for _, id := range e.IDs {
			drop[id] = true
		}
	}
	o, err := base(counts, j.Seed, epoch, j.Window, 0)
	if err != nil {
		return nil, err
	}
	o = without(o, drop, 0)
	place := 0 // an append's place among the chain's appends
	for i, e := range j.Chain {
		if i > 0 && e.Epoch < j.Chain[i-1].Epoch {
			return nil, fmt.Errorf("jobmodel: edit %d's epoch %d before edit %d's %d", i, e.Epoch, i-1, j.Chain[i-1].Epoch)
		}
		if e.Epoch == epoch {
			switch e.Kind {
			case Exclude:
				for _, id := range e.IDs {
					drop[id] = true
				}
				o = without(o, drop, e.Pos)
			case Append:
				added, err := base(e.Counts[e.OldChunks:], j.Seed, epoch, j.Window, sum(e.Counts[:e.OldChunks]))
				if err != nil {
					return nil, err
				}
				o = merged(o, added, e.Pos, j.Seed, epoch, place)
			default:
				return nil, fmt.Errorf("jobmodel: edit %d of kind %q", i, e.Kind)
			}
		}
		if e.Kind == Append {
			place++
		}
	}
	return o, nil
}
