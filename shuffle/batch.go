package shuffle

import (
	"fmt"
	"math"

	"github.com/brandgw/brand/internal/errkind"
)

var (
	// ErrInvalid reports job parameters outside their allowed range: a
	// window, batch size or world size below 1, a negative sample count, a
	// rank outside [0, world). The wrapping error names the parameter and its
	// allowed range.
	ErrInvalid = errkind.New(errkind.Invalid, "shuffle: invalid parameters")

	// ErrOutOfRange reports a batch index (or rank) outside the valid range
	// for the epoch. The wrapping error states the valid range.
	ErrOutOfRange = errkind.New(errkind.NotFound, "shuffle: out of range")
)

// rankError is the error for a rank outside [0, world). A rank is both a job
// parameter (ErrInvalid: the request can never succeed) and an index into
// the ranks of a batch (ErrOutOfRange), so it wraps both sentinels, and has
// both their kinds; a caller that maps errors to responses should test
// ErrInvalid's kind first.
type rankError struct{ rank, world int }

func (e *rankError) Error() string {
	return fmt.Sprintf("shuffle: invalid parameters: rank %d out of range [0, %d) for world size %d",
		e.rank, e.world, e.world)
}

func (e *rankError) Unwrap() []error { return []error{ErrInvalid, ErrOutOfRange} }

// Params are the parameters of one job (one rank of a training run) that,
// with the dataset's chunk sizes, an epoch number and a batch index, select a
// batch. The epoch is not among them: one job reads many epochs. A gateway
// validates them once, when it parses a request.
//
// Seed and Window fix the epoch order; BatchSize, World, Rank, DropLast and
// Offset only cut it. So a job may change its world size or batch size
// between epochs, or in the middle of one with Offset, and still read every
// sample of the epoch exactly once.
type Params struct {
	Seed      uint64 `json:"seed"`           // job seed; any value
	Window    int    `json:"window"`         // shuffle window in chunks, >= 1
	BatchSize int    `json:"batch_size"`     // samples per rank per batch, >= 1
	World     int    `json:"world"`          // number of ranks, >= 1
	Rank      int    `json:"rank,omitempty"` // this rank, in [0, World)
	DropLast  bool   `json:"drop_last"`      // drop a partial final global batch
	// Offset is how many samples of the epoch, counted globally over all
	// ranks, were consumed before this cut started: batch M covers epoch
	// positions Offset + M*BatchSize*World onward. 0 reads the whole
	// epoch. A job that consumed P samples at one world size resumes at
	// any other with Offset P, and reads every remaining sample once.
	Offset int `json:"offset,omitempty"`
}

// Validate reports whether p is usable, as an error wrapping ErrInvalid that
// names the first offending parameter and its allowed range. Whether Offset
// fits a particular epoch is checked when a batch is cut (BatchRange).
func (p Params) Validate() error {
	if err := checkWindow(p.Window); err != nil {
		return err
	}
	if p.Offset < 0 {
		return fmt.Errorf("%w: offset %d; must be >= 0", ErrInvalid, p.Offset)
	}
	return checkShape(p.BatchSize, p.World, p.Rank)
}

// NumBatches is the package's NumBatches for the part of an epoch of n
// samples that starts at p.Offset: 0 when the offset is at or past the end.
func (p Params) NumBatches(n int) int {
	if p.Offset < 0 || p.Offset >= n {
		return 0
	}
	return NumBatches(n-p.Offset, p.BatchSize, p.World, p.DropLast)
}

// BatchRange is the package's BatchRange for the part of an epoch of n
// samples that starts at p.Offset: the positions [start, end) of the epoch
// that p.Rank takes from batch m of that part. DropLast drops that part's
// partial final global batch. An offset past n wraps ErrOutOfRange.
func (p Params) BatchRange(n, m int) (start, end int, err error) {
	if err := p.Validate(); err != nil {
		return 0, 0, err
	}
	if p.Offset > n {
		return 0, 0, fmt.Errorf("%w: offset %d past the epoch's %d samples", ErrOutOfRange, p.Offset, n)
	}
	start, end, err = BatchRange(n-p.Offset, m, p.BatchSize, p.World, p.Rank, p.DropLast)
	if err != nil {
		return 0, 0, err
	}
	return start + p.Offset, end + p.Offset, nil
}

// GlobalBatch returns the epoch positions [start, end) of global batch m
// of the part of an epoch of n samples that starts at p.Offset: every
// rank's slice of it, together, whatever p.Rank. It is the cut a reader
// of every rank walks the epoch by — the planner replaying a gateway that
// serves all ranks, a cluster assigning a global batch's samples to ranks
// — so that its batches are, by construction, those BatchRange gives each
// rank. Errors are BatchRange's.
func (p Params) GlobalBatch(n, m int) (start, end int, err error) {
	p.Rank = 0
	start, _, err = p.BatchRange(n, m)
	if err != nil {
		return 0, 0, err
	}
	p.Rank = p.World - 1
	_, end, err = p.BatchRange(n, m)
	return start, end, err
}

