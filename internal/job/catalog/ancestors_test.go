package catalog_test

import (
	"fmt"
	"testing"

	"github.com/brandgw/brand/chunkindex"
	"github.com/brandgw/brand/cluster"
	"github.com/brandgw/brand/internal/job/catalog"
)

// inPlaceIndex is an index of files dataset served in place, 64 chunks
// of 10 samples, then more files of one chunk each.
func inPlaceIndex(t *testing.T, files, more int) *chunkindex.Index {
	t.Helper()
	var chunks []chunkindex.Chunk
	var keys []string
	for f := range files + more {
		chunks = append(chunks, chunkindex.Chunk{Key: fmt.Sprintf("data/f%03d.parquet#0", f), Size: 1 << 20, ETag: fmt.Sprintf("e%d", f), Samples: 10})
		for s := range 10 {
			keys = append(keys, fmt.Sprintf("f%03d/%d", f, s))
		}
	}
	ix, err := chunkindex.NewDeferred(chunks, keys, chunkindex.InPlace{Format: "parquet", Created: 1700000000})
	if err != nil {
		t.Fatal(err)
	}
	return ix
}

// Files appended to a dataset move few of its old chunks on a cluster:
// the extension's owners are hashed by its lineage's root, as the first
// version's were, so an old chunk keeps its owner unless the bounded
// loads shift it — rather than every chunk being hashed anew under the
// new version's ID, which would leave each node's cache holding chunks
// it no longer owns. The pinned view of the first version (Ancestor)
// has the first version's owners exactly.
func TestAppendKeepsOwners(t *testing.T) {
	first := inPlaceIndex(t, 64, 0)
	ext, err := first.Lineage().Extend(inPlaceIndex(t, 64, 8))
	if err != nil {
		t.Fatal(err)
	}
	a, b := catalog.NewDataset("d", "s3://b/d", nil, first), catalog.NewDataset("d", "s3://b/d", nil, ext)
	if a.ClusterKey() != b.ClusterKey() {
		t.Fatalf("the extension's cluster key %x, the first version's %x: an append re-hashes every chunk", b.ClusterKey(), a.ClusterKey())
	}
	ms, err := cluster.NewMembership([]string{"http://10.0.0.1:8080", "http://10.0.0.2:8080", "http://10.0.0.3:8080"})
	if err != nil {
		t.Fatal(err)
	}
	before, after := a.Owners(ms), b.Owners(ms)
	moved := 0
	for c := range before {
		if before[c] != after[c] {
			moved++
		}
	}
	// 64 → 72 chunks over 3 nodes: the new chunks take their share and
	// bounded loads shift a few old ones; a new key moves about 2/3.
	if moved > 64/8 {
		t.Errorf("%d of 64 old chunks changed owner on an append of 8", moved)
	}
	view, ok := b.Ancestor(first.ID())
	if !ok {
		t.Fatal("the extension does not serve the first version")
	}
	for c, o := range view.Owners(ms) {
		if o != before[c] {
			t.Fatalf("the first version's view: chunk %d owned by %d, the first version's owner %d", c, o, before[c])
		}
	}
	t.Logf("%d of 64 old chunks changed owner on an append of 8 files", moved)
}
