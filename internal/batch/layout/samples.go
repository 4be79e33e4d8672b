package layout

import (
	"context"
	"fmt"
	"slices"

	"github.com/brandgw/brand/chunkindex"
	"github.com/brandgw/brand/internal/errkind"
	"github.com/brandgw/brand/internal/job/catalog"
)

// ErrOutOfRange marks an epoch, batch or offset outside the job's epoch.
var ErrOutOfRange = errkind.New(errkind.NotFound, "not found")

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
	var seen map[int]int // once a batch spans more than scanChunks chunks
	last := -1           // the slot of the previous sample's chunk
	for _, in := range info {
		i := -1
		switch {
		case last >= 0 && s.Chunks[last] == in.Chunk:
			i = last
		case seen != nil:
			if j, ok := seen[in.Chunk]; ok {
				i = j
			}
		default:
			i = slices.Index(s.Chunks, in.Chunk)
		}
		if i < 0 {
			i = len(s.Chunks)
			s.Chunks = append(s.Chunks, in.Chunk)
			if seen != nil {
				seen[in.Chunk] = i
			} else if len(s.Chunks) > scanChunks {
				seen = make(map[int]int, 2*len(s.Chunks))
				for j, c := range s.Chunks {
					seen[c] = j
				}
			}
		}
		s.Slot = append(s.Slot, i)
		last = i
		s.Bytes += in.Length
	}
	return s
}

// scanChunks is how many distinct chunks SamplesOf looks for a sample's
// among one by one before it keeps a map of them: a shuffled batch
// spans about as many chunks as the job's window, a few to a few dozen,
// where a scan costs less than hashing (SamplesOf with a map was 3 % of
// BenchmarkServeBatchWarm).
const scanChunks = 32

// Pick lays out the samples of s at positions pos, in that order.
func (s Samples) Pick(pos []int) Samples {
	ids := make([]int, len(pos))
	info := make([]chunkindex.Sample, len(pos))
	for j, p := range pos {
		ids[j], info[j] = s.IDs[p], s.Info[p]
	}
	return SamplesOf(s.DS, ids, info)
}
