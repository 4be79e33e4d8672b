package planner

import "github.com/brandgw/brand/chunkindex"

// DatasetOf returns what the planner needs of an index: chunk sizes and
// sample counts.
func DatasetOf(ix *chunkindex.Index) Dataset {
	d := Dataset{ChunkSizes: make([]int64, ix.NumChunks()), Counts: ix.SampleCounts()}
	for c := range d.ChunkSizes {
		d.ChunkSizes[c] = ix.Chunk(c).Size
	}
	return d
}
