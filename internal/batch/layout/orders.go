package layout

import (
	"fmt"
	"strconv"
	"sync/atomic"

	"github.com/brandgw/brand/api"
	"github.com/brandgw/brand/importance"
	"github.com/brandgw/brand/internal/cache/evict"
	"github.com/brandgw/brand/internal/errkind"
	"github.com/brandgw/brand/internal/job/catalog"
	"github.com/brandgw/brand/internal/job/features"
	"github.com/brandgw/brand/internal/job/jobstream"
	lru "github.com/hashicorp/golang-lru/v2"
)

// ErrNoSnapshot means an importance epoch's snapshot is not in memory:
// the caller loads it (from the store) before asking for the order.
var ErrNoSnapshot = errkind.New(errkind.NotFound, "importance snapshot not loaded")

// Snapshots finds the importance snapshots streams name, in memory only:
// orders are computed under the use table's lock and must not wait for a
// store.
type Snapshots interface {
	Get(ds *catalog.Dataset, job, version string) (*importance.Snapshot, bool)
}

// EpochOrder is one epoch's order, memoised, with the per-chunk window
// table the use table asks for on every stream move (jobstream.EpochOrder).
type EpochOrder = jobstream.EpochOrder

// Order is what is read of an epoch's order: *shuffle.Epoch, or
// *importance.Epoch for a stream drawing by importance (jobstream.Order).
type Order = jobstream.Order

type epochKey struct {
	Stream
	epoch uint64
}

type windowKey struct {
	epochKey
	w int
}

// Orders lays out jobs' batches: it keeps what every kind of batch
// shares — the memoised base orders of streams' epochs with their edits
// (epochs) and the assignment of global batches to ranks (assigner) —
// and its units, one of each kind, which lay out what their batches
// serve over them (Unit). All are pure functions of their keys, so a lost
// or duplicated memo entry costs only recomputation; the bounds keep a
// flood of distinct seeds or epochs from holding memory. Safe for
// concurrent use.
type Orders struct {
	base  *epochs
	units *units
	asg   *assigner
}

// epochs memoises the base orders of streams' epochs, each with its
// job's edits, and the sample order of their windows: what every unit
// lays its batches out over.
type epochs struct {
	orders *lru.Cache[epochKey, *EpochOrder]
	// sampled holds importance epochs, which cost 8 bytes a sample
	// rather than O(chunks): fewer of them.
	sampled   *lru.Cache[epochKey, *EpochOrder]
	windows   *windowMemo
	snapshots Snapshots
	edits     *Edits
	// spaced makes the order of a stream of a unit's own items (a clip
	// job's clips: Spaced), nil if no unit has items of its own.
	spaced Spaced
}

// Bounds of the memoised orders: an epoch costs O(chunks), a window the
// samples of its chunks.
const (
	maxMemoEpochs        = 64
	maxMemoSampledEpochs = 8
	maxMemoWindows       = 32
)

// The windows memoised are bounded by the bytes of their sample IDs
// beyond the first maxMemoWindows, so that a gateway serving many jobs
// at once keeps each job's current window: with 32 whatever their size,
// 1,024 jobs of their own on one gateway shuffled every batch's window
// again (an eighth of its CPU). A window of 8 chunks of 10 KiB samples
// is about 100 KiB of IDs: 64 MiB hold about 600 such, or the 1,024
// windows of 4 chunks of 4 KiB samples of the concurrency benchmark.
const (
	maxMemoWindowBytes = 64 << 20
	maxMemoWindowCount = 4096
)

// windowMemo memoises windows' sample orders, least recently used out
// first, at most maxMemoWindowCount of them and, beyond the first
// maxMemoWindows, maxMemoWindowBytes of IDs. Safe for concurrent use.
type windowMemo struct {
	lru   *lru.Cache[windowKey, []int]
	bytes atomic.Int64 // of the IDs held
}

func newWindowMemo() *windowMemo {
	m := &windowMemo{}
	m.lru, _ = lru.NewWithEvict(maxMemoWindowCount, func(_ windowKey, ids []int) { m.bytes.Add(-idBytes(ids)) })
	return m
}

func idBytes(ids []int) int64 { return int64(len(ids)) * strconv.IntSize / 8 }

func (m *windowMemo) get(k windowKey) ([]int, bool) { return m.lru.Get(k) }

func (m *windowMemo) add(k windowKey, ids []int) {
	if m.lru.Contains(k) {
		return // another caller computed it first
	}
	m.bytes.Add(idBytes(ids))
	m.lru.Add(k, ids)
	for m.bytes.Load() > maxMemoWindowBytes && m.lru.Len() > maxMemoWindows {
		m.lru.RemoveOldest()
	}
}

// noSnapshots finds none.
type noSnapshots struct{}

func (noSnapshots) Get(*catalog.Dataset, string, string) (*importance.Snapshot, bool) {
	return nil, false
}

