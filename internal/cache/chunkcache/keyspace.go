package chunkcache

import (
	"context"
	"fmt"
)

// Keyspace is which space a cache key lives in, which says what its
// entry holds: a dataset's chunk or an object's block. The cache treats
// every space alike — one byte bound, one policy, one queue for room —
// and its loader is told apart by space (BySpace), so that what reads
// one space never sees a key of another.
type Keyspace uint8

const (
	// Chunk is a chunk of a dataset, which its index describes: the
	// dataset loader verifies every sample's CRC32C, and the disk tier
	// may keep it. The zero Keyspace.
	Chunk Keyspace = iota
	// Object is a block of an object a store serves as it is (the S3
	// face's read-through buckets): no index describes it, so nothing
	// verifies it beyond the version its key names, and no disk tier
	// keeps it.
	Object
)

// BySpace is a Loader that sends each key to the loader of its space:
// Chunks for Chunk keys, Objects for Object keys. A loader sees only keys
// of its own space, by construction: the dataset loader (and the disk tier
// under it) is never asked for an object's block, nor the objects' loader
// for a chunk. Spill and Wants reach only a space's loader that is a
// Spiller; LoadTiered, one that is a TieredLoader.
type BySpace struct {
	Chunks, Objects Loader // nil: keys of that space fail to load
}

func (b BySpace) loader(k Key) (Loader, error) {
	var l Loader
	switch k.Space {
	case Chunk:
		l = b.Chunks
	case Object:
		l = b.Objects
	}
	if l == nil {
		return nil, fmt.Errorf("chunkcache: no loader for %s (key space %d)", k, k.Space)
	}
	return l, nil
}

// Load implements Loader.
func (b BySpace) Load(ctx context.Context, k Key, buf []byte) error {
	_, err := b.LoadTiered(ctx, k, buf)
	return err
}

// LoadTiered implements TieredLoader.
func (b BySpace) LoadTiered(ctx context.Context, k Key, buf []byte) (bool, error) {
	l, err := b.loader(k)
	if err != nil {
		return false, err
	}
	if tl, ok := l.(TieredLoader); ok {
		return tl.LoadTiered(ctx, k, buf)
	}
	return false, l.Load(ctx, k, buf)
}

// Spill implements Spiller.
func (b BySpace) Spill(k Key, data []byte, release func()) {
	l, _ := b.loader(k)
	if sp, ok := l.(Spiller); ok {
		sp.Spill(k, data, release)
		return
	}
	release()
}

// Wants implements Spiller.
func (b BySpace) Wants(k Key) bool {
	l, _ := b.loader(k)
	sp, ok := l.(Spiller)
	return ok && sp.Wants(k)
}

var (
	_ Spiller      = BySpace{}
	_ TieredLoader = BySpace{}
)
