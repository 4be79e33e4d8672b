package gateway

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/brandgw/brand/internal/cache/chunkcache"
)

// metrics holds one gateway's Prometheus collectors, registered on the
// gateway's own registry so that several gateways can live in one process.
type metrics struct {
	requests      *prometheus.CounterVec
	errors        *prometheus.CounterVec
	duration      *prometheus.HistogramVec
	bytesServed   prometheus.Counter
	samplesServed prometheus.Counter

	backendRequests *prometheus.CounterVec
	backendBytes    prometheus.Counter
	backendSeconds  *prometheus.HistogramVec
}

// newMetrics registers the HTTP and cache collectors on reg; the parts
// register their own.
func newMetrics(reg *prometheus.Registry, cache func() chunkcache.Stats, capacity int64) *metrics {
	f := func(c prometheus.Collector) { reg.MustRegister(c) }
	m := &metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "brand_http_requests_total", Help: "HTTP requests by route and status code.",
		}, []string{"route", "code"}),
		errors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "brand_http_errors_total", Help: "Requests answered with an error status (400 and above), by route and reason (httperr.Reason: cache_busy, not_ready, too_large, bad_image, ...).",
		}, []string{"route", "reason"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "brand_http_request_duration_seconds", Help: "Time to serve a request, including writing the body.",
			Buckets: prometheus.ExponentialBuckets(0.0005, 2, 18),
		}, []string{"route"}),
		bytesServed:   prometheus.NewCounter(prometheus.CounterOpts{Name: "brand_served_bytes_total", Help: "Body bytes of batches and samples written to clients."}),
		samplesServed: prometheus.NewCounter(prometheus.CounterOpts{Name: "brand_served_samples_total", Help: "Samples written to clients."}),
		backendRequests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "brand_backend_requests_total", Help: "Requests to the object store by operation and result (ok or error).",
		}, []string{"op", "result"}),
		backendBytes: prometheus.NewCounter(prometheus.CounterOpts{Name: "brand_backend_read_bytes_total", Help: "Bytes read from the object store."}),
		backendSeconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "brand_backend_request_duration_seconds", Help: "Latency of object-store requests.",
			Buckets: prometheus.ExponentialBuckets(0.0005, 2, 18),
		}, []string{"op"}),
	}
	f(m.requests)
	f(m.errors)
	f(m.duration)
	f(m.bytesServed)
	f(m.samplesServed)
	f(m.backendRequests)
	f(m.backendBytes)
	f(m.backendSeconds)
	counter := func(name, help string, v func(chunkcache.Stats) int64) {
		f(prometheus.NewCounterFunc(prometheus.CounterOpts{Name: name, Help: help}, func() float64 { return float64(v(cache())) }))
	}
	gauge := func(name, help string, v func(chunkcache.Stats) int64) {
		f(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: name, Help: help}, func() float64 { return float64(v(cache())) }))
	}
	counter("brand_cache_hits_total", "Chunk lookups served from the cache (including joins of a load in flight).", func(s chunkcache.Stats) int64 { return s.Hits })
	counter("brand_cache_misses_total", "Chunk lookups that had to read the store.", func(s chunkcache.Stats) int64 { return s.Misses })
	counter("brand_cache_evictions_total", "Chunks evicted.", func(s chunkcache.Stats) int64 { return s.Evictions })
	counter("brand_cache_loads_total", "Chunk loads started, by demand or prefetch.", func(s chunkcache.Stats) int64 { return s.Loads })
	counter("brand_cache_load_errors_total", "Chunk loads that failed.", func(s chunkcache.Stats) int64 { return s.LoadErrors })
	counter("brand_cache_prefetch_loads_total", "Chunk loads started by prefetch.", func(s chunkcache.Stats) int64 { return s.PrefetchLoads })
	counter("brand_cache_prefetch_unused_total", "Chunks read by prefetch and evicted before any request used them: wasted reads.", func(s chunkcache.Stats) int64 { return s.PrefetchUnused })
	gauge("brand_cache_bytes", "Bytes resident in the chunk cache (ready or loading).", func(s chunkcache.Stats) int64 { return s.Bytes })
	gauge("brand_cache_entries", "Chunks resident in the cache.", func(s chunkcache.Stats) int64 { return s.Entries })
	gauge("brand_cache_pinned_entries", "Chunks pinned by responses in progress.", func(s chunkcache.Stats) int64 { return s.Pinned })
	gauge("brand_cache_pinned_bytes", "Bytes of the chunks pinned by responses in progress and loads.", func(s chunkcache.Stats) int64 { return s.PinnedBytes })
	gauge("brand_cache_waiting_requests", "Batch requests queued for room to pin their chunks.", func(s chunkcache.Stats) int64 { return s.Waiting })
	gauge("brand_cache_buffer_bytes", "Capacity of every chunk buffer the cache holds, in use or free.", func(s chunkcache.Stats) int64 { return s.BufferBytes })
	f(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "brand_cache_capacity_bytes", Help: "The cache's byte bound."}, func() float64 { return float64(capacity) }))
	f(collectors.NewGoCollector())
	f(collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// ObserveBackend implements s3backend.Observer.
func (m *metrics) ObserveBackend(op string, bytes int64, d time.Duration, err error) {
	result := "ok"
	if err != nil {
		result = "error"
	}
	m.backendRequests.WithLabelValues(op, result).Inc()
	m.backendBytes.Add(float64(bytes))
	m.backendSeconds.WithLabelValues(op).Observe(d.Seconds())
}
