package layout

import (
	"fmt"
	"iter"
	"math/bits"
	"slices"
	"sync"

	"github.com/brandgw/brand/api"
	"github.com/brandgw/brand/internal/errkind"
	"github.com/brandgw/brand/internal/job/catalog"
)

// Exclusions: a named job's list of samples removed from its future
// (POST /jobs/NAME/exclude, docs/shuffle.md §14). The list is applied
// to the epoch's order itself: from position From of epoch Epoch on, the
// order is the base order without the excluded samples, and every batch,
// window and chunk the use table follows is of that shorter order. So
// batches before From are what they were, every later batch is a pure
// function of the job's parameters and the list, and a chunk whose
// samples are all excluded is in no window from From on: nothing names
// it, so nothing reads it.

// ErrNoExclusion means a stream names an exclusion list that is not in
// memory: the caller registers it (Orders.AddExclusion) before asking
// for the order, as it loads an importance snapshot.
var ErrNoExclusion = errkind.New(errkind.NotFound, "exclusion list not loaded")

// ErrCannotExclude refuses an exclusion for a job whose order is not one
// dataset's uniform shuffle of samples: a mixture, a token, clip,
// balanced or importance-sampled job (422).
var ErrCannotExclude = errkind.New(errkind.Unprocessable, "exclusions do not apply to this job")

// ErrBeforePrevious refuses an extension of a list from a position
// before the list's own first one (400).
var ErrBeforePrevious = errkind.New(errkind.Invalid, "an extension starts before its list")

// An Exclusion is a job's excluded samples of one dataset version and
// where they start to be left out: position From of epoch Epoch's order,
// and every position of every later epoch. A list extended (Extend) is a
// chain: its order is its previous version's up to From of Epoch, and
// that order without the samples of both from there on. Immutable once
// made.
type Exclusion struct {
	// Version names the list (a digest of its content): streams carry it,
	// and batches laid out under it name it in their ETag.
	Version string
	IndexID string // the dataset version the keys were resolved in
	// Epoch and From are where this version starts to differ from its
	// previous one: From is a position in the previous version's order
	// (the base order's, for a first list).
	Epoch uint64
	From  int
	drop  []uint64 // bitset over sample IDs: this version's and every previous one's
	chunk []int32  // per chunk: its samples in drop
	n     int
	prev  *Exclusion
}

// Prev is the version x extends, nil for a first list.
func (x *Exclusion) Prev() *Exclusion { return x.prev }

// Extend makes the version of x that leaves out samples ids (sample IDs
// of ds) too, from position from of epoch epoch of x's order on: its
// order is x's before that position, and without x's samples and ids'
// from there. The position must be at or after x's own first one.
func (x *Exclusion) Extend(version string, ds *catalog.Dataset, epoch uint64, from int, ids []int) (*Exclusion, error) {
	if ds.ID() != x.IndexID {
		return nil, fmt.Errorf("an extension in index %s of a list resolved in index %s", ds.ID(), x.IndexID)
	}
	if epoch < x.Epoch || epoch == x.Epoch && from < x.From {
		return nil, fmt.Errorf("%w: an extension from position %d of epoch %d, before its previous list's first position %d of epoch %d", ErrBeforePrevious, from, epoch, x.From, x.Epoch)
	}
	y, err := NewExclusion(version, ds, epoch, from, append(slices.Collect(x.IDs()), ids...))
	if err != nil {
		return nil, err
	}
	y.prev = x
	return y, nil
}

// NewExclusion makes the exclusion of samples ids of ds (each a sample ID,
// repeats allowed) from position from of epoch epoch on. Its version is
// the caller's to name, before it is shared: from its samples (IDs), say.
func NewExclusion(version string, ds *catalog.Dataset, epoch uint64, from int, ids []int) (*Exclusion, error) {
	n := ds.Index.NumSamples()
	x := &Exclusion{Version: version, IndexID: ds.ID(), Epoch: epoch, From: from,
		drop: make([]uint64, (n+63)/64), chunk: make([]int32, len(ds.Counts))}
	for _, id := range ids {
		if id < 0 || id >= n {
			return nil, fmt.Errorf("sample %d is not a sample of dataset %s (%d samples)", id, ds.Name, n)
		}
		x.drop[id/64] |= 1 << (id % 64)
	}
	// Counted per chunk from the bitset, a chunk's samples being one run
	// of IDs: a search for each sample's chunk costs more than the bits.
	for c := range x.chunk {
		first, k := ds.Index.ChunkRange(c)
		x.chunk[c] = int32(x.count(first, first+k))
		x.n += int(x.chunk[c])
	}
	return x, nil
}

