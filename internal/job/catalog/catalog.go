package catalog

import (
	"fmt"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"github.com/brandgw/brand/chunkindex"
	"github.com/brandgw/brand/internal/cache/chunkcache"
	"github.com/brandgw/brand/internal/quote"
)

// Catalog holds the loaded datasets by name: for each, the version it
// serves now and the one the last reload replaced. Until the gateway is
// ready, lookups fail with ErrNotReady wrapped with what loading is doing
// (see WaitFor and MarkReady).
type Catalog struct {
	names       []string // as configured
	defaultName string
	log         zerolog.Logger
	metrics     *Metrics
	waiting     atomic.Pointer[string] // why the gateway is not ready; nil once it is

	mu     sync.RWMutex
	byName map[string]versions

	reload reloader
}

// versions are the versions of one dataset a catalog holds.
type versions struct {
	cur, prev *Dataset
	// older are versions before prev that cur extends, held where cur
	// is a partial index (a cluster node's) as cur's views of them
	// (Dataset.Ancestor), and named as held to the cluster: a job that
	// took several appends in turn reads the versions it read before
	// them. (A whole index views any of its ancestors: Version.)
	older []*Dataset
}

// New returns an empty catalog of the datasets names (in configuration
// order), not ready until MarkReady.
func New(names []string, defaultName string, m *Metrics, log zerolog.Logger) *Catalog {
	c := &Catalog{names: names, defaultName: defaultName, log: log, metrics: m, byName: map[string]versions{}}
	m.tables.catalog.Store(c)
	c.reload.init()
	c.WaitFor("dataset indexes are still loading")
	return c
}

// Names returns the configured dataset names, in order.
func (c *Catalog) Names() []string { return c.names }

// Default returns the default dataset's name.
func (c *Catalog) Default() string { return c.defaultName }

// WaitFor records why the gateway is not ready yet; clients read it in
// their 503s.
func (c *Catalog) WaitFor(why string) { c.waiting.Store(&why) }

// MarkReady lets lookups through.
func (c *Catalog) MarkReady() { c.waiting.Store(nil) }

// NotReady is nil once the gateway is ready, and otherwise ErrNotReady
// saying what it is waiting for.
func (c *Catalog) NotReady() error {
	if why := c.waiting.Load(); why != nil {
		return fmt.Errorf("%w: %s", ErrNotReady, *why)
	}
	return nil
}

// Add holds a dataset's first version.
func (c *Catalog) Add(d *Dataset) {
	c.mu.Lock()
	c.byName[d.Name] = versions{cur: d}
	c.mu.Unlock()
	c.metrics.indexInfo.WithLabelValues(d.Name, d.ID(), d.IndexETag).Set(1)
}

// replace makes d the version its dataset serves, keeping the one it
// replaces, so that batches laid out on that one finish and clients that
// pinned it keep reading it.
func (c *Catalog) replace(d *Dataset) (old *Dataset) {
	c.mu.Lock()
	v := c.byName[d.Name]
	next := versions{cur: d, prev: v.cur}
	if d.Index.Tables().Partial() {
		// A partial index reads a sample table from its stored object
		// when a read needs it, and the append that made d replaced the
		// object of every version d extends: those are held as d's views
		// of them (Dataset.Ancestor), which read their tables from d's.
		for i, o := range append([]*Dataset{v.cur, v.prev}, v.older...) {
			if o == nil {
				continue
			}
			a, ok := d.Ancestor(o.ID())
			switch {
			case !ok:
			case i == 0:
				next.prev = a
			case a != next.prev && !slices.Contains(next.older, a) && len(next.older) < chunkindex.MaxAncestors:
				next.older = append(next.older, a)
			}
		}
	}
	c.byName[d.Name] = next
	c.mu.Unlock()
	c.metrics.indexInfo.DeleteLabelValues(v.cur.Name, v.cur.ID(), v.cur.IndexETag)
	c.metrics.indexInfo.WithLabelValues(d.Name, d.ID(), d.IndexETag).Set(1)
	return v.cur
}

