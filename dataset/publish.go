package dataset

import (
	"bytes"
	"context"
	"fmt"
	"time"

	"github.com/brandgw/brand/chunkindex"
	"github.com/brandgw/brand/s3backend"
)

// companion is the object a dataset's index needs beside it, stored
// before the index: a packed dataset's member table, the format's
// description of the chunks of one served in place.
type companion struct {
	key  string
	what string // for errors: "the member table"
	b    []byte
}

// publish stores the companion, the index, then the manifest: a reader
// never finds a manifest naming an index that is not there yet, nor an
// index without what it needs beside it. It is the end of Pack,
// IndexShards and IndexInPlace alike; the Result's manifest is the one
// readers will see (UTC, whole seconds).
func publish(ctx context.Context, st s3backend.Store, ix *chunkindex.Index, m chunkindex.Manifest, first companion) (*Result, error) {
	if m.Created.IsZero() {
		m.Created = time.Now()
	}
	ib, err := ix.MarshalBinary()
	if err != nil {
		return nil, fmt.Errorf("dataset: encoding the index: %w", err)
	}
	mb, err := chunkindex.MarshalManifest(m)
	if err != nil {
		return nil, fmt.Errorf("dataset: encoding the manifest: %w", err)
	}
	if _, err := st.Put(ctx, first.key, bytes.NewReader(first.b), int64(len(first.b))); err != nil {
		return nil, fmt.Errorf("dataset: storing %s: %w", first.what, err)
	}
	if _, err := st.Put(ctx, chunkindex.IndexKey, bytes.NewReader(ib), int64(len(ib))); err != nil {
		return nil, fmt.Errorf("dataset: storing the index: %w", err)
	}
	if _, err := st.Put(ctx, chunkindex.ManifestKey, bytes.NewReader(mb), int64(len(mb))); err != nil {
		return nil, fmt.Errorf("dataset: storing the manifest (the index is stored): %w", err)
	}
	if m, err = chunkindex.ParseManifest(mb); err != nil {
		return nil, fmt.Errorf("dataset: re-reading the manifest: %w", err)
	}
	return &Result{Index: ix, Manifest: m}, nil
}

// publishPacked publishes a dataset of tar chunks (Pack, IndexShards)
// with its member table; files are every sample's members, in sample ID
// order.
func publishPacked(ctx context.Context, st s3backend.Store, ix *chunkindex.Index, m chunkindex.Manifest, files [][]chunkindex.MemberInfo) (*Result, error) {
	var mt chunkindex.MembersBuilder
	for id, fs := range files {
		if err := mt.Add(id, fs); err != nil {
			return nil, fmt.Errorf("dataset: building the member table: %w", err)
		}
	}
	tb, err := mt.Encode(ctx, ix)
	if err != nil {
		return nil, fmt.Errorf("dataset: building the member table: %w", err)
	}
	return publish(ctx, st, ix, m, companion{key: chunkindex.MembersKey, what: "the member table", b: tb})
}
