package task

// StepLog is a plan's counted answers, each domain's in the order
// counted: step s holds domain d's answers C(d, s) … C(d, s+1) − 1
// (stepRule; a job of one domain: answers s·B … s·B+B−1). It holds each
// domain's from its cbase-th on, and their scores from the sbase-th: the
// steps the trainer left far behind are forgotten (Spec.Keep).
type StepLog struct {
	b    uint64
	rule *stepRule
	doms []domainLog
	// full is the full steps last counted (of several domains): answers
	// only add to them, and a ratio edit applies from a step not full.
	full uint64
}

// domainLog is one domain's counted answers.
type domainLog struct {
	counted      []Counted
	scores       []float32
	cbase, sbase uint64
}

func (d *domainLog) total() uint64 { return d.cbase + uint64(len(d.counted)) }

// newStepLog is the log of a job of steps of b prompts over k domains
// shared by rule.
func newStepLog(b uint64, k int, rule *stepRule) StepLog {
	return StepLog{b: b, rule: rule, doms: make([]domainLog, k)}
}

// Total is the number of answers counted, forgotten ones included.
func (l *StepLog) Total() uint64 {
	var n uint64
	for i := range l.doms {
		n += l.doms[i].total()
	}
	return n
}

// counts is each domain's answers counted.
func (l *StepLog) counts() []uint64 {
	out := make([]uint64, len(l.doms))
	for i := range l.doms {
		out[i] = l.doms[i].total()
	}
	return out
}

// Full is the number of full steps.
func (l *StepLog) Full() uint64 {
	if len(l.doms) == 1 {
		return l.doms[0].total() / l.b
	}
	counted := l.counts()
	if l.full == 0 {
		l.full = l.rule.full(counted)
		return l.full
	}
	for l.rule.fills(counted, l.full+1) {
		l.full++
	}
	return l.full
}

// add counts c, of domain d, with its scores (nil for passes), and
// answers its step.
func (l *StepLog) add(d int, c Counted, scores []float32) uint64 {
	x := &l.doms[d]
	if scores != nil {
		c.scoreAt, c.scoreN = x.sbase+uint64(len(x.scores)), uint32(len(scores))
		x.scores = append(x.scores, scores...)
	}
	x.counted = append(x.counted, c)
	return l.rule.stepOf(d, x.total()-1)
}

// forget drops the answers of the steps more than keep behind trainer, in
// pieces of at least a quarter of what is kept.
func (l *StepLog) forget(trainer, keep uint64) {
	if trainer <= keep {
		return
	}
	for d := range l.doms {
		x := &l.doms[d]
		from := l.rule.before(d, trainer-keep)
		kept := l.rule.before(d, trainer) - from
		if from <= x.cbase || from-x.cbase < max(kept/4, 1) {
			continue
		}
		drop := min(from-x.cbase, uint64(len(x.counted)))
		if drop == 0 {
			continue
		}
		last := x.counted[drop-1]
		if send := last.scoreAt + uint64(last.scoreN); send > x.sbase {
			x.scores = append(x.scores[:0:0], x.scores[send-x.sbase:]...)
			x.sbase = send
		}
		x.counted = append(x.counted[:0:0], x.counted[drop:]...)
		x.cbase += drop
	}
}

// Step is step s's counted answers, each domain's in turn, and false
// while it is not full (or forgotten).
func (l *StepLog) Step(s uint64) ([]Counted, bool) {
	if s >= l.Full() || l.Forgotten(s) {
		return nil, false
	}
	if len(l.doms) == 1 {
		x := &l.doms[0]
		return x.counted[s*l.b-x.cbase : s*l.b-x.cbase+l.b], true
	}
	out := make([]Counted, 0, l.b)
	for d := range l.doms {
		x := &l.doms[d]
		out = append(out, x.counted[l.rule.before(d, s)-x.cbase:l.rule.before(d, s+1)-x.cbase]...)
	}
	return out, true
}

// Forgotten reports whether step s is full and forgotten.
func (l *StepLog) Forgotten(s uint64) bool {
	if s >= l.Full() {
		return false
	}
	for d := range l.doms {
		if l.rule.before(d, s) < l.doms[d].cbase {
			return true
		}
	}
	return false
}

// Have is how many of step s's prompts are counted, of its B.
func (l *StepLog) Have(s uint64) uint64 {
	var n uint64
	for d := range l.doms {
		lo, hi := l.rule.before(d, s), l.rule.before(d, s+1)
		n += min(max(l.doms[d].total(), lo), hi) - lo
	}
	return n
}

// Scores are a counted answer's scores (nil for one given as passes), of
// domain d.
func (l *StepLog) Scores(c Counted) []float32 {
	if c.scoreN == 0 {
		return nil
	}
	x := &l.doms[c.dom]
	return x.scores[c.scoreAt-x.sbase : c.scoreAt-x.sbase+uint64(c.scoreN)]
}
