package order

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strconv"

	"github.com/brandgw/brand/api"
	"github.com/brandgw/brand/chunkindex"
	"github.com/brandgw/brand/internal/catalog"
)

// ErrOutOfRange marks an epoch, batch or offset outside the job's epoch.
var ErrOutOfRange = errors.New("not found")

// Samples are sample IDs of one dataset version, grouped by chunk, with
// their index entries: what reading them needs to know before any chunk
// is read. Reads take every sample's range, CRC32C and key from Info, not
// from the index, so that on a node whose index holds only its own
// chunks' tables (chunkindex.Open) the tables of other chunks are read
// once, when the samples are laid out.
type Samples struct {
	DS     *catalog.Dataset
	IDs    []int               // in the order they are served; an ID may repeat (importance draws)
	Info   []chunkindex.Sample // per ID, its index entry
	Chunks []int               // their distinct chunks, in first-use order
	Slot   []int               // per sample: its chunk's index in Chunks
	Bytes  int64               // the samples' tar bytes, back to back
}

// NewSamples lays out samples ids of ds, reading their entries from its
// index: on a partial index, with at most one load of each chunk's table
// that this node does not hold.
func NewSamples(ctx context.Context, ds *catalog.Dataset, ids []int) (Samples, error) {
	info, err := ds.Index.Samples(ctx, ids)
	if err != nil {
		return Samples{}, fmt.Errorf("reading the index entries of %d samples of dataset %s: %w", len(ids), ds.Name, err)
	}
	return SamplesOf(ds, ids, info), nil
}

// SamplesOf lays out samples ids of ds whose index entries are info.
func SamplesOf(ds *catalog.Dataset, ids []int, info []chunkindex.Sample) Samples {
	s := Samples{DS: ds, IDs: ids, Info: info, Slot: make([]int, 0, len(ids))}
	seen := make(map[int]int, 16)
	for _, in := range info {
		i, ok := seen[in.Chunk]
		if !ok {
			i = len(s.Chunks)
			seen[in.Chunk] = i
			s.Chunks = append(s.Chunks, in.Chunk)
		}
		s.Slot = append(s.Slot, i)
		s.Bytes += in.Length
	}
	return s
}

// Pick lays out the samples of s at positions pos, in that order.
func (s Samples) Pick(pos []int) Samples {
	ids := make([]int, len(pos))
	info := make([]chunkindex.Sample, len(pos))
	for j, p := range pos {
		ids[j], info[j] = s.IDs[p], s.Info[p]
	}
	return SamplesOf(s.DS, ids, info)
}

// Without returns s without every occurrence of the samples in drop.
func (s Samples) Without(drop map[int]bool) Samples {
	pos := make([]int, 0, len(s.IDs))
	for i, id := range s.IDs {
		if !drop[id] {
			pos = append(pos, i)
		}
	}
	return s.Pick(pos)
}

// Layout is everything about one batch that the order and the index
// determine, computed before any chunk is read: which samples, in which
// chunks, at which bytes, and the response's length and ETag.
type Layout struct {
	Samples
	Stream       Stream
	Job          api.Job
	Epoch, Batch uint64
	Batches      int // global batches from the job's offset on
	EpochSamples int // samples in the epoch
	Start, End   int // epoch positions of this rank's slice
	ETag         string
	// Missing are the samples left out because their chunk is damaged at
	// rest (--on-damaged-chunk=skip), and MissingKeys their keys; full
	// is then the full batch's ETag.
	Missing     []int
	MissingKeys []string
	full        string
}

// Length is the batch's tar body: its samples and the end-of-archive
// blocks.
func (l *Layout) Length() int64 { return l.Bytes + int64(len(chunkindex.EndOfArchive)) }

// Batches returns the number of batches of an epoch of a job over ds and
// the epoch's length in samples.
func (o *Orders) Batches(ds *catalog.Dataset, job api.Job, epoch uint64) (batches, samples int, e *Epoch, err error) {
	e, err = o.Epoch(StreamOf(ds, job), epoch)
	if err != nil {
		return 0, 0, nil, err
	}
	n := e.NumSamples()
	if job.Offset > n {
		return 0, n, e, fmt.Errorf("%w: offset %d is past the end of epoch %d, which has %d samples", ErrOutOfRange, job.Offset, epoch, n)
	}
	return job.NumBatches(n), n, e, nil
}

