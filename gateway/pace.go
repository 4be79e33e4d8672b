package gateway

import (
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
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "brand_store_budget_share", Help: "This node's part of the store budget: 1 over the agreed members."},
			stat(func(s s3backend.PaceStats) float64 { return s.Share })),
	)
}

// followers tell each follower the agreed membership.
type followers []membership.Follower

func (fs followers) Follow(agreed *cluster.Membership, slots []int, warming string) {
	for _, f := range fs {
		f.Follow(agreed, slots, warming)
	}
}

// paceShare splits the store budget among the agreed members.
type paceShare struct{ p *s3backend.Pacer }

func (s paceShare) Follow(agreed *cluster.Membership, _ []int, _ string) {
	if n := agreed.Len(); n > 0 {
		s.p.SetShare(1 / float64(n))
	}
}

// follow is the follower of the agreed membership: the routing, and the
// pacer's share when there is one.
func follow(routing membership.Follower, p *s3backend.Pacer) membership.Follower {
	if p == nil {
		return routing
	}
	return followers{routing, paceShare{p}}
}