func (c *Catalog) lookup(name string) (versions, error) {
	if err := c.NotReady(); err != nil {
		return versions{}, err
	}
	c.mu.RLock()
	v, ok := c.byName[name]
	c.mu.RUnlock()
	if !ok {
		return versions{}, fmt.Errorf("%w: unknown dataset %s (serving: %v)", ErrUnknown, quote.Input(name), c.names)
	}
	return v, nil
}

// Get returns the version a dataset serves now.
func (c *Catalog) Get(name string) (*Dataset, error) {
	v, err := c.lookup(name)
	return v.cur, err
}

// Version returns the held version of a dataset whose index ID is id: the
// current one or the one the last reload replaced, or a version one of
// them extends (files appended since: Dataset.Ancestor). Any other is
// ErrVersion.
func (c *Catalog) Version(name, id string) (*Dataset, error) {
	v, err := c.lookup(name)
	if err != nil {
		return nil, err
	}
	for _, d := range v.all() {
		if d.ID() == id {
			return d, nil
		}
	}
	for _, d := range v.all() {
		if a, ok := d.Ancestor(id); ok {
			return a, nil
		}
	}
	return nil, fmt.Errorf("%w: dataset %s: index %s asked for; this node holds %s", ErrVersion, name, id, idList(v.all()))
}

// Held returns the versions of a dataset this catalog holds, the current
// one first.
func (c *Catalog) Held(name string) ([]*Dataset, error) {
	v, err := c.lookup(name)
	if err != nil {
		return nil, err
	}
	return v.all(), nil
}

// HeldIDs returns the index IDs of the versions of a dataset this catalog
// holds, the current one first; none for a dataset it does not serve.
func (c *Catalog) HeldIDs(name string) []string {
	ds, _ := c.Held(name)
	ids := make([]string, len(ds))
	for i, d := range ds {
		ids[i] = d.ID()
	}
	return ids
}

func (v versions) all() []*Dataset {
	if v.prev == nil || v.prev.ID() == v.cur.ID() {
		return []*Dataset{v.cur}
	}
	return append([]*Dataset{v.cur, v.prev}, v.older...)
}

func idList(ds []*Dataset) []string {
	out := make([]string, len(ds))
	for i, d := range ds {
		out[i] = d.ID()
	}
	return out
}

// Chunk resolves a cache key to its dataset version and chunk ID.
func (c *Catalog) Chunk(k chunkcache.Key) (*Dataset, int, error) {
	v, err := c.lookup(k.Dataset)
	if err != nil {
		return nil, 0, err
	}
	for _, d := range v.all() {
		if d, ok := d.viewOf(k.Select); ok {
			if id, ok := d.ChunkOf(k); ok {
				return d, id, nil
			}
		}
	}
	return nil, 0, fmt.Errorf("%w: chunk %q (ETag %s) is not in dataset %q", ErrUnknown, k.Object, k.ETag, k.Dataset)
}

// All returns the current version of every dataset, in configuration
// order.
func (c *Catalog) All() ([]*Dataset, error) {
	out := make([]*Dataset, 0, len(c.names))
	for _, name := range c.names {
		d, err := c.Get(name)
		if err != nil {
			return nil, err
		}
		out = append(out, d)
	}
	return out, nil
}

// Configured reports whether name is one of the configured datasets.
func (c *Catalog) Configured(name string) bool { return slices.Contains(c.names, name) }

// Metrics are the catalog's and its loader's collectors.
type Metrics struct {
	fetchSeconds  prometheus.Histogram
	fetchErrors   prometheus.Counter
	corruptChunks prometheus.Counter
	// decodeFailures counts reads of a chunk served in place whose bytes
	// did not decode: the in-place counterpart of corruptChunks.
	decodeFailures prometheus.Counter
	rereads        prometheus.Counter
	indexReloads   *prometheus.CounterVec
	indexInfo      *prometheus.GaugeVec
	tables         *tableCollector
}

