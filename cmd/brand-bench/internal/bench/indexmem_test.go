package bench

import (
	"context"
	"testing"
)

// TestRunIndexSmall runs the index benchmark on a small index: the whole
// and partial loads agree on the synthesised index, a node of 4 keeps
// about a quarter of the whole index for good, and its table cache keeps
// every other table its load streamed past (the small index is well under
// the cache's bound), so that neither a batch of other nodes' samples nor
// a lookup by key reads a table from the store.
func TestRunIndexSmall(t *testing.T) {
	cfg := DefaultIndexConfig()
	cfg.Samples, cfg.ChunkBytes, cfg.Nodes, cfg.BatchSize, cfg.WorkDir = 20000, 4<<20, []int{1, 4}, 16, t.TempDir()
	rep, err := RunIndex(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Rows) != 2*3 || rep.Chunks < 40 {
		t.Fatalf("%d rows, %d chunks", len(rep.Rows), rep.Chunks)
	}
	whole := map[string]int64{}
	for _, r := range rep.Rows {
		if r.Whole {
			whole[r.Keys] = r.FootprintBytes
		}
		if r.Whole || r.Nodes == 1 {
			continue
		}
		if r.ResidentTables+r.CachedTables != rep.Chunks {
			t.Errorf("%s keys, node of %d: %d tables its own, %d cached, of %d chunks: the load's tables were not all kept", r.Keys, r.Nodes, r.ResidentTables, r.CachedTables, rep.Chunks)
		}
		if r.BatchChunks != 16 || r.BatchLoads != 0 || r.RepeatLoads != 0 || r.LookupLoads != 0 {
			t.Errorf("%s keys, node of %d: batch of %d chunks read %d tables, %d again, lookup %d", r.Keys, r.Nodes, r.BatchChunks, r.BatchLoads, r.RepeatLoads, r.LookupLoads)
		}
		if r.FootprintBytes > r.FormulaBytes*11/10 {
			t.Errorf("%s keys, node of %d: footprint %d, formula %d", r.Keys, r.Nodes, r.FootprintBytes, r.FormulaBytes)
		}
		// Heap figures are noisy at this size; the footprint is exact.
		// Keys in no order hold no key directory until a lookup by key.
		// What the node keeps for good is its footprint less its table
		// cache's (bounded) contents.
		if f := float64(r.FootprintBytes-r.CachedBytes) / float64(whole[r.Keys]); f > 0.35 || f < 0.15 {
			t.Errorf("%s keys, node of 4 keeps %.3f of the whole index for good, want about a quarter", r.Keys, f)
		}
		if want := directoryFormula(rep.Samples); r.Keys != KeysOrdered && (r.DirectoryBytes < want*9/10 || r.DirectoryBytes > want*11/10) {
			t.Errorf("the first lookup by key added %d bytes, want the key directory's %d", r.DirectoryBytes, want)
		}
	}
}
