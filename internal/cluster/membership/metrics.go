package membership

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/brandgw/brand/api"
	"github.com/brandgw/brand/cluster"
)

// metrics show the versions and the agreed members.
type metrics struct {
	versions *prometheus.GaugeVec   // members, by kind and version
	members  *prometheus.GaugeVec   // 1 per agreed member
	changes  *prometheus.CounterVec // by kind
	// What the changes moved to this node, in all and in the last one,
	// and how long the last one took.
	movedChunks  prometheus.Counter
	movedBytes   *prometheus.CounterVec // by source
	lastChunks   prometheus.Gauge
	lastBytes    *prometheus.GaugeVec // by source
	lastSeconds  *prometheus.GaugeVec // by phase
	flipTimeouts prometheus.Counter
	leaving      prometheus.Gauge
}

func newMetrics(reg prometheus.Registerer) metrics {
	m := metrics{
		versions: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "brand_membership_members",
			Help: "Members of this node's membership versions, by kind: local (its source's list), reported (what it tells its peers, after the warm-up) and agreed (what most live nodes report; requests without members= are laid out under it)."},
			[]string{"kind", "version"}),
		members: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "brand_membership_member",
			Help: "1 for each member of the agreed membership."}, []string{"member"}),
		changes: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "brand_membership_changes_total",
			Help: "Changes of this node's membership versions, by kind (local, reported, agreed)."}, []string{"kind"}),
	}
	m.movedChunks = prometheus.NewCounter(prometheus.CounterOpts{Name: "brand_membership_moved_chunks_total",
		Help: "Chunks this node gained in membership changes and loaded before reporting the new version (those the jobs needed soon)."})
	m.movedBytes = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "brand_membership_moved_bytes_total",
		Help: "Bytes of the chunks this node loaded for membership changes, by source: peer (the old owner's cache), disk (this node's disk tier) or store."}, []string{"source"})
	m.lastChunks = prometheus.NewGauge(prometheus.GaugeOpts{Name: "brand_membership_last_change_chunks",
		Help: "Chunks this node loaded for its last membership change."})
	m.lastBytes = prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "brand_membership_last_change_bytes",
		Help: "Bytes this node loaded for its last membership change, by source (peer, disk, store)."}, []string{"source"})
	m.lastSeconds = prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "brand_membership_last_change_seconds",
		Help: "How long this node's last membership change took, by phase: warm (loading the chunks it gains), flip (until it reported the new version) and agree (until the cluster agreed on it; 0 until then)."}, []string{"phase"})
	m.flipTimeouts = prometheus.NewCounter(prometheus.CounterOpts{Name: "brand_membership_flip_timeouts_total",
		Help: "Membership changes this node reported past --membership-flip-timeout, without every gaining member warm."})
	m.leaving = prometheus.NewGauge(prometheus.GaugeOpts{Name: "brand_membership_leaving",
		Help: "1 once this node was told to leave (SIGTERM) and hands its chunks over."})
	reg.MustRegister(m.versions, m.members, m.changes, m.movedChunks, m.movedBytes, m.lastChunks, m.lastBytes, m.lastSeconds, m.flipTimeouts, m.leaving)
	return m
}

// changed records a change's figures once this node reports it.
func (m metrics) changed(c api.MembershipChange) {
	m.movedChunks.Add(float64(c.Chunks))
	m.lastChunks.Set(float64(c.Chunks))
	for src, b := range map[string]int64{"peer": c.PeerBytes, "disk": c.DiskBytes, "store": c.StoreBytes} {
		m.movedBytes.WithLabelValues(src).Add(float64(b))
		m.lastBytes.WithLabelValues(src).Set(float64(b))
	}
	m.lastSeconds.WithLabelValues("warm").Set(c.WarmSeconds)
	m.lastSeconds.WithLabelValues("flip").Set(c.FlipSeconds)
	m.agreed(c)
	if c.FlipTimedOut {
		m.flipTimeouts.Inc()
	}
}

// agreed records the time to agreement of a change.
func (m metrics) agreed(c api.MembershipChange) {
	m.lastSeconds.WithLabelValues("agree").Set(c.AgreeSeconds)
}

// show records a version of kind in the metrics.
func (m metrics) show(kind string, ms *cluster.Membership, changed bool) {
	m.versions.DeletePartialMatch(prometheus.Labels{"kind": kind})
	m.versions.WithLabelValues(kind, ms.Version()).Set(float64(ms.Len()))
	if changed {
		m.changes.WithLabelValues(kind).Inc()
	}
	if kind == "agreed" {
		m.members.Reset()
		for _, u := range ms.Members() {
			m.members.WithLabelValues(u).Set(1)
		}
	}
}
