package cluster

import (
	"testing"

	"github.com/brandgw/brand/shuffle"
)

// quality sums, over rank batches, what a batch mixes and where it is read.
type quality struct {
	batches  int
	distinct int     // distinct chunks in the rank batch
	largest  float64 // the largest share of one chunk in the rank batch
	local    float64 // the share of samples whose chunk the rank's home owns
}

func (q *quality) add(ids []int, chunkOf func(int) int, owners []int, home int) {
	if len(ids) == 0 {
		return
	}
	per := map[int]int{}
	top, local := 0, 0
	for _, id := range ids {
		c := chunkOf(id)
		per[c]++
		top = max(top, per[c])
		if owners[c] == home {
			local++
		}
	}
	q.batches++
	q.distinct += len(per)
	q.largest += float64(top) / float64(len(ids))
	q.local += float64(local) / float64(len(ids))
}

func (q quality) means() (distinct, largest, local float64) {
	n := float64(q.batches)
	return float64(q.distinct) / n, q.largest / n, q.local / n
}

// TestShuffleQuality measures what locality costs the shuffle, for the
// table in docs/shuffle.md §7.4: 256 chunks of 100 samples over 4 nodes,
// window 8, world 8 (two ranks per node), batch 64, epochs 0–9 of seed 1.
// It prints the figures with
//
//	go test ./cluster -run TestShuffleQuality -v
//
// and checks only what the design promises: every sample of an epoch is
// delivered once with locality, and the assignment serves more samples
// from their owner's node than the plain cut of the same order.
func TestShuffleQuality(t *testing.T) {
	const (
		chunks, perChunk    = 256, 100
		nodes, world, batch = 4, 8, 64
		window              = 8
		epochs              = 10
		seed                = 1
	)
	counts := make([]int, chunks)
	for c := range counts {
		counts[c] = perChunk
	}
	owners := BoundedOwners(IndexKey("3a6958a385d5afc5"), counts, Positions(nodes))
	chunkOf := func(id int) int { return id / perChunk }
	g := batch * world
	share := make([]int, world)

	var plain, local quality
	for ep := range uint64(epochs) {
		e, err := shuffle.NewEpoch(counts, seed, ep, window)
		if err != nil {
			t.Fatal(err)
		}
		n := e.NumSamples()
		delivered := make([]int, n)
		for m := range shuffle.NumBatches(n, batch, world, false) {
			lo, hi := m*g, min((m+1)*g, n)
			ids := e.AppendRange(nil, lo, hi)
			owner := make([]int, len(ids))
			for i := range ids {
				owner[i] = owners[chunkOf(ids[i])]
			}
			for r := range world {
				s, e, err := shuffle.BatchRange(n, m, batch, world, r, false)
				if err != nil {
					t.Fatal(err)
				}
				share[r] = e - s
			}
			a, err := Assign(ids, owner, share, nodes)
			if err != nil {
				t.Fatal(err)
			}
			pos := 0
			for r, s := range share {
				home := Home(r, world, nodes)
				plain.add(ids[pos:pos+s], chunkOf, owners, home)
				local.add(a.Ranks[r], chunkOf, owners, home)
				for _, id := range a.Ranks[r] {
					delivered[id]++
				}
				pos += s
			}
		}
		for id, k := range delivered {
			if k != 1 {
				t.Fatalf("epoch %d: sample %d delivered %d times with locality", ep, id, k)
			}
		}
	}

	owned := make([]int, nodes)
	for _, k := range owners {
		owned[k]++
	}
	t.Logf("%d chunks × %d samples, %d nodes owning %v chunks, window %d, world %d, batch %d, %d epochs (%d rank batches)",
		chunks, perChunk, nodes, owned, window, world, batch, epochs, plain.batches)
	t.Logf("%-40s %9s %9s %9s", "mode", "distinct", "largest", "local")
	for _, row := range []struct {
		name string
		q    quality
	}{
		{"(a) plain cut", plain},
		{"(b) locality-aware assignment", local},
	} {
		d, l, loc := row.q.means()
		t.Logf("%-40s %9.2f %9.3f %9.4f", row.name, d, l, loc)
	}

	_, _, aLocal := plain.means()
	_, _, bLocal := local.means()
	if bLocal <= aLocal {
		t.Errorf("locality serves %.3f of samples from their owner's node, the plain cut %.3f", bLocal, aLocal)
	}
}