// Layout lays out batch m of an epoch of a job over ds. On a node whose
// index holds only its own chunks' tables, it reads the tables of the
// batch's other chunks (see NewSamples).
func (o *Orders) Layout(ctx context.Context, ds *catalog.Dataset, job api.Job, epoch, m uint64) (*Layout, error) {
	s := StreamOf(ds, job)
	batches, n, e, err := o.Batches(ds, job, epoch)
	if err != nil {
		return nil, err
	}
	if batches == 0 {
		return nil, fmt.Errorf("%w: epoch %d has no batches: %d samples from offset %d with batch_size=%d world=%d drop_last=%t",
			ErrOutOfRange, epoch, n, job.Offset, job.BatchSize, job.World, job.DropLast)
	}
	if m >= uint64(batches) {
		return nil, fmt.Errorf("%w: batch %d out of range: valid batch numbers are 0..%d (epoch %d has %d batches for batch_size=%d world=%d drop_last=%t offset=%d)",
			ErrOutOfRange, m, batches-1, epoch, batches, job.BatchSize, job.World, job.DropLast, job.Offset)
	}
	start, end, err := job.BatchRange(n, int(m))
	if err != nil {
		return nil, err
	}
	var ids []int
	if o.nodes > 1 && !job.NoLocality && job.World > 1 {
		ids, err = o.assigned(s, e, epoch, job, n, int(m))
		if err != nil {
			return nil, err
		}
	} else {
		ids = o.appendRange(nil, s, e, epoch, start, end)
	}
	smp, err := NewSamples(ctx, ds, ids)
	if err != nil {
		return nil, err
	}
	return &Layout{Samples: smp, Stream: s, Job: job, Epoch: epoch, Batch: m, Batches: batches,
		EpochSamples: n, Start: start, End: end, ETag: BatchETag(ds, job, epoch, m, o.nodes)}, nil
}

// Without returns the layout of the batch served without the samples
// missing (their chunk is damaged at rest). Its ETag differs from every
// full batch's, and from the same batch missing other samples.
func (l *Layout) Without(missing []int) *Layout {
	if len(missing) == 0 {
		return l
	}
	drop := make(map[int]bool, len(missing))
	for _, id := range missing {
		drop[id] = true
	}
	nl := *l
	nl.Samples = l.Samples.Without(drop)
	nl.Missing = slices.Sorted(func(yield func(int) bool) {
		for id := range drop {
			if !yield(id) {
				return
			}
		}
	})
	keys := make(map[int]string, len(nl.Missing))
	for i, id := range l.IDs {
		if drop[id] {
			keys[id] = l.Info[i].Key
		}
	}
	nl.MissingKeys = make([]string, len(nl.Missing))
	for i, id := range nl.Missing {
		nl.MissingKeys[i] = keys[id]
	}
	nl.full = l.full
	if nl.full == "" {
		nl.full = l.ETag
	}
	nl.ETag = partialETag(nl.full, nl.Missing)
	return &nl
}

// BatchETag names a batch's bytes: the index's identity and every parameter
// that selects the batch. A batch from offset 0 keeps the ETag it had
// before offsets existed, so that caches in front of a gateway stay warm
// across the upgrade.
//
// In a cluster the order depends on the node count, and the batch on
// whether locality-aware assignment is on; both are then named. So is an
// importance snapshot an epoch is drawn from.
func BatchETag(ds *catalog.Dataset, job api.Job, epoch, m uint64, nodes int) string {
	s := fmt.Appendf(nil, "brand-batch-v1|%s|%s|%d|%d|%d|%d|%d|%t|%d|%d",
		ds.ID(), ds.Name, job.Seed, job.Window, job.BatchSize, job.World, job.Rank, job.DropLast, epoch, m)
	if job.Offset != 0 {
		s = fmt.Appendf(s, "|offset=%d", job.Offset)
	}
	if nodes > 1 {
		s = fmt.Appendf(s, "|nodes=%d|locality=%t", nodes, !job.NoLocality)
	}
	if imp := job.Importance; imp.Version != "" {
		s = fmt.Appendf(s, "|importance=%s|%s|%d", imp.Job, imp.Version, imp.Hot)
	}
	h := sha256.Sum256(s)
	return `"` + hex.EncodeToString(h[:16]) + `"`
}

// PartialETag names a batch whose full ETag is full served without the
// samples at missing (sorted; IDs or positions, as the batch's kind
// names them).
func PartialETag(full string, missing []int) string { return partialETag(full, missing) }

// partialETag names a batch served without the samples missing (sorted).
func partialETag(full string, missing []int) string {
	s := []byte("brand-partial-v1|" + full)
	for _, id := range missing {
		s = strconv.AppendInt(append(s, '|'), int64(id), 10)
	}
	h := sha256.Sum256(s)
	return `"` + hex.EncodeToString(h[:16]) + `"`
}
