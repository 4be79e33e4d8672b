package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"

	"github.com/brandgw/brand/internal/cli"
	"github.com/brandgw/brand/shuffle"

	"github.com/brandgw/brand/dataset"
	"github.com/brandgw/brand/planner"
	"github.com/brandgw/brand/s3backend"
)

// runPlan simulates a job over a dataset's index and prints what a cache
// size achieves under LRU and under the optimal (next-use) policy.
func runPlan(ctx context.Context, env *cli.Env, args []string) error {
	var (
		src                 string
		cache, bw, consume  cli.ByteSize
		seed                uint64
		batch, window, wrld int
		epochs, first, pf   int
		dropLast, asJSON    bool
		s3                  cli.S3Flags
	)
	fs := flag.NewFlagSet("plan", flag.ContinueOnError)
	fs.StringVar(&src, "src", "", "dataset URL: s3://bucket/prefix, file:///dir or a directory")
	cache = 4 << 30
	fs.Var(&cache, "cache-size", "cache size to plan for")
	bw = 1 << 30
	fs.Var(&bw, "bandwidth", "backend read bandwidth, bytes per second (e.g. 500MiB)")
	fs.Var(&consume, "consume", "trainer read rate, bytes per second (default: as fast as the backend)")
	fs.Uint64Var(&seed, "seed", 0, "shuffle seed")
	fs.IntVar(&batch, "batch-size", 32, "samples per rank per batch")
	fs.IntVar(&window, "window", 8, "shuffle window, in chunks")
	fs.IntVar(&wrld, "world", 1, "ranks")
	fs.IntVar(&epochs, "epochs", 3, "epochs to simulate (at least 2: the first is cold)")
	fs.IntVar(&first, "first-epoch", 0, "first epoch to simulate")
	fs.IntVar(&pf, "prefetch-windows", 1, "windows the gateway prefetches beyond the current one")
	fs.BoolVar(&dropLast, "drop-last", false, "drop the last partial global batch")
	fs.BoolVar(&asJSON, "json", false, "print the plan as JSON")
	s3.Register(fs)
	if err := cli.ParseFlags(fs, env, args, "brand plan --src URL [--cache-size 4GiB] [job flags]"); err != nil {
		return err
	}
	if src == "" {
		return fmt.Errorf("--src is required: the dataset to plan for")
	}
	store, err := s3backend.Open(ctx, src, s3.Config())
	if err != nil {
		return err
	}
	ix, err := dataset.ReadIndex(ctx, store)
	if err != nil {
		return err
	}
	plan, err := planner.MakePlan(planner.PlanInput{
		Dataset:            planner.DatasetOf(ix),
		Job:                planner.Job{Params: shuffle.Params{Seed: seed, Window: window, BatchSize: batch, World: wrld, DropLast: dropLast}, FirstEpoch: first, Epochs: epochs},
		CacheBytes:         int64(cache),
		BackendBytesPerSec: float64(bw),
		ConsumeBytesPerSec: float64(consume),
		PrefetchWindows:    pf,
	})
	if err != nil {
		return err
	}
	if asJSON {
		enc := json.NewEncoder(env.Stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(plan)
	}
	return plan.WriteText(env.Stdout)
}
