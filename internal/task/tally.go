package task

// tally keeps a plan's counts of its prompts as they change, so that a
// plan's report (Plan.Count) costs nothing however many prompts it has:
// the prompts in each place, those the policy weighs 1, and the prompts
// not retired by the passes they have done.
type tally struct {
	where  [inExcluded + 1]int
	inBand int
	served []int  // served[s]: the prompts not retired that have done s passes
	lo     uint32 // no prompt not retired has done fewer passes
}

// newTally is the tally of n prompts in the first pass, inBand of them
// weighed 1.
func newTally(n, inBand int) tally {
	t := tally{inBand: inBand, served: []int{n}}
	t.where[inPool] = n
	return t
}

// set moves a prompt from the place *w to place to.
func (t *tally) set(w *uint8, to uint8) {
	t.where[*w]--
	t.where[to]++
	*w = to
}

// band counts a prompt's weight changing from in band (was) or not to
// in band (now) or not.
func (t *tally) band(was, now bool) {
	switch {
	case was && !now:
		t.inBand--
	case !was && now:
		t.inBand++
	}
}

// serve moves a prompt not retired from having done from passes to to.
func (t *tally) serve(from, to uint32) {
	t.leave(from)
	t.enter(to)
}

// enter counts a prompt not retired that has done s passes; leave
// uncounts one.
func (t *tally) enter(s uint32) {
	for int(s) >= len(t.served) {
		t.served = append(t.served, 0)
	}
	t.served[s]++
	t.lo = min(t.lo, s)
}

func (t *tally) leave(s uint32) { t.served[s]-- }

// passesDone is the passes every prompt not retired has done (cur when
// every prompt is retired).
func (t *tally) passesDone(cur uint32) uint32 {
	for int(t.lo) < len(t.served) && t.served[t.lo] == 0 {
		t.lo++
	}
	if int(t.lo) == len(t.served) {
		return cur // enter lowers lo again
	}
	return t.lo
}

// tallyOf counts prompts afresh, inBand saying whether the policy weighs
// prompt q 1: a plan restored from a snapshot.
func tallyOf(prompts []prompt, inBand func(q uint32) bool) tally {
	t := tally{}
	for q := range prompts {
		pr := &prompts[q]
		t.where[pr.where]++
		if inBand(uint32(q)) {
			t.inBand++
		}
		if pr.where != inRetired && pr.where != inExcluded {
			t.enter(pr.served)
		}
	}
	t.lo = 0
	return t
}