// New returns the orders of a gateway, with importance snapshots found in
// snaps (nil: none) and the units kinds makes over their base (nil:
// none, for orders that only give base orders). A job's order is the
// same on one gateway and on a cluster of any size; only which rank of a
// global batch receives which sample depends on the cluster
// (Source.Members).
func New(snaps Snapshots, kinds Kinds) *Orders {
	if snaps == nil {
		snaps = noSnapshots{}
	}
	e, _ := lru.New[epochKey, *EpochOrder](maxMemoEpochs)
	se, _ := lru.New[epochKey, *EpochOrder](maxMemoSampledEpochs)
	base := &epochs{orders: e, sampled: se, windows: newWindowMemo(), snapshots: snaps}
	o := &Orders{base: base, asg: newAssigner()}
	base.edits = &Edits{ext: o}
	var us []Unit
	var c Composer
	if kinds != nil {
		us, c = kinds(o.Base())
	}
	o.units = newUnits(us, c)
	base.spaced = o.units.spaced
	return o
}

// Base is the orders' base, which their units lay out over.
func (o *Orders) Base() Base { return Base{o.base, o.asg} }

// UnitOf is the unit a job of features f is laid out by (see Unit), nil
// if none of the orders' units is: the resolver asks it once and hands
// it over in Source.Unit.
func (o *Orders) UnitOf(f features.Set) Unit { return o.units.of(f) }

// Compose is the unit of a job over datasets ds (a mixture) whose items
// are un's, made by the orders' Composer.
func (o *Orders) Compose(un Unit, ds []*catalog.Dataset, job api.Job) (Composite, error) {
	if o.units.compose == nil {
		return nil, fmt.Errorf("%w: no unit composes a job over several datasets", ErrNoUnit)
	}
	return o.units.compose.Compose(un, ds, job)
}

// Epoch returns the order of one epoch of a stream.
func (o *Orders) Epoch(s Stream, epoch uint64) (*EpochOrder, error) { return o.base.epoch(s, epoch) }

// epoch returns the base order of one epoch of a stream: its dataset's
// shuffle (or importance draw), with the edits of the job's chain up to
// the stream's, or the order of a stream of a unit's own items (Spaced).
func (m *epochs) epoch(s Stream, epoch uint64) (*EpochOrder, error) {
	k := epochKey{s.Order(), epoch}
	memo := m.orders
	if s.Sampled() {
		memo = m.sampled
	}
	if e, ok := memo.Get(k); ok {
		return e, nil
	}
	if s.Edit != "" {
		e, err := m.edits.epoch(s, epoch)
		if err != nil {
			return nil, err
		}
		memo.Add(k, e)
		return e, nil
	}
	if s.Space != "" {
		if m.spaced == nil {
			return nil, fmt.Errorf("%w: a stream of items of their own (%s)", ErrNoUnit, s.Space)
		}
		e, err := m.spaced.SpaceOrder(s, epoch)
		if err != nil {
			return nil, err
		}
		memo.Add(k, e)
		return e, nil
	}
	spec := importance.OrderSpec{Counts: s.DS.Counts, Seed: s.Seed, Epoch: epoch, Window: s.Window}
	if s.Sampled() {
		snap, ok := m.snapshots.Get(s.DS, s.Imp.Job, s.Imp.Version)
		if !ok {
			return nil, fmt.Errorf("%w: snapshot %s of job %s", ErrNoSnapshot, s.Imp.Version, s.Imp.Job)
		}
		spec.Snapshot, spec.Hot = snap, s.Imp.Hot
	}
	e, err := importance.NewOrder(spec)
	if err != nil {
		return nil, err
	}
	var weight []float32
	if ie, ok := e.(*importance.Epoch); ok {
		weight = chunkWeights(ie, len(s.DS.Counts))
	}
	eo := epochOrder(e, weight, s.DS.Counts)
	memo.Add(k, eo)
	return eo, nil
}

// chunkWeights are an importance epoch's chunk weights over their mean,
// as the planner takes them (evict.RelativeWeights).
func chunkWeights(e *importance.Epoch, chunks int) []float32 {
	w := make([]float64, chunks)
	for c := range w {
		w[c] = e.ChunkWeight(c)
	}
	return evict.RelativeWeights(w)
}

// window returns the sample order of window w of an epoch; the slice is
// shared and must not be modified.
func (m *epochs) window(s Stream, epoch uint64, e *EpochOrder, w int) []int {
	k := windowKey{epochKey{s.Order(), epoch}, w}
	if ids, ok := m.windows.get(k); ok {
		return ids
	}
	ids := e.Window(w)
	m.windows.add(k, ids)
	return ids
}

// appendRange appends the sample IDs at epoch positions [start, end) of a
// stream's epoch, from its memoised windows.
func (m *epochs) appendRange(dst []int, s Stream, e *EpochOrder, epoch uint64, start, end int) []int {
	for pos := start; pos < end; {
		w := e.WindowOf(pos)
		ws := e.WindowStart(w)
		win := m.window(s, epoch, e, w)
		take := min(end, ws+len(win)) - pos
		dst = append(dst, win[pos-ws:pos-ws+take]...)
		pos += take
	}
	return dst
}

// globalBatch returns what each rank of a job takes from global batch m
// of an epoch of n positions (the plain cut's shares) and the global
// batch's positions [start, end): shuffle's cut, the one the ranks'
// own requests are cut by.
func globalBatch(job api.Job, n, m int) (share []int, start, end int, err error) {
	start, end, err = job.GlobalBatch(n, m)
	if err != nil {
		return nil, 0, 0, err
	}
	share, err = job.AppendShares(make([]int, 0, job.World), n, m)
	if err != nil {
		return nil, 0, 0, err
	}
	return share, start, end, nil
}
