package cache

import (
	"testing"

	"github.com/brandgw/brand/internal/testsupport/layertest"
)

// TestRoomsReadDownward holds the cache's rooms below the batch's stages
// ("Layers that read downward"): a batch is laid out, visited and read
// through the cache, never the other way; the use table follows job
// streams (internal/job/jobstream) and reads their orders through its own
// interface, which the layout satisfies.
func TestRoomsReadDownward(t *testing.T) {
	layertest.Never(t, "internal/cache/...",
		"the data path reads downward: the cache knows the streams it serves, not how a batch is laid out",
		"internal/batch")
}
