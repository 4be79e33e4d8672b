package task

import "github.com/prometheus/client_golang/prometheus"

// Metrics are a node's task streams' counters, summed over its jobs (a
// label per job would grow without bound: /tasks/{job} has each one's).
type Metrics struct {
	leases, leased, rows, repeats prometheus.Counter
	segments, races, damaged      prometheus.Counter
	segmentBytes                  prometheus.Counter
	snapshots, snapshotFailures   prometheus.Counter
}

// NewMetrics registers a node's task metrics with reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	c := func(name, help string) prometheus.Counter {
		return prometheus.NewCounter(prometheus.CounterOpts{Name: name, Help: help})
	}
	m := &Metrics{
		leases:           c("brand_task_leases_total", "Leases this node made (docs/tasks.md)."),
		leased:           c("brand_task_prompts_leased_total", "Prompts in the leases this node made."),
		rows:             c("brand_task_feedback_rows_total", "Answers this node applied for its requests (repeats not counted)."),
		repeats:          c("brand_task_feedback_repeats_total", "Answers to prompts already answered: changed nothing."),
		segments:         c("brand_task_segments_written_total", "Segments this node wrote to task logs."),
		segmentBytes:     c("brand_task_segment_bytes_total", "Bytes of the segments this node wrote."),
		races:            c("brand_task_segment_races_total", "Segments another node wrote first: this node applied the winner's and wrote after it."),
		damaged:          c("brand_task_segments_damaged_total", "Segments whose first copy failed its checksum, read from their second."),
		snapshots:        c("brand_task_snapshots_total", "Snapshots of task plans this node wrote (every 1,024 segments of a log)."),
		snapshotFailures: c("brand_task_snapshot_failures_total", "Snapshots of task plans this node failed to write (the log holds everything: a load reads more segments)."),
	}
	reg.MustRegister(m.leases, m.leased, m.rows, m.repeats, m.segments, m.segmentBytes, m.races, m.damaged, m.snapshots, m.snapshotFailures)
	return m
}

// The counts, each a no-op on nil Metrics (a book made without them).

func (m *Metrics) wrote(bytes int) {
	if m != nil {
		m.segments.Inc()
		m.segmentBytes.Add(float64(bytes))
	}
}

func (m *Metrics) lost() {
	if m != nil {
		m.races.Inc()
	}
}

func (m *Metrics) damagedOne() {
	if m != nil {
		m.damaged.Inc()
	}
}

func (m *Metrics) outcome(o Outcome) {
	if m == nil {
		return
	}
	if o.Lease != nil {
		m.leases.Inc()
		m.leased.Add(float64(len(o.Lease.Prompts)))
	}
	if o.Answer != nil {
		m.rows.Add(float64(o.Answer.Applied))
		m.repeats.Add(float64(o.Answer.Repeats))
	}
}

func (m *Metrics) snapshotWritten() {
	if m != nil {
		m.snapshots.Inc()
	}
}

func (m *Metrics) snapshotFailed() {
	if m != nil {
		m.snapshotFailures.Inc()
	}
}
