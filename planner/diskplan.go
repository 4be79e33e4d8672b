package planner

import (
	"bytes"
	"fmt"
	"text/tabwriter"
)

// DiskPlan is a plan's figures with a disk tier of DiskCacheBytes below
// the cache (PlanInput.DiskCacheBytes): per policy, the same trace's bytes
// read from the store and from the disk, per epoch and in total. The
// cache's hits are the plan's own figures: the disk changes where a miss
// is read from, not whether it misses. See simulateTiers for the model.
type DiskPlan struct {
	DiskCacheBytes int64      `json:"disk_cache_bytes"`
	LRU            TierResult `json:"lru"`
	// Aware is the importance-aware policy's, in importance mode only.
	Aware   *TierResult `json:"importance_aware,omitempty"`
	Optimal TierResult  `json:"optimal"`
}

// TierResult is what a cache and the disk below it read under one policy:
// the bytes of the cache's misses read from the store and from the disk,
// per epoch (ascending) and in total. A fraction is the bytes over the
// dataset's — store bytes over its bytes in the store, disk bytes over
// its bytes in the cache (which the disk holds), the same for tar chunks
// — and the totals' are over one dataset too, so three epochs that each
// read the whole dataset from the store have a StoreFraction of 3.
type TierResult struct {
	Policy        Policy      `json:"policy"`
	Epochs        []TierEpoch `json:"epochs"`
	StoreBytes    int64       `json:"store_bytes"`
	StoreFraction float64     `json:"store_fraction"`
	DiskBytes     int64       `json:"disk_bytes"`
	DiskFraction  float64     `json:"disk_fraction"`
}

// TierEpoch is one epoch of a TierResult.
type TierEpoch struct {
	Epoch         int     `json:"epoch"`
	StoreBytes    int64   `json:"store_bytes"`
	StoreFraction float64 `json:"store_fraction"`
	DiskBytes     int64   `json:"disk_bytes"`
	DiskFraction  float64 `json:"disk_fraction"`
}

// newDiskPlan simulates a disk of diskBytes under each of policies with
// run (a simulation of the plan's trace and cache with that disk), and
// reports it against a dataset of datasetBytes in the cache and storeBytes
// in the store. An error of run (the plan's meter's) ends it.
func newDiskPlan(diskBytes, datasetBytes, storeBytes int64, run func(Policy) (Result, error), policies ...Policy) (*DiskPlan, error) {
	dp := &DiskPlan{DiskCacheBytes: diskBytes}
	for _, p := range policies {
		r, err := run(p)
		if err != nil {
			return nil, err
		}
		tr := tierResult(r, datasetBytes, storeBytes)
		switch p {
		case LRU:
			dp.LRU = tr
		case ImportanceAware:
			dp.Aware = &tr
		default:
			dp.Optimal = tr
		}
	}
	return dp, nil
}

// tierResult is r, a simulation with a disk tier, in store and disk bytes,
// over a dataset of datasetBytes in the cache and storeBytes in the store.
func tierResult(r Result, datasetBytes, storeBytes int64) TierResult {
	of := func(n, whole int64) float64 {
		if whole == 0 {
			return 0
		}
		return float64(n) / float64(whole)
	}
	tr := TierResult{
		Policy:        r.Policy,
		Epochs:        make([]TierEpoch, len(r.Epochs)),
		StoreBytes:    r.BackendBytes,
		StoreFraction: of(r.BackendBytes, storeBytes),
		DiskBytes:     r.DiskBytes,
		DiskFraction:  of(r.DiskBytes, datasetBytes),
	}
	for i, e := range r.Epochs {
		tr.Epochs[i] = TierEpoch{
			Epoch:         e.Epoch,
			StoreBytes:    e.BackendBytes,
			StoreFraction: of(e.BackendBytes, storeBytes),
			DiskBytes:     e.DiskBytes,
			DiskFraction:  of(e.DiskBytes, datasetBytes),
		}
	}
	return tr
}

// writeText writes the disk tier's table: per epoch, each policy's store
// and disk reads with their share of the dataset (of its datasetBytes in
// the cache and storeBytes in the store).
func (dp *DiskPlan) writeText(b *bytes.Buffer, datasetBytes, storeBytes int64) {
	type column struct {
		name string
		r    *TierResult
	}
	cols := []column{{"LRU", &dp.LRU}}
	if dp.Aware != nil {
		cols = append(cols, column{"aware", dp.Aware})
	}
	cols = append(cols, column{"optimal", &dp.Optimal})

	fmt.Fprintf(b, "\nDisk tier  %s below the cache: a miss reads the disk if it holds the chunk, else the store,\n", formatBytes(dp.DiskCacheBytes))
	b.WriteString("           and a chunk read from the store is offered to the disk\n\n")
	tw := tabwriter.NewWriter(b, 0, 0, 2, ' ', tabwriter.AlignRight)
	share := func(n, whole int64) string { return fmt.Sprintf("%s (%s)", formatBytes(n), percentOf(n, whole)) }
	tw.Write([]byte("epoch\t"))
	for _, c := range cols {
		fmt.Fprintf(tw, "%s store\t%s disk\t", c.name, c.name)
	}
	tw.Write([]byte("\n"))
	for i, e := range cols[0].r.Epochs {
		fmt.Fprintf(tw, "%d\t", e.Epoch)
		for _, c := range cols {
			var ce TierEpoch
			if i < len(c.r.Epochs) {
				ce = c.r.Epochs[i]
			}
			fmt.Fprintf(tw, "%s\t%s\t", share(ce.StoreBytes, storeBytes), share(ce.DiskBytes, datasetBytes))
		}
		tw.Write([]byte("\n"))
	}
	tw.Write([]byte("total\t"))
	for _, c := range cols {
		fmt.Fprintf(tw, "%s\t%s\t", share(c.r.StoreBytes, storeBytes), share(c.r.DiskBytes, datasetBytes))
	}
	tw.Write([]byte("\n"))
	tw.Flush()
	b.WriteString("store, disk: the bytes the cache's misses read from each, and their share of the dataset\n")
}
