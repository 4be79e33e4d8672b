package disktier

import (
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
)

// metrics are the tier's counters: atomics that /stats reads and
// Prometheus collects through functions, so both see the same figures.
type metrics struct {
	found                         atomic.Int64
	reads, readBytes, misses      atomic.Int64
	writes, writeBytes, evictions atomic.Int64
	skipped, dropped, errors      *labelled
	readSeconds, writeSeconds     prometheus.Histogram
}

// labelled is a counter per value of one label, the values fixed up front.
type labelled struct {
	by map[string]*atomic.Int64
}

func newLabelled(values ...string) *labelled {
	l := &labelled{by: map[string]*atomic.Int64{}}
	for _, v := range values {
		l.by[v] = new(atomic.Int64)
	}
	return l
}

// with returns the counter of value v; a value not declared is a bug, and
// counts under "other" rather than panicking in a server.
func (l *labelled) with(v string) *atomic.Int64 {
	if c, ok := l.by[v]; ok {
		return c
	}
	return l.by["other"]
}

func (l *labelled) sum() (n int64) {
	for _, c := range l.by {
		n += c.Load()
	}
	return n
}

func (l *labelled) collectors(name, help, label string) []prometheus.Collector {
	var cs []prometheus.Collector
	for v, c := range l.by {
		cs = append(cs, prometheus.NewCounterFunc(prometheus.CounterOpts{Name: name, Help: help,
			ConstLabels: prometheus.Labels{label: v}}, func() float64 { return float64(c.Load()) }))
	}
	return cs
}

func newMetrics(reg prometheus.Registerer, t *Tier) *metrics {
	m := &metrics{
		skipped: newLabelled("not needed sooner", "busy", "other"),
		dropped: newLabelled("incomplete", "malformed", "over capacity", "stale", "damaged", "read error", "other"),
		errors:  newLabelled("read", "write", "full", "other"),
		readSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "brand_disk_read_seconds",
			Help: "Time to read one chunk from the disk cache.", Buckets: prometheus.ExponentialBuckets(0.0005, 4, 8)}),
		writeSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "brand_disk_write_seconds",
			Help: "Time to write one chunk to the disk cache.", Buckets: prometheus.ExponentialBuckets(0.0005, 4, 8)}),
	}
	if reg == nil {
		return m
	}
	counter := func(name, help string, c *atomic.Int64) prometheus.Collector {
		return prometheus.NewCounterFunc(prometheus.CounterOpts{Name: name, Help: help}, func() float64 { return float64(c.Load()) })
	}
	cs := []prometheus.Collector{
		m.readSeconds, m.writeSeconds,
		counter("brand_disk_reads_total", "Chunks the RAM cache missed that the disk cache served.", &m.reads),
		counter("brand_disk_read_bytes_total", "Bytes of those chunks.", &m.readBytes),
		counter("brand_disk_misses_total", "Chunks the RAM cache missed that the disk cache did not hold: read from the store.", &m.misses),
		counter("brand_disk_writes_total", "Chunks written to the disk cache.", &m.writes),
		counter("brand_disk_write_bytes_total", "Bytes of those chunks.", &m.writeBytes),
		counter("brand_disk_evictions_total", "Chunks removed from the disk cache to make room for a chunk needed sooner.", &m.evictions),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "brand_disk_found_chunks",
			Help: "Chunk files the disk cache found when the gateway started."}, func() float64 { return float64(m.found.Load()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "brand_disk_bytes",
			Help: "Bytes of the disk cache's files, written or being written."}, func() float64 { return float64(t.Stats().Bytes) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "brand_disk_capacity_bytes",
			Help: "The disk cache's bound (lowered for a drive found full)."}, func() float64 { return float64(t.Stats().Capacity) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "brand_disk_chunks",
			Help: "Chunks the disk cache holds."}, func() float64 { return float64(t.Stats().Chunks) }),
	}
	cs = append(cs, m.skipped.collectors("brand_disk_writes_skipped_total",
		"Chunks loaded from the store and not written to disk: needed later than everything the disk holds, or no writer free in time.", "reason")...)
	cs = append(cs, m.dropped.collectors("brand_disk_dropped_total",
		"Chunk files removed without being served: incomplete, malformed, over capacity, stale (no loaded index names them), damaged or unreadable.", "reason")...)
	cs = append(cs, m.errors.collectors("brand_disk_errors_total",
		"I/O errors of the disk cache, by operation; each costs a store read, never a failed batch.", "op")...)
	reg.MustRegister(cs...)
	return m
}
