package layout_test

import (
	"context"
	"fmt"
	"slices"
	"testing"

	"github.com/brandgw/brand/internal/batch/layout"
	"github.com/brandgw/brand/internal/batch/units"

	"github.com/brandgw/brand/cluster"
	"github.com/brandgw/brand/internal/testsupport/catalogtest"
)

// TestOrderIndependentOfClusterSize: the same job (window 2, seed 5,
// batch 8) lays out the same global batches on one gateway and under the
// memberships of clusters of 2, 5 and 9 nodes — in order for one rank,
// and as the union of four ranks' batches for each step (which rank gets
// which sample may follow the cluster; which samples a step holds may
// not). The reproduction: a cluster's chunk order was stratified by
// owner, so the first batch of epoch 0 from a single gateway, from 2
// nodes and from 9 held different samples, and a job resized mid-run read
// another order.
func TestOrderIndependentOfClusterSize(t *testing.T) {
	ds := catalogtest.Dataset(t, "d", 24, 10) // 240 samples
	o := units.Orders(nil)
	// steps lays out epoch e at world ranks under ms: per global step,
	// its samples' keys, sorted for more than one rank.
	steps := func(ms *cluster.Membership, world int, e uint64) [][]string {
		j := job(8, world, 0)
		j.Seed = 5
		src := layout.Source{DS: ds, Members: ms}
		batches, _, err := o.Extent(src, j, e)
		if err != nil {
			t.Fatal(err)
		}
		var out [][]string
		for m := range uint64(batches) {
			var step []string
			for r := range world {
				j.Rank = r
				b, err := o.Layout(context.Background(), src, j, e, m)
				if err != nil {
					t.Fatal(err)
				}
				for i := range b.Len() {
					_, _, in := b.Sample(i)
					step = append(step, in.Key)
				}
			}
			if world > 1 {
				slices.Sort(step)
			}
			out = append(out, step)
		}
		return out
	}
	want := map[string][][]string{}
	for e := range uint64(2) {
		for _, world := range []int{1, 4} {
			want[fmt.Sprint(e, world)] = steps(nil, world, e)
		}
	}
	if len(want["0 1"]) != 30 || len(want["0 4"]) != 8 {
		t.Fatalf("one gateway lays out %d and %d global steps of epoch 0; the test wants 30 and 8", len(want["0 1"]), len(want["0 4"]))
	}
	for _, n := range []int{2, 5, 9} {
		urls := make([]string, n)
		for k := range urls {
			urls[k] = fmt.Sprintf("http://127.0.0.1:%d", 40000+k)
		}
		ms, err := cluster.NewMembership(urls)
		if err != nil {
			t.Fatal(err)
		}
		for e := range uint64(2) {
			for _, world := range []int{1, 4} {
				if got := steps(ms, world, e); !slices.EqualFunc(got, want[fmt.Sprint(e, world)], slices.Equal) {
					t.Errorf("%d nodes, epoch %d, world %d: the global steps differ from one gateway's:\n got %v\nwant %v", n, e, world, got[:1], want[fmt.Sprint(e, world)][:1])
				}
			}
		}
	}
}
