package task

import (
	"context"
	"fmt"
	"slices"

	"github.com/brandgw/brand/internal/errkind"
	"github.com/brandgw/brand/shuffle"
)

// Edits of a task job, each a record of its log, so that every node and
// the replay take them alike (docs/tasks.md, "Edits"):
//
//   - An exclusion takes prompts out at once: never leased after it, nor
//     revisited. A prompt held by a lease when it is excluded stays in
//     that lease: its answer is taken (the lease's other answers count as
//     ever) but never counted, and the answer says so (Answer.Excluded);
//     if the lease expires, the prompt goes nowhere.
//   - An append adds a domain's prompts of an index version extending its
//     own (brand index --append) to the domain's next pass: they join
//     when its current pass runs out (with shared passes, the job's).
//   - A ratio edit changes the domains' ratios from a step not yet full:
//     the steps before it keep their prompts and counts.

// Bounds of edits.
const (
	// MaxExclude bounds the prompts of one exclusion.
	MaxExclude = 1 << 20
	// MaxAppend bounds the prompts of one append.
	MaxAppend = 1 << 24
)

// ErrEditStep: a ratio edit from a step already full (409): the answer
// names the first editable step.
var ErrEditStep = errkind.New(errkind.Conflict, "task step full")

// StepFullError is a ratio edit from a step already full: the first step
// an edit may start from.
type StepFullError struct {
	Step, First uint64
}

func (e *StepFullError) Error() string {
	return fmt.Sprintf("the ratios of step %d cannot change: it is full (and may be read); the first step an edit applies from is %d", e.Step, e.First)
}

func (e *StepFullError) Unwrap() error { return ErrEditStep }

// Edited is what an edit did: the prompts an exclusion took out (those
// excluded before left aside) or an append added, and the step a ratio
// edit applies from.
type Edited struct {
	Excluded, Appended int
	From               uint64
}

// exclude applies an exclusion.
func (p *Plan) exclude(r Record) Outcome {
	for _, q := range r.IDs {
		if int(q) >= len(p.prompts) {
			return Outcome{Err: fmt.Errorf("%w: prompt %d: the job has %d", ErrBadRequest, q, len(p.prompts))}
		}
	}
	n := 0
	for _, q := range r.IDs {
		pr := &p.prompts[q]
		switch pr.where {
		case inExcluded:
			continue
		case inPool:
			p.doms[pr.dom].tree.set(int(pr.local), 0)
		}
		// At the front, waiting, retired: passed over where it is listed.
		if pr.where != inRetired {
			p.tally.leave(pr.served)
		}
		p.tally.set(&pr.where, inExcluded)
		n++
		p.mix(uint64(q) | 1<<45)
	}
	p.stats.excluded += n
	return Outcome{Edited: &Edited{Excluded: n}}
}

// append applies an append: r.N prompts of domain r.Domain, numbered
// after every prompt of the job, of its next pass.
func (p *Plan) append(r Record) Outcome {
	if int(r.Domain) >= len(p.doms) || r.N == 0 || r.N > MaxAppend || int64(len(p.prompts))+int64(r.N) > MaxPrompts {
		return Outcome{Err: fmt.Errorf("%w: an append of %d prompts to domain %d of %d", ErrBadRequest, r.N, r.Domain, len(p.doms))}
	}
	dm := p.doms[r.Domain]
	pass := dm.cur + 1
	w := slices.Grow(slices.Clone(dm.tree.w), int(r.N))
	for range r.N {
		q := uint32(len(p.prompts))
		p.prompts = append(p.prompts, prompt{local: uint32(len(dm.ids)), dom: r.Domain, served: pass, where: inNext})
		dm.ids = append(dm.ids, q)
		dm.next = append(dm.next, q)
		w = append(w, 0)
		p.tally.where[inNext]++
		p.tally.enter(pass)
	}
	p.tally.inBand += int(r.N) // no answer yet: every policy weighs 1
	p.hist = append(p.hist, make([]float32, int(r.N)*p.spec.History)...)
	dm.tree = newFenwick(w)
	dm.index = r.Index
	p.mix(uint64(r.N) | uint64(r.Domain)<<32 | 1<<46)
	return Outcome{Edited: &Edited{Appended: int(r.N)}}
}

// ratios applies a ratio edit: the domains' weights from step r.Step on.
func (p *Plan) ratios(r Record) Outcome {
	if err := p.checkRatios(r.Step, r.Weights); err != nil {
		return Outcome{Err: err}
	}
	rule, err := p.rule.edited(r.Step, r.Weights)
	if err != nil {
		return Outcome{Err: fmt.Errorf("%w: %v", ErrBadRequest, err)}
	}
	p.rule, p.steps.rule = rule, rule
	p.mix(r.Step | 1<<47)
	return Outcome{Edited: &Edited{From: r.Step}}
}

// checkRatios refuses a ratio edit the plan cannot take.
func (p *Plan) checkRatios(from uint64, weights []uint64) error {
	last := p.rule.phases[len(p.rule.phases)-1].Step
	switch {
	case len(p.doms) == 1:
		return fmt.Errorf("%w: a task job of one dataset has no ratios to edit (make it with domains)", ErrBadRequest)
	case len(weights) != len(p.doms):
		return fmt.Errorf("%w: %d ratios for %d domains", ErrBadRequest, len(weights), len(p.doms))
	case !slices.ContainsFunc(weights, func(w uint64) bool { return w > 0 }):
		return fmt.Errorf("%w: every ratio is 0: a step takes some domain's prompts", ErrBadRequest)
	case from < p.steps.Full():
		return &StepFullError{Step: from, First: p.steps.Full()}
	case from < last:
		return fmt.Errorf("%w: from step %d, before the ratios' last edit's step %d: an edit applies from that step or a later one", ErrBadRequest, from, last)
	}
	return nil
}

