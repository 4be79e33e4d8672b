package chunkindex

import (
	"context"
	"fmt"
	"testing"
)

// TestLookupMany: LookupMany answers what Lookup answers of every key,
// by both of its ways (few keys: a search each; many: one walk of the
// hash order, in one part or several), keys repeated and unknown among
// them.
func TestLookupMany(t *testing.T) {
	var cs []Chunk
	var ss []Sample
	for c := range 20 {
		cs = append(cs, Chunk{Key: fmt.Sprintf("c%d.tar", c), Size: 51 * 512, Samples: 50})
		for i := range 50 {
			ss = append(ss, Sample{Key: fmt.Sprintf("k/%d/%d", c, i), Chunk: c, Offset: int64(i) * 512, Length: 512})
		}
	}
	ix, err := New(cs, ss)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range []int{3, 40, 1200} {
		var keys []string
		for i := range n {
			switch i % 4 {
			case 0:
				keys = append(keys, fmt.Sprintf("nope/%d", i))
			default:
				keys = append(keys, fmt.Sprintf("k/%d/%d", (i*7)%20, (i*13)%50))
			}
		}
		ids, found, err := ix.LookupMany(context.Background(), keys)
		if err != nil {
			t.Fatal(err)
		}
		check := func(how string, ids []int, found []bool) {
			for i, k := range keys {
				id, ok, _ := ix.Lookup(context.Background(), k)
				if found[i] != ok || ok && ids[i] != id {
					t.Fatalf("%d keys, %s: %q: LookupMany %d %t; Lookup %d %t", n, how, k, ids[i], found[i], id, ok)
				}
			}
		}
		check("LookupMany", ids, found)
		if n*32 >= ix.NumSamples() {
			for _, parts := range []int{1, 3, 7} {
				ids, found := ix.cols.lookupWalk(keys, parts)
				check(fmt.Sprint("a walk in ", parts, " parts"), ids, found)
			}
		}
	}
}
