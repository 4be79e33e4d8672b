package layout

import (
	"fmt"
	"slices"
	"sync"

	"github.com/brandgw/brand/api"
	"github.com/brandgw/brand/internal/errkind"
	"github.com/brandgw/brand/internal/job/catalog"
	"github.com/brandgw/brand/shuffle"
)

// Appends: a named job's record that its dataset grew (files appended,
// `brand index --append`) and from which step it takes the new samples
// (POST /jobs/NAME/append, docs/shuffle.md §15). The job read index
// version Parent; its stream's dataset is the version that extends it,
// whose first Chunks chunks are Parent's. The record is applied to the
// epochs' orders themselves:
//
//   - an epoch before Epoch is Parent's order: the shuffle of the first
//     Chunks chunks alone, which are Parent's chunks and samples under
//     their IDs;
//   - epoch Epoch keeps every window of Parent's order up to and
//     including the one holding position From, then interleaves Parent's
//     remaining windows with the windows of the new chunks' own order
//     (the same shuffle, seed and window over the new chunks alone) by a
//     seeded merge in proportion to the windows left of each, so that the
//     new samples are spread over the rest of the epoch and every old and
//     new sample is read once in it;
//   - every later epoch is the plain order over the whole dataset.
//
// So the batches before From are Parent's, byte for byte, and keep their
// ETags (which name Parent); every later one is a pure function of the
// job's parameters and the record, and names the record in its ETag.
//
// A job takes several records in turn, each extending the one before
// (Previous) and its version: epoch e's order is that of the newest
// version whose record's epoch is before e, then each record of epoch e
// merged over the order before it (shuffle.AppendedEpoch). A batch is
// laid out under the newest record that changes it, over that record's
// version (Source.Grown), so it keeps the bytes and ETag it had before
// any later record was made.

// ErrNoAppend means a stream names an append record that is not in
// memory: the caller registers it (Orders.AddAppend) first.
var ErrNoAppend = errkind.New(errkind.NotFound, "append record not loaded")

// ErrCannotAppend refuses an append for a job whose order is not one
// dataset's uniform shuffle of samples, or that has an exclusion list
// (422).
var ErrCannotAppend = errkind.New(errkind.Unprocessable, "appends do not apply to this job")

// An Append is a job's record of the samples appended to its dataset and
// where it starts to read them. Immutable once made.
type Append struct {
	// Version names the record (a digest of its content): streams carry
	// it, and batches laid out under it name it in their ETag.
	Version string
	// Parent is the index version the job read before, and Chunks its
	// chunks: the first Chunks chunks of the dataset its stream reads.
	Parent string
	Chunks int
	Epoch  uint64
	From   int
	// Index is the version whose new samples the record takes.
	Index string
	// Previous is the record this one extends, nil for a job's first.
	Previous *Append
}

// chain is the records up to a, first first.
func (a *Append) chain() []*Append {
	var out []*Append
	for x := a; x != nil; x = x.Previous {
		out = append(out, x)
	}
	slices.Reverse(out)
	return out
}

// Grown is the records up to a as the shuffle takes them.
func (a *Append) Grown() []shuffle.Grown {
	var g []shuffle.Grown
	for _, x := range a.chain() {
		g = append(g, shuffle.Grown{Chunks: x.Chunks, Epoch: x.Epoch, From: x.From})
	}
	return g
}

// first is the job's first record.
func (a *Append) first() *Append {
	for a.Previous != nil {
		a = a.Previous
	}
	return a
}

// Affects reports whether a batch of epoch that ends at position end
// may differ under a from Parent's order.
func (a *Append) Affects(epoch uint64, end int) bool {
	return epoch > a.Epoch || (epoch == a.Epoch && end > a.From)
}

// CheckAppend refuses an append for a job whose order is not one
// dataset's uniform shuffle of samples.
func CheckAppend(job api.Job) error {
	if job.Exclusion != "" {
		return fmt.Errorf("%w: job %s has an exclusion list; a job takes an exclusion or an append, not both", ErrCannotAppend, job.Name)
	}
	if err := CheckExclusion(job); err != nil {
		return fmt.Errorf("%w: %w", ErrCannotAppend, err)
	}
	return nil
}

// Appends holds the records streams name, by version; none is dropped
// (a job's chain, as the exclusion lists). Safe for concurrent use.
type Appends struct {
	mu sync.Mutex
	m  map[string]*Append
}

// Add registers a and the records it extends, so that streams naming
// their versions find them.
func (s *Appends) Add(a *Append) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.m == nil {
		s.m = map[string]*Append{}
	}
	for ; a != nil; a = a.Previous {
		s.m[a.Version] = a
	}
}

// Get is the record of version v.
func (s *Appends) Get(v string) (*Append, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	a, ok := s.m[v]
	return a, ok
}

// Appends are the append records the orders know.
func (o *Orders) Appends() *Appends { return &o.appends }

