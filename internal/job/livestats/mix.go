package livestats

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/brandgw/brand/api"
	"github.com/brandgw/brand/internal/batch/layout"
)

// mixtures counts what mixtures served, per component, for /stats and
// /metrics: the samples, and the bytes loaded for them — by their
// batches' reads and by the prefetch that follows their component
// streams. It keeps the most recent maxMixtures mixtures.
type mixtures struct {
	mu      sync.Mutex
	byMix   map[string]*api.MixStat
	order   []string
	streams map[layout.Stream]mixComp // component streams seen, to credit prefetch loads
	samples *prometheus.CounterVec
	backend *prometheus.CounterVec
	disk    *prometheus.CounterVec
}

const maxMixtures = 64

func newMixtures(reg prometheus.Registerer) *mixtures {
	m := &mixtures{byMix: map[string]*api.MixStat{}, streams: map[layout.Stream]mixComp{},
		samples: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "brand_mix_samples_total",
			Help: "Samples served as components of mixtures (mix=), by dataset."}, []string{"dataset"}),
		backend: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "brand_mix_backend_bytes_total",
			Help: "Bytes read from the store for mixtures' batches, by component dataset."}, []string{"dataset"}),
		disk: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "brand_mix_disk_bytes_total",
			Help: "Bytes read from the disk tier for mixtures' batches, by component dataset."}, []string{"dataset"}),
	}
	reg.MustRegister(m.samples, m.backend, m.disk)
	return m
}

// mixComp is a component of a mixture.
type mixComp struct {
	mix  string
	comp int
}

// prefetched credits a prefetch load to the mixture component whose
// stream it was for, if any.
func (m *mixtures) prefetched(js layout.Stream, bytes int64, disk bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	mc, ok := m.streams[js]
	if !ok {
		return
	}
	st, ok := m.byMix[mc.mix]
	if !ok {
		return
	}
	c := &st.Components[mc.comp]
	if disk {
		c.DiskBytes += bytes
		m.disk.WithLabelValues(c.Dataset).Add(float64(bytes))
	} else {
		c.BackendBytes += bytes
		m.backend.WithLabelValues(c.Dataset).Add(float64(bytes))
	}
}

// follow registers a batch's mixture and its component streams, before
// its prefetch starts, so that their loads are credited to it.
func (m *mixtures) follow(b *layout.Batch) {
	m.mu.Lock()
	defer m.mu.Unlock()
	key := m.entryLocked(b.Composite()).Mix
	for _, p := range b.Parts {
		if _, ok := m.streams[p.Stream]; !ok && len(m.streams) >= 16*maxMixtures {
			clear(m.streams) // bounded: a flood of seeds forgets the older streams
		}
		m.streams[p.Stream] = mixComp{key, p.Comp}
	}
}

// entryLocked returns the figures of a mixture, made if new.
func (m *mixtures) entryLocked(mx layout.Composite) *api.MixStat {
	key := mx.Name()
	st, ok := m.byMix[key]
	if !ok {
		st = &api.MixStat{Mix: key}
		for _, ds := range mx.Datasets() {
			st.Components = append(st.Components, api.MixComponentStat{Dataset: ds.Name})
		}
		if len(m.order) >= maxMixtures {
			delete(m.byMix, m.order[0]) // its streams find no mixture and are skipped
			m.order = m.order[1:]
		}
		m.byMix[key] = st
		m.order = append(m.order, key)
	}
	return st
}

// add counts what a part's read served and loaded.
func (m *mixtures) add(mx layout.Composite, js layout.Stream, comp, samples int, backend, disk int64) {
	name := js.DS.Name
	m.samples.WithLabelValues(name).Add(float64(samples))
	m.backend.WithLabelValues(name).Add(float64(backend))
	m.disk.WithLabelValues(name).Add(float64(disk))
	m.mu.Lock()
	defer m.mu.Unlock()
	c := &m.entryLocked(mx).Components[comp]
	c.Samples += int64(samples)
	c.BackendBytes += backend
	c.DiskBytes += disk
}

// snapshot returns the mixtures' figures, oldest first.
func (m *mixtures) snapshot() []api.MixStat {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]api.MixStat, 0, len(m.order))
	for _, k := range m.order {
		st := *m.byMix[k]
		st.Components = append([]api.MixComponentStat(nil), st.Components...)
		out = append(out, st)
	}
	return out
}