// count is the number of excluded samples among IDs lo up to hi.
func (x *Exclusion) count(lo, hi int) int {
	k := 0
	for lo < hi {
		w := lo / 64
		word := x.drop[w] >> (lo % 64)
		if take := min(64-lo%64, hi-lo); take < 64 {
			word &= 1<<take - 1
		}
		k += bits.OnesCount64(word)
		lo = (w + 1) * 64
	}
	return k
}

// IDs yields the excluded samples' IDs in increasing order.
func (x *Exclusion) IDs() iter.Seq[int] {
	return func(yield func(int) bool) {
		for w, b := range x.drop {
			for b != 0 {
				if !yield(w*64 + bits.TrailingZeros64(b)) {
					return
				}
				b &= b - 1
			}
		}
	}
}

// ForPlan is x as a plan takes it (GET /plan of a named job): its bitset
// shared, read only.
func (x *Exclusion) ForPlan() *api.PlanExclusion {
	if x == nil {
		return nil
	}
	return &api.PlanExclusion{Version: x.Version, Epoch: x.Epoch, From: x.From, Samples: x.n, Drop: x.drop, Previous: x.prev.ForPlan()}
}

// Excluded reports whether sample id is on the list.
func (x *Exclusion) Excluded(id int) bool {
	w := id / 64
	return w < len(x.drop) && x.drop[w]&(1<<(id%64)) != 0
}

// Len is the number of distinct samples excluded.
func (x *Exclusion) Len() int { return x.n }

// EmptyChunks counts the chunks every sample of which is excluded: from
// the epoch after Epoch on, the chunks no batch reads.
func (x *Exclusion) EmptyChunks(counts []int) int {
	k := 0
	for c, d := range x.chunk {
		if counts[c] > 0 && int(d) == counts[c] {
			k++
		}
	}
	return k
}

// Affects reports whether positions from start on of epoch may differ
// under x from the base order: the ETag of a batch that ends at or before
// x.From of x.Epoch, or is of an earlier epoch, does not name x.
func (x *Exclusion) Affects(epoch uint64, end int) bool {
	return epoch > x.Epoch || (epoch == x.Epoch && end > x.From)
}

// CheckExclusion refuses a job's exclusion where its order is not one
// dataset's uniform shuffle of samples.
func CheckExclusion(job api.Job) error {
	switch {
	case len(job.Mix) > 0 || job.ScheduleVersion != "":
		return fmt.Errorf("%w: job %s reads a mixture; an exclusion applies to a job over one dataset", ErrCannotExclude, job.Name)
	case job.Tokens():
		return fmt.Errorf("%w: job %s is a token job (seq=); an exclusion applies to a job's samples, not its packed sequences", ErrCannotExclude, job.Name)
	case job.Clips():
		return fmt.Errorf("%w: job %s is a clip job; an exclusion applies to a job's samples, not its clips", ErrCannotExclude, job.Name)
	case job.Balance != "":
		return fmt.Errorf("%w: job %s balances its ranks (balance=%s); an exclusion applies to a job without balance=", ErrCannotExclude, job.Name, job.Balance)
	case job.Importance.On():
		return fmt.Errorf("%w: job %s samples by importance; an exclusion applies to the uniform shuffle", ErrCannotExclude, job.Name)
	}
	return nil
}

// exclusionSet holds the lists streams name, by version: none is
// dropped, since a stream's order cannot be laid out without its list
// (the gateway's book of lists holds them all anyway, one a job).
type exclusionSet struct {
	mu sync.Mutex
	m  map[string]*Exclusion
}

func (s *exclusionSet) Add(v string, x *Exclusion) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.m == nil {
		s.m = map[string]*Exclusion{}
	}
	s.m[v] = x
}

func (s *exclusionSet) Get(v string) (*Exclusion, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	x, ok := s.m[v]
	return x, ok
}

// AddExclusion registers x and the versions it extends, so that streams
// naming their versions find them.
func (o *Orders) AddExclusion(x *Exclusion) {
	for ; x != nil; x = x.prev {
		o.exclusions.Add(x.Version, x)
	}
}

// excludedEpoch is Epoch for a stream with an exclusion: the base order
// (its previous version's, for a list extended) from x's position on
// without x's samples. Windows, chunks and positions before x's position
// are the base's: a chain of versions is a chain of such orders.
func (o *Orders) excludedEpoch(s Stream, epoch uint64) (*EpochOrder, error) {
	x, ok := o.exclusions.Get(s.Exclude)
	if !ok {
		return nil, fmt.Errorf("%w: list %s", ErrNoExclusion, s.Exclude)
	}
	base := s
	base.Exclude = ""
	if x.prev != nil {
		base.Exclude = x.prev.Version
	}
	be, err := o.Epoch(base, epoch)
	if err != nil || epoch < x.Epoch {
		return be, err
	}
	from := 0
	if epoch == x.Epoch {
		from = x.From
	}
	eo := excludeOrder(be.Order, x, s.DS.Counts, s.DS.Index.ChunkOf, from)
	e := &EpochOrder{Order: eo, ChunkWindow: make([]int32, len(s.DS.Counts))}
	for c := range e.ChunkWindow {
		e.ChunkWindow[c] = -1
	}
	for w := range eo.NumWindows() {
		for _, c := range eo.WindowChunks(w) {
			e.ChunkWindow[c] = int32(w)
		}
	}
	return e, nil
}

