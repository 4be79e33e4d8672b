package planner

import (
	"fmt"
	"math"
	"slices"

	"github.com/brandgw/brand/api"
	"github.com/brandgw/brand/importance"
	"github.com/brandgw/brand/internal/errkind"
	"github.com/brandgw/brand/shuffle"
)

// ErrInvalid reports a dataset, job or plan input outside its allowed
// range. The wrapping error names the field and the range.
var ErrInvalid = errkind.New(errkind.Internal, "planner: invalid input")

// Dataset is what the planner needs to know of a dataset: per chunk, its
// size in bytes and its number of samples, indexed by chunk ID. Chunk c
// holds global sample IDs [first_c, first_c+Counts[c]) with first_c the sum
// of the counts before it, as in package shuffle.
//
// ChunkSizes are the bytes a chunk takes in the cache, and StoreSizes the
// bytes a load of it reads from the store. They differ for a dataset
// served in place (package format): the cache holds a chunk decoded into
// its resident form, sized by its resident bound with the fields the job
// reads, while a load reads the chunk's store extent for those fields (a
// Parquet job reading 2 of 20 columns reads their column chunks alone; an
// MDS shard is read whole whatever the fields). Every figure about room —
// in the cache, on a disk tier, a node's share — counts ChunkSizes; every
// figure of bytes read from the store counts StoreSizes. StoreSizes nil
// means they are ChunkSizes, as for tar chunks, which are read whole and
// held as read.
type Dataset struct {
	ChunkSizes []int64 `json:"chunk_sizes"`
	Counts     []int   `json:"counts"`
	StoreSizes []int64 `json:"store_sizes,omitempty"`
	// GETs are the store requests a load of each chunk takes (a chunk
	// read whole in parts: s3backend.Parts of its size), nil where they
	// are not known (a dataset served in place reads ranges by field).
	GETs []int32 `json:"gets,omitempty"`
}

// stores returns each chunk's bytes read from the store: StoreSizes, or
// ChunkSizes when it is nil.
func (d Dataset) stores() []int64 {
	if d.StoreSizes != nil {
		return d.StoreSizes
	}
	return d.ChunkSizes
}

// storeBytes returns the dataset's bytes in the store, the chunks' store
// sizes summed, when the dataset has store sizes of its own; 0 when it has
// none (a figure that is then the dataset's bytes, absent from a report).
func (d Dataset) storeBytes() int64 {
	if d.StoreSizes == nil {
		return 0
	}
	return sum(d.StoreSizes)
}

// sum returns the sum of sizes.
func sum(sizes []int64) int64 {
	var n int64
	for _, size := range sizes {
		n += size
	}
	return n
}

// Job is the schedule to simulate: the job's shuffle parameters — those that
// fix the order (Seed, Window) and the cut into batches (BatchSize, World,
// DropLast) — over epochs FirstEpoch .. FirstEpoch+Epochs-1. Every rank is
// simulated, in order, as one gateway serving all of them sees them, and
// whole epochs: Rank and Offset are ignored.
type Job struct {
	shuffle.Params
	FirstEpoch int `json:"first_epoch"`
	Epochs     int `json:"epochs"`
	// Edit, if not nil, is the newest of the job's edits (exclusions
	// and appends, one chain, docs/shuffle.md §16): with appends the
	// dataset is the version they grew the job to, and the epochs are
	// the orders of the chain as the gateway serves them
	// (shuffle.EditedEpoch), each cut into global batches as any order.
	Edit *Edit `json:"edit,omitempty"`
}

// Edit is one edit of a named job's chain (POST /jobs/NAME/exclude and
// /jobs/NAME/append) after the one before it (Previous), from position
// From of epoch Epoch of the order of the edits before it: an append
// (Chunks > 0) of the dataset's chunks after its first Chunks, the
// version it extends, up to the next append's version (the whole
// dataset for the last); or an exclusion of the samples Drop marks (a
// bitset over sample IDs, Samples of them, holding every earlier
// exclusion's too). A chunk every sample of which is excluded is in no
// batch from there on: it is never read.
type Edit struct {
	Version  string   `json:"version"`
	Epoch    int      `json:"epoch"`
	From     int      `json:"from_position"`
	Chunks   int      `json:"parent_chunks,omitempty"`
	Samples  int      `json:"samples,omitempty"`
	Drop     []uint64 `json:"-"`
	Previous *Edit    `json:"previous,omitempty"`
}

