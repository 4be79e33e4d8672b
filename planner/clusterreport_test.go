package planner

import (
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/brandgw/brand/cluster"
	"github.com/brandgw/brand/shuffle"
)

// reportDataset is the synthetic dataset of docs/planner.md's cluster
// table: 4,096 chunks of 256 samples of 10 KiB (2.5 MiB a chunk, 10 GiB in
// all).
func reportDataset() Dataset { return equalDataset(4096, 256, 256*10<<10) }

// reportInput is one row of that table: nodes nodes with two ranks each,
// batch 64, three epochs, and a per-node cache that makes the cluster's
// cache the given fraction of the dataset.
func reportInput(nodes, window int, clusterCache float64) ClusterInput {
	d := reportDataset()
	var total int64
	for _, size := range d.ChunkSizes {
		total += size
	}
	return ClusterInput{
		Dataset:        d,
		Job:            Job{Params: shuffle.Params{Seed: 1, Window: window, BatchSize: 64, World: 2 * nodes}, Epochs: 3},
		IndexKey:       cluster.IndexKey("report"),
		Nodes:          nodes,
		NodeCacheBytes: int64(clusterCache * float64(total) / float64(nodes)),
	}
}

// TestClusterPlanReport computes docs/planner.md's cluster table (run it
// with -v to print the table) and checks what the model promises of it:
// a cold epoch reads the dataset once, and no more when the cache has
// room for the windows in flight; locality never crosses
// more than the plain cut, the plain cut crosses about (N−1)/N, and with
// the cluster's cache at 140 % a warm epoch reads only what the nodes
// owning more than their cache can hold must re-read.
func TestClusterPlanReport(t *testing.T) {
	type row struct {
		nodes, window int
		clusterCache  float64
	}
	var rows []row
	for _, n := range []int{4, 16, 64, 256} {
		// The default window, then one that gives every node eight
		// chunks of each window, at 140 % and at 50 %.
		rows = append(rows, row{n, 8, 1.4}, row{n, 8 * n, 1.4}, row{n, 8 * n, 0.5})
	}
	// At 256 nodes and 50 %, a node's cache (8 chunks) is its share of one
	// window of 8 × 256: batches that straddle two windows thrash it.
	// Half that window fits.
	rows = append(rows, row{256, 4 * 256, 0.5})
	var b strings.Builder
	b.WriteString("| nodes | window | cluster cache | store, cold | store, warm | cross-node, locality | cross-node, plain cut | balancing | busiest node, warm | distinct chunks per rank batch, locality / plain | largest share, locality / plain |\n")
	b.WriteString("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, row := range rows {
		in := reportInput(row.nodes, row.window, row.clusterCache)
		p := mustClusterPlan(t, in)
		cold, warm := p.ColdStoreFraction(), p.WarmStoreFraction()
		loc, cut := p.CrossNodeFraction(true), p.CrossNodeFraction(false)
		var busiest int64
		for _, e := range p.Epochs[1:] {
			busiest = max(busiest, e.MaxNodeStoreBytes)
		}
		fmt.Fprintf(&b, "| %d | %d | %.0f %% | %.3f | %.3f | %.1f %% | %.1f %% | %.1f %% | %s | %.1f / %.1f | %.1f %% / %.1f %% |\n",
			row.nodes, row.window, 100*row.clusterCache, cold, warm, 100*loc, 100*cut, 100*loc, formatBytes(busiest),
			p.Locality.MeanDistinctChunksPerBatch, p.PlainCut.MeanDistinctChunksPerBatch,
			100*p.Locality.MaxChunkShare, 100*p.PlainCut.MaxChunkShare)

		// Every chunk is read at least once, by its owner; with room for
		// the windows in flight, exactly once.
		if cold < 1 || row.clusterCache > 1 && cold != 1 {
			t.Errorf("%d nodes, window %d: the cold epoch reads %.3f of the dataset", row.nodes, row.window, cold)
		}
		if loc > cut {
			t.Errorf("%d nodes: locality crosses %.3f, the plain cut %.3f", row.nodes, loc, cut)
		}
		if want := float64(row.nodes-1) / float64(row.nodes); math.Abs(cut-want) > 0.05 {
			t.Errorf("%d nodes: the plain cut crosses %.3f; about (N−1)/N = %.3f expected", row.nodes, cut, want)
		}
		// A warm epoch re-reads at most what each node owns beyond its
		// cache, every time it is used, and a cluster cache of 140 % leaves
		// the average node room to spare.
		owned := make([]int64, row.nodes)
		for c, o := range cluster.BoundedOwners(in.IndexKey, in.Dataset.Counts, cluster.Positions(row.nodes)) {
			owned[o] += in.Dataset.ChunkSizes[c]
		}
		var over int64
		for _, o := range owned {
			over += max(0, o-in.NodeCacheBytes)
		}
		if row.clusterCache > 1 && warm > 0 && over == 0 {
			t.Errorf("%d nodes: every node's cache holds what it owns, yet warm epochs read %.3f", row.nodes, warm)
		}
	}
	t.Logf("synthetic dataset: 4096 chunks × 256 samples × 10 KiB; batch 64, 2 ranks per node, 3 epochs\n%s", b.String())
}
