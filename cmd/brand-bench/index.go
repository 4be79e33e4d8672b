package main

import (
	"context"
	"flag"
	"fmt"
	"time"

	"github.com/brandgw/brand/cmd/brand-bench/internal/bench"
	"github.com/brandgw/brand/internal/cli"
)

const indexSynopsis = "index [--samples N] [flags]"

// runIndexBench measures the index a node holds (bench.RunIndex): a
// synthesised index loaded whole, as today, and partially for node 0 of
// clusters of several sizes. It writes index.txt and index.json.
func runIndexBench(ctx context.Context, env *cli.Env, args []string) error {
	cfg := bench.DefaultIndexConfig()
	var (
		out     = "bench-results"
		timeout = 60 * time.Minute
		samples = float64(cfg.Samples)
	)
	fs := flag.NewFlagSet("index", flag.ContinueOnError)
	fs.Float64Var(&samples, "samples", samples, "samples of the synthesised index (1e6 is fine)")
	fs.Var((*cli.ByteSize)(&cfg.ChunkBytes), "chunk-size", "target chunk size")
	fs.Var((*cli.ByteSize)(&cfg.MeanBytes), "mean-bytes", "mean sample size")
	fs.Var((*intList)(&cfg.Nodes), "nodes", "cluster sizes, each loaded as its node 0 (comma-separated)")
	fs.Var((*stringList)(&cfg.Keys), "keys", "key order, shuffled or ordered (repeatable; default both)")
	fs.IntVar(&cfg.BatchSize, "batch-size", cfg.BatchSize, "samples of the batch of other nodes' chunks laid out")
	fs.BoolVar(&cfg.NoWhole, "no-whole", false, "skip today's whole index (Decode needs about 2.3 times its size in memory)")
	fs.StringVar(&cfg.WorkDir, "work-dir", "", "where the synthesised index is written (default: a temporary directory, removed)")
	fs.StringVar(&out, "out", out, "directory for index.txt and index.json")
	fs.DurationVar(&timeout, "timeout", timeout, "bound on the whole run")
	keysGiven := false
	if err := parseFlags(fs, env, args, indexSynopsis); err != nil {
		return err
	}
	fs.Visit(func(f *flag.Flag) { keysGiven = keysGiven || f.Name == "keys" })
	if keysGiven {
		cfg.Keys = cfg.Keys[len(bench.DefaultIndexConfig().Keys):] // the flag appends to the default
	}
	cfg.Samples = int(samples)
	if cfg.Samples < 1 || cfg.Samples > 1<<32-1 {
		return fmt.Errorf("--samples %g: want 1 to 2^32-1", samples)
	}
	for _, k := range cfg.Keys {
		if k != bench.KeysShuffled && k != bench.KeysOrdered {
			return fmt.Errorf("--keys %q: want %s or %s", k, bench.KeysShuffled, bench.KeysOrdered)
		}
	}
	cleanup, err := workAndOut(&cfg.WorkDir, out, "index")
	defer cleanup()
	if err != nil {
		return err
	}
	cfg.Command = commandLine("brand-bench index", args)
	cfg.Log = env.Stderr
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	rep, err := bench.RunIndex(ctx, cfg)
	if err != nil {
		return err
	}
	if err := rep.WriteText(env.Stdout); err != nil {
		return err
	}
	return writeReports(env.Stderr, out, report{"index.txt", rep.WriteText}, report{"index.json", rep.WriteJSON})
}