// chain is the edits up to e, first first.
func (e *Edit) chain() []*Edit {
	var out []*Edit
	for x := e; x != nil; x = x.Previous {
		out = append(out, x)
	}
	slices.Reverse(out)
	return out
}

// shuffle is the chain up to e as the shuffle takes it, over a dataset
// of counts.
func (e *Edit) shuffle(counts []int) []shuffle.Edit {
	var out []shuffle.Edit
	for _, x := range e.chain() {
		se := shuffle.Edit{Epoch: uint64(x.Epoch), From: x.From, Chunks: x.Chunks}
		if x.Chunks == 0 {
			se.Drop = shuffle.NewDrop(x.Drop, counts)
		}
		out = append(out, se)
	}
	return out
}

// Access is one chunk request of the demand trace: chunk Chunk is needed by
// a batch of epoch Epoch of job Job (0 unless the trace merges several jobs:
// SharedTrace). They are small integers to keep multi-epoch traces of large
// datasets compact (12 bytes an access).
type Access struct {
	Chunk int32
	Epoch int32
	Job   uint16
	// Start marks the first access of a batch; the batch runs to the next
	// access that starts one. A gateway pins all of a batch's chunks before
	// it reads any, so serving a batch never evicts one of its own chunks
	// to make room for another; Simulate models that. A trace in which no
	// access sets Start is simulated one access at a time.
	Start bool
}

// Trace returns the demand sequence of chunk accesses of j on d: for each
// global batch of each simulated epoch in order (the samples of all ranks of
// batch m, which are epoch positions [m·B·world, (m+1)·B·world)), the
// distinct chunks of its samples in order of first use. Each access carries
// its epoch, which marks the epoch boundaries.
//
// A job with no batches (drop_last and fewer samples than one global batch)
// has an empty trace. Invalid input yields an error wrapping ErrInvalid.
func Trace(d Dataset, j Job) ([]Access, error) {
	s, err := newSchedule(d, j)
	if err != nil {
		return nil, err
	}
	return s.trace(nil, nil)
}

// schedule is a validated dataset and job, with the tables that map a
// sample ID to its chunk.
type schedule struct {
	d     Dataset
	j     Job
	edits []shuffle.Edit // the job's edits as the shuffle takes them, once made
	first []int          // first[c] is chunk c's first sample ID; len chunks+1
	n     int            // samples

	// The sample ID space is cut into buckets of 1<<shift IDs, about a
	// chunk's worth each; bucket[b] is the chunk holding ID b<<shift (the
	// last chunk for IDs past the end). A sample's chunk lies between its
	// bucket's entry and the next, usually equal or adjacent, so chunkOf
	// costs a step or two instead of a binary search over every chunk,
	// whose mispredicted branches dominated tracing millions of samples.
	bucket []int32
	shift  uint
}

func newSchedule(d Dataset, j Job) (*schedule, error) {
	if err := validateDataset(d); err != nil {
		return nil, err
	}
	if err := validateJob(j); err != nil {
		return nil, err
	}
	first := make([]int, len(d.Counts)+1)
	for c, k := range d.Counts {
		first[c+1] = first[c] + k
	}
	s := &schedule{d: d, j: j, first: first, n: first[len(d.Counts)]}
	if err := validateEdits(j, len(d.Counts)); err != nil {
		return nil, err
	}
	for 2<<s.shift <= s.n/len(d.Counts) {
		s.shift++
	}
	s.bucket = make([]int32, (s.n-1)>>s.shift+2)
	c := 0
	for b := range s.bucket {
		id := b << s.shift
		for c < len(d.Counts)-1 && first[c+1] <= id {
			c++
		}
		s.bucket[b] = int32(c)
	}
	return s, nil
}

