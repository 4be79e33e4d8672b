// Package runs is the unit of a run job (run=K): a dataset's samples
// served as runs of K consecutive records — a time series' steps, an
// audio stream's frames, a robot log's rows, stored one record a sample —
// for models that read a context of consecutive records as one item.
//
// A chunk of n samples holds ⌊n/K⌋ runs: samples first+jK …
// first+(j+1)K−1 of the index, the chunk's last n mod K samples in none.
// An epoch's order of runs is the dataset's chunk-then-sample order with
// each run at its first record's place: the runs of a window are shuffled
// within it as its samples are, so the order is exact, resumable and
// world-size-free as every order, and a run's records, of one chunk, are
// read together. A batch of batch_size runs serves their records, each
// run's in the index's order, as stored (keys, members and a job's
// transform= as a job of samples has them); the Brand-Run header says
// how many records a run holds.
//
// It is the sixth kind of batch, added through the seam alone
// (docs/architecture.md, "One seam: adding a kind of batch"): this
// package, its row in the table (internal/job/features), its parameter
// (api.Runs), its entry in internal/batch/units and the Python client's
// field.
package runs

import (
	"context"
	"fmt"
	"net/http"
	"sort"
	"strconv"

	lru "github.com/hashicorp/golang-lru/v2"

	"github.com/brandgw/brand/api"
	"github.com/brandgw/brand/internal/batch/layout"
	"github.com/brandgw/brand/internal/job/catalog"
	"github.com/brandgw/brand/internal/job/features"
	"github.com/brandgw/brand/internal/job/query"
)

// Unit is the unit of a run job. Safe for concurrent use.
type Unit struct {
	base layout.Base
	// epochs memoises each epoch's runs per window: its prefix sums.
	epochs *lru.Cache[epochKey, *epoch]
}

// maxMemoEpochs bounds the epochs kept: each is a word a window.
const maxMemoEpochs = 64

type epochKey struct {
	s     layout.Stream // its Order
	epoch uint64
	k     int
}

// New returns the unit over the orders' base b.
func New(b layout.Base) *Unit {
	c, _ := lru.New[epochKey, *epoch](maxMemoEpochs)
	return &Unit{base: b, epochs: c}
}

func (*Unit) Feature() features.Feature { return features.Runs }

// View is the fields job names (columns=).
func (*Unit) View(_ context.Context, ds *catalog.Dataset, job api.Job) (*catalog.Dataset, error) {
	return ds.Select(job.Columns)
}

// epoch is one epoch's order of runs: where each window's runs start
// among the epoch's, and the base order it is read from.
type epoch struct {
	e      *layout.EpochOrder
	starts []int // per window, its first run's index; a last entry, the runs
}

// runsOf is the runs chunk c of ds holds at run length k.
func runsOf(ds *catalog.Dataset, c, k int) int { return ds.Counts[c] / k }

// epochOf is the order of runs of epoch of job over ds.
func (u *Unit) epochOf(ds *catalog.Dataset, job api.Job, n uint64) (*epoch, layout.Stream, error) {
	s := layout.StreamOf(ds, job)
	k := epochKey{s.Order(), n, job.Run.Len}
	if ep, ok := u.epochs.Get(k); ok {
		return ep, s, nil
	}
	e, err := u.base.Epoch(s, n)
	if err != nil {
		return nil, s, err
	}
	ep := &epoch{e: e, starts: make([]int, e.NumWindows()+1)}
	for w := range e.NumWindows() {
		runs := 0
		for _, c := range e.WindowChunks(w) {
			runs += runsOf(ds, c, job.Run.Len)
		}
		ep.starts[w+1] = ep.starts[w] + runs
	}
	u.epochs.Add(k, ep)
	return ep, s, nil
}

// Extent is the epoch's runs.
func (u *Unit) Extent(src layout.Source, job api.Job, n uint64) (int, error) {
	if err := check(src.DS, job); err != nil {
		return 0, err
	}
	ep, _, err := u.epochOf(src.DS, job, n)
	if err != nil {
		return 0, err
	}
	return ep.starts[len(ep.starts)-1], nil
}

// check refuses a run length no chunk of ds holds a run of.
func check(ds *catalog.Dataset, job api.Job) error {
	for _, n := range ds.Counts {
		if n >= job.Run.Len {
			return nil
		}
	}
	return fmt.Errorf("%w: run=%d: no chunk of dataset %s holds %d records (its largest holds fewer): give a shorter run", ErrRuns, job.Run.Len, ds.Name, job.Run.Len)
}

// ErrRuns marks a run job its dataset cannot serve (400).
var ErrRuns = fmt.Errorf("%w: run job", query.ErrBadRequest)

// Lay lays out the rank's runs of b, items [Start, End) of the epoch's
// order of runs, as one part reading their records in order.
func (u *Unit) Lay(ctx context.Context, b *layout.Batch) error {
	if a := b.Assignment(b.Job); a != api.AssignPlain {
		return fmt.Errorf("run job: assignment %s: a run job's ranks take the plain cut", a)
	}
	ds, k := b.DS, b.Job.Run.Len
	ep, s, err := u.epochOf(ds, b.Job, b.Epoch)
	if err != nil {
		return err
	}
	ids := make([]int, 0, (b.End-b.Start)*k)
	first, end := -1, 0
	// The window of the batch's first run, then each window's runs in
	// its order (its heads: a run's first record) until the batch has
	// its own.
	w := sort.Search(len(ep.starts)-1, func(w int) bool { return ep.starts[w+1] > b.Start })
	at := ep.starts[min(w, len(ep.starts)-1)] // the index of the window's next head
	for ; at < b.End && w < ep.e.NumWindows(); w++ {
		ws := ep.e.WindowStart(w)
		for i, id := range u.base.Window(s, b.Epoch, ep.e, w) {
			c := ds.Index.ChunkOf(id)
			lo, _ := ds.Index.ChunkRange(c)
			if j := id - lo; j%k != 0 || j/k >= runsOf(ds, c, k) {
				continue // not a run's first record
			}
			if at >= b.Start && at < b.End {
				for r := range k {
					ids = append(ids, id+r)
				}
				if first < 0 {
					first = ws + i
				}
				end = ws + i + 1
			}
			if at++; at >= b.End {
				break
			}
		}
	}
	smp, err := layout.NewSamples(ctx, ds, ids)
	if err != nil {
		return err
	}
	b.Parts = []layout.Part{{Stream: s, Epoch: b.Epoch, Samples: smp, First: max(first, 0), End: end,
		Share: b.Job.BatchSize * b.Job.World * k, EpochLen: ds.Index.NumSamples()}}
	b.Take = layout.TakeAll(len(ids))
	return nil
}

// AppendKey names the run length.
func (*Unit) AppendKey(s []byte, job api.Job) []byte {
	return strconv.AppendInt(append(s, "|run="...), int64(job.Run.Len), 10)
}

// Describe adds nothing to /epoch/N beyond its extent, in runs.
func (*Unit) Describe(*api.EpochInfo, layout.Source, api.Job, uint64) error { return nil }

// BatchHeaders names the records a run holds (Brand-Run): a batch's
// samples come in runs of that many, in order.
func (*Unit) BatchHeaders(h http.Header, b *layout.Batch) {
	h.Set(api.HeaderRun, strconv.Itoa(b.Job.Run.Len))
}