// NewMetrics registers the catalog's collectors on reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		fetchSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "brand_chunk_fetch_duration_seconds", Help: "Time to read one whole chunk from the store.",
			Buckets: prometheus.ExponentialBuckets(0.001, 2, 16),
		}),
		fetchErrors:   prometheus.NewCounter(prometheus.CounterOpts{Name: "brand_chunk_fetch_errors_total", Help: "Chunk reads that failed."}),
		corruptChunks: prometheus.NewCounter(prometheus.CounterOpts{Name: "brand_chunk_checksum_failures_total", Help: "Chunk reads in which a sample failed its CRC32C, re-reads included."}),
		decodeFailures: prometheus.NewCounter(prometheus.CounterOpts{Name: "brand_chunk_decode_failures_total",
			Help: "Reads of a chunk served in place whose bytes did not decode (a codec error, a page past its stated size, values that do not fit), re-reads included."}),
		rereads: prometheus.NewCounter(prometheus.CounterOpts{Name: "brand_chunk_rereads_total", Help: "Chunks read again because a read failed its checksum or did not decode."}),
		indexReloads: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "brand_index_reloads_total", Help: "Dataset indexes reloaded because the stored index changed.",
		}, []string{"dataset"}),
		indexInfo: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "brand_index_info", Help: "1 for the index version each dataset serves now (index: its content identity; etag: the index object's ETag).",
		}, []string{"dataset", "index", "etag"}),
	}
	m.tables = newTableCollector()
	reg.MustRegister(m.fetchSeconds, m.fetchErrors, m.corruptChunks, m.decodeFailures, m.rereads, m.indexReloads, m.indexInfo, m.tables)
	return m
}

// tableCollector reports the sample tables of the index versions the
// catalog serves now (chunkindex.Tables.Stats): on a cluster node, which
// keeps only its own chunks' tables, what it keeps, what it caches and
// how often it reads another chunk's table from the store.
type tableCollector struct {
	catalog                   atomic.Pointer[Catalog]
	loads, tables, tableBytes *prometheus.Desc
}

func newTableCollector() *tableCollector {
	labels := []string{"dataset", "index"}
	kinds := []string{"dataset", "index", "kind"}
	return &tableCollector{
		loads: prometheus.NewDesc("brand_index_table_loads_total",
			"Sample tables of chunks this node does not own read from the stored index (a cluster node's partial index).", labels, nil),
		tables: prometheus.NewDesc("brand_index_tables",
			"Sample tables in memory: resident (this node's chunks; every chunk on a single gateway) or cached (other chunks').", kinds, nil),
		tableBytes: prometheus.NewDesc("brand_index_table_bytes",
			"Bytes of the sample tables in memory, by kind (see brand_index_tables).", kinds, nil),
	}
}

func (tc *tableCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- tc.loads
	ch <- tc.tables
	ch <- tc.tableBytes
}

func (tc *tableCollector) Collect(ch chan<- prometheus.Metric) {
	c := tc.catalog.Load()
	if c == nil {
		return
	}
	c.mu.RLock()
	cur := make([]*Dataset, 0, len(c.byName))
	for _, v := range c.byName {
		cur = append(cur, v.cur)
	}
	c.mu.RUnlock()
	for _, d := range cur {
		st := d.Index.Tables().Stats()
		ch <- prometheus.MustNewConstMetric(tc.loads, prometheus.CounterValue, float64(st.Loads), d.Name, d.ID())
		ch <- prometheus.MustNewConstMetric(tc.tables, prometheus.GaugeValue, float64(st.Resident), d.Name, d.ID(), "resident")
		ch <- prometheus.MustNewConstMetric(tc.tables, prometheus.GaugeValue, float64(st.Cached), d.Name, d.ID(), "cached")
		ch <- prometheus.MustNewConstMetric(tc.tableBytes, prometheus.GaugeValue, float64(st.ResidentBytes), d.Name, d.ID(), "resident")
		ch <- prometheus.MustNewConstMetric(tc.tableBytes, prometheus.GaugeValue, float64(st.CachedBytes), d.Name, d.ID(), "cached")
	}
}
