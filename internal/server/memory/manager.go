package memory

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/brandgw/brand/api"
	"github.com/brandgw/brand/internal/cache/chunkcache"
)

// Cache is what the manager reads of the chunk cache: its state, for the
// pressure signal, and the buffers it holds, for the budget's figures.
type Cache interface {
	Stats() chunkcache.Stats
	Capacity() int64
}

// Config configures a Manager.
type Config struct {
	// Budget is the budget's shares, as Fit returned them.
	Budget Budget
	// MaxWait bounds a wait for room in Copies or Decodes; past it the
	// caller is refused with an error wrapping Busy.
	MaxWait time.Duration
	Busy    error
	// Registry, if set, gets the brand_memory_* metrics.
	Registry prometheus.Registerer
}

// Manager is a node's memory manager (see the package doc). Safe for
// concurrent use.
type Manager struct {
	budget  Budget
	pool    pool
	copies  *Account
	decodes *Account
	cache   Cache // set once by Watch; nil: no cache, no pressure
}

// New returns a manager of c's shares.
func New(c Config) *Manager {
	m := &Manager{budget: c.Budget}
	m.copies = newAccount("copies", "memory for copies of samples out of the cache, in bytes", c.Budget.Copies, c.MaxWait, c.Busy, &m.pool)
	m.decodes = newAccount("decodes", "memory for decoding images and chunks, in bytes", c.Budget.Decodes, c.MaxWait, c.Busy, &m.pool)
	if c.Registry != nil {
		m.register(c.Registry)
	}
	return m
}

// Watch names the chunk cache: its state is the pressure signal and its
// buffers the cache share's figure. Called once, before the node serves
// (the cache is built after the manager: its loader decodes in the
// manager's memory).
func (m *Manager) Watch(c Cache) { m.cache = c }

// Budget is the budget's shares.
func (m *Manager) Budget() Budget { return m.budget }

// Copies is the share copies out of the cache, transformed batches and
// premade batches and next batches' samples take: held until the response that carries them is
// written.
func (m *Manager) Copies() *Account { return m.copies }

// Decodes is the share decodes take while they run: an image's working
// memory (transform.Footprint.Work), a chunk of a dataset served in
// place being read and decoded; and below them request bodies being read
// and decoded (Account.Hold).
func (m *Manager) Decodes() *Account { return m.decodes }

// Get returns an empty buffer of capacity at least n from the pools; Put
// gives it back. A buffer from Get is memory of whatever share its user
// reserved it from, or of the base: the pools only save its allocation.
func (m *Manager) Get(n int64) []byte { return m.pool.get(n) }

// Put keeps b for a later Get. The caller must not use b after.
func (m *Manager) Put(b []byte) { m.pool.put(b) }

// Prefill puts k buffers of n bytes' size class into the pools, every
// page touched, as the chunk cache's Preallocate does for its buffers:
// for a node serving datasets in place, the buffers its first loads read
// chunks into before decoding them, which would otherwise each be fresh
// memory faulted in page by page as the store's bytes arrive (measured:
// 35,000 faults a cold epoch of 14 MDS shards, against 500 for tar
// chunks read into the cache's touched buffers). It fills no more than
// the decodes share holds, and reports the bytes it filled. Like every
// pooled buffer they count in the base while no one uses them; unlike
// the others, the pools keep them for the node's life (a class keeps as
// many as were prefilled), so that no collection and no core a load
// runs on makes a load fault in a fresh one.
func (m *Manager) Prefill(n int64, k int) int64 {
	if n <= 0 || k <= 0 {
		return 0
	}
	size := max(n, int64(1)<<(class(n)+minClassShift))
	k = int(min(int64(k), m.budget.Decodes/size))
	m.pool.fill(n, k)
	return int64(k) * size
}

// UnderPressure reports whether the cache is under pressure, so that a
// response still being written from pinned chunks should give them back
// (reader.Result.Relieve): requests wait for room, or, once a response
// has been written for longer than a fast client takes (after),
// responses pin more than half of it — a slow client then holds what the
// next requests will need.
func (m *Manager) UnderPressure(after bool) bool {
	if m.cache == nil {
		return false
	}
	st := m.cache.Stats()
	return st.Waiting > 0 || after && st.PinnedBytes > m.cache.Capacity()/2
}

// Stalled reports whether callers wait for copies or decodes and none
// has been let through for d.
func (m *Manager) Stalled(d time.Duration) bool {
	return m.copies.Stalled(d) || m.decodes.Stalled(d)
}

// Stats are the budget's shares and what each holds now, for /stats.
func (m *Manager) Stats() api.MemoryStats {
	st := api.MemoryStats{Limit: m.budget.Total(),
		Shares: []api.MemoryShare{
			{Share: "cache", Bytes: m.budget.Cache},
			{Share: "base", Bytes: m.budget.Base},
			{Share: "copies", Bytes: m.budget.Copies, Held: m.copies.Held(), Refused: m.copies.Refused()},
			{Share: "decodes", Bytes: m.budget.Decodes, Held: m.decodes.Held(), Refused: m.decodes.Refused()},
		}}
	if m.cache != nil {
		st.Shares[0].Held = m.cache.Stats().BufferBytes
	}
	return st
}

func (m *Manager) register(reg prometheus.Registerer) {
	for i, part := range []string{"cache", "base", "copies", "decodes"} {
		l := prometheus.Labels{"part": part}
		reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "brand_memory_budget_bytes", ConstLabels: l,
			Help: "The node's memory budget (--memory-limit) by part: the cache, the rest of the process, copies out of the cache, decodes."},
			func() float64 { return float64(m.Stats().Shares[i].Bytes) }))
		if part == "base" {
			continue
		}
		reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "brand_memory_held_bytes", ConstLabels: l,
			Help: "Bytes held now by part of the memory budget: the cache's chunk buffers, copies and transformed batches until written, decodes while they run."},
			func() float64 { return float64(m.Stats().Shares[i].Held) }))
	}
	for _, a := range []*Account{m.copies, m.decodes} {
		reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "brand_memory_refused_total", ConstLabels: prometheus.Labels{"part": a.part},
			Help: "Reservations of a part of the memory budget refused after waiting the bound (answered 503 with Retry-After)."},
			func() float64 { return float64(a.Refused()) }))
	}
}