// IndexOf is the index version a job's answers name (Brand-Index, the
// epoch's index): its dataset's, or for a job with append records the
// version it read before the first, which it still names and pins.
func (s *Appends) IndexOf(ds *catalog.Dataset, job api.Job) string {
	if job.Append != "" {
		if a, ok := s.Get(job.Append); ok {
			return a.first().Parent
		}
	}
	return ds.ID()
}

// appendedEpoch is Epoch for a stream with an append record.
func appendedEpoch(o *Orders, s Stream, epoch uint64) (*EpochOrder, error) {
	a, ok := o.appends.Get(s.Append)
	if !ok {
		return nil, fmt.Errorf("%w: record %s", ErrNoAppend, s.Append)
	}
	counts := s.DS.Counts
	if a.Chunks > len(counts) {
		return nil, fmt.Errorf("%w: record %s extends %d chunks, the dataset has %d", ErrNoAppend, a.Version, a.Chunks, len(counts))
	}
	if epoch > a.Epoch {
		base := s
		base.Append = ""
		return o.Epoch(base, epoch)
	}
	ord, err := AppendedOrder(counts, a.Grown(), s.Seed, epoch, s.Window)
	if err != nil {
		return nil, err
	}
	e := &EpochOrder{Order: ord, ChunkWindow: make([]int32, len(counts))}
	for c := range e.ChunkWindow {
		e.ChunkWindow[c] = -1
	}
	for w := range ord.NumWindows() {
		for _, c := range ord.WindowChunks(w) {
			e.ChunkWindow[c] = int32(w)
		}
	}
	return e, nil
}

// AppendedOrder is the order of an epoch of a job that took the append
// records chain (first first) over counts, the last record's version:
// shuffle.AppendedEpoch, which the planner plans the job by too.
func AppendedOrder(counts []int, chain []shuffle.Grown, seed, epoch uint64, window int) (Order, error) {
	o, err := shuffle.AppendedEpoch(counts, chain, seed, epoch, window)
	if err != nil {
		return nil, err
	}
	return o, nil
}

// beforeAppend is src and job as they were when batch m of epoch (the
// whole epoch for m < 0) was last changed, for a job with append
// records: over the parent version where the batch (or epoch) is wholly
// before the first record's first position — the parent's in every
// respect, its samples, their assignment to ranks (the parent's chunk
// owners on a cluster), its stream and its ETag — and over an earlier
// record's version, under that record, where the batch is before every
// later record's first position. The whole epoch (its extent, the
// stream its schedule follows) is laid out under the newest record of
// that epoch or an earlier one: the later ones do not change it.
func beforeAppend(o *Orders, src Source, job api.Job, epoch uint64, m int64) (Source, api.Job) {
	if job.Append == "" || src.Parent == nil {
		return src, job
	}
	a, ok := o.appends.Get(job.Append)
	if !ok {
		return src, job
	}
	chain := a.chain()
	var end int
	if m >= 0 {
		end, ok = batchEnd(o, src, job, epoch, uint64(m))
	}
	for i := len(chain) - 1; i >= 0; i-- {
		r := chain[i]
		if m < 0 && r.Epoch > epoch || m >= 0 && ok && !r.Affects(epoch, end) {
			continue
		}
		if i == len(chain)-1 {
			return src, job
		}
		if i >= len(src.Grown) || src.Grown[i] == nil {
			return src, job // a version this node cannot name: the current
		}
		src.DS, src.Grown, job.Append = src.Grown[i], src.Grown[:i+1], r.Version
		return src, job
	}
	return parentOf(src, job)
}

// parentOf is src and job as the parent version's.
func parentOf(src Source, job api.Job) (Source, api.Job) {
	src.DS, src.Parent, src.Grown, src.Index, job.Append = src.Parent, nil, nil, "", ""
	return src, job
}

// batchEnd is the end of batch m of an epoch of job over src: its
// position after its last sample.
func batchEnd(o *Orders, src Source, job api.Job, epoch, m uint64) (int, bool) {
	if src.DS == nil {
		return 0, false
	}
	_, n, _, err := o.Batches(src.DS, job, epoch)
	if err != nil {
		return 0, false
	}
	_, end, err := job.GlobalBatch(n, int(m))
	return end, err == nil
}

// appended reports whether batch m of an epoch of job reads positions
// its append record changes: a batch wholly before the record's first
// position is the parent's, and keeps its ETag. One it cannot tell of
// is taken as changed.
func appended(o *Orders, src Source, job api.Job, epoch, m uint64) bool {
	a, ok := o.appends.Get(job.Append)
	if !ok || src.DS == nil {
		return true
	}
	if epoch != a.Epoch {
		return epoch > a.Epoch
	}
	end, ok := batchEnd(o, src, job, epoch, m)
	return !ok || a.Affects(epoch, end)
}