// validateEdits checks the job's edits against a dataset of chunks
// chunks: a chain the shuffle takes (shuffle.EditedEpoch refuses the rest
// as it lays an epoch out). An exclusion's bitset may be shorter than the
// dataset's samples: those past it are not excluded.
func validateEdits(j Job, chunks int) error {
	k, appends := 0, 0
	for x := j.Edit; x != nil; x = x.Previous {
		if k++; k > shuffle.MaxEdits {
			return fmt.Errorf("%w: a chain of more than %d edits", ErrInvalid, shuffle.MaxEdits)
		}
		if x.Chunks > 0 {
			appends++
		}
		switch {
		case x.Epoch < 0 || x.From < 0 || x.Chunks > chunks || x.Previous != nil && x.Previous.Epoch > x.Epoch:
			return fmt.Errorf("%w: an edit from position %d of epoch %d (over %d chunks of %d) is not one of a chain", ErrInvalid, x.From, x.Epoch, x.Chunks, chunks)
		}
	}
	if appends > shuffle.MaxAppends {
		return fmt.Errorf("%w: a chain of more than %d appends", ErrInvalid, shuffle.MaxAppends)
	}
	return nil
}

func validateDataset(d Dataset) error {
	switch {
	case len(d.ChunkSizes) != len(d.Counts):
		return fmt.Errorf("%w: %d chunk sizes but %d sample counts; need one of each per chunk",
			ErrInvalid, len(d.ChunkSizes), len(d.Counts))
	case d.StoreSizes != nil && len(d.StoreSizes) != len(d.Counts):
		return fmt.Errorf("%w: %d store sizes for %d chunks; need one per chunk, or none (the chunk sizes)",
			ErrInvalid, len(d.StoreSizes), len(d.Counts))
	case len(d.Counts) == 0:
		return fmt.Errorf("%w: the dataset has no chunks", ErrInvalid)
	case len(d.Counts) > math.MaxInt32:
		return fmt.Errorf("%w: %d chunks; at most %d", ErrInvalid, len(d.Counts), math.MaxInt32)
	}
	var bytes int64
	n := 0
	for c, size := range d.ChunkSizes {
		if size < 0 {
			return fmt.Errorf("%w: chunk %d size %d bytes; must be >= 0", ErrInvalid, c, size)
		}
		if size > math.MaxInt64-bytes {
			return fmt.Errorf("%w: total dataset bytes overflow int64 at chunk %d", ErrInvalid, c)
		}
		bytes += size
		k := d.Counts[c]
		if k < 0 {
			return fmt.Errorf("%w: chunk %d has %d samples; must be >= 0", ErrInvalid, c, k)
		}
		if k > math.MaxInt-n {
			return fmt.Errorf("%w: total sample count overflows int at chunk %d", ErrInvalid, c)
		}
		n += k
	}
	if n == 0 {
		return fmt.Errorf("%w: the dataset has no samples", ErrInvalid)
	}
	bytes = 0
	for c, size := range d.StoreSizes {
		if size < 0 {
			return fmt.Errorf("%w: chunk %d store size %d bytes; must be >= 0", ErrInvalid, c, size)
		}
		if size > math.MaxInt64-bytes {
			return fmt.Errorf("%w: total dataset store bytes overflow int64 at chunk %d", ErrInvalid, c)
		}
		bytes += size
	}
	return nil
}

func validateJob(j Job) error {
	switch {
	case j.Window < 1:
		return fmt.Errorf("%w: window %d chunks; must be >= 1", ErrInvalid, j.Window)
	case j.BatchSize < 1:
		return fmt.Errorf("%w: batch size %d; must be >= 1", ErrInvalid, j.BatchSize)
	case j.World < 1:
		return fmt.Errorf("%w: world size %d; must be >= 1", ErrInvalid, j.World)
	case j.BatchSize > math.MaxInt/j.World:
		return fmt.Errorf("%w: batch size %d × world size %d overflows int", ErrInvalid, j.BatchSize, j.World)
	case j.FirstEpoch < 0:
		return fmt.Errorf("%w: first epoch %d; must be >= 0", ErrInvalid, j.FirstEpoch)
	case j.Epochs < 1:
		return fmt.Errorf("%w: %d epochs; must be >= 1", ErrInvalid, j.Epochs)
	case j.FirstEpoch > math.MaxInt32-j.Epochs:
		// Epoch numbers are int32 in the trace, and the working set looks
		// one epoch past the last simulated one.
		return fmt.Errorf("%w: epochs %d..%d; the epoch after the last must be <= %d",
			ErrInvalid, j.FirstEpoch, j.FirstEpoch+j.Epochs-1, math.MaxInt32)
	}
	return nil
}

// cut is the job's cut of an epoch into global batches: shuffle's, from
// the epoch's start, since a plan simulates whole epochs of every rank
// (Rank and Offset are not part of it).
func (s *schedule) cut() shuffle.Params {
	p := s.j.Params
	p.Rank, p.Offset = 0, 0
	return p
}

