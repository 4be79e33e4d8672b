package route

import (
	"time"

	"github.com/brandgw/brand/internal/cluster/transport"
)

// OffloadSlack is how much longer, in expected wait, an owner's transform
// queue must be than this node's before this node asks the owner for
// samples as stored and transforms them itself. It keeps nodes whose
// queues differ by a few images asking owners, as the layout intends (the
// owner holds the bytes; a tensor crosses the network once), and moves
// the work off a node that is behind: a slower machine, fewer cores, or
// more ranks' samples than the others. Measured with
// BenchmarkTransformOffload (two in-process nodes, one with half the
// workers; docs/transform.md §11): at 10 ms the straggler transformed 92
// to 109 of its 128 images an epoch and the other node the rest; at 50 ms
// 118 to 122, the queues' expected waits there being 10 to 60 ms.
const OffloadSlack = 10 * time.Millisecond

// transformAt reports whether node k is to transform, under pipeline t,
// the samples this node asks it for: it defines t with t's fingerprint
// (its last state says so), and its transform queue's expected wait,
// also from its last state, is not longer than this node's by more than
// the slack (Config.Slack; OffloadSlack by default). A node not probed yet is asked for samples as stored:
// this node's own transform is always right.
//
// Both figures are at most a probe interval old (the state probe carries
// the owner's): a steady difference between nodes — the straggler the
// rule is for — shows in them, a passing burst moves no work.
func (r *Router) transformAt(k int, t transport.Transform) bool {
	st := r.peers.State(k)
	if st == nil || st.Transforms[t.Name] != t.Fingerprint {
		return false
	}
	if st.Load == nil || r.load == nil || r.slack < 0 {
		return true
	}
	return st.Load.Wait() <= r.load().Wait()+r.slack
}

// originFor is origin as node k is asked with it: without the pipeline
// when k is not to transform (transformAt), so that k answers the
// samples as stored and this node's stage transforms them.
func (r *Router) originFor(k int, origin *transport.Origin, samples int) *transport.Origin {
	if origin == nil || !origin.Transform.On() {
		return origin
	}
	if r.transformAt(k, origin.Transform) {
		r.askedTransformed.Add(int64(samples))
		return origin
	}
	r.askedRaw.Add(int64(samples))
	o := *origin
	o.Transform = transport.Transform{}
	return &o
}
