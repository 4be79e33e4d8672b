package main

import (
	"flag"
	"time"

	"github.com/brandgw/brand/cmd/brand-bench/internal/bench"
	"github.com/brandgw/brand/internal/cli"
)

const budgetSynopsis = "budget [flags]"

// budgetBenchmark is the store's budget benchmark (bench.RunBudget): a
// cluster's job over an S3 front that throttles, paced under the budget
// beside per-request retries alone.
func budgetBenchmark() benchmark[bench.BudgetConfig, *bench.BudgetReport] {
	return benchmark[bench.BudgetConfig, *bench.BudgetReport]{
		name: "budget", synopsis: budgetSynopsis, config: bench.DefaultBudgetConfig, timeout: 60 * time.Minute,
		run: bench.RunBudget,
		flags: func(fs *flag.FlagSet, cfg *bench.BudgetConfig) func() error {
			fs.IntVar(&cfg.Samples, "samples", cfg.Samples, "samples in the dataset")
			fs.Var((*cli.ByteSize)(&cfg.MeanBytes), "mean-bytes", "mean sample size")
			fs.Var((*cli.ByteSize)(&cfg.ChunkSize), "chunk-size", "target chunk size")
			fs.IntVar(&cfg.Nodes, "nodes", cfg.Nodes, "gateways of the cluster")
			fs.IntVar(&cfg.BatchSize, "batch-size", cfg.BatchSize, "samples per rank per batch")
			fs.IntVar(&cfg.Window, "window", cfg.Window, "shuffle window, in chunks")
			fs.IntVar(&cfg.World, "world", cfg.World, "ranks of the job, each reading from its home node")
			fs.IntVar(&cfg.Epochs, "epochs", cfg.Epochs, "epochs of each throttled run")
			fs.Float64Var(&cfg.NodeCache, "node-cache", cfg.NodeCache, "each node's cache, a fraction of the dataset")
			fs.Float64Var(&cfg.Fraction, "fraction", cfg.Fraction, "the store's limit and the budget, a fraction of the job's unthrottled GET rate")
			fs.IntVar(&cfg.Rounds, "rounds", cfg.Rounds, "alternations of the retries-only and the paced run")
			fs.StringVar(&cfg.GatewayBinary, "gateway-binary", "", "brand binary to measure (default: brand beside this executable, else on $PATH)")
			fs.Var((*stringList)(&cfg.GatewayArgs), "gateway-arg", "extra `FLAG` of brand serve for every gateway (repeatable)")
			fs.StringVar(&cfg.WorkDir, "work-dir", "", "where MinIO's data, the dataset and the gateways' logs go; kept and reused when given (default: a temporary directory, removed)")
			fs.DurationVar(&cfg.ConfigTimeout, "config-timeout", cfg.ConfigTimeout, "bound on each run")
			return nil
		},
	}
}