// numBatches is the number of global batches of an epoch of the
// dataset's samples, each once: every epoch's but those a job's edits
// change (epochSizes has each epoch's own), and what the budget and the
// trace's capacity are estimated by.
func (s *schedule) numBatches() int {
	return s.cut().NumBatches(s.n)
}

// epochSizes are the simulated epochs as the gateway serves them, first
// first, what /epoch/N answers from offset 0 (layout.Orders.Extent): each
// epoch's samples — its order's, fewer than the dataset's from an
// exclusion's step on and more from an append's (shuffle.EditedEpoch,
// the order the gateway lays the job's batches out by) — and the global
// batches the job's cut makes of them (Params.NumBatches): none with
// drop_last and fewer samples than one global batch, an epoch the plan
// then reads nothing of.
func (s *schedule) epochSizes() ([]api.PlanEpoch, error) {
	out := make([]api.PlanEpoch, s.j.Epochs)
	cut := s.cut()
	for i := range out {
		e, n := s.j.FirstEpoch+i, s.n
		if s.j.Edit != nil {
			ep, err := s.order(e, s.j.Window)
			if err != nil {
				return nil, fmt.Errorf("%w: %w", ErrInvalid, err)
			}
			n = ep.NumSamples()
		}
		out[i] = api.PlanEpoch{Epoch: e, Samples: n, Batches: cut.NumBatches(n)}
	}
	return out, nil
}

// servedSamples is the number of samples an epoch of the dataset's
// samples, each once, serves: all of them, or without the dropped partial
// final batch.
func (s *schedule) servedSamples() int { return served(s.j.Params, s.n) }

// served is the number of samples an epoch of n samples serves under the
// cut p (its rank and offset aside): all of them, or without the dropped
// partial final batch — none if it has no batch.
func served(p shuffle.Params, n int) int {
	p.Rank, p.Offset = 0, 0
	nb := p.NumBatches(n)
	if nb == 0 {
		return 0
	}
	_, end, _ := p.GlobalBatch(n, nb-1)
	return end
}

// chunkOf returns the chunk holding sample id: the first chunk ending after
// it, which skips empty chunks. It searches between the chunks of id's
// bucket and of the next one; the latter ends after id.
func (s *schedule) chunkOf(id int) int32 {
	b := id >> s.shift
	lo, hi := int(s.bucket[b]), int(s.bucket[b+1])
	for lo < hi {
		mid := int(uint(lo+hi) >> 1)
		if s.first[mid+1] > id {
			hi = mid
		} else {
			lo = mid + 1
		}
	}
	return int32(lo)
}

// spec is what fixes epoch e's order for the job, in windows of window
// chunks (the job's own, or the number of chunks for a full shuffle): the
// single gateway's uniform shuffle, until a caller adds strata or a
// snapshot.
func (s *schedule) spec(e, window int) importance.OrderSpec {
	return importance.OrderSpec{Counts: s.d.Counts, Seed: s.j.Seed, Epoch: uint64(e), Window: window}
}

// walk calls visit for every global batch of every simulated epoch, in
// order, with the chunk of each of the batch's samples in epoch order. The
// order is that of a shuffle with the given window (the job's own, or the
// number of chunks for a full shuffle). The slice passed to visit is reused
// after it returns.
//
// walk keeps one window's sample IDs and one global batch in memory, never
// the whole epoch. It counts the samples it walks on m and returns m's
// error when the budget runs out or the plan's context is done.
func (s *schedule) walk(m *meter, window int, visit func(epoch int, chunks []int32)) error {
	return s.walkOrder(m, func(e int) (epochOrder, error) { return s.order(e, window) }, visit)
}

// epochOrder is what a walk reads of an epoch's order (importance.Order,
// shuffle.Appended).
type epochOrder interface {
	NumSamples() int
	NumWindows() int
	Window(w int) []int
	WindowChunks(w int) []int
	WindowOf(pos int) int
}

// order is epoch e's order for the job in windows of window chunks
// (spec's), as the gateway serves it under the job's edits
// (shuffle.EditedEpoch).
func (s *schedule) order(e, window int) (epochOrder, error) {
	if s.j.Edit == nil {
		return importance.NewOrder(s.spec(e, window))
	}
	if s.edits == nil {
		s.edits = s.j.Edit.shuffle(s.d.Counts)
	}
	return shuffle.EditedEpoch(s.d.Counts, s.edits, s.j.Seed, uint64(e), window)
}

