package gateway

import (
	"cmp"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/brandgw/brand/cluster"
	"github.com/brandgw/brand/internal/cluster/membership"
	"github.com/brandgw/brand/s3backend"
)

// registerPacer counts the store budget's pacing in reg
// (docs/http-api.md "Metrics").
func registerPacer(reg prometheus.Registerer, p *s3backend.Pacer) {
	stat := func(f func(s s3backend.PaceStats) float64) func() float64 {
		return func() float64 { return f(p.Stats()) }
	}
	reg.MustRegister(
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "brand_store_throttled_total", Help: "Store answers 503 or 429 to GETs and HEADs (each halved this node's rate, at most once per 250 ms)."},
			stat(func(s s3backend.PaceStats) float64 { return float64(s.Throttled) })),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "brand_store_paced_waits_total", Help: "Store requests that waited for the budget."},
			stat(func(s s3backend.PaceStats) float64 { return float64(s.Waits) })),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "brand_store_paced_wait_seconds_total", Help: "Time store requests waited for the budget."},
			stat(func(s s3backend.PaceStats) float64 { return s.WaitSeconds })),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "brand_store_rate_gets", Help: "GETs a second this node paces its store reads at now (0: no bound)."},
			stat(func(s s3backend.PaceStats) float64 { return s.GETs })),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "brand_store_rate_bytes", Help: "Bytes a second this node paces its store reads at now (0: no bound)."},
			stat(func(s s3backend.PaceStats) float64 { return s.Bytes })),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "brand_store_burst_gets", Help: "GETs beyond its rate any second of this node's store reads may carry (the token bucket's size; 0: no bound)."},
			stat(func(s s3backend.PaceStats) float64 { return float64(s.BurstGETs) })),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "brand_store_burst_bytes", Help: "Bytes beyond its rate any second of this node's store reads may carry (0: no bound)."},
			stat(func(s s3backend.PaceStats) float64 { return float64(s.BurstBytes) })),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "brand_store_budget_share", Help: "This node's part of the store budget: 1 over the agreed members."},
			stat(func(s s3backend.PaceStats) float64 { return s.Share })),
	)
}

// followers tell each follower the agreed membership, and those that
// follow the listed one that.
type followers []membership.Follower

func (fs followers) Follow(agreed *cluster.Membership, slots []int, warming string) {
	for _, f := range fs {
		f.Follow(agreed, slots, warming)
	}
}

func (fs followers) FollowList(listed *cluster.Membership, listedByAll bool) {
	for _, f := range fs {
		if lf, ok := f.(membership.ListFollower); ok {
			lf.FollowList(listed, listedByAll)
		}
	}
}

// paceShare splits the store budget among the cluster's nodes: each takes
// 1/n, n the members of the larger of the membership the cluster agrees
// on and the list this node reads from its source. A share falls at once
// (a node lists a joiner at its next poll) and rises only after hold, a
// poll and a probe. A node starts at 1/64 of its share for a hold, and a
// joiner stays there until every member lists it (membership.ListFollower),
// so that it never reads beside members that still take the old split.
// A node its own list leaves out takes 1/64 of a share at once, and the
// members of a shrunk cluster rise only a hold after they agree without
// it.
// The cluster's total then stays within the budget through a join or a
// leave (integration TestStoreBudgetAcrossAJoin).
type paceShare struct {
	p    *s3backend.Pacer
	self string
	hold time.Duration
	// after runs f after d (time.AfterFunc; a test's clock).
	after func(d time.Duration, f func())

	mu             sync.Mutex
	agreed, listed int
	listedOut      bool    // this node's list leaves it out: it leaves, or was removed
	unlisted       bool    // some member does not list this node yet: it joins
	share          float64 // in force; 0 before the first membership
	rising         bool    // a rise is scheduled
}

// joinHold is the part of its share a node starting takes for its first
// hold.
const joinHold = 64

func newPaceShare(p *s3backend.Pacer, self string, hold time.Duration) *paceShare {
	return &paceShare{p: p, self: self, hold: hold, after: func(d time.Duration, f func()) { time.AfterFunc(d, f) }}
}

func (s *paceShare) Follow(agreed *cluster.Membership, _ []int, _ string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if agreed != nil {
		s.agreed = agreed.Len()
	}
	s.updateLocked()
}

func (s *paceShare) FollowList(listed *cluster.Membership, listedByAll bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.unlisted = !listedByAll
	if listed != nil {
		s.listed = listed.Len()
		s.listedOut = listed.Index(s.self) < 0
	}
	s.updateLocked()
}

// target is the share the memberships known now give: a node its own
// list leaves out (leaving, or removed while it still runs) takes the
// least, as the members it lists split the budget without it; so does a
// joiner some member does not list yet, as that member still takes the
// old split.
func (s *paceShare) targetLocked() float64 {
	t := 1 / float64(max(1, s.agreed, s.listed))
	if s.listedOut || s.unlisted {
		t /= joinHold
	}
	return t
}

// updateLocked applies a fall at once and schedules a rise.
func (s *paceShare) updateLocked() {
	t := s.targetLocked()
	switch {
	case s.share == 0:
		s.share = t / joinHold
		s.p.SetShare(s.share)
		s.riseLocked()
	case t < s.share:
		s.share = t
		s.p.SetShare(t)
	case t > s.share:
		s.riseLocked()
	}
}

// riseLocked takes the share up to its target after the hold (the target
// then, which a fall meanwhile has already applied).
func (s *paceShare) riseLocked() {
	if s.rising {
		return
	}
	s.rising = true
	s.after(s.hold, func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		s.rising = false
		if t := s.targetLocked(); t > s.share {
			s.share = t
			s.p.SetShare(t)
		}
	})
}

// follow is the follower of the agreed membership: the routing, and the
// pacer's share when there is one, held for hold before it rises.
func follow(routing membership.Follower, p *s3backend.Pacer, self string, hold time.Duration) membership.Follower {
	if p == nil {
		return routing
	}
	return followers{routing, newPaceShare(p, self, hold)}
}

// paceHold is a poll of the member list and a probe of the peers: the
// time within which every member has listed what one node lists.
func paceHold(c ClusterConfig) time.Duration {
	probe := cmp.Or(c.ProbeInterval, DefaultProbeInterval)
	return cmp.Or(c.MembersPoll, probe) + probe
}