// excludedOrder is an epoch's order without an exclusion's samples at
// base positions from on. Its windows are base's, each shorter by its
// excluded samples, and name only the chunks that keep a sample there.
// The base may be a previous version's excludedOrder: a window of it
// after from lacks that version's samples, which x's hold too (x's drop
// is the union), so a chunk's samples left are its count less x's.
// It costs O(chunks) to make, and a window of base's to read a window.
type excludedOrder struct {
	base   Order
	x      *Exclusion
	from   int     // base positions before from are kept whole
	starts []int   // per window its first position, then the length
	chunks [][]int // per window: its chunks that keep a sample
}

func excludeOrder(base Order, x *Exclusion, counts []int, chunkOf func(id int) int, from int) *excludedOrder {
	nw := base.NumWindows()
	e := &excludedOrder{base: base, x: x, from: from, starts: make([]int, nw+1), chunks: make([][]int, nw)}
	pos := 0
	for w := range nw {
		e.starts[w] = pos
		bs, be := base.WindowStart(w), base.NumSamples()
		if w+1 < nw {
			be = base.WindowStart(w + 1)
		}
		chunks := base.WindowChunks(w)
		switch {
		case be <= from:
			pos += be - bs
			e.chunks[w] = chunks
		case bs >= from:
			kept := make([]int, 0, len(chunks))
			for _, c := range chunks {
				if k := counts[c] - int(x.chunk[c]); k > 0 {
					pos += k
					kept = append(kept, c)
				}
			}
			e.chunks[w] = kept
		default:
			// The window holding from: a chunk with excluded samples is
			// kept if one of its samples is, before from or not excluded.
			keep := map[int]bool{}
			for _, id := range e.Window(w) {
				pos++
				keep[chunkOf(id)] = true
			}
			for _, c := range chunks {
				if keep[c] {
					e.chunks[w] = append(e.chunks[w], c)
				}
			}
		}
	}
	e.starts[nw] = pos
	return e
}

func (e *excludedOrder) NumSamples() int          { return e.starts[len(e.starts)-1] }
func (e *excludedOrder) NumWindows() int          { return len(e.chunks) }
func (e *excludedOrder) WindowChunks(w int) []int { return e.chunks[w] }

func (e *excludedOrder) WindowStart(w int) int {
	if w == len(e.chunks) {
		return e.NumSamples()
	}
	return e.starts[w]
}

func (e *excludedOrder) WindowOf(pos int) int {
	w, _ := slices.BinarySearchFunc(e.starts[1:], pos, func(end, pos int) int {
		if end > pos {
			return 1
		}
		return -1
	})
	return w
}

// Window is base's window w without the excluded samples at base
// positions from e.from on.
func (e *excludedOrder) Window(w int) []int {
	ids := e.base.Window(w)
	bs := e.base.WindowStart(w)
	out := ids[:0]
	for i, id := range ids {
		if bs+i < e.from || !e.x.Excluded(id) {
			out = append(out, id)
		}
	}
	return out
}

// effective is the version of job's exclusion list that batch m of an
// epoch is laid out under, as its ETag names it: a batch wholly before a
// version's first position is its previous version's (the base order's,
// before the first list's), and keeps that version's ETag. One it cannot
// tell of (its list not registered, its extent unknown) is taken as
// changed by the job's version.
func (o *Orders) effective(src Source, job api.Job, epoch, m uint64) string {
	x, ok := o.exclusions.Get(job.Exclusion)
	if !ok || src.DS == nil {
		return job.Exclusion
	}
	end := -1 // the batch's end, once counted
	for ; x != nil; x = x.prev {
		if epoch > x.Epoch {
			return x.Version
		}
		if epoch < x.Epoch {
			continue
		}
		if end < 0 {
			// Its extent under the job's version: before x.From, the
			// versions' orders agree.
			_, n, _, err := o.Batches(src.DS, job, epoch)
			if err != nil {
				return job.Exclusion
			}
			if _, end, err = job.GlobalBatch(n, int(m)); err != nil {
				return job.Exclusion
			}
		}
		if x.Affects(epoch, end) {
			return x.Version
		}
	}
	return ""
}
