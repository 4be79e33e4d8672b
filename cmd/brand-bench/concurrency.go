package main

import (
	"flag"
	"time"

	"github.com/brandgw/brand/cmd/brand-bench/internal/bench"
	"github.com/brandgw/brand/internal/cli"
)

const concurrencySynopsis = "concurrency [--small] [flags]"

// concurrencyBenchmark is the concurrency benchmark
// (bench.RunConcurrency): one gateway with a warm cache under many
// concurrent streams, the ranks of one job and as many jobs; and a
// cluster of three with one node killed.
func concurrencyBenchmark() benchmark[bench.ConcurrencyConfig, *bench.ConcurrencyReport] {
	return benchmark[bench.ConcurrencyConfig, *bench.ConcurrencyReport]{
		name: "concurrency", synopsis: concurrencySynopsis, config: bench.DefaultConcurrencyConfig, timeout: 30 * time.Minute,
		small: bench.SmallConcurrencyConfig, smallDoc: "a short run: 4,096 samples of 2 KiB, 0.5 s at 4 and at 96 streams, a cluster of 48 ranks for 2 s, a cache of 64 MiB, --memory-limit 512MiB (flags given explicitly still apply)",
		run: bench.RunConcurrency,
		flags: func(fs *flag.FlagSet, cfg *bench.ConcurrencyConfig) func() error {
			fs.IntVar(&cfg.Samples, "samples", cfg.Samples, "samples of the dataset")
			fs.Var((*cli.ByteSize)(&cfg.MeanBytes), "mean-bytes", "mean sample size")
			fs.Var((*cli.ByteSize)(&cfg.ChunkSize), "chunk-size", "target chunk size")
			fs.IntVar(&cfg.BatchSize, "batch-size", cfg.BatchSize, "samples per rank per batch")
			fs.IntVar(&cfg.Window, "window", cfg.Window, "shuffle window, in chunks")
			fs.Var((*intList)(&cfg.Streams), "streams", "concurrent streams measured, each a rank of one job and then a job of its own")
			fs.DurationVar(&cfg.Duration, "duration", cfg.Duration, "how long each point reads")
			fs.Var((*cli.ByteSize)(&cfg.CacheSize), "cache-size", "the gateway's cache (--cache-size), at least the dataset")
			fs.Var((*cli.ByteSize)(&cfg.MemoryLimit), "memory-limit", "the gateway's --memory-limit, its peak RSS held to it")
			fs.IntVar(&cfg.ClusterStreams, "cluster-streams", cfg.ClusterStreams, "ranks of one job read through a cluster of three nodes, one killed halfway")
			fs.DurationVar(&cfg.ClusterDuration, "cluster-duration", cfg.ClusterDuration, "how long the cluster's ranks read (the node is killed halfway)")
			fs.BoolVar(&cfg.SkipCluster, "skip-cluster", false, "leave the cluster out")
			fs.StringVar(&cfg.GatewayBinary, "gateway-binary", "", "brand binary to measure (default: brand beside this executable, else on $PATH)")
			fs.Var((*stringList)(&cfg.GatewayArgs), "gateway-arg", "extra `FLAG` of brand serve (repeatable)")
			fs.StringVar(&cfg.WorkDir, "work-dir", "", "where the dataset and the gateway's log go; kept and reused when given (default: a temporary directory, removed)")
			fs.DurationVar(&cfg.ConfigTimeout, "config-timeout", cfg.ConfigTimeout, "bound on the gateway's run")
			return nil
		},
	}
}
