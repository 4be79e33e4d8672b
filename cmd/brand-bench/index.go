package main

import (
	"flag"
	"fmt"
	"time"

	"github.com/brandgw/brand/cmd/brand-bench/internal/bench"
	"github.com/brandgw/brand/internal/cli"
)

const indexSynopsis = "index [--samples N] [flags]"

// indexBenchmark measures the index a node holds (bench.RunIndex): a
// synthesised index loaded whole, as today, and partially for node 0 of
// clusters of several sizes. It starts no gateway.
func indexBenchmark() benchmark[bench.IndexConfig, *bench.IndexReport] {
	return benchmark[bench.IndexConfig, *bench.IndexReport]{
		name: "index", synopsis: indexSynopsis, config: bench.DefaultIndexConfig, timeout: 60 * time.Minute,
		noGateway: true,
		run:       bench.RunIndex,
		flags: func(fs *flag.FlagSet, cfg *bench.IndexConfig) func() error {
			samples := fs.Float64("samples", float64(cfg.Samples), "samples of the synthesised index (1e6 is fine)")
			fs.Var((*cli.ByteSize)(&cfg.ChunkBytes), "chunk-size", "target chunk size")
			fs.Var((*cli.ByteSize)(&cfg.MeanBytes), "mean-bytes", "mean sample size")
			fs.Var((*intList)(&cfg.Nodes), "nodes", "cluster sizes, each loaded as its node 0 (comma-separated)")
			fs.Var((*stringList)(&cfg.Keys), "keys", "key order, shuffled or ordered (repeatable; default both)")
			fs.IntVar(&cfg.BatchSize, "batch-size", cfg.BatchSize, "samples of the batch of other nodes' chunks laid out")
			fs.BoolVar(&cfg.NoWhole, "no-whole", false, "skip today's whole index (Decode needs about 2.3 times its size in memory)")
			fs.StringVar(&cfg.WorkDir, "work-dir", "", "where the synthesised index is written (default: a temporary directory, removed)")
			return func() error {
				if given(fs, "keys") {
					cfg.Keys = cfg.Keys[len(bench.DefaultIndexConfig().Keys):] // the flag appends to the default
				}
				cfg.Samples = int(*samples)
				if cfg.Samples < 1 || cfg.Samples > 1<<32-1 {
					return fmt.Errorf("--samples %g: want 1 to 2^32-1", *samples)
				}
				for _, k := range cfg.Keys {
					if k != bench.KeysShuffled && k != bench.KeysOrdered {
						return fmt.Errorf("--keys %q: want %s or %s", k, bench.KeysShuffled, bench.KeysOrdered)
					}
				}
				return nil
			}
		},
	}
}