// Ratios are the domains' ratios' phases: the weights from each step on.
func (p *Plan) Ratios() []shuffle.SchedulePhase { return p.rule.phases }

// Domains is the plan's domains: 1 for a job of one dataset.
func (p *promptSet) Domains() int { return len(p.doms) }

// PromptOf is prompt q's domain and its ID in the domain's dataset.
func (p *promptSet) PromptOf(q uint32) (dom, local int) {
	pr := p.prompts[q]
	return int(pr.dom), int(pr.local)
}

// Prompt is the prompt of domain dom's local ID, false if the job has
// none (not in its index version, or appended since).
func (p *promptSet) Prompt(dom, local int) (uint32, bool) {
	if dom < 0 || dom >= len(p.doms) || local < 0 || local >= len(p.doms[dom].ids) {
		return 0, false
	}
	return p.doms[dom].ids[local], true
}

// DomainIndex is the index version domain dom's prompts are keys of: the
// one it was made over, or the last an append grew it to.
func (p *promptSet) DomainIndex(dom int) string { return p.doms[dom].index }

// DomainState is domain dom's pass, its answers counted and its prompts.
func (p *Plan) DomainState(dom int) (pass uint32, counted uint64, prompts int) {
	return p.doms[dom].cur, p.steps.doms[dom].total(), len(p.doms[dom].ids)
}

// Excluded reports whether prompt q is excluded.
func (p *promptSet) Excluded(q uint32) bool { return p.prompts[q].where == inExcluded }

// Exclude takes prompts ids (the plan's) out of the job at once.
func (s *Stream) Exclude(ctx context.Context, ids []uint32) (Edited, error) {
	if len(ids) == 0 || len(ids) > MaxExclude {
		return Edited{}, fmt.Errorf("%w: %d prompts: an exclusion takes 1 to %d", ErrBadRequest, len(ids), MaxExclude)
	}
	return s.edit(ctx, Record{Kind: recExclude, IDs: ids}, func(p *Plan) (*Edited, error) {
		for _, q := range ids {
			if int(q) >= len(p.prompts) {
				return nil, fmt.Errorf("%w: prompt %d: the job has %d", ErrBadRequest, q, len(p.prompts))
			}
		}
		return nil, nil
	})
}

// Append adds n prompts of domain dom, of index version index (which
// extends the domain's), to its next pass.
func (s *Stream) Append(ctx context.Context, dom int, index string, n int) (Edited, error) {
	if n < 1 || n > MaxAppend || len(index) > 64 {
		return Edited{}, fmt.Errorf("%w: an append of %d prompts: 1 to %d", ErrBadRequest, n, MaxAppend)
	}
	return s.edit(ctx, Record{Kind: recAppend, Domain: uint16(dom), Index: index, N: uint32(n)}, func(p *Plan) (*Edited, error) {
		if dom < 0 || dom >= len(p.doms) {
			return nil, fmt.Errorf("%w: domain %d of %d", ErrBadRequest, dom, len(p.doms))
		}
		return nil, nil
	})
}

// EditRatios changes the domains' ratios (their weights) from step from
// on, a step not yet full. The same edit made again while it is the
// last (a retry whose first try's answer was lost, or refused when the
// store could not take its second copy, though its segment stands) is
// answered as made, writing nothing, though step from has filled since:
// the ratios from it are those asked.
func (s *Stream) EditRatios(ctx context.Context, from uint64, weights []uint64) (Edited, error) {
	return s.edit(ctx, Record{Kind: recRatios, Step: from, Weights: weights}, func(p *Plan) (*Edited, error) {
		if last := p.rule.phases[len(p.rule.phases)-1]; len(p.rule.phases) > 1 && last.Step == from && slices.Equal(last.Weights, weights) {
			return &Edited{From: from}, nil
		}
		if err := p.checkRatios(from, weights); err != nil {
			return nil, err
		}
		_, err := p.rule.edited(from, weights)
		if err != nil {
			return nil, fmt.Errorf("%w: %v", ErrBadRequest, err)
		}
		return nil, nil
	})
}

// edit writes edit r once check (of the plan, as of the log's last
// segment in the store) takes it: an edit the plan would refuse is
// never written, nor one it says is in force already (its answer).
func (s *Stream) edit(ctx context.Context, r Record, check func(p *Plan) (*Edited, error)) (Edited, error) {
	if err := s.refresh(ctx); err != nil {
		return Edited{}, err
	}
	s.mu.Lock()
	done, err := check(s.plan)
	s.mu.Unlock()
	if err != nil {
		return Edited{}, err
	}
	if done != nil {
		// Its segment may be the last, its second copy not written:
		// answered once it has one.
		s.wmu.Lock()
		err := s.tail.mend(ctx, s.st, s.job, s.segs)
		s.wmu.Unlock()
		if err != nil {
			return Edited{}, err
		}
		return *done, nil
	}
	out, err := s.submit(ctx, r)
	if err == nil {
		err = out.Err
	}
	if err != nil {
		return Edited{}, err
	}
	return *out.Edited, nil
}
