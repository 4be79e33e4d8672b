package peer

import "time"

// BalanceSlack is how much longer, in expected wait, an owner's transform
// queue must be than this node's before this node asks the owner for
// samples as stored and transforms them itself. It keeps nodes whose
// queues differ by noise — a batch or two of images, each a few
// milliseconds — asking owners, as the layout intends (the owner holds
// the bytes; a tensor crosses the network once), and moves the work only
// off a node that is really behind: a slower machine, fewer cores, or
// more ranks' samples than the others.
const BalanceSlack = 50 * time.Millisecond

// transformAt reports whether node k is to transform, under pipeline t,
// the samples this node asks it for: it defines t with t's fingerprint
// (its last state says so), and its transform queue's expected wait,
// also from its last state, is not longer than this node's by more than
// BalanceSlack. A node not probed yet is asked for samples as stored:
// this node's own transform is always right.
//
// Both figures are at most a probe interval old (the state probe carries
// the owner's): a steady difference between nodes — the straggler the
// rule is for — shows in them, a passing burst moves no work.
func (s *Set) transformAt(k int, t Transform) bool {
	st := s.nodes[k].state.Load()
	if st == nil || st.Transforms[t.Name] != t.Fingerprint {
		return false
	}
	if st.Load == nil || s.load == nil {
		return true
	}
	return st.Load.Wait() <= s.load().Wait()+BalanceSlack
}

// originFor is origin as node k is asked with it: without the pipeline
// when k is not to transform (transformAt), so that k answers the
// samples as stored and this node's stage transforms them.
func (s *Set) originFor(k int, origin *Origin, samples int) *Origin {
	if origin == nil || !origin.Transform.On() {
		return origin
	}
	if s.transformAt(k, origin.Transform) {
		s.askedTransformed.Add(int64(samples))
		return origin
	}
	s.askedRaw.Add(int64(samples))
	o := *origin
	o.Transform = Transform{}
	return &o
}
