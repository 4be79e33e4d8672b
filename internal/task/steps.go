package task

// StepLog is a plan's counted answers in the order counted: step s is
// answers s·B … s·B+B−1. It holds those from the cbase-th on, and their
// scores from the sbase-th: the steps the trainer left far behind are
// forgotten (Spec.Keep).
type StepLog struct {
	b            uint64
	counted      []Counted
	scores       []float32
	cbase, sbase uint64
}

// Total is the number of answers counted, forgotten ones included.
func (l *StepLog) Total() uint64 { return l.cbase + uint64(len(l.counted)) }

// Full is the number of full steps.
func (l *StepLog) Full() uint64 { return l.Total() / l.b }

// add counts c with its scores (nil for passes), and answers its step.
func (l *StepLog) add(c Counted, scores []float32) uint64 {
	if scores != nil {
		c.scoreAt, c.scoreN = l.sbase+uint64(len(l.scores)), uint32(len(scores))
		l.scores = append(l.scores, scores...)
	}
	l.counted = append(l.counted, c)
	return (l.Total() - 1) / l.b
}

// forget drops the answers of the steps more than keep behind trainer, in
// pieces of at least a quarter of what is kept.
func (l *StepLog) forget(trainer, keep uint64) {
	if trainer <= keep {
		return
	}
	from := (trainer - keep) * l.b
	if from <= l.cbase || from-l.cbase < max(keep*l.b/4, 1) {
		return
	}
	drop := from - l.cbase
	last := l.counted[drop-1]
	if send := last.scoreAt + uint64(last.scoreN); send > l.sbase {
		l.scores = append(l.scores[:0:0], l.scores[send-l.sbase:]...)
		l.sbase = send
	}
	l.counted = append(l.counted[:0:0], l.counted[drop:]...)
	l.cbase = from
}

// Step is step s's counted answers, and false while it is not full (or
// forgotten).
func (l *StepLog) Step(s uint64) ([]Counted, bool) {
	if s >= l.Full() || s*l.b < l.cbase {
		return nil, false
	}
	return l.counted[s*l.b-l.cbase : s*l.b-l.cbase+l.b], true
}

// Forgotten reports whether step s is full and forgotten.
func (l *StepLog) Forgotten(s uint64) bool { return s < l.Full() && s*l.b < l.cbase }

// Scores are a counted answer's scores (nil for one given as passes).
func (l *StepLog) Scores(c Counted) []float32 {
	if c.scoreN == 0 {
		return nil
	}
	return l.scores[c.scoreAt-l.sbase : c.scoreAt-l.sbase+uint64(c.scoreN)]
}
