package planner

import (
	"github.com/brandgw/brand/api"
	"github.com/brandgw/brand/chunkindex"
	"github.com/brandgw/brand/format"
)

// DatasetOf returns what the planner needs of an index: chunk sizes and
// sample counts. For a dataset served in place (ix.Deferred()) the sizes
// are the chunks' resident bounds with every field, and the store sizes
// are unknown without the format's decoder: DatasetInPlace has both.
func DatasetOf(ix *chunkindex.Index) Dataset {
	d := Dataset{ChunkSizes: make([]int64, ix.NumChunks()), Counts: ix.SampleCounts()}
	for c := range d.ChunkSizes {
		d.ChunkSizes[c] = ix.Chunk(c).Size
	}
	return d
}

// DatasetInPlace returns what the planner needs of a dataset served in
// place (package format), indexed by ix and decoded by dec, read with the
// fields sel (nil: every field), as a gateway serving it reads it: per
// chunk, its resident bound with those fields, which the cache holds, and
// as StoreSizes its store extent with them — the bytes of
// Decoder.Extent's ranges, which a load reads (format.Concat); nil if
// every chunk's are its resident bound.
func DatasetInPlace(ix *chunkindex.Index, dec format.Decoder, sel format.Selection) Dataset {
	n := ix.NumChunks()
	d := Dataset{ChunkSizes: make([]int64, n), StoreSizes: make([]int64, n), Counts: ix.SampleCounts()}
	differ := false
	for c := range n {
		ranges, resident := dec.Extent(c, sel)
		d.ChunkSizes[c], d.StoreSizes[c] = resident, format.Concat(ranges)
		differ = differ || d.StoreSizes[c] != resident
	}
	if !differ {
		d.StoreSizes = nil
	}
	return d
}

// datasetOfPlan is the dataset a gateway describes (api.PlanDataset).
// WithGETs is d whose chunks are each read whole by one request of
// requests (a store's Requests: s3backend.S3's parts, one for a local
// file): what a plan counts each load's GETs by (Dataset.GETs).
func WithGETs(d Dataset, requests func(n int64) int) Dataset {
	d.GETs = make([]int32, len(d.ChunkSizes))
	for c, size := range d.stores() {
		d.GETs[c] = int32(requests(size))
	}
	return d
}

func datasetOfPlan(pd api.PlanDataset) Dataset {
	return Dataset{ChunkSizes: pd.Sizes, Counts: pd.Counts, StoreSizes: pd.StoreSizes, GETs: pd.GETs}
}
