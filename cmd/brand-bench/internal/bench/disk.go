package bench

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
)

// runDiskGroup compares, at each of Config.Disk's cache fractions, the
// RAM cache alone with RAM plus a disk tier that holds the dataset: the
// same job, epochs 0..Brand.Epochs-1, each through a fresh gateway over
// the same store; then the disk gateway is stopped and started again on
// the disk cache it filled and reads the next epoch (a warm restart).
// Store bytes per epoch come from each gateway's own /stats.
func (r *runner) runDiskGroup(ctx context.Context) error {
	epochs := r.cfg.Brand.Epochs
	total := r.tb.index.TotalBytes()
	// Every chunk file carries a header of tens of bytes: room for them.
	diskBytes := total + total/16 + int64(r.tb.index.NumChunks())*4096
	for _, f := range r.cfg.Disk.CacheFractions {
		if _, err := r.brandRun(ctx, f, "next-use", epochs, GroupDisk); err != nil {
			return err
		}
		dir := filepath.Join(r.cfg.WorkDir, fmt.Sprintf("disk-cache-%g", f*100))
		if err := os.RemoveAll(dir); err != nil {
			return fmt.Errorf("bench: clearing the disk cache: %w", err)
		}
		opts := brandOpts{diskDir: dir, diskBytes: diskBytes}
		if err := r.diskRun(ctx, f, epochs, opts); err != nil {
			return err
		}
		opts.first, opts.restarted = epochs, true
		if err := r.diskRun(ctx, f, 1, opts); err != nil {
			return err
		}
	}
	return nil
}

// diskRun runs one gateway of the disk group and adds its rows.
func (r *runner) diskRun(ctx context.Context, fraction float64, epochs int, opts brandOpts) error {
	var run *brandRun
	err := r.measured(ctx, func(ctx context.Context) error {
		var err error
		run, err = r.runBrandWith(ctx, fraction, "next-use", epochs, opts)
		return err
	})
	if err != nil {
		return fmt.Errorf("brand%s, cache %s: %w", opts.describe(), percentString(fraction), err)
	}
	r.rep.Gateways = append(r.rep.Gateways, GatewayRun{CacheBytes: run.cacheBytes, CacheFraction: fraction, Policy: run.policy,
		Epochs: len(run.epochs), PeakRSS: run.epochs[len(run.epochs)-1].peakRSS,
		StartSeconds: run.start.Seconds(), StartCPU: run.startCPU.Seconds(), Counters: run.counters, DiskBytes: opts.diskBytes, Restarted: opts.restarted})
	for _, row := range run.rows(GroupDisk) {
		r.add(row)
	}
	return nil
}
