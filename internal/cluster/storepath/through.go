package storepath

import (
	"context"

	"github.com/rs/zerolog"

	"github.com/brandgw/brand/internal/cache/chunkcache"
	"github.com/brandgw/brand/internal/job/catalog"
)

// ThroughConfig is what Through asks of the node's other parts.
type ThroughConfig struct {
	// Down reports whether this node cannot reach a dataset's store now
	// (Watch.Down, for a remote dataset).
	Down func(ds *catalog.Dataset) bool
	// Chunk names the dataset version and chunk of a cache key
	// (catalog.Catalog.Chunk).
	Chunk func(k chunkcache.Key) (*catalog.Dataset, int, error)
	// Pick names the peer to read a chunk through, -1 if none
	// (route.Router.Through).
	Pick func(ds *catalog.Dataset, c int) int
	// Fetch reads a chunk through the peer in slot k, from the store if
	// its cache does not hold it (transport.Nodes.FetchChunkThrough).
	Fetch func(ctx context.Context, k int, ds *catalog.Dataset, c int, buf []byte) error
	Log   zerolog.Logger
}

// Through reads, while this node cannot reach the store, the chunks it
// loads (its own, for its batches and its peers' requests) through a peer
// that can, which reads each from the store through its own cache (GET
// /internal/v2/chunk?through=true): the node keeps its chunks in its own
// cache, so its peers keep asking it for them and, once the store answers
// again, none is read twice. A chunk no peer can read for it (none is
// up, or none reaches the store either) is refused at once
// (ErrUnreachable), and read elsewhere. It is a catalog.Handover, asked
// before the store.
type Through struct{ c ThroughConfig }

// NewThrough returns the reader of chunks through peers.
func NewThrough(c ThroughConfig) *Through { return &Through{c: c} }

// attempts bounds the peers a chunk is asked of: a second one if the
// first fails (it is then held down, and not picked again).
const attempts = 2

// Read implements catalog.Handover.
func (t *Through) Read(ctx context.Context, k chunkcache.Key, buf []byte, verify func([]byte) error) bool {
	ds, c, err := t.c.Chunk(k)
	if err != nil || !t.c.Down(ds) {
		return false
	}
	tried := -1
	for range attempts {
		p := t.c.Pick(ds, c)
		if p < 0 || p == tried {
			return false
		}
		tried = p
		if err := t.c.Fetch(ctx, p, ds, c, buf); err != nil {
			t.c.Log.Debug().Err(err).Str("chunk", k.String()).Msg("a peer could not read a chunk for this node, cut off from the store")
			continue
		}
		if err := verify(buf); err != nil {
			t.c.Log.Warn().Err(err).Str("chunk", k.String()).Msg("a chunk a peer read for this node failed its check")
			continue
		}
		return true
	}
	return false
}