// walkOrder is walk over the epoch orders order returns, each chosen as
// the gateway chooses it: the uniform order, an importance epoch's drawn
// from a snapshot (importance.NewOrder), or the order of the job's edits
// (schedule.order). Each epoch's global batches are shuffle's cut
// (Params.GlobalBatch) of its order's samples, the one each rank's
// batches are cut by.
func (s *schedule) walkOrder(m *meter, order func(epoch int) (epochOrder, error), visit func(epoch int, chunks []int32)) error {
	cut := s.cut()
	buf := make([]int32, 0, min(cut.BatchSize*cut.World, s.n))
	for e := s.j.FirstEpoch; e < s.j.FirstEpoch+s.j.Epochs; e++ {
		if err := m.err(); err != nil {
			return err
		}
		ep, err := order(e)
		if err != nil {
			return fmt.Errorf("%w: %w", ErrInvalid, err)
		}
		// An epoch under the job's edits has its own length: fewer
		// samples after an exclusion, more after an append.
		n := ep.NumSamples()
		nb := cut.NumBatches(n)
		if nb == 0 {
			continue
		}
		b, k := 0, 0 // the batch being cut, and the position in the order
		_, end, err := cut.GlobalBatch(n, 0)
		if err != nil {
			return fmt.Errorf("%w: %w", ErrInvalid, err)
		}
		buf = buf[:0]
	walk:
		for w := range ep.NumWindows() {
			for _, id := range ep.Window(w) {
				buf = append(buf, s.chunkOf(id))
				if k++; k < end {
					continue
				}
				if err := m.walk(len(buf)); err != nil {
					return err
				}
				visit(e, buf)
				buf = buf[:0]
				if b++; b == nb {
					break walk
				}
				if _, end, err = cut.GlobalBatch(n, b); err != nil {
					return fmt.Errorf("%w: %w", ErrInvalid, err)
				}
			}
		}
	}
	return m.err()
}

// maxPresize caps the trace's initial capacity (in accesses, 768 MiB)
// whatever the estimate.
const maxPresize = 1 << 26

// trace walks the job's schedule and returns its demand trace, calling
// also, if not nil, with every global batch as walk does.
func (s *schedule) trace(m *meter, also func(epoch int, chunks []int32)) ([]Access, error) {
	return s.traceOf(m, func(visit func(epoch int, chunks []int32)) error {
		return s.walk(m, s.j.Window, visit)
	}, also)
}

// traceOf is trace over the global batches walk visits. It counts the
// accesses the trace holds on m, and the walk stops at its next count
// once they pass the budget.
func (s *schedule) traceOf(m *meter, walk func(visit func(epoch int, chunks []int32)) error, also func(epoch int, chunks []int32)) ([]Access, error) {
	// A batch touches at most its samples' count of chunks, at most all of
	// them, and usually at most the chunks of the two windows it straddles.
	// Sizing the trace for that up front saves the growing copies of a
	// slice that reaches millions of accesses.
	perBatch := min(s.j.BatchSize*s.j.World, len(s.d.Counts))
	if s.j.Window <= perBatch/2 {
		perBatch = 2 * s.j.Window
	}
	perEpoch, size := s.numBatches()*perBatch, maxPresize
	if perEpoch <= maxPresize/s.j.Epochs {
		size = perEpoch * s.j.Epochs
	}
	if room := m.traceRoom(); room >= 0 {
		size = int(min(int64(size), room))
	}
	out := make([]Access, 0, size)
	// stamp[c] is the number of the last batch that used chunk c, so that a
	// batch's distinct chunks are found in O(samples).
	stamp := make([]int, len(s.d.Counts))
	batch := 0
	err := walk(func(epoch int, chunks []int32) {
		batch++
		start, n := true, len(out)
		for _, c := range chunks {
			if stamp[c] != batch {
				stamp[c] = batch
				out = append(out, Access{Chunk: c, Epoch: int32(epoch), Start: start})
				start = false
			}
		}
		// An error stops the walk at its next count.
		_ = m.trace(len(out) - n)
		if also != nil {
			also(epoch, chunks)
		}
	})
	if err == nil {
		err = m.err()
	}
	if err != nil {
		return nil, err
	}
	return out, nil
}
