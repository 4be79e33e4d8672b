package parquet

import (
	"fmt"

	"github.com/brandgw/brand/format"
)

// A chunk is one or more consecutive row groups of one file (package
// doc, "Chunks"): Index cuts each file's row groups into chunks of about
// the chunk size, so that a dataset whose writer made small row groups
// (the Hub's image datasets: 100 rows, a few MiB) is still read from the
// store in reads of about the chunk size and cached in chunks of it.

// DefaultChunkBytes is the size a chunk of row groups aims for when
// format.Options.ChunkBytes is 0: the size of `brand pack`'s chunks
// (docs/format.md §6.4 says what was measured).
const DefaultChunkBytes = 16 << 20

// numChunks is the dataset's chunks.
func (ds *dataset) numChunks() int {
	if ds.ends == nil {
		return len(ds.chunks)
	}
	return len(ds.ends)
}

// span is chunk c's row groups.
func (ds *dataset) span(c int) []chunk {
	if ds.ends == nil {
		return ds.chunks[c : c+1]
	}
	lo := 0
	if c > 0 {
		lo = ds.ends[c-1]
	}
	return ds.chunks[lo:ds.ends[c]]
}

// setSpans cuts the row groups at ends (dataset.ends; nil for a chunk
// each) after checking that each chunk's row groups are consecutive row
// groups of one file.
func (ds *dataset) setSpans(ends []int) error {
	ds.ends, ds.docs = nil, nil
	if ends == nil {
		return nil
	}
	lo := 0
	for _, hi := range ends {
		if hi <= lo || hi > len(ds.chunks) {
			return fmt.Errorf("%w: a chunk of row groups %d to %d of %d", errMeta, lo, hi, len(ds.chunks))
		}
		for i := lo + 1; i < hi; i++ {
			a, b := &ds.chunks[i-1], &ds.chunks[i]
			if a.file != b.file || a.first+a.rows != b.first {
				return fmt.Errorf("%w: a chunk of row groups that do not follow one another in one file", errMeta)
			}
		}
		lo = hi
	}
	if lo != len(ds.chunks) {
		return fmt.Errorf("%w: chunks of %d row groups, of %d", errMeta, lo, len(ds.chunks))
	}
	ds.ends = ends
	if t := ds.tokens; t != nil {
		ds.docs = make([][]uint32, len(ends))
		for c := range ends {
			var n []uint32
			for _, g := range ds.span(c) {
				n = append(n, t.counts[g.at]...)
			}
			ds.docs[c] = n
		}
	}
	return nil
}

// groupBytes is row group g's column chunks' bytes in its file: what
// reading it with every field fetches.
func groupBytes(g *chunk) int64 {
	var n int64
	for _, m := range g.cols {
		n = add(n, m.length)
	}
	return n
}

// cut returns the ends (dataset.ends) of chunks of consecutive row
// groups of one file of about target bytes each (their column chunks'
// bytes, groupBytes): a row group joins the chunk before it while that
// brings the chunk nearer the target, and while the chunk's resident
// bound with every field stays within lim.ChunkBytes and its rows within
// lim.ChunkSamples. nil when every chunk is one row group (the
// description is then as before chunks of several row groups).
func (d *decoder) cut(target int64, lim format.Limits) []int {
	gs := d.ds.chunks
	var ends []int
	several := false
	var size, rows, members int64
	for i := range gs {
		g := &gs[i]
		b, m := groupBytes(g), d.membersBound(g, nil)
		join := i > 0 && gs[i-1].file == g.file &&
			add(size, b/2) <= target &&
			rows+g.rows <= int64(lim.ChunkSamples) &&
			add(format.Overhead(int(min(rows+g.rows, int64(lim.ChunkSamples)))), add(members, m)) <= lim.ChunkBytes
		if join {
			ends[len(ends)-1] = i + 1
			size, rows, members = add(size, b), rows+g.rows, add(members, m)
			several = true
			continue
		}
		ends = append(ends, i+1)
		size, rows, members = b, g.rows, m
	}
	if !several {
		return nil
	}
	return ends
}
