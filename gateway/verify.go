package gateway

import (
	"fmt"

	"github.com/brandgw/brand/chunkindex"
)

// describe formats a checksum failure.
func describe(ix *chunkindex.Index, id int, got uint32, object, dataset string) error {
	_, _, _, want := ix.SampleRange(id)
	return fmt.Errorf("%w: sample %q in chunk %s of dataset %s has CRC32C %08x, the index says %08x; the object was modified or damaged",
		ErrCorrupt, ix.SampleKey(id), object, dataset, got, want)
}
