// Package catalogtest makes the catalog's datasets that tests of the
// batch stages serve from (the reader's, visit's): an index alone, on no
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
	var cs []chunkindex.Chunk
	var ss []chunkindex.Sample
	for c := range chunks {
		cs = append(cs, chunkindex.Chunk{Key: fmt.Sprintf("c%04d.tar", c), Size: int64(perChunk) * SampleSize, ETag: fmt.Sprint(c), Samples: perChunk})
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
