// Package catalogtest makes the catalog's datasets that tests of the
// batch stages and of the job and cluster rooms serve from (the reader's,
// layout's, feedback's, hand-over's, …): an index alone, on no
// store, so a test reads its chunks through its own fakes.
//
// It is test support, as net/http's httptest is: the server links none
// of it.
package catalogtest

import (
	"fmt"
	"testing"

	"github.com/brandgw/brand/chunkindex"
	"github.com/brandgw/brand/internal/job/catalog"
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