// AppendShares appends to dst how many positions of global batch m each
// rank takes, rank 0 first: the lengths of BatchRange's slices, which
// tile GlobalBatch(n, m) in rank order. Errors are BatchRange's.
func (p Params) AppendShares(dst []int, n, m int) ([]int, error) {
	for r := range p.World {
		p.Rank = r
		s, e, err := p.BatchRange(n, m)
		if err != nil {
			return dst, err
		}
		dst = append(dst, e-s)
	}
	return dst, nil
}

// RankSamples is how many samples p.Rank receives from the part of an epoch
// of n samples that starts at p.Offset.
func (p Params) RankSamples(n int) int {
	nb := p.NumBatches(n)
	if nb == 0 {
		return 0
	}
	// Every batch but the last gives the rank a full slice.
	s, e, err := p.BatchRange(n, nb-1)
	if err != nil {
		return 0
	}
	return (nb-1)*p.BatchSize + e - s
}

func checkWindow(window int) error {
	if window < 1 {
		return fmt.Errorf("%w: window %d chunks; must be >= 1", ErrInvalid, window)
	}
	return nil
}

// checkShape validates the batch geometry. BatchSize*World must fit in an
// int so that global batch boundaries can be computed without overflow.
func checkShape(batchSize, world, rank int) error {
	switch {
	case batchSize < 1:
		return fmt.Errorf("%w: batch size %d; must be >= 1", ErrInvalid, batchSize)
	case world < 1:
		return fmt.Errorf("%w: world size %d; must be >= 1", ErrInvalid, world)
	case batchSize > math.MaxInt/world:
		return fmt.Errorf("%w: batch size %d × world size %d overflows int", ErrInvalid, batchSize, world)
	case rank < 0 || rank >= world:
		return &rankError{rank: rank, world: world}
	}
	return nil
}

// NumBatches returns the number of global batches in an epoch of n samples
// with batchSize samples per rank and world ranks: floor(n / (batchSize*world))
// with dropLast, where a partial final global batch is dropped entirely, and
// ceil(n / (batchSize*world)) without, where the final global batch may be
// short. It returns 0 for parameters BatchRange would reject as invalid.
func NumBatches(n, batchSize, world int, dropLast bool) int {
	if n < 0 || checkShape(batchSize, world, 0) != nil {
		return 0
	}
	g := batchSize * world
	nb := n / g
	if !dropLast && n%g != 0 {
		nb++
	}
	return nb
}

// BatchRange returns the epoch positions [start, end) that rank takes from
// global batch m: global batch m covers positions [m*B*world, (m+1)*B*world)
// and rank r takes the B positions starting at m*B*world + r*B, clipped to n.
// The epoch order therefore never depends on the world size; only the cut
// does. Without dropLast a rank's slice of the final batch may be short or
// empty (start == end), which is valid.
//
// Invalid parameters yield an error wrapping ErrInvalid; a batch index
// outside [0, NumBatches) one wrapping ErrOutOfRange that states the range.
func BatchRange(n, m, batchSize, world, rank int, dropLast bool) (start, end int, err error) {
	if n < 0 {
		return 0, 0, fmt.Errorf("%w: %d samples; must be >= 0", ErrInvalid, n)
	}
	if err := checkShape(batchSize, world, rank); err != nil {
		return 0, 0, err
	}
	nb := NumBatches(n, batchSize, world, dropLast)
	if m < 0 || m >= nb {
		return 0, 0, fmt.Errorf("%w: batch %d not in [0, %d) (%d samples, batch size %d, world size %d, drop_last %t)",
			ErrOutOfRange, m, nb, n, batchSize, world, dropLast)
	}
	// m < nb <= ceil(n/g) gives m*g < n, so base cannot overflow; the
	// clipping compares remainders so that base+off cannot either.
	base := m * batchSize * world
	start, end = n, n
	if off := rank * batchSize; off < n-base {
		start = base + off
	}
	if batchSize < n-start {
		end = start + batchSize
	}
	return start, end, nil
}

// Batch returns the sample IDs rank takes from global batch m, in epoch
// order, as a fresh slice (empty, not nil, for an empty final slice). Its
// cost is proportional to the samples of the windows the batch touches, never
// to the dataset. Errors are those of BatchRange.
func (e *Epoch) Batch(m, batchSize, world, rank int, dropLast bool) ([]int, error) {
	start, end, err := BatchRange(e.NumSamples(), m, batchSize, world, rank, dropLast)
	if err != nil {
		return nil, err
	}
	return e.AppendRange(make([]int, 0, end-start), start, end), nil
}
