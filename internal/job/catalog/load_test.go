package catalog

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"github.com/brandgw/brand/chunkindex"
	"github.com/brandgw/brand/cluster"
	"github.com/brandgw/brand/s3backend"
)

// putIndex stores an index of chunks chunks of 4 samples each, whose
// keys start with prefix, and returns it.
func putIndex(t *testing.T, st s3backend.Store, chunks int, prefix string) *chunkindex.Index {
	t.Helper()
	var cs []chunkindex.Chunk
	var ss []chunkindex.Sample
	for c := range chunks {
		cs = append(cs, chunkindex.Chunk{Key: fmt.Sprintf("c%03d.tar", c), Size: 4 * 512, Samples: 4})
		for i := range 4 {
			ss = append(ss, chunkindex.Sample{Key: fmt.Sprintf("%s/%d/%d", prefix, c, i), Chunk: c, Offset: int64(512 * i), Length: 512})
		}
	}
	ix, err := chunkindex.New(cs, ss)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := ix.MarshalBinary()
	if _, err := st.Put(context.Background(), chunkindex.IndexKey, bytes.NewReader(b), int64(len(b))); err != nil {
		t.Fatal(err)
	}
	return ix
}

// A node of a cluster reads its index partially, keeping its own chunks'
// tables; a reload reads the new version the same way. A single gateway
// reads it whole.
func TestLoadPartition(t *testing.T) {
	st, err := s3backend.NewLocal(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	whole := putIndex(t, st, 30, "a")
	single, err := Load(ctx, Spec{Name: "d", Store: st}, s3backend.Config{}, zerolog.Nop())
	if err != nil || single.Index.Tables().Partial() {
		t.Fatalf("single gateway: %v, partial %t", err, err == nil && single.Index.Tables().Partial())
	}
	ms, err := cluster.NewMembership([]string{"http://a:1", "http://b:1", "http://c:1"})
	if err != nil {
		t.Fatal(err)
	}
	p := Partition{Self: "http://b:1", Members: ms}
	d, err := Load(ctx, Spec{Name: "d", Store: st, Partition: p}, s3backend.Config{}, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	own := func(ix *chunkindex.Index) int {
		n := 0
		for _, k := range ms.Owners(cluster.IndexKey(ix.ID()), ix.SampleCounts()) {
			if k == 1 {
				n++
			}
		}
		return n
	}
	if !d.Index.Tables().Partial() || d.ID() != whole.ID() || d.Index.Tables().Stats().Resident != own(whole) {
		t.Fatalf("node 1 of 3: partial %t, ID %s (want %s), %d tables kept (owns %d chunks)",
			d.Index.Tables().Partial(), d.ID(), whole.ID(), d.Index.Tables().Stats().Resident, own(whole))
	}
	for _, o := range []int{0, 1} {
		if !slices.Contains(d.Owners(ms), o) {
			t.Fatalf("no chunk owned by node %d", o)
		}
	}

	c := New([]string{"d"}, "d", NewMetrics(prometheus.NewRegistry()), zerolog.Nop())
	c.Add(d)
	c.MarkReady()
	next := putIndex(t, st, 20, "b")
	if names, err := c.Reload(ctx); err != nil || len(names) != 1 {
		t.Fatalf("Reload: %v, %v", names, err)
	}
	d2, _ := c.Get("d")
	if !d2.Index.Tables().Partial() || d2.ID() != next.ID() || d2.Index.Tables().Stats().Resident != own(next) {
		t.Errorf("reloaded: partial %t, %d tables kept (owns %d)", d2.Index.Tables().Partial(), d2.Index.Tables().Stats().Resident, own(next))
	}
	if id, ok, err := d2.Index.Lookup(ctx, "b/7/2"); err != nil || !ok || id != 7*4+2 {
		t.Errorf("Lookup(b/7/2) = %d, %t, %v", id, ok, err)
	}
}

// TestLoadWithoutIndex: a dataset whose store holds no index fails to
// load saying how to write one (a gateway's Load fails with it).
func TestLoadWithoutIndex(t *testing.T) {
	_, err := Load(context.Background(), Spec{Name: "d", URL: t.TempDir()}, s3backend.Config{}, zerolog.Nop())
	if err == nil || !strings.Contains(err.Error(), "brand pack") {
		t.Fatalf("got %v, want an error pointing at brand pack", err)
	}
}
