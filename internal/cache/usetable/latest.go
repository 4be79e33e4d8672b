package usetable

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/brandgw/brand/internal/cache/chunkcache"
	"github.com/brandgw/brand/internal/job/jobstream"
)

// Prefetchable is Snapshot.Prefetchable in the latest table.
func (s *Table) Prefetchable(k chunkcache.Key) bool { return s.Snapshot().Prefetchable(k) }

// Displaces is Snapshot.Displaces in the latest table.
func (s *Table) Displaces(need, lead int64) bool { return s.Snapshot().Displaces(need, lead) }

// StandIn is Snapshot.StandIn in the latest table.
func (s *Table) StandIn(k chunkcache.Key) bool { return s.Snapshot().StandIn(k) }

// Keeps is Snapshot.Keeps in the latest table.
func (s *Table) Keeps(d int64) bool { return s.Snapshot().Keeps(d) }

// Tally is told of every chunk a prefetch read for an epoch of a stream,
// from the store or (disk) from the disk tier below the cache
// (livestats.Stats, which credits it to the stream).
type Tally interface {
	Prefetched(js jobstream.Stream, epoch uint64, chunk int, bytes int64, disk bool)
}

// Collectors are the use table's metrics of turns, read when scraped.
func (s *Table) Collectors() []prometheus.Collector {
	return []prometheus.Collector{
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "brand_turn_wait_seconds_total",
			Help: "Time batches waited for their job's turn because the windows the jobs read did not fit in the cache together."},
			func() float64 { return s.Turns().Waited.Seconds() }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "brand_turns_overdue_total",
			Help: "Turns given past --max-turn-wait although the job's window did not fit beside the others'."},
			func() float64 { return float64(s.Turns().Overdue) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "brand_jobs_waiting",
			Help: "Job streams waiting for a turn now."},
			func() float64 { return float64(s.Turns().Waiting) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "brand_batches_serving",
			Help: "Batches admitted (each rank's bounded by usetable.MaxRankInflight) and not yet holding their chunks."},
			func() float64 {
				s.mu.Lock()
				defer s.mu.Unlock()
				n := 0
				for _, st := range s.streams {
					n += st.inflight.serving
				}
				return float64(n)
			}),
	}
}
