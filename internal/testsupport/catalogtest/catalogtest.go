// Package catalogtest makes the catalog's datasets that tests of the
// batch stages and of the job and cluster rooms serve from (the reader's,
// layout's, feedback's, hand-over's, the resolver's, …): an index alone,
// on no store, so a test reads its chunks through its own fakes; or, for
// a test of what is kept in a dataset's store (a job's edits), on the
// store it is given.
//
// It is test support, as net/http's httptest is: the server links none
// of it.
package catalogtest

import (
	"fmt"
	"testing"

	"github.com/brandgw/brand/chunkindex"
	"github.com/brandgw/brand/internal/job/catalog"
	"github.com/brandgw/brand/s3backend"
)

// SampleSize is the size of every sample of Dataset: one tar block.
const SampleSize = 512

// Dataset returns a dataset named name of chunks chunks of perChunk
// samples each, on no store. Chunk c is the object "c%04d.tar" with the
// ETag fmt.Sprint(c) and perChunk × SampleSize bytes; its sample i is
// keyed name/c/i and stands at i × SampleSize.
func Dataset(t testing.TB, name string, chunks, perChunk int) *catalog.Dataset {
	t.Helper()
	sizes := make([]int64, chunks)
	for c := range sizes {
		sizes[c] = int64(perChunk) * SampleSize
	}
	return Sized(t, name, sizes, perChunk)
}

// Sized is Dataset of len(sizes) chunks, chunk c of sizes[c] bytes (at
// least its samples', the rest after them): the dataset of a test that
// weighs chunks by their bytes, as a cache's hit ratio by bytes does.
func Sized(t testing.TB, name string, sizes []int64, perChunk int) *catalog.Dataset {
	t.Helper()
	var cs []chunkindex.Chunk
	var ss []chunkindex.Sample
	for c, size := range sizes {
		cs = append(cs, chunkindex.Chunk{Key: fmt.Sprintf("c%04d.tar", c), Size: size, ETag: fmt.Sprint(c), Samples: perChunk})
		for i := range perChunk {
			ss = append(ss, chunkindex.Sample{Key: fmt.Sprintf("%s/%d/%d", name, c, i), Chunk: c, Offset: int64(i) * SampleSize, Length: SampleSize})
		}
	}
	ix, err := chunkindex.New(cs, ss)
	if err != nil {
		t.Fatal(err)
	}
	return catalog.NewDataset(name, "", nil, ix)
}

// Grown returns the versions of a dataset named name served in place
// from st, each extending the one before it as `brand index --append`'s
// index does (chunkindex.Extend): version v holds the first chunks[v]
// chunks, of perChunk samples each, sample i of chunk c keyed name/c/i
// as Dataset's. Its chunks name no object of st: a test of the layout,
// the edits or the resolver reads none.
func Grown(t testing.TB, name string, st s3backend.Store, perChunk int, chunks ...int) []*catalog.Dataset {
	t.Helper()
	src := chunkindex.InPlace{Format: "lines", Created: 1}
	var out []*catalog.Dataset
	var prev *chunkindex.Index
	for _, n := range chunks {
		var cs []chunkindex.Chunk
		var keys []string
		for c := range n {
			cs = append(cs, chunkindex.Chunk{Key: fmt.Sprintf("%s#%d", name, c), Size: int64(perChunk) * SampleSize, Samples: perChunk})
			for i := range perChunk {
				keys = append(keys, fmt.Sprintf("%s/%d/%d", name, c, i))
			}
		}
		ix, err := chunkindex.NewDeferred(cs, keys, src)
		if err != nil {
			t.Fatal(err)
		}
		if prev != nil {
			if ix, err = prev.Lineage().Extend(ix); err != nil {
				t.Fatal(err)
			}
		}
		prev = ix
		out = append(out, catalog.NewDataset(name, "file:///"+name, st, ix))
	}
	return out
}
